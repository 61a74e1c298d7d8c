// PROTOCOL.md, Names and patterns: type name syntax, reserved `eventbus.`
// types, `*` and `>` matching, at-most-once delivery per connection.
//
// Before editing: matching tests publish every candidate type with `req` and
// then settle the subscriber, so "not delivered" is checked without sleeping.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Names and patterns")
struct NamesAndPatternsTests {
    static let validNames = [
        "a", "order.created", "A.b-c_d:e.09", "x.y.z.w.v", String(repeating: "n", count: 255),
        String(repeating: "ab.", count: 84) + "abc",  // 255 bytes, many segments
        "eventbusx.y", "my.eventbus.x",
    ]

    @Test("A type of 1-255 bytes of dot-separated [A-Za-z0-9_-:] segments is published", arguments: validNames)
    func validTypeIsPublished(name: String) throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe(">")
            let receipt = try broker.connect().publish(name)
            #expect(receipt.delivered == 1)
            #expect(try subscriber.readFrame().type == name)
        }
    }

    static let invalidNames = [
        "", ".", "a.", ".a", "a..b", "a b", "a/b", "é", "a\\u0000b", "a\\nb", "a,b", "a#b",
        String(repeating: "n", count: 256), String(repeating: "ab.", count: 84) + "abcd",
    ]

    @Test("A bad type name is bad_type", arguments: invalidNames)
    func invalidTypeIsBadType(name: String) throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe(">")
            let error = try broker.connect().error(#"{"op":"publish","type":"\#(name)","req":1}"#)
            #expect(error.code == "bad_type", "\(error)")
            try subscriber.expectNoFrame()
        }
    }

    @Test("Patterns are not allowed in publish", arguments: ["a.*", "a.>", "*", ">", "*.b"])
    func patternInPublishIsBadType(pattern: String) throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe(">")
            #expect(try broker.connect().error(#"{"op":"publish","type":"\#(pattern)","req":1}"#).code == "bad_type")
            try subscriber.expectNoFrame()
        }
    }

    @Test("Publishing a type beginning eventbus. is forbidden", arguments: ["eventbus.x", "eventbus.connected.now"])
    func reservedTypeIsForbidden(name: String) throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe(">")
            #expect(try broker.connect().error(#"{"op":"publish","type":"\#(name)","req":1}"#).code == "forbidden")
            try subscriber.expectNoFrame()
        }
    }

    @Test("Names are case-sensitive")
    func namesAreCaseSensitive() throws {
        #expect(try delivered(pattern: "Order.created", of: ["order.created", "Order.created", "ORDER.CREATED"]) == ["Order.created"])
    }

    @Test("An exact pattern matches only its own type")
    func exactPatternMatchesItsType() throws {
        #expect(try delivered(pattern: "a.b", of: ["a", "a.b", "a.bc", "a.b.c", "xa.b"]) == ["a.b"])
    }

    @Test("* matches exactly one whole segment")
    func starMatchesExactlyOneSegment() throws {
        #expect(try delivered(pattern: "a.*.c", of: ["a.b.c", "a.x.c", "a.c", "a.b.b.c", "a.b.c.d", "b.b.c"]) == ["a.b.c", "a.x.c"])
        #expect(try delivered(pattern: "*", of: ["a", "b", "a.b"]) == ["a", "b"])
        #expect(try delivered(pattern: "*.b", of: ["a.b", "x.b", "b", "a.a.b"]) == ["a.b", "x.b"])
    }

    @Test("A trailing > matches one or more segments")
    func trailingGreaterThanMatchesOneOrMore() throws {
        #expect(try delivered(pattern: "order.>", of: ["order", "order.created", "order.a.b", "orders.x", "x.order.y"]) == ["order.created", "order.a.b"])
        #expect(try delivered(pattern: "a.*.>", of: ["a.b", "a.b.c", "a.b.c.d"]) == ["a.b.c", "a.b.c.d"])
    }

    @Test("> alone matches every type")
    func greaterThanAloneMatchesEverything() throws {
        let all = ["a", "a.b", "Z.y.x", "q-1:2.x_y"]
        #expect(try delivered(pattern: ">", of: all) == all)
    }

    static let badPatterns = ["a.>.b", ">.a", "a*", "*a", "a.b>", "a.**", "a..b", "", ".", "a.", "a b", "é"]

    @Test("A bad pattern is bad_type", arguments: badPatterns)
    func badPatternIsBadType(pattern: String) throws {
        try withBroker { broker in
            let error = try broker.connect().error(#"{"op":"subscribe","type":"\#(pattern)","req":1}"#)
            #expect(error.code == "bad_type", "\(error)")
        }
    }

    @Test("An event is delivered at most once to a connection, however many of its patterns match")
    func deliveredAtMostOnceWithOverlappingPatterns() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("a.b", "a.*", "a.>", ">", "*.b", "*.*")
            let other = try broker.connect()
            try other.subscribe("a.b", ">")
            let receipt = try broker.connect().publish("a.b")
            #expect(receipt.delivered == 2)
            #expect(try subscriber.readFrame().seq == receipt.seq)
            #expect(try other.readFrame().seq == receipt.seq)
            try subscriber.expectNoFrame()
            try other.expectNoFrame()
        }
    }

    /// Starts a broker, subscribes one connection to `pattern`, publishes each
    /// of `types` (with `req`, in order) from another, and returns the types
    /// the subscriber received, after settling it.
    private func delivered(pattern: String, of types: [String]) throws -> [String] {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe(pattern)
            let publisher = try broker.connect()
            for (i, type) in types.enumerated() { try publisher.publish(type, req: i) }
            return try subscriber.settle().map { $0.type ?? "<\($0.raw)>" }
        }
    }
}
