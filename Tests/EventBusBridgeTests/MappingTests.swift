// Subject mapping (PREFIX.evt.NODE.TYPE both ways, ctl subjects), node and
// prefix names, and pattern containment for the import subscriptions.
import EventBusBridge
import EventBusNATS
@_spi(Package) import EventBusProtocol
import Testing

func node(_ text: String) -> NodeName { NodeName(text)! }
func type(_ text: String) -> EventType { EventType(text)! }
func pattern(_ text: String) -> Pattern { Pattern(text)! }

@Suite struct MappingTests {
    @Test(arguments: [
        ("host-a", true), ("A_b-9", true), (String(repeating: "n", count: 63), true),
        ("", false), (String(repeating: "n", count: 64), false), ("host.a", false), ("host a", false),
        ("h*", false), (">", false), ("h:1", false), ("caf\u{E9}", false), ("$sys", false),
    ])
    func nodeNamesAreOneSubjectToken(text: String, valid: Bool) {
        #expect((NodeName(text) != nil) == valid)
    }

    @Test(arguments: [
        ("eventbus", true), ("eb", true), ("org.site.eb", true), ("a.b.c.d.e.f.g.h", true),
        ("a.b.c.d.e.f.g.h.i", false), ("", false), ("a..b", false), (".a", false), ("a.*", false), ("a.>", false), ("a b", false),
        (String(repeating: "p", count: 64), false),
    ])
    func prefixesAreTokensOfNodeCharacters(text: String, valid: Bool) {
        #expect((SubjectPrefix(text) != nil) == valid)
    }

    @Test func subjectsAreBuiltFromPrefixNodeAndType() {
        let mapping = SubjectMapping(node: node("host-a"))
        #expect(mapping.exportSubject(for: type("order.created")).text == "eventbus.evt.host-a.order.created")
        #expect(mapping.exportSubject(for: type("a:b.c_d-e")).text == "eventbus.evt.host-a.a:b.c_d-e")
        #expect(mapping.importSubject(for: pattern("order.>")).text == "eventbus.evt.*.order.>")
        #expect(mapping.importSubject(for: pattern(">")).text == "eventbus.evt.*.>")
        #expect(mapping.helloSubject.text == "eventbus.ctl.host-a.hello")
        #expect(mapping.droppedSubject.text == "eventbus.ctl.host-a.dropped")
        #expect(mapping.allDroppedSubject.text == "eventbus.ctl.*.dropped")
        let custom = SubjectMapping(prefix: SubjectPrefix("site.eb")!, node: node("n1"))
        #expect(custom.exportSubject(for: type("x")).text == "site.eb.evt.n1.x")
    }

    @Test(arguments: [
        ("eventbus.evt.host-b.order.created", IncomingSubject.event(node: node("host-b"), type: type("order.created"))),
        ("eventbus.evt.h.a:b", .event(node: node("h"), type: type("a:b"))),
        ("eventbus.evt.host-b.bad$type", .badType("eventbus.evt.host-b.bad$type")),
        ("eventbus.evt.host-b.caf\u{E9}", .badType("eventbus.evt.host-b.caf\u{E9}")),
        ("eventbus.evt.host-b", .badType("eventbus.evt.host-b")),
        ("eventbus.evt.h@st.x", .badType("eventbus.evt.h@st.x")),
        ("eventbus.evt.host-b." + String(repeating: "t", count: 256), .badType("eventbus.evt.host-b." + String(repeating: "t", count: 256))),
        ("eventbus.ctl.host-b.hello", .other),
        ("other.evt.host-b.x", .other),
        ("eventbusX.evt.h.x", .other),
    ])
    func incomingSubjectsAreReadBackAndCheckedAsEventbusTypes(subject: String, expected: IncomingSubject) {
        #expect(SubjectMapping(node: node("host-a")).parse(subject) == expected)
    }

    @Test(arguments: [
        (">", "order.created", true), (">", ">", true), ("order.>", "order.*", true), ("order.>", "order.a.b", true),
        ("order.>", "order", false), ("order.*", "order.>", false), ("*.*", "a.b", true), ("a.b", "a.*", false),
        ("a.*.c", "a.b.*", false), ("a.b.*", "a.*.c", false), ("*", "a.b", false), ("a.>", "a.>", true),
    ])
    func patternContainmentIsExact(outer: String, inner: String, covers: Bool) {
        #expect(BridgeCore.covers(pattern(outer), pattern(inner)) == covers)
    }

    @Test func coveredImportPatternsAreNotSubscribedTwice() {
        let minimal = BridgeCore.minimalPatterns(["order.*", ">", "audit.x", ">"].map(pattern))
        #expect(minimal.map(\.text) == [">"])
        let partial = BridgeCore.minimalPatterns(["a.*.c", "a.b.*", "a.b.c", "a.*.c"].map(pattern))
        #expect(partial.map(\.text) == ["a.*.c", "a.b.*"], "partial overlaps stay (arrival dedupes them), exact covers go")
    }

    /// The definition `minimalPatterns` had (every pattern against every
    /// other, O(n^2)): what its trie walk must agree with.
    static func minimalByComparingAll(_ patterns: [Pattern]) -> [Pattern] {
        patterns.enumerated().filter { i, p in
            !patterns.enumerated().contains { j, q in j != i && BridgeCore.covers(q, p) && (!BridgeCore.covers(p, q) || j < i) }
        }.map(\.element)
    }

    @Test func minimalPatternsAgreeWithComparingEveryPair() {
        let segments = ["a", "b", "*", ">"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            var list: [Pattern] = []
            for _ in 0..<Int.random(in: 1...12, using: &generator) {
                var parts: [String] = []
                for depth in 0..<Int.random(in: 1...4, using: &generator) {
                    let part = segments.randomElement(using: &generator)!
                    parts.append(part)
                    if part == ">" || depth == 3 { break }
                }
                list.append(pattern(parts.joined(separator: ".")))
            }
            #expect(BridgeCore.minimalPatterns(list).map(\.text) == Self.minimalByComparingAll(list).map(\.text), "\(list.map(\.text))")
        }
    }

    @Test func aListBuiltToMakeTheSearchBranchKeepsEveryPatternButTheDuplicates() {
        // Every pattern of 12 segments of `a` or `*`, each ending in a name of
        // its own: a pattern of names is looked for under the 2^12 prefixes
        // that cover its own (3^12 steps for the list), more than the walks'
        // budget, and no pattern covers another. Either way the duplicates
        // go and the rest stay, in order.
        var list: [Pattern] = []
        for bits in 0..<(1 << 12) {
            let head = (0..<12).map { bits & (1 << $0) == 0 ? "a" : "*" }.joined(separator: ".")
            list.append(pattern(head + ".n\(bits)"))
        }
        #expect(BridgeCore.minimalPatterns(list + list.prefix(3)).map(\.text) == list.map(\.text))
    }

    @Test func tenThousandServingPatternsAreMinimisedByTheTrie() {
        // What the watch of another uid's serving patterns hands the link:
        // distinct names (none covers another), plus `svc.*`, which covers
        // the two-segment ones, listed last.
        let names = (0..<10_000).map { pattern("svc.p\($0)" + ($0 % 2 == 0 ? "" : ".x")) }
        let minimal = BridgeCore.minimalPatterns(names + [pattern("svc.*")]).map(\.text)
        #expect(minimal.count == 5_001)
        #expect(minimal.first == "svc.p1.x" && minimal.last == "svc.*")
    }
}
