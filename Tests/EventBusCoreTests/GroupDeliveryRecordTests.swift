// A member's record of the group events queued to it
// (`ConnectionGroups.deliveries`, for the hand-on when it closes) is pruned
// cheaply now (issue 38, case 10): to the events not older than the oldest
// queued, then, when that leaves too many, to the events still queued. The
// tests check that pruning never loses an event that is still queued: a
// member that closes hands on every group event it holds unwritten, also
// when its queue holds events out of seq order (redelivered ones behind
// newer ones), and that the record stays bounded by its queue. (Each member
// holds a plain subscription too, so that its deliveries are recorded: a
// worker's one membership records none, GroupUnrecordedTests.)
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Queue group delivery record")
struct GroupDeliveryRecordTests {
    /// Bytes of the first `frames` frames queued to `connection`.
    static func bytes(ofFirst frames: Int, _ h: BrokerHarness, _ connection: Connection) -> Int {
        var seen = 0
        for (i, byte) in h.queued(connection).enumerated() where byte == 0x0A {
            seen += 1
            if seen == frames { return i + 1 }
        }
        return 0
    }

    static func publish(_ h: BrokerHarness, _ publisher: Connection, _ count: Int, from first: Int) {
        for i in first..<(first + count) { h.send(publisher, #"{"op":"publish","type":"job","data":\#(i)}"#) }
    }

    @Test("A member that reads as it goes, then closes, hands on every event it holds unwritten; its record stays bounded")
    func readingMemberHandsOnAll() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect()
        for m in [a, b] { h.send(m, #"{"op":"subscribe","type":"other"}"#, #"{"op":"subscribe","type":"job","group":"w"}"#) }
        for m in [a, b] { _ = h.read(m) }
        #expect(a.groups.unrecorded == 0, "recorded")
        let publisher = h.connect()
        var next = 0
        // Rounds of 40 publishes, `a` reads after each: its record is pruned again and again.
        for _ in 0..<50 {
            Self.publish(h, publisher, 40, from: next)
            next += 40
            // (Pruned as events are recorded: bounded by the queue as it was at the last one.)
            #expect(a.groups.deliveries.count <= 2 * a.outbound.frameCount + 64, "bounded by its queue: \(a.groups.deliveries.count)")
            _ = h.read(a)
        }
        _ = h.read(b)
        Self.publish(h, publisher, 90, from: next)
        let held = h.peek(a).filter { $0.op == "event" }.count
        #expect(held == 45)
        h.record(h.broker.peersClosed([a], at: h.now))
        let redelivered = h.read(b).filter { $0.op == "event" && $0.bool("redelivered") == true }.count
        #expect(redelivered == held, "each event a held unwritten goes to b: \(redelivered) of \(held)")
        h.close(a)
        h.closeAll()
    }

    @Test("A member whose queue holds redelivered events behind newer ones keeps them through a prune, and hands them on")
    func outOfOrderQueueKeepsRecord() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect(), c = h.connect()
        for m in [a, b, c] { h.send(m, #"{"op":"subscribe","type":"other"}"#, #"{"op":"subscribe","type":"job","group":"w"}"#) }
        for m in [a, b, c] { _ = h.read(m) }
        let publisher = h.connect()
        Self.publish(h, publisher, 450, from: 0)  // 150 each
        // `a` leaves: its 150 go to b and c, behind their own (older seqs after newer).
        h.record(h.broker.peersClosed([a], at: h.now))
        h.close(a)
        let own = 150
        let queued = h.peek(b).filter { $0.op == "event" }.count
        #expect(queued > own)
        // b writes its own 150: what it still has are redelivered events, older than the newest written.
        _ = h.read(b, maxBytes: Self.bytes(ofFirst: own, h, b))
        let kept = h.peek(b).filter { $0.op == "event" }.count
        #expect(kept == queued - own)
        // The next events to b prune its record (more than twice its queue + 64 recorded).
        _ = h.read(c)
        Self.publish(h, publisher, 2, from: 450)
        #expect(b.groups.deliveries.count <= b.outbound.frameCount + 33, "pruned: \(b.groups.deliveries.count) for \(b.outbound.frameCount) queued")
        let held = h.peek(b).filter { $0.op == "event" }.count
        h.record(h.broker.peersClosed([b], at: h.now))
        let handedOn = h.read(c).filter { $0.op == "event" && $0.bool("redelivered") == true }.count
        #expect(handedOn == held, "every event b held unwritten goes to c: \(handedOn) of \(held)")
        h.close(b)
        h.closeAll()
    }
}
