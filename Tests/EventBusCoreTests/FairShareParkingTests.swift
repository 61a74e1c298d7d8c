// (parkfair) Full subscribers parked against one publisher uid
// (ParkedSubscribers.swift): a subscriber that another uid's fair share of
// its queue refuses again while dropping is passed over for that uid's
// events only — not walked per event (its `lastRoutedSeq` stays), the
// events it loses counted exactly as routing would have routed them to it
// (against a twin that reads) — and still gets the events of other uids,
// root's and its own uid's that fit; it is back at its next write.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Parked against a publisher uid")
struct FairShareParkingTests {
    static let e = eventSize()
    /// Room for eight events: one other uid's fair share is four of them.
    static func configure(_ c: inout BrokerConfiguration) { c.maxOutboundBytes = 8 * e + e / 2 }

    @Test(arguments: ["drop-new", "wait"])
    func anotherUIDsNeverReadersAreParkedAgainstItAndLoseExactlyWhatRoutingWouldHaveSent(_ overflow: String) {
        let h = BrokerHarness(Self.configure)
        // Never-readers of uid 1000 and their twins (same uid, patterns and
        // options), the twins read after every publish.
        var never: [Connection] = [], twins: [Connection] = []
        for k in 0..<6 {
            let c = h.connect(uid: 1000)
            h.send(c, #"{"op":"hello","overflow":"\#(overflow)"}"#, #"{"op":"subscribe","type":"a.>"}"#, #"{"op":"subscribe","type":">"}"#)
            if k % 2 == 0 { never.append(c) } else { twins.append(c) }
        }
        for t in twins { _ = h.read(t) }
        let victim = h.connect(uid: 1001), third = h.connect(uid: 1002), root = h.connect(uid: 0)
        var expected = 0
        func publish(_ from: Connection, _ type: String = "a.b") {
            h.send(from, paddedPublish(type))
            let got = twins.map { h.read($0).filter { $0.op == "event" }.count }
            #expect(Set(got).count == 1, "the twins got the same")
            expected += got[0]
        }
        // The victim's fair share of each never-reader is four events; the
        // fifth is dropped, the sixth parks it against uid 1001.
        for _ in 0..<6 { publish(victim) }
        #expect(never.allSatisfy { $0.parkedAgainst == [1001] && !$0.isParked }, "\(never.map(\.parkedAgainst))")
        #expect(h.broker.parking.againstUIDs.count == never.count)
        // Passed over for the victim's events: not walked at all.
        let walked = never.map(\.output.lastRoutedSeq)
        for _ in 0..<200 { publish(victim, "x.y") }
        #expect(never.map(\.output.lastRoutedSeq) == walked, "a parked-against connection is not tried")
        #expect(never.allSatisfy { $0.pendingDropCount == 202 }, "the fifth and sixth, then 200 passed over")
        var visited = 0
        h.broker.forEachSubscriber(of: EventType("a.b")!, entry: nil) { _ in visited += 1 }
        #expect(visited == never.count + twins.count, "the hold check still sees them")
        h.checkInvariants()
        // Another uid's events fit its own share: they reach the never-readers
        // (each after the notice of what was lost before it; the connection
        // is back in the lists for every uid, and parked again at the
        // victim's second refusal after it).
        publish(third)
        #expect(never.allSatisfy { $0.parkedAgainst.isEmpty && $0.pendingDropCount == 0 })
        for _ in 0..<3 { publish(victim) }
        #expect(never.allSatisfy { $0.parkedAgainst == [1001] })
        // Root's events fit under the connection's limit.
        publish(root)
        for _ in 0..<50 { publish(victim, "x.y") }
        h.checkInvariants()
        let stats = h.broker.statistics.dropped
        // Read it all: back at the first write, every loss told.
        var totalNotices = 0
        for c in never {
            var frames = h.read(c)
            frames += h.read(c)
            let events = frames.filter { $0.op == "event" }
            let notices = ParkingTests.droppedInNotices(frames)
            #expect(c.parkedAgainst.isEmpty && !c.isParked)
            #expect(events.count + notices == expected, "\(events.count) read + \(notices) in notices, routing sent the twin \(expected)")
            #expect(events.count >= 4 + 1 + 1, "the victim's share, the third uid's and root's")
            totalNotices += notices
        }
        #expect(Int(stats) == totalNotices)
        let byType = ParkingTests.typeDrops(h, root)
        #expect(byType.values.reduce(0, +) == totalNotices, "\(byType)")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func parkedAgainstTwoUIDsAndBackAfterAWrite() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(uid: 1000)
        h.send(s, #"{"op":"hello","overflow":"drop-new"}"#, #"{"op":"subscribe","type":">"}"#)
        let v = h.connect(uid: 1001), w = h.connect(uid: 1002)
        for _ in 0..<6 { h.send(v, paddedPublish()) }
        #expect(s.parkedAgainst == [1001])
        // W's first event fits its share (queued after the notice, back in
        // the lists); the victim's next two park it again; W's next two are
        // refused by W's share: parked against both.
        h.send(w, paddedPublish())
        #expect(s.parkedAgainst.isEmpty)
        for _ in 0..<2 { h.send(v, paddedPublish()) }
        for _ in 0..<2 { h.send(w, paddedPublish()) }
        #expect(s.parkedAgainst == [1001, 1002])
        let routed = s.output.lastRoutedSeq
        for _ in 0..<10 { h.send(v, paddedPublish()); h.send(w, paddedPublish()) }
        #expect(s.output.lastRoutedSeq == routed)
        h.checkInvariants()
        // One event written: back in every list.
        var frames = h.read(s, maxBytes: Self.e - OutboundQueue.entryOverheadBytes)
        #expect(s.parkedAgainst.isEmpty && h.broker.parking.againstUIDs.isEmpty && !h.broker.types.splitsFairParked)
        frames += h.read(s)
        let events = frames.filter { $0.op == "event" }.count
        #expect(events + ParkingTests.droppedInNotices(frames) == 6 + 1 + 2 + 2 + 20)
        h.checkInvariants()
        h.closeAll()
    }
}
