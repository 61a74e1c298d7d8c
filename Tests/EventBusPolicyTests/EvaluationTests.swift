// One test per rule of PROTOCOL.md "Access policy (1.1)", as tables of rules,
// identities and types or patterns, through the compiled `PolicyView`.
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import Testing

/// One row: who does what to which target, and the expected answer.
struct Case: CustomTestStringConvertible, Sendable {
    var identity: PolicyIdentity
    var action: PolicyAction
    var target: String
    /// "allow"/"deny" for connect, publish, receive, bridge; "allowed",
    /// "filtered", "forbidden" for subscribe.
    var expected: String
    /// For denials: the origin the verdict must name ("test.conf:3", "reserved", ...).
    var origin: String?

    var testDescription: String { "uid \(identity.uid) gids \(identity.gids) \(action) \(target) → \(expected)" }
}

/// Runs `cases` against `policy` (and the reference evaluator for types).
func check(_ policy: AccessPolicy, _ cases: [Case], sourceLocation: SourceLocation = #_sourceLocation) {
    for c in cases {
        let view = policy.view(for: c.identity)
        let verdict: PolicyVerdict?
        let answer: String
        switch c.action {
        case .connect: verdict = view.connect
        case .bridge: verdict = view.bridge
        case .hold:
            #expect("\(view.hold)" == c.expected, "\(c.testDescription)", sourceLocation: sourceLocation)
            continue
        case .publish: verdict = view.publish(type(c.target))
        case .serve:
            if c.expected == "allow" || c.expected == "deny" {
                verdict = view.serve(type(c.target))  // (1.3) subscribe and serve both
            } else {
                let decision = view.serve(pattern(c.target))
                #expect(words(decision) == c.expected, "\(c.testDescription)", sourceLocation: sourceLocation)
                continue
            }
        case .subscribe:
            if c.expected == "allow" || c.expected == "deny" {
                // A receive check (exact type), as for a filtered subscription.
                verdict = view.receive(type(c.target))
            } else {
                let decision = view.subscribe(pattern(c.target))
                #expect(words(decision) == c.expected, "\(c.testDescription)", sourceLocation: sourceLocation)
                if case .forbidden(let v) = decision, let origin = c.origin {
                    #expect(originText(view.origin(of: v)) == origin, "\(c.testDescription): named \(view.origin(of: v))", sourceLocation: sourceLocation)
                }
                continue
            }
        }
        answer = verdict!.effect.description
        #expect(answer == c.expected, "\(c.testDescription)", sourceLocation: sourceLocation)
        if c.action != .subscribe, c.action != .connect, c.action != .bridge, c.action != .serve {
            let reference = referenceEffect(policy, c.action, c.identity, type(c.target))
            #expect(reference.description == c.expected, "reference disagrees: \(c.testDescription)", sourceLocation: sourceLocation)
        }
        if let origin = c.origin, let verdict {
            let named = view.origin(of: verdict)
            #expect(originText(named) == origin, "\(c.testDescription): named \(named)", sourceLocation: sourceLocation)
        }
    }
}

/// An origin as the tables write it: `test.conf:3`, or the built-in's case name.
func originText(_ origin: PolicyOrigin) -> String {
    switch origin {
    case .reserved: "reserved"
    case .builtInDefault: "builtInDefault"
    case .bridgeNeedsRule: "bridgeNeedsRule"
    case .noPolicyFile: "noPolicyFile"
    case .tooComplex: "tooComplex"
    case .line: origin.description
    }
}

func row(_ identity: PolicyIdentity, _ action: PolicyAction, _ target: String, _ expected: String, _ origin: String? = nil) -> Case {
    Case(identity: identity, action: action, target: target, expected: expected, origin: origin)
}

@Suite("Which rule decides")
struct PrecedenceTests {
    @Test func userRulesBeatGroupRulesBeatEveryone() {
        guard let policy = load("""
            deny  publish a.>
            allow publish a.> group=auditors
            deny  publish a.> user=alice
            allow subscribe s.> user=alice
            deny  subscribe s.> group=3001
            """) else { return }
        check(policy, [
            row(who(2002), .publish, "a.x", "deny", "test.conf:1"),                    // everyone level
            row(who(2002, groups: [3001]), .publish, "a.x", "allow", "test.conf:2"),   // group beats everyone
            row(who(2001, groups: [3001]), .publish, "a.x", "deny", "test.conf:3"),    // user beats group
            row(who(2001, groups: [3001]), .subscribe, "s.x", "allow", "test.conf:4"), // user allow beats group deny
            row(who(2002, groups: [3001]), .subscribe, "s.x", "deny", "test.conf:5"),
            row(who(2002), .publish, "b.x", "allow", "builtInDefault"),                // no rule: default
        ])
    }

    @Test func denyBeatsAllowWithinALevel() {
        guard let policy = load("""
            allow publish a.>
            deny  publish a.b
            allow publish a.b
            allow subscribe x.> group=50
            deny  subscribe x.y group=3001
            """) else { return }
        check(policy, [
            row(who(1), .publish, "a.b", "deny", "test.conf:2"),
            row(who(1), .publish, "a.c", "allow", "test.conf:1"),
            row(who(1, groups: [50, 3001]), .subscribe, "x.y", "deny", "test.conf:5"),  // two groups, same level
            row(who(1, groups: [50, 3001]), .subscribe, "x.z", "allow", "test.conf:4"),
        ])
    }

    @Test func fileOrderDoesNotMatter() {
        let lines = [
            "deny publish a.>", "allow publish a.b.> user=7", "allow publish a.> group=50",
            "deny publish a.c group=50", "default publish deny", "allow publish z.*",
            "deny subscribe >", "allow subscribe a.*", "allow subscribe a.> user=7", "deny subscribe a.b.c user=7",
        ]
        var rng = SeededGenerator(seed: 0x0DE4)
        let identities = [who(7), who(7, groups: [50]), who(8, groups: [50]), who(9)]
        let types = ["a.b", "a.b.c", "a.c", "a.d.e", "z.q", "z.q.r", "q"].map(type)
        let patterns = [">", "a.>", "a.*", "a.b.>", "z.>", "q.>"].map(pattern)
        /// The text of the line a verdict names (the same rule, wherever it moved).
        func ruleText(_ policy: AccessPolicy, _ order: [String], _ verdict: PolicyVerdict) -> String {
            guard case .line(_, let n) = policy.origin(of: verdict) else { return "\(policy.origin(of: verdict))" }
            return order[n - 1]
        }
        guard let first = load(lines.joined(separator: "\n")) else { return }
        for _ in 0..<20 {
            let order = lines.shuffled(using: &rng)
            guard let shuffled = load(order.joined(separator: "\n")) else { return }
            for identity in identities {
                let a = first.view(for: identity), b = shuffled.view(for: identity)
                for t in types {
                    #expect(a.publish(t).effect == b.publish(t).effect)
                    #expect(a.receive(t).effect == b.receive(t).effect)
                    if !a.publish(t).isAllowed {
                        // The message may name another deny of the same level, never an allow.
                        #expect(ruleText(shuffled, order, b.publish(t)).contains("deny"))
                    }
                }
                for p in patterns { #expect(words(a.subscribe(p)) == words(b.subscribe(p))) }
            }
        }
    }

    @Test func defaultLinesApplyWhenNoRuleMatches() {
        guard let policy = load("""
            default publish deny
            default subscribe deny
            default connect deny
            allow publish ok.>
            allow subscribe ok.>
            allow connect - group=staff
            """) else { return }
        check(policy, [
            row(who(1), .publish, "ok.x", "allow", "test.conf:4"),
            row(who(1), .publish, "other.x", "deny", "test.conf:1"),
            row(who(1), .subscribe, "other.x", "deny", "test.conf:2"),
            row(who(1), .connect, "-", "deny", "test.conf:3"),
            row(who(1, groups: [50]), .connect, "-", "allow", "test.conf:6"),
        ])
    }

    @Test func conflictingDefaultsDenyWins() {
        let sources = [PolicySource(path: "vendor.conf", text: "default publish allow\n"),
                       PolicySource(path: "admin.conf", text: "default publish deny\n")]
        let policy = try? AccessPolicy.load(sources, resolver: testNames, brokerUID: testBrokerUID)
        #expect(policy?.view(for: who(1)).publish(type("x")).effect == .deny)
        #expect(policy.map { $0.origin(of: $0.view(for: who(1)).publish(type("x"))).description } == "admin.conf:1")
    }

    @Test func withoutAnyRuleEverythingButBridgeIsAllowed() {
        guard let empty = load("# nothing but a comment\n") else { return }
        check(empty, [
            row(who(1), .connect, "-", "allow", "builtInDefault"),
            row(who(1), .publish, "a.b", "allow", "builtInDefault"),
            row(who(1), .subscribe, ">", "allowed"),
            row(who(0), .bridge, "-", "deny", "bridgeNeedsRule"),  // a policy file exists
        ])
    }
}

@Suite("Identity: uid, primary gid, supplementary groups")
struct IdentityTests {
    @Test func groupRulesMatchThePrimaryGidOrAnySupplementaryGroup() {
        guard let policy = load("deny subscribe secret.>\nallow subscribe secret.> group=auditors\n") else { return }
        check(policy, [
            row(who(2001, gid: 3001), .subscribe, "secret.>", "allowed"),             // primary gid
            row(who(2001, gid: 100, groups: [7, 3001]), .subscribe, "secret.>", "allowed"),  // supplementary
            row(who(2001, gid: 100), .subscribe, "secret.>", "forbidden", "test.conf:1"),     // not a member
            row(who(2001, gid: 100), .subscribe, "secret.x", "deny", "test.conf:1"),
        ])
    }

    @Test func uidZeroIsBoundByTheRulesLikeAnyone() {
        guard let policy = load("deny publish x.>\ndeny connect - user=root\n") else { return }
        check(policy, [
            row(who(0), .publish, "x.y", "deny", "test.conf:1"),
            row(who(0), .connect, "-", "deny", "test.conf:2"),
            row(who(1), .connect, "-", "allow"),
        ])
    }

    @Test func percentUStandsForTheConnectionsUIDAndRanksAsAUserRule() {
        guard let policy = load("""
            deny  subscribe user.>
            allow subscribe user.%u.>
            deny  publish   box.*.in
            allow publish   box.u%u.in
            """) else { return }
        check(policy, [
            row(who(1000), .subscribe, "user.1000.>", "allowed"),
            row(who(1000), .subscribe, "user.1001.>", "forbidden", "test.conf:1"),
            row(who(1000), .subscribe, "user.>", "filtered"),
            row(who(1001), .subscribe, "user.1001.x", "allow", "test.conf:2"),
            row(who(1000), .publish, "box.u1000.in", "allow", "test.conf:4"),  // %u inside a segment
            row(who(1000), .publish, "box.u1001.in", "deny", "test.conf:3"),
        ])
    }

    @Test func identitiesNormaliseTheirGroups() {
        #expect(PolicyIdentity(uid: 1, gid: 5, supplementaryGroups: [9, 5, 3, 9]).gids == [3, 5, 9])
        #expect(PolicyIdentity(uid: 1, gid: 5, supplementaryGroups: [9, 3]) == PolicyIdentity(uid: 1, gid: 3, supplementaryGroups: [5, 9]))
        let identity = PolicyIdentity(uid: 1, gid: 5, supplementaryGroups: [9, 3])
        #expect(identity.isMember(of: 3) && identity.isMember(of: 5) && identity.isMember(of: 9))
        #expect(!identity.isMember(of: 4) && !identity.isMember(of: 10) && !identity.isMember(of: 0))
    }
}

@Suite("Publish, receive, connect, bridge")
struct ActionTests {
    @Test func publishingEventbusIsForbiddenWhateverTheFilesSay() {
        guard let policy = load("allow publish eventbus.> user=0\nallow publish > user=0\nallow publish eventbus.fake\n") else { return }
        check(policy, [
            row(who(0), .publish, "eventbus.fake", "deny", "reserved"),
            row(who(5), .publish, "eventbus.fake", "deny", "reserved"),
            row(who(0), .publish, "eventbusx.fake", "allow"),
            row(who(5), .subscribe, "eventbus.>", "allowed"),  // receiving the broker's events is fine
        ])
        let view = policy.view(for: who(5))
        #expect(view.denialMessage(.publish, "eventbus.fake", view.publish(type("eventbus.fake")))
            == "publish eventbus.fake denied for uid 5 by built-in rule (eventbus.> is reserved for the broker)")
    }

    @Test func publishIsDecidedByTheRulesWhosePatternMatchesTheType() {
        guard let policy = load("deny publish a.*\nallow publish a.b user=1\ndeny publish *.c.>\n") else { return }
        check(policy, [
            row(who(2), .publish, "a.b", "deny", "test.conf:1"),
            row(who(1), .publish, "a.b", "allow", "test.conf:2"),
            row(who(1), .publish, "a.b.c", "allow"),     // a.* does not match three segments
            row(who(1), .publish, "x.c.d", "deny", "test.conf:3"),
            row(who(1), .publish, "x.c", "allow"),       // *.c.> needs a segment after c
        ])
    }

    @Test func connectDeniedNamesTheRule() {
        guard let policy = load("deny connect - user=bob\n") else { return }
        let view = policy.view(for: who(2002))
        #expect(!view.connect.isAllowed)
        #expect(view.denialMessage(.connect, nil, view.connect) == "connect denied for uid 2002 by test.conf:1")
        #expect(policy.view(for: who(2001)).connect.isAllowed)
    }

    @Test func bridgeIsDeniedUnlessARuleAllowsIt() {
        guard let policy = load("allow bridge - user=eventbus-bridge\nallow bridge - group=staff\ndeny bridge - user=2002\n") else { return }
        check(policy, [
            row(who(998), .bridge, "-", "allow", "test.conf:1"),
            row(who(0), .bridge, "-", "deny", "bridgeNeedsRule"),
            row(who(testBrokerUID), .bridge, "-", "deny", "bridgeNeedsRule"),
            row(who(5, groups: [50]), .bridge, "-", "allow", "test.conf:2"),
            row(who(2002, groups: [50]), .bridge, "-", "deny", "test.conf:3"),
        ])
    }

    @Test func holdIsOwnUIDWithoutARuleAnyUIDWhenAllowedNoneWhenDenied() {
        guard let policy = load("allow hold - user=998\nallow hold - group=50\ndeny hold - user=2002\n") else { return }
        check(policy, [
            row(who(998), .hold, "-", "anyUID"),
            row(who(0), .hold, "-", "ownUID"),
            row(who(5, groups: [50]), .hold, "-", "anyUID"),
            row(who(2002, groups: [50]), .hold, "-", "none"),  // user beats group
        ])
        #expect(AccessPolicy.withoutFiles(brokerUID: 4242).view(for: who(1000)).hold == .ownUID)
    }

    @Test func withoutAPolicyFileBridgeIsForUIDZeroAndTheBrokersUIDOnly() {
        let policy = AccessPolicy.withoutFiles(brokerUID: 4242)
        #expect(!policy.hasFiles)
        check(policy, [
            row(who(0), .bridge, "-", "allow", "noPolicyFile"),
            row(who(4242), .bridge, "-", "allow", "noPolicyFile"),
            row(who(1000), .bridge, "-", "deny", "noPolicyFile"),
            row(who(1000), .publish, "system.x", "allow"),
            row(who(1000), .subscribe, ">", "allowed"),
            row(who(1000), .connect, "-", "allow"),
        ])
        let loadedFromNothing = try? AccessPolicy.load([], resolver: testNames, brokerUID: 4242)
        #expect(loadedFromNothing?.hasFiles == false)
    }

    @Test func denialMessagesNameTheDefaultLine() {
        guard let policy = load("default subscribe deny\nallow subscribe foo.*\n") else { return }
        let view = policy.view(for: who(1000))
        guard case .forbidden(let verdict) = view.subscribe(pattern("bar.>")) else {
            Issue.record("bar.> should be forbidden")
            return
        }
        #expect(view.denialMessage(.subscribe, "bar.>", verdict)
            == "subscribe bar.> denied for uid 1000 by test.conf:1 (default subscribe deny)")
    }

    @Test func viewsAreSharedPerIdentityAndBounded() {
        guard let policy = load("deny publish x.>\n") else { return }
        let cache = PolicyViewCache(policy: policy, capacity: 3)
        let a = cache.view(for: who(1, groups: [5]))
        #expect(cache.view(for: PolicyIdentity(uid: 1, gid: 5, supplementaryGroups: [1])) === a)
        for uid in 10..<20 { _ = cache.view(for: who(UInt32(uid))) }
        #expect(cache.count <= 3)
        #expect(!cache.view(for: who(1, groups: [5])).publish(type("x.y")).isAllowed)
    }
}
