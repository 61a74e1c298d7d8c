// Retained events (PROTOCOL.md "Retained events and history (1.1)",
// "Quotas (1.1)"): publish with retain, clear, subscribe with last, the
// limits, stats and hello, and restoring from the state file's bytes; plus
// the byte matcher the replays use, checked against `Pattern.matches`.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Foundation
import Testing

@Suite("Retained events")
struct RetentionTests {
    @Test func aRetainedEventIsDeliveredAsUsualAndSentWithRetainedTrueAfterASubscribeWithLast() throws {
        let h = BrokerHarness()
        let live = h.connect()
        let publisher = h.connect(pid: 812)
        h.send(live, #"{"op":"subscribe","type":"currency.changed"}"#)
        h.send(publisher, #"{"op":"publish","type":"currency.changed","retain":true,"req":1,"data":{"code":"EUR"}}"#)
        let liveEvent = try #require(h.read(live).first)
        #expect(liveEvent.seq == 1 && liveEvent.fields["retained"] == nil)
        #expect(h.read(publisher).first?.int("delivered") == 1)

        let late = h.connect()
        h.send(late, #"{"op":"subscribe","type":"currency.changed","last":true,"req":"s"}"#)
        h.send(publisher, #"{"op":"publish","type":"currency.changed","data":{"code":"GBP"}}"#)
        let frames = h.read(late)
        #expect(frames.map(\.op) == ["ok", "event", "event"])
        #expect(frames[0].int("retained") == 1 && frames[0].type == "currency.changed")
        #expect(frames[1].seq == 1 && frames[1].fields["retained"] as? Bool == true)
        #expect(frames[1].raw == liveEvent.raw.dropLast() + #","retained":true}"#, "the retained copy is the live frame plus the flag")
        #expect(frames[2].seq == 2 && frames[2].fields["retained"] == nil)
        h.closeAll()
    }

    @Test func lastSendsEveryMatchingTypeInSeqOrderAndTheNewestOfEach() throws {
        let h = BrokerHarness()
        let p = h.connect()
        for (type, n) in [("a.x", 1), ("b.y", 2), ("a.z", 3), ("a.x", 4), ("a.q.r", 5)] {
            h.send(p, #"{"op":"publish","type":"\#(type)","retain":true,"data":\#(n)}"#)
        }
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"a.*","last":true,"req":1}"#)
        let frames = h.read(s)
        #expect(frames.first?.int("retained") == 2)
        #expect(frames.dropFirst().map { "\($0.type!)=\($0.seq!)" } == ["a.z=3", "a.x=4"])
        // Without req the ok is silent, the events still come.
        let quiet = h.connect()
        h.send(quiet, #"{"op":"subscribe","type":">","last":true}"#)
        #expect(h.read(quiet).map { $0.seq! } == [2, 3, 4, 5])
        h.closeAll()
    }

    @Test func lastIgnoresTheNoEchoRuleAndRepeatsOnEverySubscribe() throws {
        let h = BrokerHarness()
        let c = h.connect()
        h.send(c, #"{"op":"publish","type":"state.x","retain":true,"data":1}"#)
        h.send(c, #"{"op":"subscribe","type":"state.x","last":true,"req":1}"#)
        h.send(c, #"{"op":"subscribe","type":"state.x","last":true,"req":2}"#)
        let frames = h.read(c)
        #expect(frames.map(\.op) == ["ok", "event", "ok", "event"], "the current value, also to its own publisher")
        #expect(c.subscriptionCount == 1)
        h.closeAll()
    }

    @Test func clearRemovesTheRetainedEventAndSaysWhetherThereWasOne() throws {
        let h = BrokerHarness()
        let p = h.connect()
        h.send(p, #"{"op":"publish","type":"a","retain":true,"data":1}"#)
        h.send(p, #"{"op":"clear","type":"a","req":1}"#, #"{"op":"clear","type":"a","req":2}"#, #"{"op":"clear","type":"a"}"#)
        let replies = h.read(p)
        #expect(replies.map { "\($0.op!) \($0.type!) \($0.fields["removed"] as! Bool)" } == ["ok a true", "ok a false"])
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"a","last":true,"req":1}"#)
        #expect(h.read(s).map { $0.int("retained") } == [0])
        #expect(h.broker.retention.retained.count == 0 && h.broker.ledger.totals.retainedBytes == 0)
        h.closeAll()
    }

    /// Attack round: two uids of tiny retained events took all 65,536 and
    /// nobody, uid 0 included, could retain a new type.
    @Test func aUidGetsTheShareOfTheRetainedEventsThatItsBytesLimitGives() throws {
        let h = BrokerHarness {
            $0.quotas.maxRetainedEvents = 16
            $0.quotas.maxRetainedBytes = 1 << 20  // 128 KiB and so 2 events per uid
        }
        let p = h.connect(uid: 1000)
        for (i, type) in ["a", "b", "c", "a"].enumerated() {
            h.send(p, #"{"op":"publish","type":"\#(type)","retain":true,"req":\#(i)}"#)
        }
        let replies = h.read(p)
        #expect(replies.map { $0.code ?? "ok" } == ["ok", "ok", "limit", "ok"], "replacing its own is fine")
        #expect(replies[2].string("message")!.contains("would exceed 2 events"))
        let other = h.connect(uid: 1001)
        h.send(other, #"{"op":"publish","type":"c","retain":true,"req":1}"#)
        let root = h.connect(uid: 0)
        for i in 0..<5 { h.send(root, #"{"op":"publish","type":"r\#(i)","retain":true,"req":\#(i)}"#) }
        #expect(h.read(other).first?.op == "ok")
        #expect(h.read(root).allSatisfy { $0.op == "ok" }, "uid 0 has no per-uid share")
        #expect(h.broker.retention.retained.count == 8)
        h.checkInvariants()
        h.closeAll()
    }

    /// Attack round: a retained event past 2 KiB (whose frame is built in a
    /// chunk of its own) was copied from that chunk after it was released:
    /// subscribers, `last` and the state file got freed memory.
    @Test(arguments: [1_000, 3_000, 70_000])
    func aLargeRetainedEventIsKeptIntact(size: Int) throws {
        let h = BrokerHarness()
        let live = h.connect()
        h.send(live, #"{"op":"subscribe","type":"big"}"#)
        let p = h.connect(uid: 2000)
        let data = String(repeating: "x", count: size)
        h.send(p, #"{"op":"publish","type":"big","retain":true,"data":"\#(data)"}"#)
        #expect(h.read(live).map { $0.string("data") } == [data])
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"big","last":true}"#)
        #expect(h.read(s).map { $0.string("data") } == [data])
        h.closeAll()
    }

    /// Attack round: `last` on an exact type cost no credit however large
    /// the retained event; its copy is now paid for, and a uid in debt waits.
    @Test func lastOnAnExactTypePaysForTheCopyAndWaitsWhenTheCreditIsSpent() throws {
        let h = BrokerHarness {
            $0.retention.replayBurstUnits = 100
            $0.retention.replayUnitsPerSecond = 100
        }
        let p = h.connect(uid: 2000)
        h.send(p, #"{"op":"publish","type":"big","retain":true,"data":"\#(String(repeating: "x", count: 10_000))"}"#)
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"big","last":true,"req":1}"#)
        #expect(h.read(s).map { $0.op } == ["ok", "event"], "the credit was positive: served, now in debt")
        h.send(s, #"{"op":"unsubscribe","type":"big"}"#, #"{"op":"subscribe","type":"big","last":true,"req":2}"#)
        #expect(h.read(s).map { $0.code ?? $0.op! } == ["limit"])
        h.elapsedNanoseconds += 10_000_000_000
        h.send(s, #"{"op":"subscribe","type":"big","last":true,"req":3}"#)
        #expect(h.read(s).map { $0.op } == ["ok", "event"], "credit back with time")
        h.closeAll()
    }

    @Test func overTheRetainedLimitsThePublishIsRefusedWithLimitAndNothingHappens() throws {
        let h = BrokerHarness {
            $0.quotas.maxRetainedEvents = 2
            $0.quotas.maxRetainedBytes = 8 * 600  // 600 bytes per uid
        }
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        let p = h.connect(uid: 1000)
        let pad = String(repeating: "x", count: 200)
        h.send(p, #"{"op":"publish","type":"a","retain":true,"req":1,"data":"\#(pad)"}"#)
        h.send(p, #"{"op":"publish","type":"b","retain":true,"req":2,"data":"\#(pad)"}"#)  // 2 × ~300 B > 600
        let other = h.connect(uid: 1001)
        h.send(other, #"{"op":"publish","type":"b","retain":true,"req":3,"data":1}"#)
        h.send(other, #"{"op":"publish","type":"c","retain":true,"req":4,"data":1}"#)  // a third type
        h.send(other, #"{"op":"publish","type":"b","retain":true,"req":5,"data":2}"#)  // replacing is fine
        let first = h.read(p)
        #expect(first.map(\.op) == ["ok", "error"])
        #expect(first[1].code == "limit" && first[1].string("message")!.contains("uid 1000"))
        let second = h.read(other)
        #expect(second.map { $0.code ?? "ok" } == ["ok", "limit", "ok"])
        #expect(second[1].string("message")!.contains("too many retained events"))
        // Refused publishes were not routed and took no seq.
        #expect(h.read(s).map { $0.seq! } == [1, 2, 3])
        #expect(h.broker.retention.retained.count == 2)
        // The connection stays usable; uid 0 has no per-uid share.
        h.send(p, #"{"op":"ping","req":6}"#)
        #expect(h.read(p).first?.op == "ok")
        let root = h.connect(uid: 0)
        h.send(root, #"{"op":"publish","type":"a","retain":true,"req":7,"data":"\#(pad)\#(pad)"}"#)
        #expect(h.read(root).first?.op == "ok")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func statsAndHelloReportRetentionAndHistory() throws {
        let h = BrokerHarness()
        let c = h.connect()
        h.send(c, #"{"op":"publish","type":"a","retain":true,"data":1}"#, #"{"op":"publish","type":"b"}"#)
        h.send(c, #"{"op":"stats","req":1}"#, #"{"op":"hello","req":2}"#)
        let replies = h.read(c)
        let stats = replies[0]
        #expect(stats.int("retained") == 1 && stats.int("retained_bytes") == h.broker.retention.retained.byteCount)
        #expect(stats.int("history_first_seq") == 1 && stats.int("history_events") == 2)
        let features = try #require(replies[1].fields["features"] as? [String])
        #expect(features.contains("retain") && features.contains("history"))

        let off = BrokerHarness { $0.retention.historyEvents = 0 }
        let d = off.connect()
        off.send(d, #"{"op":"publish","type":"b"}"#, #"{"op":"stats","req":1}"#, #"{"op":"hello","req":2}"#)
        let offReplies = off.read(d)
        #expect(offReplies[0].int("history_events") == 0 && offReplies[0].int("history_first_seq") == 2)
        #expect((offReplies[1].fields["features"] as? [String])?.contains("history") == false)
        h.closeAll()
        off.closeAll()
    }

    // MARK: Restoring

    /// The state file bytes the server would write for `h`'s retained events.
    static func stateFile(_ h: BrokerHarness) -> [UInt8] {
        var bytes = RetainedStateFile.header
        for frame in RetainedStateFile.orderedFrames(h.broker.retainedSnapshot()) {
            bytes += UnsafeRawBufferPointer(start: frame.baseAddress, count: frame.count)
        }
        return bytes
    }

    @Test func restoredEventsKeepEveryFieldAndGetNewSeqsInTheirOldOrder() throws {
        let old = BrokerHarness()
        let p = old.connect(pid: 812, uid: 1000, gid: 1001)
        h(old, p, [#"{"op":"publish","type":"b","retain":true,"source":"s","id":"x","data":{"k":[1, 2]}}"#,
                   #"{"op":"publish","type":"c","data":0}"#,
                   #"{"op":"publish","type":"a","retain":true,"data":"A"}"#])
        let before = old.broker.retainedSnapshot().events.sorted { $0.seq < $1.seq }.map { parseFrame(Array(UnsafeRawBufferPointer(start: $0.frame.baseAddress, count: $0.frame.count - 1))) }

        let new = BrokerHarness(instance: "1111111122222222")
        let report = new.broker.restoreRetained(fromStateFile: RetentionTests.stateFile(old).span.bytes)
        #expect(report.restored == 2 && report.problems.isEmpty)
        let s = new.connect()
        new.send(s, #"{"op":"subscribe","type":">","last":true}"#)
        let after = new.read(s)
        #expect(after.map { $0.seq! } == [1, 2] && after.map { $0.type! } == ["b", "a"])
        for (b, a) in zip(before, after) {
            // Byte for byte the same frame but for the seq (and the flag).
            let expected = b.raw.replacingOccurrences(of: #""seq":\#(b.seq!),"#, with: #""seq":\#(a.seq!),"#).dropLast() + #","retained":true}"#
            #expect(a.raw == expected)
        }
        // New events continue after the restored seqs; they are not history.
        let q = new.connect()
        new.send(q, #"{"op":"publish","type":"z","req":1}"#)
        #expect(new.read(q).first?.seq == 3)
        #expect(new.read(s).map { $0.seq } == [3])
        let r = new.connect()
        new.send(r, #"{"op":"subscribe","type":">","since":0,"req":2}"#)
        #expect(new.read(r).map { "\($0.op!)\($0.seq.map { " \($0)" } ?? "")" } == ["ok", "event 3"], "since 0 replays the ring, not the restored seqs, without a gap")
        old.closeAll()
        new.closeAll()
    }

    private func h(_ harness: BrokerHarness, _ c: Connection, _ lines: [String]) {
        for line in lines { harness.send(c, line) }
    }

    @Test func aDamagedOrTruncatedStateFileKeepsWhatCanBeRead() throws {
        let old = BrokerHarness()
        let p = old.connect()
        for type in ["a", "b", "c"] { old.send(p, #"{"op":"publish","type":"\#(type)","retain":true,"data":"\#(type)"}"#) }
        var lines = RetentionTests.stateFile(old).split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
        lines.insert(Array(#"{"op":"event","seq":9,"type":"bad","time":"2023-11-14T22:13:21.234Z","extra":1}"#.utf8), at: 2)
        lines.insert(Array("garbage \u{FF}".utf8), at: 1)
        lines.insert(Array(#"{"op":"event","seq":10,"type":"eventbus.x","time":"2023-11-14T22:13:21.234Z","source":"s","id":"i","pid":1,"uid":1,"gid":1,"data":1}"#.utf8), at: 1)
        var bytes = Array(lines.joined(separator: [0x0A]))
        bytes.removeLast(8)  // the last event ("c") cut off mid-line
        let new = BrokerHarness()
        let report = new.broker.restoreRetained(fromStateFile: bytes.span.bytes)
        #expect(report.restored == 2)
        #expect(report.problems.count == 4, "\(report.problems)")
        #expect(Set(new.broker.retention.retained.events.keys) == ["a", "b"])
        new.checkInvariants()
        old.closeAll()
        new.closeAll()
    }

    // MARK: The matcher

    static let matchTable: [(String, String)] = [
        ("a", "a"), ("a", "b"), ("a", "a.b"), ("a.b", "a"), ("a.*", "a.b"), ("a.*", "a.b.c"), ("a.*", "a"),
        ("*", "a"), ("*", "a.b"), ("a.>", "a"), ("a.>", "a.b"), ("a.>", "a.b.c"), (">", "x"), (">", "x.y.z"),
        ("*.b", "a.b"), ("*.b", "ab.b"), ("*.b", "a.bc"), ("a.*.c", "a.x.c"), ("a.*.c", "a.x.d"),
        ("ab", "abc"), ("abc", "ab"), ("a.b.>", "a.b"), ("a.*.>", "a.b.c"), ("a.*.>", "a.b"), ("*.*", "a.b"), ("*.*", "a"),
    ]

    @Test(arguments: matchTable)
    func theByteMatcherAgreesWithPatternMatches(_ pattern: String, _ type: String) throws {
        let p = try #require(Pattern(pattern)), t = try #require(EventType(type))
        #expect(PatternMatcher(p).matches(type) == p.matches(t))
    }

    @Test func mayOverlapIsNeverFalseForPatternsThatOverlap() throws {
        let patterns = ["a", "a.b", "a.*", "*.b", "a.>", ">", "*", "b.*", "a.b.c", "*.*.c", "a.*.>", "x.y"].map { Pattern($0)! }
        for p in patterns {
            for q in patterns {
                let fast = PatternMatcher(p).mayOverlap(PatternMatcher(q))
                if p.overlaps(q) { #expect(fast, "\(p) and \(q) overlap") }
                if !fast { #expect(!p.overlaps(q)) }
            }
        }
        #expect(!PatternMatcher(Pattern("a.*")!).mayOverlap(PatternMatcher(Pattern("b.>")!)))
        #expect(!PatternMatcher(Pattern("a")!).mayOverlap(PatternMatcher(Pattern("a.b")!)))
    }
}
