// Routing (PROTOCOL.md "Events", "Names and patterns", "Semantics"): exact and
// wildcard subscriptions, the event envelope, at-most-once delivery with
// overlapping patterns, the echo rule, broker-wide seq; and a seeded random
// cross-check of the index against `Pattern.matches`.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Routing")
struct RoutingTests {
    @Test func exactSubscriptionReceivesTheEventWithItsEnvelope() throws {
        let h = BrokerHarness()
        let subscriber = h.connect()
        let publisher = h.connect(pid: 4242, uid: 1001, gid: 1002)
        h.send(subscriber, #"{"op":"subscribe","type":"order.created"}"#)
        h.elapsedNanoseconds = 1_234_000_000
        h.send(publisher, #"{"op":"publish","type":"order.created","data":{ "total" : 12.50, "k":[1,2] },"req":1}"#)

        let events = h.read(subscriber)
        #expect(events.count == 1)
        let event = try #require(events.first)
        #expect(event.op == "event")
        #expect(event.seq == 1)
        #expect(event.type == "order.created")
        #expect(event.string("time") == "2023-11-14T22:13:21.234Z")
        #expect(event.string("source") == "pid/4242")
        #expect(event.string("id") == "\(BrokerHarness.instance)-1")
        #expect(event.int("pid") == 4242 && event.int("uid") == 1001 && event.int("gid") == 1002)
        // data is forwarded byte for byte, not re-serialised.
        #expect(event.raw.hasSuffix(#","data":{ "total" : 12.50, "k":[1,2] }}"#))

        let replies = h.read(publisher)
        #expect(replies.count == 1)
        #expect(replies.first?.op == "ok" && replies.first?.int("req") == 1)
        #expect(replies.first?.seq == 1 && replies.first?.int("delivered") == 1)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func publishWithoutDataCarriesNull() throws {
        let h = BrokerHarness()
        let subscriber = h.connect()
        let publisher = h.connect()
        h.send(subscriber, #"{"op":"subscribe","type":"a"}"#)
        h.send(publisher, #"{"op":"publish","type":"a"}"#)
        let event = try #require(h.read(subscriber).first)
        #expect(event.raw.hasSuffix(#","data":null}"#))
        #expect(h.read(publisher).isEmpty, "success without req is silent")
        h.closeAll()
    }

    @Test func sourceAndIdGivenByThePublisherAreSplicedUnchanged() throws {
        let h = BrokerHarness()
        let subscriber = h.connect()
        let publisher = h.connect()
        h.send(subscriber, #"{"op":"subscribe","type":"a"}"#)
        h.send(publisher, #"{"op":"publish","type":"a","source":"bill\u0069ng","id":"x\"1"}"#)
        let event = try #require(h.read(subscriber).first)
        #expect(event.raw.contains(#""source":"bill\u0069ng","id":"x\"1""#))
        #expect(event.string("source") == "billing" && event.string("id") == "x\"1")
        h.closeAll()
    }

    @Test func helloClientNameBecomesTheDefaultSource() throws {
        let h = BrokerHarness()
        let subscriber = h.connect()
        let publisher = h.connect()
        h.send(subscriber, #"{"op":"subscribe","type":"a"}"#)
        h.send(publisher, #"{"op":"hello","client":"billing"}"#, #"{"op":"publish","type":"a"}"#)
        #expect(try #require(h.read(subscriber).first).string("source") == "billing")
        h.closeAll()
    }

    static let wildcardTable: [(String, String, Bool)] = [
        ("order.*", "order.created", true), ("order.*", "order", false), ("order.*", "order.a.b", false),
        ("*.created", "order.created", true), ("*", "order", true), ("*", "order.created", false),
        ("order.>", "order.created", true), ("order.>", "order.a.b", true), ("order.>", "order", false),
        (">", "a", true), (">", "a.b.c", true), ("*.>", "a", false), ("*.>", "a.b", true),
        ("a.*.c.>", "a.b.c.d", true), ("a.*.c.>", "a.b.c", false), ("a.*.c", "a.b.c", true),
        ("a.*.c", "a.b.d", false), ("order.created", "order.created", true), ("order.created", "Order.created", false),
    ]

    @Test("routes by pattern as NATS subjects do", arguments: wildcardTable)
    func routesByPattern(_ pattern: String, _ type: String, _ delivered: Bool) {
        let h = BrokerHarness()
        let subscriber = h.connect()
        let publisher = h.connect()
        h.send(subscriber, #"{"op":"subscribe","type":"\#(pattern)"}"#)
        h.send(publisher, #"{"op":"publish","type":"\#(type)","req":1}"#)
        let events = h.read(subscriber)
        #expect(events.count == (delivered ? 1 : 0))
        #expect(h.read(publisher).first?.int("delivered") == (delivered ? 1 : 0))
        h.checkInvariants()
        h.closeAll()
    }

    @Test func oneEventIsDeliveredOnceHoweverManyPatternsMatch() {
        let h = BrokerHarness()
        let subscriber = h.connect()
        let other = h.connect()
        let publisher = h.connect()
        h.send(subscriber, #"{"op":"subscribe","type":"a.b"}"#, #"{"op":"subscribe","type":"a.*"}"#,
               #"{"op":"subscribe","type":"a.>"}"#, #"{"op":"subscribe","type":">"}"#, #"{"op":"subscribe","type":"*.b"}"#,
               #"{"op":"subscribe","type":"*.*"}"#)
        h.send(other, #"{"op":"subscribe","type":"a.b"}"#, #"{"op":"subscribe","type":">"}"#)
        h.send(publisher, #"{"op":"publish","type":"a.b","req":1}"#, #"{"op":"publish","type":"a.b","req":2}"#)
        #expect(h.read(subscriber).map(\.seq) == [1, 2])
        #expect(h.read(other).map(\.seq) == [1, 2])
        #expect(h.read(publisher).map { $0.int("delivered") } == [2, 2])
        #expect(h.broker.statistics.delivered == 4)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aPublisherDoesNotReceiveItsOwnEventsWithoutEcho() {
        let h = BrokerHarness()
        let publisher = h.connect()
        let other = h.connect()
        h.send(publisher, #"{"op":"subscribe","type":">"}"#, #"{"op":"publish","type":"a","req":1}"#)
        h.send(other, #"{"op":"subscribe","type":"a"}"#)
        h.send(publisher, #"{"op":"publish","type":"a","req":2}"#)
        let frames = h.read(publisher)
        #expect(frames.allSatisfy { $0.op == "ok" })
        #expect(frames.map { $0.int("delivered") } == [0, 1])
        // Another connection's events still reach it.
        h.send(other, #"{"op":"publish","type":"b"}"#)
        #expect(h.read(publisher).map(\.type) == ["b"])
        h.closeAll()
    }

    @Test func helloWithEchoTrueReceivesItsOwnEvents() {
        let h = BrokerHarness()
        let publisher = h.connect()
        h.send(publisher, #"{"op":"hello","echo":true}"#, #"{"op":"subscribe","type":"a.*"}"#,
               #"{"op":"publish","type":"a.x","req":1}"#)
        let frames = h.read(publisher)
        // The event is queued during the publish, before its ok.
        #expect(frames.map(\.op) == ["event", "ok"])
        #expect(frames.last?.int("delivered") == 1)
        h.closeAll()
    }

    @Test func seqIsBrokerWideAndEachSubscriberSeesItIncrease() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect(), p1 = h.connect(), p2 = h.connect()
        h.send(a, #"{"op":"subscribe","type":"x.>"}"#)
        h.send(b, #"{"op":"subscribe","type":"x.b"}"#)
        for i in 0..<10 {
            h.send(i % 2 == 0 ? p1 : p2, #"{"op":"publish","type":"x.\#(i % 3 == 0 ? "b" : "a")","req":\#(i)}"#)
        }
        let seenA = h.read(a).compactMap(\.seq)
        let seenB = h.read(b).compactMap(\.seq)
        #expect(seenA == Array(1...10))
        #expect(seenB == [1, 4, 7, 10])
        let replies = (h.read(p1) + h.read(p2)).compactMap(\.seq).sorted()
        #expect(replies == Array(1...10))
        h.checkInvariants()
        h.closeAll()
    }

    @Test func eventsFromOneConnectionArriveInPublishOrder() {
        let h = BrokerHarness()
        let subscriber = h.connect()
        let publisher = h.connect()
        h.send(subscriber, #"{"op":"subscribe","type":">"}"#)
        let lines = (0..<50).map { #"{"op":"publish","type":"t\#($0 % 7)","data":\#($0)}"# }
        h.sendRaw(publisher, utf8(lines.joined(separator: "\n") + "\n"))
        let events = h.read(subscriber)
        #expect(events.map { $0.fields["data"] as? Int } == (0..<50).map { $0 })
        h.closeAll()
    }

    /// Random patterns over a small vocabulary so that many of them overlap.
    static func randomPattern(_ rng: inout SeededGenerator) -> String {
        let count = Int.random(in: 1...3, using: &rng)
        var segments: [String] = []
        for i in 0..<count {
            let roll = Int.random(in: 0..<10, using: &rng)
            if roll < 2 { segments.append("*") } else if roll < 3 && i == count - 1 { segments.append(">") } else {
                segments.append(["a", "b", "c"].randomElement(using: &rng)!)
            }
        }
        return segments.joined(separator: ".")
    }

    static func randomType(_ rng: inout SeededGenerator) -> String {
        (0..<Int.random(in: 1...4, using: &rng)).map { _ in ["a", "b", "c"].randomElement(using: &rng)! }.joined(separator: ".")
    }

    @Test func theIndexAgreesWithPatternMatchesUnderRandomChurn() {
        var rng = SeededGenerator(seed: 0xC0FFEE)
        let h = BrokerHarness()
        var connections: [Connection] = (0..<24).map { _ in h.connect() }
        let publisher = h.connect()
        for round in 0..<400 {
            // Churn: subscribe, unsubscribe, or replace a connection.
            let c = connections.randomElement(using: &rng)!
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                h.send(c, #"{"op":"subscribe","type":"\#(Self.randomPattern(&rng))"}"#)
            case 5..<8:
                let pattern = c.patterns.randomElement(using: &rng)?.text ?? Self.randomPattern(&rng)
                h.send(c, #"{"op":"unsubscribe","type":"\#(pattern)"}"#)
            default:
                h.close(c)
                connections.removeAll { $0 === c }
                connections.append(h.connect())
            }
            // Publish a random type; compare who got it with Pattern.matches.
            let type = EventType(Self.randomType(&rng))!
            h.send(publisher, #"{"op":"publish","type":"\#(type.name)","req":\#(round)}"#)
            let expected = Set(connections.filter { $0.patterns.contains { $0.matches(type) } }.map(\.id))
            var got: Set<ConnectionID> = []
            for connection in connections {
                let events = h.read(connection).filter { $0.op == "event" }
                #expect(events.count <= 1)
                if !events.isEmpty { got.insert(connection.id) }
            }
            #expect(got == expected, "round \(round) type \(type)")
            #expect(h.read(publisher).last?.int("delivered") == expected.count)
            if round % 50 == 0 { h.checkInvariants() }
        }
        h.checkInvariants()
        h.closeAll()
    }
}
