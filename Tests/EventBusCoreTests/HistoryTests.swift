// History replay (PROTOCOL.md "Retained events and history (1.1)"): the
// ring's bounds, `since` replays (order, flags, no duplicate, no loss around
// the replay), `gap` frames, `instance`, no-echo, the outbound limit, the
// de-duplication across a connection's own patterns and the replay credit.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("History")
struct HistoryTests {
    /// `"event 3 replayed"`, `"gap 1 4"`, `"ok"`: one word per frame.
    static func summary(_ frames: [Frame]) -> [String] {
        frames.map { f in
            switch f.op {
            case "event": "event \(f.seq!)" + (f.fields["replayed"] as? Bool == true ? " replayed" : "")
            case "gap": "gap \(f.int("since_seq")!) \(f.int("first_seq")!) \(f.type!)"
            case "dropped": "dropped \(f.int("count")!) \(f.int("since_seq")!)"
            default: f.op ?? "?"
            }
        }
    }

    func publish(_ h: BrokerHarness, _ c: Connection, _ types: [String]) {
        for type in types { h.send(c, #"{"op":"publish","type":"\#(type)"}"#) }
    }

    @Test func sinceReplaysTheNewerMatchingEventsFlaggedThenLiveOnes() throws {
        let h = BrokerHarness()
        let p = h.connect()
        publish(h, p, ["a", "b", "a", "a", "b"])  // seqs 1...5
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"a","since":1,"req":1}"#)
        publish(h, p, ["a"])
        #expect(Self.summary(h.read(s)) == ["ok", "event 3 replayed", "event 4 replayed", "event 6"])
        h.closeAll()
    }

    @Test func eventsPublishedInTheSameBatchAsTheSubscribeAreNeitherLostNorRepeated() throws {
        let h = BrokerHarness()
        let p = h.connect()
        publish(h, p, ["a", "a"])
        let s = h.connect()
        // The publisher's frames and the subscriber's arrive interleaved, one step each.
        h.send(p, #"{"op":"publish","type":"a"}"#)
        h.send(s, #"{"op":"subscribe","type":"a","since":1}"#)
        h.send(p, #"{"op":"publish","type":"a"}"#)
        #expect(Self.summary(h.read(s)) == ["event 2 replayed", "event 3 replayed", "event 4"])
        h.closeAll()
    }

    @Test func aRingThatNoLongerReachesBackSendsAGapFirst() throws {
        let h = BrokerHarness { $0.retention.historyEvents = 3 }
        let p = h.connect()
        publish(h, p, ["a", "a", "a", "a", "a", "a"])
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"a","since":1,"instance":"\#(BrokerHarness.instance)"}"#)
        #expect(Self.summary(h.read(s)) == ["gap 1 4 a", "event 4 replayed", "event 5 replayed", "event 6 replayed"])
        // Reaching back exactly to since + 1 is no gap.
        let t = h.connect()
        h.send(t, #"{"op":"subscribe","type":"a","since":3}"#)
        #expect(Self.summary(h.read(t)) == ["event 4 replayed", "event 5 replayed", "event 6 replayed"])
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aForeignInstanceGetsAGapFromZeroAndTheWholeRing() throws {
        let h = BrokerHarness()
        let p = h.connect()
        publish(h, p, ["a", "b"])
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":">","since":7,"instance":"someotherrun0000","req":1}"#)
        #expect(Self.summary(h.read(s)) == ["ok", "gap 0 1 >", "event 1 replayed", "event 2 replayed"])
        let t = h.connect()
        h.send(t, #"{"op":"subscribe","type":">","since":0,"instance":"\#(BrokerHarness.instance)"}"#)
        #expect(Self.summary(h.read(t)) == ["event 1 replayed", "event 2 replayed"], "since 0 of this instance: no gap")
        let u = h.connect()
        h.send(u, #"{"op":"subscribe","type":">","since":2}"#)
        h.send(u, #"{"op":"ping","req":1}"#)
        #expect(Self.summary(h.read(u)) == ["ok"], "up to date: nothing, no gap")
        h.closeAll()
    }

    @Test func historyOffSendsAGapWheneverSomethingWasMissed() throws {
        let h = BrokerHarness { $0.retention.historyEvents = 0 }
        let p = h.connect()
        publish(h, p, ["a", "a"])
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"a","since":1}"#, #"{"op":"subscribe","type":"b","since":2}"#)
        #expect(Self.summary(h.read(s)) == ["gap 1 3 a"])
        h.closeAll()
    }

    @Test func theByteBoundEvictsTheOldest() throws {
        let h = BrokerHarness { $0.retention.historyBytes = 1000 }
        let p = h.connect()
        for _ in 0..<10 { h.send(p, #"{"op":"publish","type":"a","data":"\#(String(repeating: "x", count: 150))"}"#) }
        let ring = h.broker.retention.history
        let fit = 1000 / ring[0].frame.count  // every frame has the same size
        #expect(fit == 3 && ring.count == fit && ring.firstSeq == 8 && ring.lostThrough == 7, "\(ring[0].frame.count) bytes per frame")
        // An event larger than the whole bound empties the ring and is lost itself.
        h.send(p, #"{"op":"publish","type":"a","data":"\#(String(repeating: "x", count: 2000))"}"#)
        #expect(h.broker.retention.history.count == 0 && h.broker.retention.history.lostThrough == 11)
        publish(h, p, ["a"])
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"a","since":9}"#)
        #expect(Self.summary(h.read(s)) == ["gap 9 12 a", "event 12 replayed"])
        h.checkInvariants()
        h.closeAll()
    }

    @Test func lastAndSinceTogetherSendTheRetainedEventsFirstAndNotAgainFromTheRing() throws {
        let h = BrokerHarness()
        let p = h.connect()
        h.send(p, #"{"op":"publish","type":"a","retain":true}"#)
        publish(h, p, ["b", "a"])
        h.send(p, #"{"op":"publish","type":"c","retain":true}"#)
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":">","last":true,"since":0,"req":1}"#)
        let frames = h.read(s)
        // `a` keeps its retained event 1 (3 was published without retain).
        #expect(Self.summary(frames) == ["ok", "event 1", "event 4", "event 2 replayed", "event 3 replayed"])
        #expect(frames[1].fields["retained"] as? Bool == true && frames[0].int("retained") == 2)
        h.closeAll()
    }

    @Test func replayObeysNoEchoUnlessEchoIsOn() throws {
        let h = BrokerHarness()
        let me = h.connect()
        let other = h.connect()
        publish(h, me, ["a"])
        publish(h, other, ["a"])
        h.send(me, #"{"op":"subscribe","type":"a","since":0}"#)
        #expect(Self.summary(h.read(me)) == ["event 2 replayed"])
        let echo = h.connect()
        h.send(echo, #"{"op":"hello","echo":true}"#)
        publish(h, echo, ["a"])
        h.send(echo, #"{"op":"subscribe","type":"a","since":0}"#)
        #expect(Self.summary(h.read(echo)) == ["event 1 replayed", "event 2 replayed", "event 3 replayed"])
        h.closeAll()
    }

    @Test func aReplayNeverRepeatsWhatAnotherOfTheConnectionsPatternsOffered() throws {
        let h = BrokerHarness()
        let p = h.connect()
        publish(h, p, ["a.b", "a.c", "a.b"])  // 1...3
        let s = h.connect()
        // The library resubscribing two overlapping patterns after a reconnect.
        h.send(s, #"{"op":"subscribe","type":"a.>","since":0}"#, #"{"op":"subscribe","type":"a.b","since":0}"#)
        #expect(Self.summary(h.read(s)) == ["event 1 replayed", "event 2 replayed", "event 3 replayed"])
        // A pattern offered live since seq 4, a replay of an overlapping one later.
        let t = h.connect()
        h.send(t, #"{"op":"subscribe","type":"a.*"}"#)
        publish(h, p, ["a.b", "a.x"])  // 4, 5
        h.send(t, #"{"op":"subscribe","type":"a.b","since":0}"#)
        #expect(Self.summary(h.read(t)) == ["event 4", "event 5", "event 1 replayed", "event 3 replayed"])
        // The same pattern again with an earlier since fills in only what is missing.
        h.send(t, #"{"op":"subscribe","type":"a.*","since":0}"#)
        #expect(Self.summary(h.read(t)) == ["event 2 replayed"])
        h.closeAll()
    }

    @Test func manyOverlappingPatternsCostABoundedReplayAndLoseNothing() throws {
        let h = BrokerHarness()
        let p = h.connect()
        publish(h, p, (0..<50).map { "t.\($0)" })
        let s = h.connect()
        let patterns = ["t.>", ">", "*.*"] + (0..<40).map { "t.\($0)" }
        for pattern in patterns { h.send(s, #"{"op":"subscribe","type":"\#(pattern)"}"#) }
        _ = h.read(s)
        let before = h.broker.replayCredit(uid: s.credentials.uid)
        h.send(s, #"{"op":"subscribe","type":"t.*","since":0}"#)
        let seqs = h.read(s).compactMap { $0.seq }
        #expect(Set(seqs) == Set(1...50), "nothing lost, whatever was de-duplicated")
        let spent = before - h.broker.replayCredit(uid: s.credentials.uid)
        // 50 ring entries, 43 subscriptions looked at, at most 17 checks per event.
        #expect(spent <= 50 + 43 + 50 * (Broker.maxDeduplicated + 1))
        h.closeAll()
    }

    @Test func replayedEventsCountAgainstTheOutboundLimit() throws {
        let h = BrokerHarness { $0.maxOutboundBytes = 2048 }
        let p = h.connect()
        for _ in 0..<20 { h.send(p, #"{"op":"publish","type":"a","data":"\#(String(repeating: "x", count: 150))"}"#) }
        let s = h.connect()
        h.send(s, #"{"op":"hello","overflow":"drop-new"}"#, #"{"op":"subscribe","type":"a","since":0}"#)  // (under wait it is paced)
        let first = h.read(s)
        #expect(first.count < 20 && first.allSatisfy { $0.op == "event" })
        publish(h, p, ["a"])
        let rest = Self.summary(h.read(s))
        #expect(rest == ["dropped \(20 - first.count) \(first.count + 1)", "event 21"])
        h.closeAll()
    }

    @Test func aUidOutOfReplayCreditGetsACutShortReplayAndAGap() throws {
        let h = BrokerHarness {
            $0.retention.replayBurstUnits = 30
            $0.retention.replayUnitsPerSecond = 10
        }
        let p = h.connect()
        publish(h, p, Array(repeating: "a", count: 20))
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"a","since":0}"#)
        #expect(Self.summary(h.read(s)).count == 20, "20 ring entries cost 20 of the 30 units")
        let t = h.connect()
        h.send(t, #"{"op":"subscribe","type":"a","since":0}"#)
        let cut = Self.summary(h.read(t))
        #expect(cut == ["gap 0 11 a"] + (11...20).map { "event \($0) replayed" }, "the 10 units left pay for the newest 10")
        // Credit comes back with time.
        h.elapsedNanoseconds += 10_000_000_000
        let u = h.connect()
        h.send(u, #"{"op":"subscribe","type":"a","since":0}"#)
        #expect(Self.summary(h.read(u)).count == 20)
        h.closeAll()
    }

    @Test(arguments: [1, 2, 3])
    func theRingKeepsTheNewestConsecutiveEventsUnderRandomSizes(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let h = BrokerHarness {
            $0.retention.historyEvents = Int.random(in: 1...8, using: &random)
            $0.retention.historyBytes = Int.random(in: 300...3000, using: &random)
        }
        let p = h.connect()
        for _ in 0..<200 {
            let size = Int.random(in: 0...900, using: &random)
            h.send(p, #"{"op":"publish","type":"r.\#(size % 7)","data":"\#(String(repeating: "x", count: size))"}"#)
            h.checkInvariants()
        }
        // A replay since any seq gives exactly the ring's events after it, and a gap when one is missing.
        let ring = h.broker.retention.history
        let since = UInt64.random(in: 150...200, using: &random)
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"r.*","since":\#(since)}"#)
        let frames = h.read(s)
        let held = (0..<ring.count).map { ring[$0].seq }.filter { $0 > since }
        #expect(frames.filter { $0.op == "event" }.map { UInt64($0.seq!) } == held)
        #expect((frames.first?.op == "gap") == (ring.lostThrough > since))
        h.closeAll()
    }

    /// Small events (written in place in the ring's arenas) and large ones
    /// (in chunks of their own) mixed over many arenas: every replayed frame
    /// is the one published, and the ring lets its chunks go as it evicts.
    @Test func framesStayIntactAndChunksAreReleasedOverManyArenas() throws {
        var random = SeededGenerator(seed: 14)
        let h = BrokerHarness {
            $0.retention.historyEvents = 40
            $0.retention.historyBytes = 60_000
        }
        let p = h.connect()
        var data: [UInt64: String] = [:]
        for i in 1...3000 {
            let size = Int.random(in: 0...10, using: &random) < 2 ? Int.random(in: 2100...5000, using: &random) : Int.random(in: 0...300, using: &random)
            let text = "\(i)-" + String(repeating: "x", count: size)
            data[UInt64(i)] = text
            h.send(p, #"{"op":"publish","type":"m.\#(i % 3)","data":"\#(text)"}"#)
            let ring = h.broker.retention.history
            #expect(ring.heldChunks <= ring.count + 3, "after \(i): \(ring.heldChunks) chunks for \(ring.count) events")
        }
        let ring = h.broker.retention.history
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"m.*","since":0}"#)
        let events = h.read(s).filter { $0.op == "event" }
        #expect(events.map { UInt64($0.seq!) } == (0..<ring.count).map { ring[$0].seq })
        for event in events { #expect(event.string("data") == data[UInt64(event.seq!)]) }
        h.checkInvariants()
        h.closeAll()
    }

    // Attack round (docs/RELIABILITY.md "Attack round"): a `subscribe` of a
    // few bytes could make the broker copy a whole ring of large events
    // (16 MiB) for almost no replay credit, and copy it even into a queue
    // where it was then dropped.

    @Test func aReplayCostsCreditForTheBytesItCopies() throws {
        let h = BrokerHarness()
        let p = h.connect(uid: 2000)
        let big = String(repeating: "x", count: 10_000)
        for _ in 0..<4 { h.send(p, #"{"op":"publish","type":"a","data":"\#(big)"}"#) }
        let s = h.connect()
        let before = h.broker.replayCredit(uid: s.credentials.uid)
        h.send(s, #"{"op":"subscribe","type":"a","since":0}"#)
        #expect(h.read(s).count == 4)
        let spent = before - h.broker.replayCredit(uid: s.credentials.uid)
        // 4 entries, and 4 copies of more than 10,000 bytes: (10,000 - 256) / 64 = 152 units each at least.
        #expect(spent >= 4 + 4 * 152)
        h.closeAll()
    }

    @Test func aReplayIntoAFullQueueCopiesNothingAndCostsOnlyItsEntries() throws {
        let h = BrokerHarness { $0.maxOutboundBytes = 16_384 }
        let p = h.connect(uid: 2000)
        let big = String(repeating: "x", count: 10_000)
        for _ in 0..<8 { h.send(p, #"{"op":"publish","type":"a","data":"\#(big)"}"#) }
        let s = h.connect()
        h.send(s, #"{"op":"hello","overflow":"drop-new"}"#)  // (under wait the replay is paced)
        h.send(s, #"{"op":"subscribe","type":"b","since":0}"#, #"{"op":"subscribe","type":"a","since":0}"#)
        #expect(h.peek(s).filter { $0.op == "event" }.count == 1, "one 10 KB event fits in 16 KiB")
        let before = h.broker.replayCredit(uid: s.credentials.uid)
        h.send(s, #"{"op":"unsubscribe","type":"a"}"#, #"{"op":"subscribe","type":"a","since":0}"#)
        let spent = before - h.broker.replayCredit(uid: s.credentials.uid)
        #expect(spent == 8 + 1, "8 ring entries and 1 other subscription; nothing copied")
        let frames = h.read(s)
        #expect(frames.filter { $0.op == "event" }.count == 1)
        h.send(p, #"{"op":"publish","type":"a"}"#)
        #expect(HistoryTests.summary(h.read(s)) == ["dropped 15 2", "event 9"], "7 + 8 drops announced")
        h.closeAll()
    }
}
