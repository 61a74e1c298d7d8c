// Outbound limits (PROTOCOL.md "Semantics"): drop-new, drop-old and
// disconnect with their `dropped` notices (count, since_seq, placed before the
// next event, or queued once the queue drains below half), the global
// --max-queued rule, replies that are never dropped, and back-pressure on
// requests (`.pauseReading` over the limit, `.resumeReading` below half).
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

/// A publish frame whose event is about `padding` bytes larger than an empty one.
func paddedPublish(_ type: String = "t", padding: Int = 200, req: Int? = nil) -> String {
    let reqField = req.map { #","req":\#($0)"# } ?? ""
    return #"{"op":"publish","type":"\#(type)","data":"\#(String(repeating: "x", count: padding))"\#(reqField)}"#
}

/// The charge in bytes of the event frame `paddedPublish` produces for a
/// 1-digit seq (its bytes plus `OutboundQueue.entryOverheadBytes`).
func eventSize(padding: Int = 200) -> Int {
    let h = BrokerHarness()
    let s = h.connect(), p = h.connect()
    h.send(s, #"{"op":"subscribe","type":">"}"#)
    h.send(p, paddedPublish(padding: padding))
    return s.outbound.chargedBytes
}

/// A `dropped` notice's (count, since_seq), or nil for other frames.
func dropped(_ frame: Frame) -> (Int, Int)? {
    guard frame.op == "dropped", let count = frame.int("count"), let since = frame.int("since_seq") else { return nil }
    return (count, since)
}

@Suite("Overflow")
struct OverflowTests {
    /// Room for three events and a notice, not four events; half is ~1.7 events.
    static let e = eventSize()
    static func configure(_ c: inout BrokerConfiguration) { c.maxOutboundBytes = 3 * e + e / 2 }

    @Test func dropNewDropsTheNewEventAndNoticesBeforeTheNextOne() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"hello","overflow":"drop-new"}"#, #"{"op":"subscribe","type":">"}"#)
        for i in 1...5 { h.send(p, paddedPublish(req: i)) }
        #expect(h.read(p).map { $0.int("delivered") } == [1, 1, 1, 0, 0])
        #expect(s.pendingDropCount == 2)
        #expect(h.broker.statistics.dropped == 2 && h.broker.statistics.delivered == 3)
        #expect(h.takeNotices() == [.startedDropping(s.id, pid: s.credentials.pid)], "one notice per episode")

        // Write one event: the queue is still above half, so no notice yet.
        #expect(h.read(s, maxBytes: Self.e - OutboundQueue.entryOverheadBytes).compactMap(\.seq) == [1])
        #expect(!h.peek(s).contains { $0.op == "dropped" })

        // The next event that fits is preceded by the notice.
        h.send(p, paddedPublish())
        let frames = h.read(s)
        #expect(frames.map(\.op) == ["event", "event", "dropped", "event"])
        #expect(frames.compactMap(\.seq) == [2, 3, 6])
        #expect(frames.compactMap(dropped).first.map { [$0.0, $0.1] } == [2, 4])
        #expect(s.pendingDropCount == 0)
        #expect(h.takeEffects().isEmpty, "events never pause reading")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func theDroppedNoticeIsQueuedWhenTheQueueDrainsBelowHalf() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"hello","overflow":"drop-new"}"#, #"{"op":"subscribe","type":">"}"#)
        for _ in 1...4 { h.send(p, paddedPublish()) }
        #expect(s.pendingDropCount == 1)
        _ = h.read(s, maxBytes: Self.e - OutboundQueue.entryOverheadBytes)  // two events left: above half
        #expect(!h.peek(s).contains { $0.op == "dropped" })
        _ = h.read(s, maxBytes: Self.e - OutboundQueue.entryOverheadBytes)  // one event left: below half
        let queued = h.peek(s)
        #expect(queued.map(\.op) == ["event", "dropped"])
        #expect(queued.last.flatMap(dropped).map { [$0.0, $0.1] } == [1, 4])
        #expect(s.pendingDropCount == 0)
        #expect(h.lastStep == BrokerStep(output: [s.id]), "the notice is new output")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func dropOldDropsTheOldestWholeEventsButNeverAPartlyWrittenOne() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"hello","overflow":"drop-old"}"#, #"{"op":"subscribe","type":">"}"#)
        for _ in 1...3 { h.send(p, paddedPublish()) }
        #expect(h.read(s, maxBytes: 10).isEmpty)  // event 1 is partly written
        h.send(p, paddedPublish(req: 4))
        h.send(p, paddedPublish(req: 5))
        #expect(h.read(p).map { $0.int("delivered") } == [1, 1])
        #expect(h.takeNotices() == [.startedDropping(s.id, pid: s.credentials.pid)], "the merged notice is one episode")
        let frames = h.read(s)
        // Event 1 arrives whole; 2 and 3 were dropped to make room for 4 and 5.
        #expect(frames.compactMap(\.seq) == [1, 4, 5])
        // One notice, merged, where the gap is: right after the partly written frame.
        #expect(frames.compactMap(dropped).map { [$0.0, $0.1] } == [[2, 2]])
        #expect(frames.map(\.op) == ["event", "dropped", "event", "event"])
        #expect(h.broker.statistics.dropped == 2)
        #expect(h.broker.statistics.delivered == 5)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func dropOldNeverDropsReplies() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"hello","overflow":"drop-old"}"#, #"{"op":"subscribe","type":">"}"#)
        h.send(p, paddedPublish())
        h.send(s, #"{"op":"ping","req":"between"}"#)
        for _ in 1...6 { h.send(p, paddedPublish()) }
        let frames = h.read(s)
        // The notice for event 1 (dropped) stands where event 1 stood, before the reply.
        #expect(frames.first?.op == "dropped" && frames.first.flatMap(dropped)?.1 == 1)
        #expect(frames.dropFirst().first?.op == "ok" && frames.dropFirst().first?.string("req") == "between")
        // Every event is either delivered or counted in a notice, newest kept.
        let seen = frames.compactMap(\.seq)
        let lost = frames.compactMap(dropped).map(\.0).reduce(0, +)
        #expect(seen.count + lost == 7)
        #expect(seen.last == 7 && seen == seen.sorted())
        #expect(h.broker.statistics.dropped == UInt64(lost))
        h.checkInvariants()
        h.closeAll()
    }

    // Regression: drop-old once emptied the queue for an event larger than the
    // whole limit and then dropped that event too (seqs [3], dropped {2, 1}).
    @Test
    func dropOldKeepsQueuedEventsWhenTheNewOneCouldNeverFit() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"hello","overflow":"drop-old"}"#, #"{"op":"subscribe","type":">"}"#)
        h.send(p, paddedPublish(), paddedPublish(padding: 4 * Self.e), paddedPublish())
        let frames = h.read(s)
        #expect(frames.compactMap(\.seq) == [1, 3])
        #expect(frames.compactMap(dropped).map { [$0.0, $0.1] } == [[1, 2]])
        h.closeAll()
    }

    @Test func disconnectQueuesSlowConsumerAndClosesAfterTheNextWrite() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"hello","overflow":"disconnect"}"#, #"{"op":"subscribe","type":">"}"#)
        for i in 1...3 { h.send(p, paddedPublish(req: i)) }
        #expect(h.takeEffects().isEmpty)
        #expect(h.send(p, paddedPublish(req: 4)).effects
                == [.close(s.id, .afterWrite), .notice(.slowConsumerDisconnected(s.id, pid: s.credentials.pid))])
        #expect(h.lastStep.output == [s.id, p.id])
        #expect(h.send(p, paddedPublish(req: 5)).effects.isEmpty, "closed once, and no longer routed to")
        #expect(h.send(s, #"{"op":"ping","req":1}"#).isEmpty, "no input is handled while closing")
        #expect(h.read(p).map { $0.int("delivered") } == [1, 1, 1, 0, 0])
        let queued = h.peek(s)
        #expect(queued.map(\.op) == ["event", "event", "event", "error"])
        #expect(queued.last?.code == "slow_consumer" && queued.last?.has("req") == false)
        // The server closes it after its next write attempt, written or not.
        _ = h.read(s, maxBytes: 10)
        #expect(h.lastStep.isEmpty)
        #expect(h.close(s).effects == [.close(s.id, .now)])
        h.checkInvariants()
        h.closeAll()
    }

    @Test func repliesAreNeverDroppedAndRequestsAreBackPressuredBetweenFrames() {
        let h = BrokerHarness { $0.maxOutboundBytes = 200 }
        let c = h.connect()
        let pings = (1...20).map { #"{"op":"ping","req":\#($0 + 10)}"# }  // 21-byte replies
        // One read of 20 pings: handling stops at the frame that put the queue
        // over its limit (9 replies and one entry: 221 bytes charged); the
        // other 11 frames wait in the connection, unread.
        #expect(h.sendRaw(c, utf8(pings.joined(separator: "\n") + "\n")) == BrokerStep(output: [c.id], effects: [.pauseReading(c.id)]))
        #expect(c.outbound.byteCount == 9 * 21 && c.hasBufferedInput)
        // The nine replies share one entry, charged whole until its last byte
        // is written (its chunk is held until then): still paused.
        #expect(h.read(c, maxBytes: 21 * 3).count == 3)
        #expect(h.lastStep.isEmpty)
        #expect(h.read(c, maxBytes: 21 * 3).count == 3)
        #expect(h.lastStep.isEmpty && c.outbound.chargedBytes == 221)
        // Written completely (below half): reading resumes, and the kept frames come first.
        #expect(h.read(c, maxBytes: 21 * 3).count == 3)
        #expect(h.lastStep.effects == [.resumeReading(c.id)])
        h.sendRaw(c, [])
        #expect(c.hasBufferedInput && c.readPaused, "paused again after nine more")
        #expect(h.read(c).compactMap { $0.int("req") } == Array(20...28))
        h.sendRaw(c, [])
        #expect(h.read(c).compactMap { $0.int("req") } == Array(29...30))
        #expect(!c.hasBufferedInput && !c.readPaused)
        #expect(h.send(c, #"{"op":"ping","req":1}"#).effects.isEmpty, "paused only over the limit")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aSubscriberOverItsLimitStillGetsItsReplies() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        for _ in 1...5 { h.send(p, paddedPublish()) }
        h.send(s, #"{"op":"ping","req":1}"#, #"{"op":"stats","req":2}"#)
        let frames = h.read(s)
        #expect(frames.filter { $0.op == "ok" }.map { $0.int("req") } == [1, 2])
        #expect(frames.compactMap(\.seq) == [1, 2, 3])
        h.closeAll()
    }

    @Test func theGlobalLimitDropsForTheLargestQueueFirst() {
        let e = Self.e
        let h = BrokerHarness { $0.maxOutboundBytes = 1 << 20; $0.maxQueuedBytes = 6 * e }
        let slow = h.connect(), fast = h.connect(), p = h.connect()
        h.send(slow, #"{"op":"subscribe","type":">"}"#)
        h.send(fast, #"{"op":"subscribe","type":">"}"#)
        var fastSeen: [Int] = []
        for _ in 1...9 {
            h.send(p, paddedPublish())
            fastSeen += h.read(fast).compactMap(\.seq)
            #expect(h.broker.statistics.queuedBytes <= 6 * e + e)
        }
        #expect(fastSeen == Array(1...9), "the connection that keeps up loses nothing")
        #expect(h.peek(slow).compactMap(\.seq) == [1, 2, 3, 4, 5, 6])
        #expect(slow.pendingDropCount == 3)
        #expect(h.broker.statistics.dropped == 3)
        h.checkInvariants()
        h.closeAll()
    }

    // The documented bound (docs/PROTOCOL-NOTES.md "Backpressure and drops"):
    // beyond --max-queued only queues holding at least a fair share
    // (max-queued / connections) lose events, so a subscriber that keeps up is
    // never punished for a slow one; all queues together stay within
    // --max-queued plus one fair share per connection, i.e. twice --max-queued.
    @Test func theGlobalLimitBoundsAllQueuesTogetherWithinTwiceTheLimit() {
        let e = Self.e
        let h = BrokerHarness { $0.maxOutboundBytes = 1 << 20; $0.maxQueuedBytes = 6 * e }
        let slow = h.connect(), later = h.connect(), p = h.connect()
        h.send(slow, #"{"op":"subscribe","type":">"}"#)
        h.send(later, #"{"op":"subscribe","type":">"}"#)
        for _ in 1...6 {
            h.send(p, paddedPublish())
            _ = h.read(later)
        }
        // Now the second subscriber stops reading too: it may grow to its fair
        // share (2 events of 3 connections' 6), no further.
        for _ in 7...12 {
            h.send(p, paddedPublish())
            #expect(h.broker.statistics.queuedBytes <= 2 * 6 * e, "queued \(h.broker.statistics.queuedBytes) > \(12 * e)")
        }
        #expect(h.peek(later).compactMap(\.seq) == [7, 8])
        #expect(h.peek(slow).compactMap(\.seq) == [1, 2, 3, 4, 5, 6])
        h.checkInvariants()
        h.closeAll()
    }

    @Test func theGlobalLimitAppliesEachConnectionsOwnOverflowRule() {
        let e = Self.e
        let h = BrokerHarness { $0.maxOutboundBytes = 1 << 20; $0.maxQueuedBytes = 4 * e }
        let slow = h.connect(), p = h.connect()
        h.send(slow, #"{"op":"hello","overflow":"disconnect"}"#, #"{"op":"subscribe","type":">"}"#)
        for _ in 1...5 { h.send(p, paddedPublish()) }
        #expect(h.takeEffects().contains(.close(slow.id, .afterWrite)))
        #expect(h.peek(slow).last?.code == "slow_consumer")
        h.closeAll()
    }
}
