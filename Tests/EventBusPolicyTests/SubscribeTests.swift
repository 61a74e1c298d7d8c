// `subscribe` against the policy (PROTOCOL.md "Access policy (1.1)",
// "Receiving"): forbidden only when every type the pattern can match is
// denied, filtered when only some are, and the filtered subscription's
// per-type checks. Then the compiled automata against the reference
// evaluator for random policies, types and patterns.
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Subscribe: forbidden, filtered, allowed")
struct SubscribeTests {
    @Test func theWorkedCaseOfProtocolMD() {
        // With only `allow subscribe foo.*` and `default subscribe deny`:
        guard let policy = load("default subscribe deny\nallow subscribe foo.*\n") else { return }
        let view = policy.view(for: who(1000))
        #expect(view.subscribe(pattern("foo.>")) == .filtered)
        #expect(view.receive(type("foo.a")).isAllowed)
        #expect(!view.receive(type("foo.a.b")).isAllowed)
        guard case .forbidden = view.subscribe(pattern("bar.>")) else {
            Issue.record("bar.> should be forbidden")
            return
        }
        #expect(view.subscribe(pattern("foo.*")) == .allowed)
        #expect(view.subscribe(pattern("foo.x")) == .allowed)
        #expect(words(view.subscribe(pattern("foo.x.>"))) == "forbidden")  // foo.*, exactly: not foo.x.y
    }

    @Test("subscribe answers", arguments: [
        // (rules, pattern, expected)
        ("deny subscribe secret.>", ">", "filtered"),          // why `subscribe >` is filtered, not refused
        ("deny subscribe secret.>", "secret.>", "forbidden"),
        ("deny subscribe secret.>", "secret.a.*", "forbidden"),
        ("deny subscribe secret.>", "secret", "allowed"),      // secret.> needs a segment after secret
        ("deny subscribe secret.>", "*.x", "filtered"),        // secret.x denied, a.x not
        ("deny subscribe secret.>", "public.>", "allowed"),
        ("deny subscribe >", "a.>", "forbidden"),
        ("deny subscribe *", "*", "forbidden"),
        ("deny subscribe *", ">", "filtered"),
        ("deny subscribe a.*\nallow subscribe a.b user=1000", "a.*", "filtered"),
        ("deny subscribe a.*\nallow subscribe a.* user=1000", "a.*", "allowed"),
        ("deny subscribe a.*\nallow subscribe a.> group=50", "a.b", "deny-but-not-member"),
        ("default subscribe deny\nallow subscribe a.>\ndeny subscribe a.b.>", "a.>", "filtered"),
        ("default subscribe deny\nallow subscribe a.>\ndeny subscribe a.b.>", "a.b.>", "forbidden"),
        ("default subscribe deny\nallow subscribe a.>\ndeny subscribe a.b.>", "a.b", "allowed"),
        ("default subscribe deny\nallow subscribe *.*.*", ">", "filtered"),
        ("default subscribe deny\nallow subscribe >", ">", "allowed"),
    ])
    func subscribeAnswer(_ rules: String, _ p: String, _ expected: String) {
        guard let policy = load(rules) else { return }
        let view = policy.view(for: who(1000))
        let want = expected == "deny-but-not-member" ? "forbidden" : expected
        #expect(words(view.subscribe(pattern(p))) == want)
        #expect(referenceSubscribe(policy, who(1000), pattern(p), literals: ["a", "b", "x", "secret", "public", "zz"], maxSegments: 5) == want)
    }

    @Test func filteredIsExactAtThe255ByteBound() {
        // `deny subscribe P.*.*` where P is 251 bytes: P.a.a is 255 bytes, so
        // `P.>` is filtered. With a 253-byte prefix, a type of `P.>` has room
        // for one 1-byte segment only.
        let long = String(repeating: "a.", count: 125) + "b"  // 251 bytes
        let longer = String(repeating: "a.", count: 126) + "b"  // 253 bytes
        guard let fits = load("deny subscribe \(long).*.*\n"),
              let tooLong = load("deny subscribe \(longer).>\nallow subscribe \(longer).* user=1000\n") else { return }
        #expect(fits.view(for: who(1)).subscribe(pattern(long + ".>")) == .filtered)
        // Every valid type of longer.> has one 1-byte last segment, and the
        // user rule allows exactly those: nothing left to deny.
        #expect(tooLong.view(for: who(1000)).subscribe(pattern(longer + ".>")) == .allowed)
        #expect(words(tooLong.view(for: who(1001)).subscribe(pattern(longer + ".>"))) == "forbidden")
    }

    @Test func constantVerdictsLetTheBrokerSkipChecks() {
        guard let open = load("deny subscribe secret.>\n"), let none = load("allow publish >\n") else { return }
        #expect(open.view(for: who(1)).constantReceiveVerdict == nil)       // secret.x differs
        #expect(open.view(for: who(1)).constantPublishVerdict == nil)       // eventbus.> is always denied
        #expect(none.view(for: who(1)).constantReceiveVerdict?.isAllowed == true)
        #expect(AccessPolicy.withoutFiles(brokerUID: 1).view(for: who(5)).constantReceiveVerdict?.isAllowed == true)
    }
}

@Suite("Compiled views agree with the reference evaluator")
struct AutomatonPropertyTests {
    static let ruleLiterals = ["a", "b"]
    static let typeLiterals = ["a", "b", "c"]  // c: a segment no rule names

    /// A random policy of up to 6 rules over `a`, `b`, `*`, `>`, users 1 and 2, group 50.
    static func randomPolicy(_ rng: inout SeededGenerator) -> (text: String, policy: AccessPolicy)? {
        var lines: [String] = []
        for _ in 0..<Int.random(in: 0...6, using: &rng) {
            let effect = Bool.random(using: &rng) ? "allow" : "deny"
            let action = Bool.random(using: &rng) ? "publish" : "subscribe"
            let p = randomPattern(&rng, literals: ruleLiterals, maxSegments: 3)
            let who = ["", "", " user=1", " user=2", " group=50"].randomElement(using: &rng)!
            lines.append("\(effect) \(action) \(p)\(who)")
        }
        if Bool.random(using: &rng) { lines.append("default subscribe deny") }
        if Int.random(in: 0..<4, using: &rng) == 0 { lines.append("default publish deny") }
        let text = lines.joined(separator: "\n")
        guard let policy = try? AccessPolicy.load([PolicySource(path: "r.conf", text: text)], resolver: testNames, brokerUID: 9) else {
            Issue.record("random policy did not load: \(text)")
            return nil
        }
        return (text, policy)
    }

    @Test func publishAndReceiveAgreeForRandomPolicies() {
        var rng = SeededGenerator(seed: 0xA0_7011)
        let identities = [who(1), who(2, groups: [50]), who(3)]
        for _ in 0..<300 {
            guard let (text, policy) = Self.randomPolicy(&rng) else { return }
            for identity in identities {
                let view = policy.view(for: identity)
                let reference = Reference(policy, identity)
                for _ in 0..<12 {
                    let t = randomType(&rng, literals: Self.typeLiterals, maxSegments: 5)
                    #expect(view.publish(t).effect == reference.effect(.publish, t), "publish \(t) as \(identity) under\n\(text)")
                    #expect(view.receive(t).effect == reference.effect(.subscribe, t), "receive \(t) as \(identity) under\n\(text)")
                }
            }
        }
    }

    @Test func subscribeAgreesWithEnumerationForRandomPolicies() {
        var rng = SeededGenerator(seed: 0x5B5C_0BE)
        let identities = [who(1), who(2, groups: [50])]
        var seen: [String: Int] = [:]
        for _ in 0..<250 {
            guard let (text, policy) = Self.randomPolicy(&rng) else { return }
            for identity in identities {
                let view = policy.view(for: identity)
                let reference = Reference(policy, identity)
                for _ in 0..<6 {
                    let p = randomPattern(&rng, literals: Self.ruleLiterals, maxSegments: 3)
                    let expected = reference.subscribe(p, literals: Self.typeLiterals, maxSegments: 5)
                    let got = words(view.subscribe(p))
                    seen[got, default: 0] += 1
                    #expect(got == expected, "subscribe \(p) as \(identity) under\n\(text)")
                    // A filtered subscription's checks deliver exactly what the policy allows.
                    if got == "filtered" {
                        for t in allInstances(of: p, literals: Self.typeLiterals, maxSegments: 4) {
                            #expect(view.receive(t).effect == reference.effect(.subscribe, t))
                        }
                    }
                }
            }
        }
        #expect((seen["allowed"] ?? 0) > 50 && (seen["filtered"] ?? 0) > 50 && (seen["forbidden"] ?? 0) > 50, "\(seen)")
    }

    @Test func percentURulesAgreeForManyUIDs() {
        guard let policy = load("deny subscribe u.>\nallow subscribe u.%u.>\ndeny publish u.*.x\nallow publish u.%u.*\n") else { return }
        for uid: UInt32 in [0, 1, 7, 10, 999, 1000, 65534, 4_294_967_294] {
            let view = policy.view(for: who(uid))
            for t in ["u.\(uid).x", "u.\(uid)", "u.\(uid &+ 1).x", "u.1.x", "u.\(uid).x.y"].map(type) {
                #expect(view.publish(t).effect == referenceEffect(policy, .publish, who(uid), t), "publish \(t) as \(uid)")
                #expect(view.receive(t).effect == referenceEffect(policy, .subscribe, who(uid), t), "receive \(t) as \(uid)")
            }
        }
    }
}
