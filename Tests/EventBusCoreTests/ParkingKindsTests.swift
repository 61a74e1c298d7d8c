// (issue 37) Never-readers of every overflow kind parked out of the route
// lists (ParkedSubscribers.swift): a `wait` subscriber refusing another
// uid's events is parked and still holds a publisher of its own uid; a
// `drop-old` one that dropped since its last write and is refused again is
// parked, and when it next takes bytes its stale queue is dropped, every
// drop told in the one notice first in line. For each, what it reads plus
// its notices' counts is what was published to it, and `stats.dropped`,
// its `dropped` and the `types` op's per-type `dropped` agree.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Parked subscribers of every overflow kind")
struct ParkingKindsTests {
    static let e = ParkingTests.e

    static func configure(_ c: inout BrokerConfiguration) {
        c.maxOutboundBytes = 3 * e + e / 2
    }

    /// Seqs of the event frames among `frames`.
    static func seqs(_ frames: [Frame]) -> [Int] { frames.filter { $0.op == "event" }.compactMap(\.seq).map { Int($0) } }

    @Test func aWaitNeverReaderOfAnotherUIDsEventsIsParkedWithExactCounts() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(uid: 1000), root = h.connect(uid: 0), other = h.connect(uid: 1001)
        h.send(s, #"{"op":"hello","overflow":"wait"}"#, #"{"op":"subscribe","type":">"}"#)
        for i in 0..<40 { h.send(i % 2 == 0 ? root : other, paddedPublish(i % 3 == 0 ? "a.b" : "x.y")) }
        #expect(s.isParked, "refused again by its own queue: parked")
        #expect(h.broker.statistics.held == 0, "another uid's events are never held")
        #expect(Int(s.droppedCount) == Int(h.broker.statistics.dropped) && s.droppedCount > 30)
        var frames = h.read(s)
        #expect(!s.isParked)
        frames += h.read(s)  // the notice, queued once below half
        let delivered = Self.seqs(frames).count
        #expect(delivered + ParkingTests.droppedInNotices(frames) == 40, "\(frames.map(\.op))")
        #expect(ParkingTests.typeDrops(h, root).values.reduce(0, +) == Int(h.broker.statistics.dropped))
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aParkedWaitSubscriberStillHoldsAPublisherOfItsOwnUID() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(uid: 1000), root = h.connect(uid: 0), own = h.connect(uid: 1000)
        h.send(s, #"{"op":"hello","overflow":"wait"}"#, #"{"op":"subscribe","type":">"}"#)
        for _ in 1...10 { h.send(root, paddedPublish()) }
        #expect(s.isParked && s.pendingDropCount == 7)
        h.send(own, paddedPublish(req: 1))
        #expect(h.broker.statistics.held == 1, "held by the parked subscriber of its uid, as in the lists")
        #expect(h.read(own).isEmpty, "no reply while held")
        var frames = h.read(s)
        #expect(h.broker.statistics.held == 0, "released below half")
        _ = h.sendRaw(own, [])  // read again: its held frame is routed
        frames += h.read(s)
        #expect(Self.seqs(frames) == [1, 2, 3, 11], "\(frames.map(\.op))")
        #expect(frames.compactMap(dropped).map { [$0.0, $0.1] } == [[7, 4]])
        #expect(h.read(own).first?.op == "ok")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aParkedWaitSubscriberComesBackForAnEventOfItsUIDThatFits() {
        // Three 1 KB events fill it with 500 bytes to spare: a fourth does not
        // fit, a small event of its own uid does.
        let big = eventSize(padding: 1000)
        let h = BrokerHarness { $0.maxOutboundBytes = 3 * big + 500 }
        let s = h.connect(uid: 1000), root = h.connect(uid: 0), own = h.connect(uid: 1000)
        h.send(s, #"{"op":"hello","overflow":"wait"}"#, #"{"op":"subscribe","type":">"}"#)
        for _ in 1...10 { h.send(root, paddedPublish(padding: 1000)) }
        #expect(s.isParked)
        // Delivered, not counted lost as a parked drop-new subscriber's would be.
        h.send(own, paddedPublish(padding: 1))
        #expect(!s.isParked && h.broker.statistics.held == 0)
        let frames = h.read(s) + h.read(s)
        #expect(Self.seqs(frames) == [1, 2, 3, 11], "\(frames.map(\.op))")
        #expect(ParkingTests.droppedInNotices(frames) == 7)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aDropOldNeverReaderIsParkedAndItsStaleQueueReplacedWhenItNextReads() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(uid: 1000), root = h.connect(uid: 0)
        h.send(s, #"{"op":"hello","overflow":"drop-old"}"#, #"{"op":"subscribe","type":">"}"#)
        for i in 1...10 { h.send(root, paddedPublish(i % 2 == 0 ? "a.b" : "x.y")) }
        #expect(!s.isParked, "drop-old keeps the newest until it is stalled")
        h.elapsedNanoseconds += 1_100_000_000  // its notice unread for the stall timeout: stalled
        for i in 11...30 { h.send(root, paddedPublish(i % 2 == 0 ? "a.b" : "x.y")) }
        #expect(s.isParked, "stalled and refused again: parked")
        #expect(Int(s.droppedCount) == Int(h.broker.statistics.dropped) && s.droppedCount >= 26)
        // One event's bytes taken (a notice is first in line, then part of
        // an event): back, its stale queue dropped, every drop since in one
        // notice in front.
        var frames = h.read(s, maxBytes: Self.e - OutboundQueue.entryOverheadBytes)
        #expect(!s.isParked)
        frames += h.read(s)
        let lastNotice = frames.lastIndex { $0.op == "dropped" } ?? 0
        #expect(Self.seqs(Array(frames[..<lastNotice])).count <= 1, "only the partly written event left before it: \(frames.map(\.op))")
        for _ in 31...32 { h.send(root, paddedPublish("a.b")) }
        frames += h.read(s)
        let received = Self.seqs(frames)
        let after = Self.seqs(Array(frames[lastNotice...]))
        let notices = ParkingTests.droppedInNotices(frames)
        #expect(received.count + notices == 32)
        #expect(after == [31, 32])
        // drop-old: every event after the last notice is newer than every event dropped.
        let lost = Set(1...32).subtracting(received)
        #expect((lost.max() ?? 0) < (after.min() ?? 0) && lost.count == notices)
        #expect(frames.compactMap(dropped).allSatisfy { lost.contains($0.1) }, "since_seq names a lost event")
        #expect(Int(h.broker.statistics.dropped) == notices && Int(s.droppedCount) == notices)
        let byType = ParkingTests.typeDrops(h, root)
        #expect(byType.values.reduce(0, +) == notices, "\(byType)")
        #expect(byType["a.b"] == lost.filter { $0 % 2 == 0 }.count, "each drop counted for its type")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aParkedDropOldSubscriberOfManyNeverCostsAPublisherPerEvent() {
        let h = BrokerHarness(Self.configure)
        let root = h.connect(uid: 0)
        var never: [Connection] = []
        for _ in 0..<20 {
            let s = h.connect(uid: 1000)
            h.send(s, #"{"op":"hello","overflow":"drop-old"}"#, #"{"op":"subscribe","type":">"}"#)
            never.append(s)
        }
        for _ in 1...10 { h.send(root, paddedPublish()) }
        h.elapsedNanoseconds += 1_100_000_000
        for _ in 11...12 { h.send(root, paddedPublish()) }
        let parked = never.filter { $0.isParked }.count
        #expect(parked == never.count)
        var visited = 0
        h.broker.forEachSubscriber(of: EventType("t")!, entry: nil) { _ in visited += 1 }
        #expect(visited == 0, "out of the kept list")
        for _ in 13...100 { h.send(root, paddedPublish()) }
        for s in never {
            let frames = h.read(s) + h.read(s)
            #expect(Self.seqs(frames).count + ParkingTests.droppedInNotices(frames) == 100)
        }
        #expect(Int(h.broker.statistics.dropped) == never.map { Int($0.droppedCount) }.reduce(0, +))
        h.checkInvariants()
        h.closeAll()
    }
}
