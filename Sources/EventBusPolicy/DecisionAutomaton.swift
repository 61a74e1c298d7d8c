// The rules of one action for one identity, compiled into a deterministic
// automaton over segments, so that a decision for a type costs one table probe
// per segment until the answer no longer depends on the rest (for most types
// under the shipped policy: one probe), with no cache to churn.
//
// Before editing: a state is the set of rules still able to match after the
// segments read so far (`prefix`, all at the same depth) plus the `>` rules
// already satisfied. Edges exist for every literal that some rule names at
// that depth; every other segment takes `other`. Verdicts follow PROTOCOL.md
// "Access policy (1.1)": the highest level among matching rules decides, deny
// beats allow within it, no rule means the default. The automaton is built
// breadth-first, so a state's children have higher numbers (the absorbing
// states, where no rule is left in `prefix`, loop on themselves); the passes
// in `finish` rely on that order.
@_spi(Package) import EventBusProtocol

/// A decision and the rule (or default, or built-in) that made it.
/// `origin` indexes the policy's origin table (`PolicyView.origin(of:)`).
package struct PolicyVerdict: Hashable, Sendable {
    /// `allow` or `deny`.
    @usableFromInline package var effect: PolicyEffect
    /// Index into the policy's origins: `PolicyView.origin(of:)` tells what
    /// it is; also the key of `DenialLogLimiter.admit`.
    package var origin: Int32

    @inlinable package var isAllowed: Bool { effect == .allow }

    package init(effect: PolicyEffect, origin: Int32) {
        self.effect = effect
        self.origin = origin
    }
}

/// A rule's pattern, split once when the policy is loaded: the segments
/// before any `>` (a segment with `%u` kept as a template for each uid).
struct RuleShape: Sendable {
    enum Segment: Sendable {
        case literal(Substring)
        case star
        /// A segment containing `%u`, e.g. `%u` or `u%u`.
        case template(String)
    }

    var fixed: [Segment]
    var tail: Bool

    /// - Parameter text: a pattern the parser accepted, `%u` unexpanded.
    init(_ text: String) {
        var segments = text.split(separator: ".", omittingEmptySubsequences: false)
        tail = segments.last == ">"
        if tail { segments.removeLast() }
        fixed = segments.map { segment in
            if segment == "*" { return .star }
            if segment.contains("%u") { return .template(String(segment)) }
            return .literal(segment)
        }
    }

    /// The segments with `%u` replaced by `uid` (nil: by the widest uid), nil for `*`.
    func expanded(uid: UInt32?) -> [Substring?] {
        fixed.map { segment in
            switch segment {
            case .literal(let literal): literal
            case .star: nil
            case .template(let template): Substring(template.replacing("%u", with: uid.map(String.init) ?? widestUID))
            }
        }
    }
}

/// A rule ready for compiling: `%u` expanded, identity already checked.
struct AutomatonRule {
    /// Segments before any `>`: a literal, or nil for `*`.
    var fixed: [Substring?]
    /// Whether a `>` follows `fixed`.
    var tail: Bool
    var level: PolicyLevel
    var effect: PolicyEffect
    var origin: Int32
}

/// Cheapest way (in bytes) to finish a type from a state with each effect:
/// cost counts every segment's bytes plus one for its dot, so a whole type of
/// cost c is c - 1 bytes long. `Int32.max`: no way.
struct Reach {
    var allow: Int32 = .max
    var allowOrigin: Int32 = -1
    var deny: Int32 = .max
    var denyOrigin: Int32 = -1

    mutating func offer(_ verdict: PolicyVerdict, cost: Int32) {
        if verdict.effect == .allow {
            if cost < allow || (cost == allow && verdict.origin < allowOrigin) { allow = cost; allowOrigin = verdict.origin }
        } else {
            if cost < deny || (cost == deny && verdict.origin < denyOrigin) { deny = cost; denyOrigin = verdict.origin }
        }
    }

    mutating func offer(_ other: Reach, plus cost: Int32) {
        if other.allow != .max { offer(PolicyVerdict(effect: .allow, origin: other.allowOrigin), cost: other.allow + cost) }
        if other.deny != .max { offer(PolicyVerdict(effect: .deny, origin: other.denyOrigin), cost: other.deny + cost) }
    }
}

struct DecisionAutomaton: Sendable {
    /// Per state (index = state number; 0 is the start): literal edges.
    private(set) var edges: [[Substring: Int32]] = []
    /// Per state: where a segment that is no edge's literal goes.
    private(set) var other: [Int32] = []
    /// Per state: cost of the shortest segment that is no edge's literal, plus its dot.
    private(set) var otherCost: [Int32] = []
    /// Per state: the verdict for a type that ends here (unused for state 0).
    private(set) var end: [PolicyVerdict] = []
    /// Per state: the verdict every type passing through here gets, if one does.
    private(set) var uniform: [PolicyVerdict?] = []
    /// Per state: cheapest completions with zero or more further segments.
    private(set) var reach: [Reach] = []
    /// Per state: cheapest completions with one or more further segments.
    private(set) var reachPlus: [Reach] = []
    /// The same states for the per-event walk: a summary each and one edge table.
    private(set) var summaries: [StateSummary] = []
    private(set) var table = EdgeTable(edges: [])

    var stateCount: Int { edges.count }

    private struct Key: Hashable {
        /// Segments read; -1 for an absorbing state (no rule left in `prefix`).
        var depth: Int32
        var prefix: [Int32]
        var satisfied: [Int32]
    }

    /// Compiles `rules`; nil when the automaton would need more than
    /// `maxStates` states.
    /// - Parameters:
    ///   - fallback: the verdict when no rule matches (the `default` line).
    init?(rules: [AutomatonRule], fallback: PolicyVerdict, maxStates: Int) {
        var keys: [Key] = []
        var numbers: [Key: Int32] = [:]
        func state(_ key: Key) -> Int32? {
            if let n = numbers[key] { return n }
            guard keys.count < maxStates else { return nil }
            let n = Int32(keys.count)
            keys.append(key)
            numbers[key] = n
            return n
        }
        func verdict(_ matched: [Int32]) -> PolicyVerdict {
            var best: AutomatonRule? = nil
            for r in matched {
                let rule = rules[Int(r)]
                guard let current = best else { best = rule; continue }
                if rule.level != current.level {
                    if rule.level > current.level { best = rule }
                } else if rule.effect != current.effect {
                    if rule.effect == .deny { best = rule }
                } else if rule.origin < current.origin {
                    best = rule
                }
            }
            return best.map { PolicyVerdict(effect: $0.effect, origin: $0.origin) } ?? fallback
        }

        _ = state(Key(depth: 0, prefix: (0..<Int32(rules.count)).map { $0 }, satisfied: []))
        var next = 0
        while next < keys.count {
            let key = keys[next]
            let me = Int32(next)
            next += 1
            if key.depth < 0 {
                edges.append([:]); other.append(me); otherCost.append(2)
                end.append(verdict(key.satisfied))
                continue
            }
            let depth = Int(key.depth)
            var matchedHere = key.satisfied
            var satisfiedNext = key.satisfied
            var stars: [Int32] = []
            var byLiteral: [Substring: [Int32]] = [:]
            for r in key.prefix {
                let rule = rules[Int(r)]
                if depth < rule.fixed.count {
                    if let literal = rule.fixed[depth] { byLiteral[literal, default: []].append(r) } else { stars.append(r) }
                } else if rule.tail {
                    satisfiedNext.append(r)  // its `>` takes the next segment and all after
                } else {
                    matchedHere.append(r)  // depth == fixed.count: matches a type ending here
                }
            }
            matchedHere.sort()
            satisfiedNext.sort()
            end.append(verdict(matchedHere))
            func successor(_ prefix: [Int32]) -> Int32? {
                state(prefix.isEmpty ? Key(depth: -1, prefix: [], satisfied: satisfiedNext)
                                     : Key(depth: key.depth + 1, prefix: prefix, satisfied: satisfiedNext))
            }
            var out: [Substring: Int32] = [:]
            out.reserveCapacity(byLiteral.count)
            for literal in byLiteral.keys.sorted() {
                // Both lists are in rule order; merge them to keep `prefix` sorted.
                var merged: [Int32] = []
                merged.reserveCapacity(byLiteral[literal]!.count + stars.count)
                var a = byLiteral[literal]![...], b = stars[...]
                while let x = a.first, let y = b.first { if x < y { merged.append(x); a = a.dropFirst() } else { merged.append(y); b = b.dropFirst() } }
                merged.append(contentsOf: a)
                merged.append(contentsOf: b)
                guard let child = successor(merged) else { return nil }
                out[literal] = child
            }
            guard let rest = successor(stars) else { return nil }
            edges.append(out)
            other.append(rest)
            otherCost.append(DecisionAutomaton.shortestOtherSegment(out) + 1)
        }
        finish(absorbing: keys.map { $0.depth < 0 })
        summarise()
    }

    /// Bytes of the shortest valid segment that is not a key of `edges`.
    private static func shortestOtherSegment(_ edges: [Substring: Int32]) -> Int32 {
        // 65 bytes may form a segment (A-Z a-z 0-9 _ - :), so length L has 65^L.
        var length = 1
        var capacity = 65
        while edges.keys.lazy.filter({ $0.utf8.count == length }).count >= capacity {
            length += 1
            capacity = capacity > Int.max / 65 ? Int.max : capacity * 65
        }
        return Int32(length)
    }

    /// Fills `uniform`, `reach` and `reachPlus`, children before parents.
    private mutating func finish(absorbing: [Bool]) {
        let count = edges.count
        uniform = Array(repeating: nil, count: count)
        reach = Array(repeating: Reach(), count: count)
        reachPlus = Array(repeating: Reach(), count: count)
        for s in 0..<count where absorbing[s] {
            uniform[s] = end[s]
            reach[s].offer(end[s], cost: 0)
            reachPlus[s].offer(end[s], cost: 2)  // one more segment, "a"
        }
        for s in stride(from: count - 1, through: 0, by: -1) where !absorbing[s] {
            var plus = Reach()
            var same: PolicyVerdict?? = s == 0 ? .none : .some(end[s])  // .none: not decided yet
            func visit(_ child: Int32, cost: Int32) {
                plus.offer(reach[Int(child)], plus: cost)
                let u = uniform[Int(child)]
                switch same {
                case .none: same = .some(u)
                case .some(let v): if v == nil || v != u { same = .some(nil) }
                }
            }
            for (literal, child) in edges[s] { visit(child, cost: Int32(literal.utf8.count) + 1) }
            visit(other[s], cost: otherCost[s])
            reachPlus[s] = plus
            var all = plus
            if s != 0 { all.offer(end[s], cost: 0) }
            reach[s] = all
            if case .some(let v) = same { uniform[s] = v }
        }
    }

    /// Whether every type gets the same verdict (then it is that verdict).
    var constantVerdict: PolicyVerdict? { uniform[0] }

    /// Builds what `verdict(_:)` reads (DecisionAutomaton+Walk.swift).
    private mutating func summarise() {
        summaries = (0..<edges.count).map { s in
            StateSummary(other: other[s], end: end[s], uniform: uniform[s] ?? end[s], isUniform: uniform[s] != nil)
        }
        table = EdgeTable(edges: edges)
    }
}
