// Helpers for the policy tests: loading a policy from text, identities, a
// seeded generator, random patterns and types over a small alphabet, and a
// reference evaluator written straight from PROTOCOL.md "Access policy (1.1)"
// (a linear scan of the rules, no automaton) to hold the compiled views to.
//
// Before editing: everything random is seeded, so a failure reproduces; the
// reference must stay independent of the code under test (it uses only the
// parsed rules' fields and `Pattern.matches`).
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import EventBusTestSupport
import Testing

/// The shared seeded generator (EventBusProtocol.SplitMix64, fixed per seed).
typealias SeededGenerator = EventBusProtocol.SplitMix64

/// Users and groups the tests resolve by name.
let testNames = TableNameResolver(
    users: ["root": 0, "alice": 2001, "bob": 2002, "eventbus-bridge": 998],
    groups: ["root": 0, "auditors": 3001, "staff": 50])

/// The broker's own uid in these tests (neither 0 nor a test user).
let testBrokerUID: UInt32 = 999

/// Loads one file of text as `path`, or records the errors and returns nil.
func load(_ text: String, path: String = "test.conf", brokerUID: UInt32 = testBrokerUID,
          sourceLocation: SourceLocation = #_sourceLocation) -> AccessPolicy? {
    do {
        return try AccessPolicy.load([PolicySource(path: path, text: text)], resolver: testNames, brokerUID: brokerUID)
    } catch {
        Issue.record("policy did not load: \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// The errors a set of files gives (empty when it loads).
func loadErrors(_ sources: [PolicySource]) -> [String] {
    do {
        _ = try AccessPolicy.load(sources, resolver: testNames, brokerUID: testBrokerUID)
        return []
    } catch {
        return error.errors.map(\.description)
    }
}

/// `uid`, primary gid `gid` (default: equal to uid), supplementary `groups`.
func who(_ uid: UInt32, gid: UInt32? = nil, groups: [UInt32] = []) -> PolicyIdentity {
    PolicyIdentity(uid: uid, gid: gid ?? uid, supplementaryGroups: groups)
}

func type(_ name: String) -> EventType {
    guard let t = EventType(name) else { preconditionFailure("bad type in test: \(name)") }
    return t
}

func pattern(_ text: String) -> Pattern {
    guard let p = Pattern(text) else { preconditionFailure("bad pattern in test: \(text)") }
    return p
}

// MARK: Random patterns and types

/// A random pattern of 1...maxSegments segments from `literals`, `*`, and
/// sometimes a final `>`.
func randomPattern(_ rng: inout SeededGenerator, literals: [String], maxSegments: Int = 4) -> Pattern {
    let count = Int.random(in: 1...maxSegments, using: &rng)
    var parts: [String] = []
    for i in 0..<count {
        if i == count - 1 && Int.random(in: 0..<3, using: &rng) == 0 {
            parts.append(">")
        } else if Int.random(in: 0..<3, using: &rng) == 0 {
            parts.append("*")
        } else {
            parts.append(literals.randomElement(using: &rng)!)
        }
    }
    return pattern(parts.joined(separator: "."))
}

/// A random type of 1...maxSegments segments from `literals`.
func randomType(_ rng: inout SeededGenerator, literals: [String], maxSegments: Int = 6) -> EventType {
    let count = Int.random(in: 1...maxSegments, using: &rng)
    return type((0..<count).map { _ in literals.randomElement(using: &rng)! }.joined(separator: "."))
}

/// A random type that `p` matches: wildcards filled from `literals`, a `>`
/// with 1...3 segments.
func randomInstance(of p: Pattern, _ rng: inout SeededGenerator, literals: [String]) -> EventType {
    var parts: [String] = []
    for segment in p.segments {
        switch segment {
        case "*": parts.append(literals.randomElement(using: &rng)!)
        case ">": for _ in 0..<Int.random(in: 1...3, using: &rng) { parts.append(literals.randomElement(using: &rng)!) }
        default: parts.append(String(segment))
        }
    }
    return type(parts.joined(separator: "."))
}

/// Every type `p` matches whose segments come from `literals`, with at most
/// `maxSegments` segments.
func allInstances(of p: Pattern, literals: [String], maxSegments: Int) -> [EventType] {
    var results: [[String]] = [[]]
    let segments = p.segments
    for (i, segment) in segments.enumerated() {
        if segment == ">" && i == segments.count - 1 {
            var grown: [[String]] = []
            var frontier = results
            while let first = frontier.first, first.count < maxSegments {
                frontier = frontier.flatMap { prefix in literals.map { prefix + [$0] } }
                grown += frontier
            }
            results = grown
        } else if segment == "*" {
            results = results.flatMap { prefix in literals.map { prefix + [$0] } }
        } else {
            results = results.map { $0 + [String(segment)] }
        }
    }
    return results.filter { !$0.isEmpty && $0.count <= maxSegments }.map { type($0.joined(separator: ".")) }
}

// MARK: Reference evaluation

/// PROTOCOL.md's rule, by a linear scan: of the rules whose action matches,
/// whose identity matches and whose pattern matches `target`, those naming a
/// user (or using %u) beat those naming a group, which beat the rest; deny
/// beats allow at one level; none: the default lines (deny beats allow), else
/// allow. `publish eventbus.>` is always denied; `bridge` has its own default.
struct Reference {
    let policy: AccessPolicy
    let identity: PolicyIdentity
    /// The rules that apply to `identity`: action, level, effect, expanded pattern.
    let rules: [(action: PolicyAction, level: Int, effect: PolicyEffect, pattern: Pattern?)]

    init(_ policy: AccessPolicy, _ identity: PolicyIdentity) {
        self.policy = policy
        self.identity = identity
        rules = policy.rules.compactMap { rule in
            if let uid = rule.uid, uid != identity.uid { return nil }
            if let gid = rule.gid, !identity.gids.contains(gid) { return nil }
            let level = rule.uid != nil || (rule.pattern ?? "").contains("%u") ? 2 : rule.gid != nil ? 1 : 0
            return (rule.action, level, rule.effect, rule.pattern.map { pattern($0.replacing("%u", with: String(identity.uid))) })
        }
    }

    func effect(_ action: PolicyAction, _ target: EventType? = nil) -> PolicyEffect {
        if action == .publish, let target, target.name.hasPrefix("eventbus.") { return .deny }
        var top = -1
        var denied = false
        for rule in rules where rule.action == action {
            if let p = rule.pattern, !p.matches(target!) { continue }
            if rule.level > top { top = rule.level; denied = false }
            if rule.level == top && rule.effect == .deny { denied = true }
        }
        if top >= 0 { return denied ? .deny : .allow }
        if action == .bridge {
            if policy.hasFiles { return .deny }
            return identity.uid == 0 || identity.uid == policy.brokerUID ? .allow : .deny
        }
        return policy.defaultLines.contains { $0.action == action && $0.effect == .deny } ? .deny : .allow
    }

    /// The answer to `subscribe`, by enumerating the pattern's types over
    /// `literals` (which must hold every literal of the rules and the
    /// pattern, plus one more) up to `maxSegments` segments.
    func subscribe(_ p: Pattern, literals: [String], maxSegments: Int) -> String {
        var allowed = false, denied = false
        for t in allInstances(of: p, literals: literals, maxSegments: maxSegments) {
            if effect(.subscribe, t) == .allow { allowed = true } else { denied = true }
            if allowed && denied { break }
        }
        return denied ? (allowed ? "filtered" : "forbidden") : "allowed"
    }
}

func referenceEffect(_ policy: AccessPolicy, _ action: PolicyAction, _ identity: PolicyIdentity, _ target: EventType? = nil) -> PolicyEffect {
    Reference(policy, identity).effect(action, target)
}

func referenceSubscribe(_ policy: AccessPolicy, _ identity: PolicyIdentity, _ p: Pattern, literals: [String], maxSegments: Int) -> String {
    Reference(policy, identity).subscribe(p, literals: literals, maxSegments: maxSegments)
}

/// `SubscribeDecision` as the same words.
func words(_ decision: SubscribeDecision) -> String {
    switch decision {
    case .allowed: "allowed"
    case .filtered: "filtered"
    case .forbidden: "forbidden"
    }
}
