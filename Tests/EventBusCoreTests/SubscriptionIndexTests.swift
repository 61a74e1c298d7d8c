// The subscription index's own rules: subscribers of one pattern leave in any
// order (each removal moves the last member into the gap, and every record
// must follow), the compressed trie splits an edge where a new pattern leaves
// it and prunes back to nothing, and a long unique pattern costs one node.
// Routing is checked against `Pattern.matches` throughout, and
// `checkInvariants` after every change.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Subscription index")
struct SubscriptionIndexTests {
    static let leaving: [(pattern: String, type: String)] = [("t", "t"), ("t.*", "t.x"), ("t.>", "t.x.y"), (">", "t")]

    @Test("subscribers of one pattern leave in any order", arguments: leaving)
    func subscribersOfOnePatternLeaveInAnyOrder(pattern: String, type: String) {
        var rng = SeededGenerator(seed: 0x5EED)
        let h = BrokerHarness()
        var subscribers = (0..<40).map { _ in h.connect() }
        let publisher = h.connect()
        for s in subscribers { h.send(s, #"{"op":"subscribe","type":"\#(pattern)"}"#) }
        h.checkInvariants()
        subscribers.shuffle(using: &rng)
        var round = 0
        while let s = subscribers.popLast() {
            if Bool.random(using: &rng) {
                h.close(s)
            } else {
                h.send(s, #"{"op":"unsubscribe","type":"\#(pattern)"}"#)
            }
            h.checkInvariants()
            round += 1
            h.send(publisher, #"{"op":"publish","type":"\#(type)","req":\#(round)}"#)
            #expect(h.read(publisher).last?.int("delivered") == subscribers.count)
        }
        #expect(h.broker.indexIsEmpty)
        h.closeAll()
    }

    static let overlapping = [
        "a.b.c.d.e", "a.b.c.x", "a.b", "a.*.c.d.e", "a.b.c.d.>", "a.>", "*.b.c", "a.b.c.d.e.f.g.>", "a.b.*.d", "*.*.*", "b.c.d.e",
    ]
    static let types = ["a", "a.b", "a.b.c", "a.b.c.d", "a.b.c.d.e", "a.b.c.x", "a.x.c.d.e", "a.b.c.d.e.f.g.h", "a.b.q.d", "z.b.c", "b.c.d.e", "a.b.c.d.e.f"]

    @Test func edgesSplitWherePatternsPartAndPruneBackToNothing() {
        var rng = SeededGenerator(seed: 0xBEEF)
        let h = BrokerHarness()
        let publisher = h.connect()
        var held: [(Connection, String)] = []
        let connections = (0..<4).map { _ in h.connect() }
        func checkRouting(_ note: String) {
            for type in Self.types {
                let eventType = EventType(type)!
                let expected = Set(held.filter { Pattern($0.1)!.matches(eventType) }.map(\.0.id))
                h.send(publisher, #"{"op":"publish","type":"\#(type)","req":1}"#)
                #expect(h.read(publisher).last?.int("delivered") == expected.count, "\(note): \(type)")
                for c in connections { _ = h.read(c) }
            }
        }
        for pattern in Self.overlapping.shuffled(using: &rng) {
            for c in connections where Bool.random(using: &rng) || held.isEmpty {
                h.send(c, #"{"op":"subscribe","type":"\#(pattern)"}"#)
                held.append((c, pattern))
                h.checkInvariants()
            }
        }
        checkRouting("all subscribed")
        held.shuffle(using: &rng)
        while let (c, pattern) = held.popLast() {
            h.send(c, #"{"op":"unsubscribe","type":"\#(pattern)"}"#)
            h.checkInvariants()
            if held.count % 3 == 0 { checkRouting("\(held.count) left") }
        }
        #expect(h.broker.indexIsEmpty)
        h.closeAll()
    }

    @Test func aLongUniquePatternIsOneNodeAndGoesWithItsConnection() throws {
        let h = BrokerHarness()
        let c = h.connect(), p = h.connect()
        let long = "c1" + String(repeating: ".*.y", count: 60) + ".>"
        h.send(c, #"{"op":"subscribe","type":"\#(long)"}"#, #"{"op":"subscribe","type":"c1.*.z"}"#)
        let root = h.broker.index.root
        let node = try #require(root.children["c1"])
        // One node for the shared "c1.*", split where the second pattern leaves it.
        #expect(root.children.count == 1 && Array(node.edge) == ["c1", "*"])
        #expect(node.children.keys.sorted() == ["y", "z"])
        #expect(node.children["y"]?.edge.count == 119 && node.children["y"]?.children.isEmpty == true)
        h.send(p, #"{"op":"publish","type":"c1\#(String(repeating: ".a.y", count: 60)).end","req":1}"#,
               #"{"op":"publish","type":"c1.a.z","req":2}"#, #"{"op":"publish","type":"c1.a.y","req":3}"#)
        #expect(h.read(p).map { $0.int("delivered") } == [1, 1, 0])
        h.checkInvariants()
        h.close(c)
        #expect(h.broker.indexIsEmpty)
        h.closeAll()
    }
}
