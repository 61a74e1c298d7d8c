// Pattern containment and overlap (EventBusProtocol's Pattern+Relations.swift)
// held to matching: tables of the cases PROTOCOL.md and DESIGN-NOTES name, the
// 255-byte bound, and seeded property tests in both directions (a relation
// that holds agrees with every sampled type; one that does not holds a
// witness type that matching confirms).
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Pattern containment and overlap")
struct PatternRelationTests {
    @Test("containment", arguments: [
        (">", "a", true), (">", "a.b.c", true), (">", "*", true), (">", ">", true),
        ("foo.>", "foo.*", true), ("foo.>", "foo.a.b", true), ("foo.>", "foo.a.>", true), ("foo.>", "foo", false),
        ("foo.*", "foo.a", true), ("foo.*", "foo.*", true),
        ("foo.*", "foo.>", false),  // foo.a.b: the NATS 2.9.10 hole (DESIGN-NOTES B.1)
        ("foo.*", "foo.a.b", false), ("foo.a", "foo.*", false), ("*.*", "a.>", false),
        ("a.*.c", "a.b.c", true), ("a.*.c", "a.*.d", false), ("*.>", ">", false), ("*.>", "a.>", true),
        ("a.>", "*.>", false), ("a.b", "a.b", true), ("a.b", "a.c", false),
    ])
    func containment(_ outer: String, _ inner: String, _ expected: Bool) {
        #expect(pattern(outer).contains(pattern(inner)) == expected)
    }

    @Test("overlap", arguments: [
        ("foo.*", "*.bar", true), ("foo.*", "foo.a.>", false), (">", "a", true), ("a.>", "a", false),
        ("a.>", "*.b", true), ("a.>", "b.>", false), ("*.*", "a.>", true), ("*.*", "a.*.>", false),
        ("a.b.c", "a.*.c", true), ("a.b.c", "a.*.d", false), ("secret.>", ">", true), ("*", "a.b", false),
    ])
    func overlap(_ a: String, _ b: String, _ expected: Bool) {
        #expect(pattern(a).overlaps(pattern(b)) == expected)
        #expect(pattern(b).overlaps(pattern(a)) == expected)
    }

    @Test func witnessesAreShortest() {
        #expect(pattern("foo.*").shortestCommonType(with: pattern("*.bar"))?.name == "foo.bar")
        #expect(pattern("a.>").shortestCommonType(with: pattern(">"))?.name == "a.a")
        #expect(pattern("foo.>").shortestType(notMatchedBy: pattern("foo.*"))?.name == "foo.a.a")
        #expect(pattern("foo.*").shortestType(notMatchedBy: pattern("foo.a"))?.name == "foo.b")
        #expect(pattern(">").shortestType(notMatchedBy: pattern("*.>"))?.name == "a")
    }

    /// 126 segments of `a.` then one more: 253 bytes before the last segment.
    static let longPrefix = String(repeating: "a.", count: 126) + "b"  // 253 bytes

    @Test func containmentCountsThe255ByteBound() {
        // Only one 1-byte segment fits after the 253-byte prefix and its dot:
        // every valid type of `prefix.>` is also one of `prefix.*`.
        let tail = pattern(Self.longPrefix + ".>")
        let star = pattern(Self.longPrefix + ".*")
        #expect(tail.contains(star))
        #expect(star.contains(tail))
        #expect(tail.shortestType(notMatchedBy: star) == nil)
        // One byte shorter, and `x.a.a` no longer fits either (253 + 4 > 255),
        // but with a 251-byte prefix it does.
        let shorter = String(repeating: "a.", count: 125) + "b"  // 251 bytes
        #expect(!pattern(shorter + ".*").contains(pattern(shorter + ".>")))
        #expect(pattern(shorter + ".>").shortestType(notMatchedBy: pattern(shorter + ".*"))?.name.utf8.count == 255)
    }

    @Test func overlapCountsThe255ByteBound() {
        // `*.*...` (127 stars, 253 bytes) against `aaaa.>`: the shared types
        // need `aaaa` plus 126 more segments, 256 bytes: none is valid.
        let stars = pattern(Array(repeating: "*", count: 127).joined(separator: "."))
        #expect(!stars.overlaps(pattern("aaaa.>")))
        #expect(stars.overlaps(pattern("aaa.>")))  // 255 bytes exactly
        #expect(stars.shortestCommonType(with: pattern("aaa.>"))?.name.utf8.count == 255)
    }

    static let literals = ["a", "b", "c"]

    @Test func containmentAgreesWithMatching() {
        var rng = SeededGenerator(seed: 0xC0_47A1)
        var held = 0, failed = 0
        for _ in 0..<3000 {
            let outer = randomPattern(&rng, literals: ["a", "b"])
            let inner = randomPattern(&rng, literals: ["a", "b"])
            if outer.contains(inner) {
                held += 1
                for _ in 0..<20 {
                    let t = randomInstance(of: inner, &rng, literals: Self.literals)
                    #expect(outer.matches(t), "\(outer) contains \(inner) but not \(t)")
                }
            } else {
                failed += 1
                let witness = inner.shortestType(notMatchedBy: outer)
                #expect(witness != nil)
                if let witness {
                    #expect(inner.matches(witness) && !outer.matches(witness), "\(witness) should be in \(inner), not in \(outer)")
                }
            }
        }
        #expect(held > 300 && failed > 300, "both outcomes are exercised (\(held) held, \(failed) failed)")
    }

    @Test func overlapAgreesWithMatching() {
        var rng = SeededGenerator(seed: 0x0E_71A9)
        var overlapping = 0, disjoint = 0
        for _ in 0..<3000 {
            let a = randomPattern(&rng, literals: ["a", "b"])
            let b = randomPattern(&rng, literals: ["a", "b"])
            #expect(a.overlaps(b) == b.overlaps(a))
            #expect(a.overlaps(b) == (a.shortestCommonType(with: b) != nil), "\(a) ∩ \(b): overlaps walks bytes, shortestCommonType builds the witness")
            if let witness = a.shortestCommonType(with: b) {
                overlapping += 1
                #expect(a.matches(witness) && b.matches(witness), "\(witness) should match \(a) and \(b)")
            } else {
                disjoint += 1
                // No type of either matches the other.
                for _ in 0..<20 {
                    let t = randomInstance(of: a, &rng, literals: Self.literals)
                    #expect(!b.matches(t), "\(a) and \(b) are called disjoint, yet both match \(t)")
                }
            }
        }
        #expect(overlapping > 300 && disjoint > 300, "both outcomes are exercised (\(overlapping), \(disjoint))")
    }

    /// (watchlist) `overlaps` counts the witness's bytes rather than
    /// building it: with long literals, near and over the 255-byte bound, it
    /// still agrees with `shortestCommonType`.
    @Test func overlapCountsTheBoundLikeTheWitness() {
        var rng = SeededGenerator(seed: 0x0255_B17E)
        let literals = ["a", String(repeating: "b", count: 60), String(repeating: "c", count: 90), String(repeating: "b", count: 120)]
        var overlapping = 0, disjoint = 0
        for _ in 0..<3000 {
            let a = randomLongPattern(&rng, literals), b = randomLongPattern(&rng, literals)
            let witness = a.shortestCommonType(with: b)
            #expect(a.overlaps(b) == (witness != nil), "\(a) ∩ \(b)")
            #expect(b.overlaps(a) == (witness != nil), "\(b) ∩ \(a)")
            if witness == nil { disjoint += 1 } else { overlapping += 1 }
        }
        #expect(overlapping > 300 && disjoint > 300, "both outcomes are exercised (\(overlapping), \(disjoint))")
    }

    /// A random valid pattern of up to 5 segments from `literals`, `*` and a
    /// last `>`, at most 255 bytes (drawn again until it fits).
    private func randomLongPattern(_ rng: inout SeededGenerator, _ literals: [String]) -> Pattern {
        while true {
            let count = Int.random(in: 1...5, using: &rng)
            let parts = (0..<count).map { i -> String in
                if i == count - 1 && Int.random(in: 0..<3, using: &rng) == 0 { return ">" }
                return Int.random(in: 0..<3, using: &rng) == 0 ? "*" : literals.randomElement(using: &rng)!
            }
            if let p = Pattern(parts.joined(separator: ".")) { return p }
        }
    }

    @Test func containmentIsExactAgainstEnumeration() {
        // Small patterns, every type over {a, b, c} up to 6 segments: the
        // relation equals "no enumerated type of inner escapes outer".
        var rng = SeededGenerator(seed: 0xE4AC7)
        for _ in 0..<300 {
            let outer = randomPattern(&rng, literals: ["a", "b"], maxSegments: 3)
            let inner = randomPattern(&rng, literals: ["a", "b"], maxSegments: 3)
            let types = allInstances(of: inner, literals: Self.literals, maxSegments: 5)
            let escapes = types.contains { !outer.matches($0) }
            #expect(outer.contains(inner) == !escapes, "\(outer) ⊇ \(inner)")
            let shared = types.contains { outer.matches($0) }
            #expect(outer.overlaps(inner) == shared, "\(outer) ∩ \(inner)")
        }
    }

    @Test func segmentsAreVisitedWithoutSplitting() {
        var seen: [String] = []
        type("order.created.v2").forEachSegment { seen.append(String($0)); return true }
        #expect(seen == ["order", "created", "v2"])
        var first: [String] = []
        type("a.b.c").forEachSegment { first.append(String($0)); return false }
        #expect(first == ["a"])
        #expect(type("a.b.c").segmentCount == 3 && type("x").segmentCount == 1)
        #expect(pattern("order.*.>").parsedSegments == [.literal("order"), .star, .tail])
    }
}
