// `eventbusd --check-policy FILE...` output: the effective merged policy, one
// line per rule with names resolved to numbers and the file:line it came
// from, plus warnings for lines that can never decide anything.
//
// Before editing: every non-comment line of the output must parse back to
// the same rule (a test reads it back), so the output can serve as a
// policy file itself; comments carry the origins and the names.
@_spi(Package) import EventBusProtocol

extension AccessPolicy {
    /// Who may `bridge` without a policy file, for messages: `uid 0` when
    /// the broker runs as root, else `uid 0 and uid 998` (the broker's own).
    package var fileLessBridgeUIDs: String {
        brokerUID == 0 ? "uid 0" : "uid 0 and uid \(brokerUID)"
    }

    /// The effective policy as text. Example (shipped file, uid 0):
    /// ```
    /// # effective policy of 1 file: config/policy.conf
    /// default connect allow                      # built in
    /// # built in: deny publish eventbus.> (reserved for the broker, whatever the files say)
    /// deny publish system.>                      # config/policy.conf:20
    /// allow publish system.> user=0              # config/policy.conf:21
    /// ```
    package func renderEffective() -> String {
        var out: [String] = []
        if hasFiles {
            out.append("# effective policy of \(paths.count) file\(paths.count == 1 ? "" : "s"): \(paths.joined(separator: " "))")
        } else {
            out.append("# no policy file: everything is allowed, bridge only to \(fileLessBridgeUIDs)")
        }
        func line(_ text: String, _ comment: String) {
            let pad = max(1, 44 - text.count)
            out.append(text + String(repeating: " ", count: pad) + "# " + comment)
        }
        for action in [PolicyAction.connect, .publish, .subscribe, .serve] {
            let verdict = defaultVerdict(action)
            let from = verdict.origin == AccessPolicy.builtInDefaultOrigin ? "built in" : origin(of: verdict).description
            line("default \(action) \(verdict.effect)", from)
        }
        out.append("# built in: deny publish eventbus.> (reserved for the broker, whatever the files say)")
        if hasFiles {
            if !rules.contains(where: { $0.action == .bridge && $0.effect == .allow }) {
                out.append("# bridge: denied to everyone (no rule allows it)")
            }
        } else {
            out.append("# bridge: allowed to \(fileLessBridgeUIDs) only (no policy file)")
        }
        for rule in rules {
            var names: [String] = []
            if let name = rule.userName { names.append("user=\(name)") }
            if let name = rule.groupName { names.append("group=\(name)") }
            if rule.usesUID && rule.uid == nil { names.append("%u: ranks as a user rule") }
            line(AccessPolicy.text(of: rule), ([rule.origin.description] + names).joined(separator: ", "))
        }
        for limit in limits {
            var names: [String] = []
            if let name = limit.userName { names.append("user=\(name)") }
            if let name = limit.groupName { names.append("group=\(name)") }
            line(AccessPolicy.text(of: limit), ([limit.origin.description] + names).joined(separator: ", "))
        }
        for warning in warnings() { out.append("# warning: \(warning)") }
        return out.joined(separator: "\n") + "\n"
    }

    /// A rule as a policy line, numbers for names: `allow subscribe audit.> group=4`.
    static func text(of rule: PolicyRule) -> String {
        var text = "\(rule.effect) \(rule.action) \(rule.pattern ?? "-")"
        if let uid = rule.uid { text += " user=\(uid)" }
        if let gid = rule.gid { text += " group=\(gid)" }
        return text
    }

    /// A limit as a policy line: `limit connections 1024 user=998`.
    static func text(of limit: PolicyLimit) -> String {
        // Counts stay plain numbers; byte sizes take K, M or G where exact.
        let value = limit.resource.isBytes ? limit.value.description : { if case .value(let n) = limit.value { String(n) } else { "unlimited" } }()
        var text = "limit \(limit.resource.rawValue) \(value)"
        if let uid = limit.uid { text += " user=\(uid)" }
        if let gid = limit.gid { text += " group=\(gid)" }
        return text
    }

    /// Lines that can never decide: an `allow` whose every type a `deny` of
    /// the same action and the same identity conditions covers (deny beats
    /// allow within a level), and `default allow` lines beside a `default deny`.
    package func warnings() -> [String] {
        var warnings: [String] = []
        var denies: [[Int]] = Array(repeating: [], count: PolicyAction.allCases.count)
        for (i, rule) in rules.enumerated() where rule.effect == .deny {
            denies[PolicyAction.allCases.firstIndex(of: rule.action)!].append(i)
        }
        for rule in rules where rule.effect == .allow {
            for d in denies[PolicyAction.allCases.firstIndex(of: rule.action)!] {
                let deny = rules[d]
                guard deny.uid == rule.uid, deny.gid == rule.gid, deny.usesUID == rule.usesUID else { continue }
                let covered: Bool
                if let allowed = rule.pattern, let denied = deny.pattern {
                    // `%u` stands for the same uid in both; check with one.
                    guard let a = Pattern(allowed.replacing("%u", with: "1000")),
                          let b = Pattern(denied.replacing("%u", with: "1000")) else { continue }
                    covered = b.contains(a)
                } else {
                    covered = true  // connect/bridge: `-` against `-`
                }
                if covered {
                    warnings.append("\(rule.origin) \(AccessPolicy.text(of: rule)) never applies: \(deny.origin) \(AccessPolicy.text(of: deny)) beats it at the same level")
                    break
                }
            }
        }
        for action in [PolicyAction.connect, .publish, .subscribe, .serve] where defaultVerdict(action).effect == .deny {
            for line in defaultLines where line.action == action && line.effect == .allow {
                warnings.append("\(line.origin) default \(action) allow never applies: a default \(action) deny beats it")
            }
        }
        return warnings
    }
}
