// (issue 20) Full subscribers parked out of the route lists
// (ParkedSubscribers.swift): the events a parked connection loses are
// counted exactly as routing would have routed them to it — once per event
// whatever number of its patterns match, never its own events without echo,
// never a type the policy denies it — in its `dropped` notice, `clients`,
// `stats.dropped` and the `types` op's per-type `dropped`; it is out of the
// kept lists while parked and back after a write.
@testable import EventBusCore
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Parked subscribers")
struct ParkingTests {
    static let e = eventSize()
    /// Room for three events, so a never-reader is full after three.
    static func configure(_ c: inout BrokerConfiguration) {
        c.maxOutboundBytes = 3 * e + e / 2
        c.policy = try? PolicyRoutingTests.policy("deny subscribe secret.>\n")
    }

    /// Sum of the `dropped` notices' counts among `frames`.
    static func droppedInNotices(_ frames: [Frame]) -> Int { frames.compactMap(dropped).map(\.0).reduce(0, +) }

    /// The per-type `dropped` of the `types` op, by type.
    static func typeDrops(_ h: BrokerHarness, _ asker: Connection) -> [String: Int] {
        h.send(asker, #"{"op":"types","req":"t"}"#)
        guard let reply = h.read(asker).last, let list = reply.array("types") as? [[String: Any]] else { return [:] }
        var result: [String: Int] = [:]
        for item in list {
            if let type = item["type"] as? String, let dropped = (item["dropped"] as? Int) { result[type] = dropped }
        }
        return result
    }

    @Test func aParkedSubscriberLosesExactlyWhatRoutingWouldHaveSentIt() {
        let h = BrokerHarness(Self.configure)
        let patterns = [">", "a.>", "a.b", "a.*"]  // overlapping; `>` is filtered (secret.> denied)
        // Two never-readers (echo off and on) and their twins, same uid, patterns
        // and options, read after every step: what routing sends the twin is
        // what the never-reader would have got.
        var never: [Connection] = [], twins: [Connection] = []
        for echo in [false, true] {
            for list in 0..<2 {
                let c = h.connect(uid: 1000)
                h.send(c, #"{"op":"hello","overflow":"drop-new","echo":\#(echo)}"#)
                for p in patterns { h.send(c, #"{"op":"subscribe","type":"\#(p)"}"#) }
                if list == 0 { never.append(c) } else { twins.append(c) }
            }
        }
        for t in twins { _ = h.read(t) }
        let root = h.connect(uid: 0), other = h.connect(uid: 1001)
        let types = ["a.b", "a.c", "x.y", "secret.z", "a.b.c"]
        /// Events each twin got, by type, not counting those its never-reader published.
        var expected: [[String: Int]] = [[:], [:]]
        var publishes = 0
        func publish(_ from: Connection, _ type: String, mark: String) {
            h.send(from, paddedPublish(type, padding: 200).replacingOccurrences(of: #""data":"x"#, with: #""data":"\#(mark)"#))
            publishes += 1
            for (k, twin) in twins.enumerated() {
                for frame in h.read(twin) where frame.op == "event" {
                    // The never-reader's own event goes to it only with echo.
                    if frame.string("data")?.hasPrefix("n\(k)") == true && k == 0 { continue }
                    expected[k][frame.type ?? "?", default: 0] += 1
                }
            }
        }
        for round in 0..<40 {
            for (i, type) in types.enumerated() {
                let from = [root, other, never[0], never[1]][(round + i) % 4]
                let mark = from === never[0] ? "n0" : from === never[1] ? "n1" : "p"
                publish(from, type, mark: mark)
            }
            if round == 10 {
                #expect(never.allSatisfy { $0.isParked }, "full and refused again: parked")
                // Routed to no parked connection any more: the kept list leaves them out.
                var visited = 0
                h.broker.forEachSubscriber(of: EventType("a.b")!, entry: nil) { c in
                    #expect(!c.isParked)
                    visited += 1
                }
                #expect(visited == twins.count)
            }
            if round == 20 {
                // Subscription changes while parked, the same on the twins.
                for c in [never[0], twins[0]] {
                    h.send(c, #"{"op":"unsubscribe","type":"a.b"}"#, #"{"op":"subscribe","type":"q.>"}"#)
                }
                for c in [never[1], twins[1]] { h.send(c, #"{"op":"unsubscribe","type":">"}"#) }
                _ = h.read(twins[0]); _ = h.read(twins[1])
                #expect(never.allSatisfy { $0.isParked })
                for type in ["q.r", "x.y"] { publish(root, type, mark: "p") }
            }
        }
        // A twin gets its never-reader's events (another connection), which
        // the never-reader itself gets only with echo (skipped above for k == 0).
        h.checkInvariants()
        var totalDrops = 0
        for (k, c) in never.enumerated() {
            let want = expected[k].values.reduce(0, +)
            let countedBefore = Int(c.pendingDropCount)
            #expect(Int(c.droppedCount) == countedBefore, "one episode: every drop still pending")
            // Read it all: each write brings it back; the notice follows below half.
            var frames = h.read(c)
            frames += h.read(c)
            let delivered = frames.filter { $0.op == "event" }.count
            let notices = Self.droppedInNotices(frames)
            #expect(!c.isParked)
            #expect(delivered >= 1 && notices > 100)
            #expect(delivered + notices == want, "never-reader \(k): \(delivered) delivered + \(notices) in notices, routing sent its twin \(want)")
            #expect(notices == countedBefore)
            totalDrops += notices
        }
        #expect(Int(h.broker.statistics.dropped) == totalDrops)
        let byType = Self.typeDrops(h, root)
        #expect(byType.values.reduce(0, +) == totalDrops, "\(byType)")
        #expect(byType["secret.z"] ?? 0 == 0, "a denied type is no drop")
        #expect(publishes > 200)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aParkedSubscriberIsBackAfterAWriteAndGetsTheNextEventThatFits() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"hello","overflow":"drop-new"}"#, #"{"op":"subscribe","type":">"}"#)
        for _ in 1...10 { h.send(p, paddedPublish()) }
        #expect(s.isParked && s.pendingDropCount == 7)
        #expect(h.broker.statistics.dropped == 7)
        // One event written: back in the lists, still above half (no notice yet).
        #expect(h.read(s, maxBytes: Self.e - OutboundQueue.entryOverheadBytes).compactMap(\.seq) == [1])
        #expect(!s.isParked && s.pendingDropCount == 7)
        h.send(p, paddedPublish())
        let frames = h.read(s)
        #expect(frames.map(\.op) == ["event", "event", "dropped", "event"])
        #expect(frames.compactMap(dropped).first.map { [$0.0, $0.1] } == [7, 4])
        #expect(frames.compactMap(\.seq) == [2, 3, 11])
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aClosedParkedSubscriberLeavesTheLotAndCountsNothingAfter() {
        let h = BrokerHarness(Self.configure)
        let a = h.connect(), b = h.connect(), p = h.connect(uid: 0)
        for c in [a, b] { h.send(c, #"{"op":"hello","overflow":"drop-new"}"#, #"{"op":"subscribe","type":"t"}"#) }
        for _ in 1...6 { h.send(p, paddedPublish()) }
        #expect(a.isParked && b.isParked && h.broker.parking.members.count == 2)
        #expect(h.broker.statistics.dropped == 6)
        h.close(a)
        #expect(h.broker.parking.members.count == 1)
        for _ in 1...5 { h.send(p, paddedPublish()) }
        #expect(h.broker.statistics.dropped == 11, "only b loses the five")
        #expect(b.pendingDropCount == 8 && b.droppedCount == 8)
        h.send(p, #"{"op":"clients","req":1}"#)
        let listed = h.read(p).last?.array("clients") as? [[String: Any]] ?? []
        #expect(listed.compactMap { $0["dropped"] as? Int }.sorted() == [0, 8], "clients counts the parked drops")
        h.checkInvariants()
        h.closeAll()
    }
}
