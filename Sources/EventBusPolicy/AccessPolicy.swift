// The merged access policy of every policy file (PROTOCOL.md "Access policy
// (1.1)"), loaded all or nothing, and the origin table that lets every
// decision name its file:line.
//
// Before editing: an `AccessPolicy` is immutable and Sendable; everything
// per identity (compiled automata, `%u` expanded) lives in `PolicyView`. File
// order never changes a decision: merging only concatenates, and every
// choice between lines (rules, defaults, limits) is made by level and effect,
// with file order used only to pick which line a message names.
@_spi(Package) import EventBusProtocol

/// The policy of a broker: every rule, `default` and `limit` line of its
/// files, or the built-in behaviour when there are none.
///
/// Example:
/// ```
/// let policy = try AccessPolicy.load(
///     [PolicySource(path: "/usr/share/eventbus/policy.conf", text: vendorText),
///      PolicySource(path: "/etc/eventbus/policy.conf", text: adminText)],
///     resolver: passwdResolver, brokerUID: getuid())
/// let view = policy.view(for: PolicyIdentity(uid: 1000, gid: 1000, supplementaryGroups: [27]))
/// ```
package struct AccessPolicy: Sendable {
    /// The files, in the order they were merged.
    package let paths: [String]
    /// Every `allow`/`deny` line, in merge order.
    package let rules: [PolicyRule]
    /// Every `default` line, in merge order.
    package let defaultLines: [PolicyDefault]
    /// Every `limit` line, in merge order.
    package let limits: [PolicyLimit]
    /// The broker's own uid (no per-uid limits; may `bridge` without a policy file).
    package let brokerUID: UInt32
    /// Whether any policy file was given. Without one, everything the rules
    /// call "default" is allowed and `bridge` is for uid 0 and `brokerUID`.
    package var hasFiles: Bool { !paths.isEmpty }

    /// `rules[i]`'s pattern, split once (nil for `-`).
    let shapes: [RuleShape?]
    /// Every origin a verdict can name; `PolicyVerdict.origin` indexes it.
    let origins: [PolicyOrigin]
    /// The same, as a message names them (`/etc/eventbus/policy.conf:3 (default subscribe deny)`).
    let originLabels: [String]

    static let reservedOrigin: Int32 = 0
    static let builtInDefaultOrigin: Int32 = 1
    static let bridgeNeedsRuleOrigin: Int32 = 2
    static let noPolicyFileOrigin: Int32 = 3
    static let tooComplexOrigin: Int32 = 4
    static let firstRuleOrigin: Int32 = 5
    /// Origin index of `rules[i]` is `firstRuleOrigin + i`; `defaultLines[j]`
    /// follow the rules.
    func defaultOrigin(_ j: Int) -> Int32 { AccessPolicy.firstRuleOrigin + Int32(rules.count + j) }

    /// States one automaton (one action, one identity) may have. The shipped
    /// policy needs about ten; only many `*` segments before literals in
    /// other rules multiply states.
    package static let maxAutomatonStates = 8192

    /// Reads the merged files: the vendor file, `/etc/eventbus/policy.conf`,
    /// then `/etc/eventbus/policy.d/*.conf` in lexical order (the caller reads
    /// them and passes them in that order).
    /// - Parameters:
    ///   - sources: the files' paths and text; none gives `withoutFiles`.
    ///   - resolver: resolves `user=` and `group=` names.
    ///   - brokerUID: the broker's own uid.
    /// - Throws: `PolicyLoadError` with every error of every file
    ///   (`file:line: message`) when any line is invalid: all or nothing.
    package static func load(_ sources: [PolicySource], resolver: any PolicyNameResolver, brokerUID: UInt32) throws(PolicyLoadError) -> AccessPolicy {
        let parser = PolicyParser(resolver: resolver)
        var rules: [PolicyRule] = [], defaults: [PolicyDefault] = [], limits: [PolicyLimit] = []
        var errors: [PolicyError] = []
        for source in sources {
            let file = parser.parse(source)
            rules += file.rules
            defaults += file.defaults
            limits += file.limits
            errors += file.errors
        }
        guard errors.isEmpty else { throw PolicyLoadError(errors: errors) }
        let policy = AccessPolicy(paths: sources.map(\.path), rules: rules, defaultLines: defaults, limits: limits, brokerUID: brokerUID)
        // The automaton of all rules together bounds those of the identities
        // (each sees a subset of the rules).
        for action in [PolicyAction.publish, .subscribe, .serve] {
            let all = policy.automatonRules(action, identity: nil, uid: nil)
            if DecisionAutomaton(rules: all, fallback: PolicyVerdict(effect: .allow, origin: 0), maxStates: maxAutomatonStates) == nil {
                var path = "", line = 0
                if case .line(let p, let l)? = rules.last(where: { $0.action == action })?.origin { path = p; line = l }
                throw PolicyLoadError(errors: [PolicyError(path: path, line: line, message: "policy too complex: the \(action) rules need more than \(maxAutomatonStates) automaton states (use fewer * segments in front of literals)")])
            }
        }
        return policy
    }

    /// The policy of a broker that has no policy file (the per-user bus).
    package static func withoutFiles(brokerUID: UInt32) -> AccessPolicy {
        AccessPolicy(paths: [], rules: [], defaultLines: [], limits: [], brokerUID: brokerUID)
    }

    init(paths: [String], rules: [PolicyRule], defaultLines: [PolicyDefault], limits: [PolicyLimit], brokerUID: UInt32) {
        self.paths = paths
        self.rules = rules
        self.defaultLines = defaultLines
        self.limits = limits
        self.brokerUID = brokerUID
        self.shapes = rules.map { $0.pattern.map(RuleShape.init) }
        var origins: [PolicyOrigin] = [.reserved, .builtInDefault, .bridgeNeedsRule, .noPolicyFile, .tooComplex]
        var labels = origins.map(\.description)
        for rule in rules {
            origins.append(rule.origin)
            labels.append(rule.origin.description)
        }
        for line in defaultLines {
            origins.append(line.origin)
            labels.append("\(line.origin) (default \(line.action) \(line.effect))")
        }
        self.origins = origins
        self.originLabels = labels
    }

    /// The verdict when no rule of `action` matches: the `default` lines of
    /// that action (deny beats allow; the first such line is named), else allow.
    package func defaultVerdict(_ action: PolicyAction) -> PolicyVerdict {
        var best: PolicyVerdict? = nil
        for (j, line) in defaultLines.enumerated() where line.action == action {
            if best == nil || (line.effect == .deny && best!.effect == .allow) {
                best = PolicyVerdict(effect: line.effect, origin: defaultOrigin(j))
            }
        }
        return best ?? PolicyVerdict(effect: .allow, origin: AccessPolicy.builtInDefaultOrigin)
    }

    /// What a verdict's origin index stands for.
    package func origin(of verdict: PolicyVerdict) -> PolicyOrigin { origins[Int(verdict.origin)] }

    /// How a message names a verdict's origin: `/etc/eventbus/policy.conf:7`,
    /// `/etc/eventbus/policy.conf:1 (default subscribe deny)`, or a built-in rule.
    package func label(of verdict: PolicyVerdict) -> String { originLabels[Int(verdict.origin)] }

    /// The rules of `action` for compiling, with their origin numbers.
    /// - Parameters:
    ///   - identity: keep only the rules that apply to it; nil keeps all.
    ///   - uid: the `%u` value; nil puts the widest uid (only the number of
    ///     states matters then).
    func automatonRules(_ action: PolicyAction, identity: PolicyIdentity?, uid: UInt32?) -> [AutomatonRule] {
        var out: [AutomatonRule] = []
        if action == .publish {
            out.append(AutomatonRule(fixed: ["eventbus"], tail: true, level: .mandatory, effect: .deny, origin: AccessPolicy.reservedOrigin))
        }
        for (i, rule) in rules.enumerated() where rule.action == action {
            if let identity, !rule.applies(to: identity) { continue }
            guard let shape = shapes[i] else { continue }
            out.append(AutomatonRule(fixed: shape.expanded(uid: uid), tail: shape.tail, level: rule.level,
                                     effect: rule.effect, origin: AccessPolicy.firstRuleOrigin + Int32(i)))
        }
        return out
    }

    /// The verdict of the rules of a pattern-less action (`connect`, `bridge`)
    /// for `identity`: highest level, deny beats allow; nil when none applies.
    func verdictWithoutPattern(_ action: PolicyAction, for identity: PolicyIdentity) -> PolicyVerdict? {
        var best: (level: PolicyLevel, verdict: PolicyVerdict)? = nil
        for (i, rule) in rules.enumerated() where rule.action == action && rule.applies(to: identity) {
            let verdict = PolicyVerdict(effect: rule.effect, origin: AccessPolicy.firstRuleOrigin + Int32(i))
            guard let current = best else { best = (rule.level, verdict); continue }
            if rule.level > current.level || (rule.level == current.level && rule.effect == .deny && current.verdict.effect == .allow) {
                best = (rule.level, verdict)
            }
        }
        return best?.verdict
    }

    /// The compiled view of one identity (uncached; see `PolicyViewCache`).
    package func view(for identity: PolicyIdentity) -> PolicyView {
        PolicyView(policy: self, identity: identity)
    }
}
