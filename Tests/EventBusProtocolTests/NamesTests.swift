// Event type and pattern rules (PROTOCOL.md "Names and patterns") as tables,
// and `Pattern.matches`, the reference semantics the broker's index follows.
@_spi(Package) @testable import EventBusProtocol
import Testing

@Suite("Event types")
struct EventTypeTests {
    static let valid: [String] = [
        "a", "order", "order.created", "Order.Created", "a.b.c.d.e.f",
        "A-Z_a-z:0-9", "x:y", "under_score", "da-sh", "0", "9.9.9",
        String(repeating: "a", count: 255),
        String(repeating: "ab.", count: 84) + "abc",  // 255 bytes of short segments
        "eventbus.reserved.but.valid.name",
    ]

    static let invalid: [String] = [
        "", ".", "a.", ".a", "a..b", "order.*", "order.>", "*", ">", "a b", "a\tb",
        "a/b", "a,b", "é", "order.créé", "a\u{0}b", "a\nb", "a.b.",
        String(repeating: "a", count: 256),
        String(repeating: "ab.", count: 84) + "abcd",  // 256 bytes
        "a*", "*a", "a>", "\"quoted\"", "a.\u{00A0}",
    ]

    @Test("valid event types are accepted", arguments: valid)
    func validTypeIsAccepted(_ name: String) {
        #expect(EventType(name)?.name == name)
        #expect(EventType.isValid(name.utf8))
        #expect(utf8(name).withByteView { EventType.isValid(raw: $0) })
    }

    @Test("invalid event types are rejected", arguments: invalid)
    func invalidTypeIsRejected(_ name: String) {
        #expect(EventType(name) == nil)
        #expect(!EventType.isValid(name.utf8))
        #expect(!utf8(name).withByteView { EventType.isValid(raw: $0) })
    }

    @Test func lengthLimitIs255BytesNot255Characters() {
        // 'é' is not allowed anyway, so check the byte count boundary with ASCII
        // and confirm the count is of UTF-8 bytes via isValid on raw bytes.
        #expect(EventType.isValid([UInt8](repeating: 0x61, count: 255)))
        #expect(!EventType.isValid([UInt8](repeating: 0x61, count: 256)))
    }

    @Test func namesAreCaseSensitive() {
        let lower = EventType("order.created")!
        let upper = EventType("Order.Created")!
        #expect(lower != upper)
        #expect(!Pattern("order.created")!.matches(upper))
    }

    @Test("types beginning eventbus. are reserved", arguments: [
        ("eventbus.started", true), ("eventbus.a.b", true), ("eventbus", false),
        ("eventbusx.started", false), ("Eventbus.started", false), ("my.eventbus.x", false),
    ])
    func reservedPrefixIsDetected(_ name: String, _ reserved: Bool) {
        #expect(EventType(name)!.isReserved == reserved)
    }
}

@Suite("Patterns")
struct PatternTests {
    static let valid: [(String, Bool)] = [
        ("order.created", false), ("a", false), ("*", true), (">", true),
        ("order.*", true), ("order.>", true), ("*.created", true), ("*.*.*", true),
        ("a.*.c.>", true), ("*.>", true), (String(repeating: "a", count: 255), false),
        (String(repeating: "*.", count: 127) + ">", true),  // 255 bytes
    ]

    static let invalid: [String] = [
        "", ".", "a.", ".a", "a..b", ">.a", "a.>.b", "> ", "a>", ">a", "a*", "*a",
        "**", ">>", "a.**", "a.>>", "a.*b", "a. ", "é", "a/b",
        String(repeating: "a", count: 256),
        String(repeating: "*.", count: 127) + "ab",  // 256 bytes, all segments fine
    ]

    @Test("valid patterns are accepted", arguments: valid)
    func validPatternIsAccepted(_ text: String, _ wildcards: Bool) {
        let pattern = Pattern(text)
        #expect(pattern?.text == text)
        #expect(pattern?.hasWildcards == wildcards)
    }

    @Test("invalid patterns are rejected", arguments: invalid)
    func invalidPatternIsRejected(_ text: String) {
        #expect(Pattern(text) == nil)
    }

    @Test("every valid event type is also a pattern without wildcards", arguments: EventTypeTests.valid)
    func everyTypeIsAnExactPattern(_ name: String) {
        let pattern = Pattern(name)
        #expect(pattern?.hasWildcards == false)
        #expect(pattern?.matches(EventType(name)!) == true)
    }

    static let matching: [(String, String, Bool)] = [
        ("order.created", "order.created", true),
        ("order.created", "order.updated", false),
        ("order.created", "order.created.x", false),
        ("order.created", "order", false),
        ("order.*", "order.created", true),
        ("order.*", "order", false),
        ("order.*", "order.a.b", false),
        ("*.created", "order.created", true),
        ("*.created", "created", false),
        ("*", "order", true),
        ("*", "order.created", false),
        ("*.*", "a.b", true),
        ("*.*", "a", false),
        ("order.>", "order.created", true),
        ("order.>", "order.a.b", true),
        ("order.>", "order", false),
        ("order.>", "orders.created", false),
        (">", "a", true),
        (">", "a.b.c.d", true),
        ("*.>", "a", false),
        ("*.>", "a.b", true),
        ("a.*.c.>", "a.b.c.d", true),
        ("a.*.c.>", "a.b.c", false),
        ("a.*.c.>", "a.b.x.d", false),
        ("Order.*", "order.created", false),
        ("a.b", "a.bb", false),
        ("a.bb", "a.b", false),
    ]

    @Test("Pattern.matches follows NATS subject rules", arguments: matching)
    func patternMatchesType(_ pattern: String, _ type: String, _ expected: Bool) {
        #expect(Pattern(pattern)!.matches(EventType(type)!) == expected)
    }

    @Test func segmentsSplitOnDots() {
        #expect(Pattern("a.*.>")!.segments == ["a", "*", ">"])
        #expect(Pattern(">")!.segments == [">"])
    }

    /// The rules of PROTOCOL.md "Names and patterns" as the segments they
    /// split into (what `Pattern.init` did before it became one pass over the bytes).
    private static func isValidBySegments(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 1 && utf8.count <= 255 else { return false }
        let segments = utf8.split(separator: 0x2E, omittingEmptySubsequences: false)
        for (index, segment) in segments.enumerated() {
            if segment.isEmpty { return false }
            if segment == [0x2A] { continue }
            if segment == [0x3E] { if index == segments.count - 1 { continue } else { return false } }
            guard segment.allSatisfy(EventType.isSegmentByte) else { return false }
        }
        return true
    }

    /// (watchlist) `Pattern.init` and `segments` walk bytes: on random
    /// strings of the characters that matter (a non-ASCII one, a combining
    /// mark after a dot) they agree with splitting and checking segment by segment.
    @Test func patternValidationAndSegmentsAgreeWithSplitting() {
        var rng = SeededGenerator(seed: 0x5E6_3E47)
        let pieces = ["a", "b", "*", ">", ".", ".", "é", ".\u{301}", "x", "-", " ", "**", "ab"]
        var valid = 0, invalid = 0
        for _ in 0..<20_000 {
            let count = Int(rng.next() % 7)
            let text = (0...count).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined()
            let pattern = Pattern(text)
            #expect((pattern != nil) == Self.isValidBySegments(text), "\(text)")
            guard let pattern else { invalid += 1; continue }
            valid += 1
            #expect(pattern.segments == text.split(separator: ".", omittingEmptySubsequences: false), "\(text)")
            #expect(pattern.hasWildcards == (text.contains("*") || text.contains(">")), "\(text)")
        }
        #expect(valid > 1_000 && invalid > 1_000, "both outcomes are exercised (\(valid) valid, \(invalid) not)")
        let long = String(repeating: "a", count: 254)
        #expect(Pattern(long + ".*") == nil && Pattern(long + ".b") == nil, "256 bytes")
        #expect(Pattern(String(long.dropLast()) + ".*")?.segments.count == 2, "255 bytes")
    }
}
