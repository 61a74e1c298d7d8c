// The vocabulary of the access policy (PROTOCOL.md "Access policy (1.1)"):
// actions, effects, the rules and `default` and `limit` lines as parsed, and
// where each came from, so that every decision can name its file:line.
//
// Before editing: these are the parser's output and the renderer's input;
// `%u` stays unexpanded here (`PolicyView` expands it per uid), names are
// already numbers.
@_spi(Package) import EventBusProtocol

/// What a rule is about: `connect`, `publish`, `subscribe`, `bridge`,
/// (1.2, PROTOCOL.md "Flow control") `hold` or (1.3, "Request/reply") `serve`.
package enum PolicyAction: String, CaseIterable, Hashable, Sendable {
    case connect, publish, subscribe, bridge, hold, serve

    /// Whether rules of this action take a pattern (`publish`, `subscribe`,
    /// `serve`) rather than `-` (`connect`, `bridge`, `hold`).
    package var takesPattern: Bool { self == .publish || self == .subscribe || self == .serve }
}

/// `allow` or `deny`.
@usableFromInline package enum PolicyEffect: UInt8, Hashable, Sendable, CustomStringConvertible {
    case allow, deny

    @usableFromInline package var description: String { self == .allow ? "allow" : "deny" }
}

/// How specific a rule's identity is (PROTOCOL.md: rules naming a `user` beat
/// those naming a `group`, which beat those naming neither). `mandatory` is
/// the built-in `eventbus.>` rule that no file can override.
package enum PolicyLevel: UInt8, Comparable, Hashable, Sendable {
    case everyone = 0, group = 1, user = 2, mandatory = 3

    package static func < (a: PolicyLevel, b: PolicyLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Where a rule, default or decision comes from: a file line or a built-in.
/// Its `description` is what a `forbidden` error message and the log name.
package enum PolicyOrigin: Hashable, Sendable, CustomStringConvertible {
    /// A line of a policy file, e.g. `/etc/eventbus/policy.conf:7`.
    case line(path: String, line: Int)
    /// `publish eventbus.>` is forbidden to every client (PROTOCOL.md "Names and patterns").
    case reserved
    /// No rule matched and no `default` line was given: allow.
    case builtInDefault
    /// No rule allows `bridge` (it is denied unless one does).
    case bridgeNeedsRule
    /// No policy file: `bridge` is allowed to uid 0 and the broker's own uid only.
    case noPolicyFile
    /// This identity's rules need more automaton states than allowed: it is denied everything.
    case tooComplex

    package var description: String {
        switch self {
        case .line(let path, let line): "\(path):\(line)"
        case .reserved: "built-in rule (eventbus.> is reserved for the broker)"
        case .builtInDefault: "built-in default (allow)"
        case .bridgeNeedsRule: "built-in rule (bridge is denied unless a rule allows it)"
        case .noPolicyFile: "built-in rule (without a policy file, bridge is for uid 0 and the broker's uid only)"
        case .tooComplex: "built-in rule (the policy is too complex for this identity, so everything is denied)"
        }
    }
}

/// One `allow|deny` line, names resolved, `%u` kept.
/// Example: `allow publish user.%u.> group=100` from `/etc/eventbus/policy.conf:4`.
package struct PolicyRule: Hashable, Sendable {
    package var effect: PolicyEffect
    package var action: PolicyAction
    /// The pattern as written, `%u` unexpanded (`user.%u.>`); nil for `-`.
    package var pattern: String?
    /// `user=`: the uid it names, resolved.
    package var uid: UInt32?
    /// `group=`: the gid it names, resolved.
    package var gid: UInt32?
    /// The names as written when they were names (for `--check-policy`).
    package var userName: String?
    package var groupName: String?
    package var origin: PolicyOrigin

    package init(effect: PolicyEffect, action: PolicyAction, pattern: String?, uid: UInt32? = nil, gid: UInt32? = nil,
                userName: String? = nil, groupName: String? = nil, origin: PolicyOrigin) {
        self.effect = effect
        self.action = action
        self.pattern = pattern
        self.uid = uid
        self.gid = gid
        self.userName = userName
        self.groupName = groupName
        self.origin = origin
    }

    /// Whether the pattern uses `%u`, which makes the rule per-uid: it ranks
    /// with the rules naming a `user` (see `level`).
    package var usesUID: Bool { pattern?.contains("%u") ?? false }

    /// The rule's rank. A pattern with `%u` means "this connection's own
    /// uid", as if the rule were written once per uid with `user=` that uid,
    /// so it ranks as a `user` rule: that is what lets `allow subscribe
    /// user.%u.>` win over `deny subscribe user.>` (docs/POLICY.md).
    package var level: PolicyLevel {
        if uid != nil || usesUID { return .user }
        if gid != nil { return .group }
        return .everyone
    }

    /// Whether the rule's identity conditions hold for `identity`: `user=`
    /// equals its uid, `group=` is its primary gid or a supplementary one.
    package func applies(to identity: PolicyIdentity) -> Bool {
        if let uid, uid != identity.uid { return false }
        if let gid, !identity.isMember(of: gid) { return false }
        return true
    }
}

/// A `default publish|subscribe|connect|serve allow|deny` line.
package struct PolicyDefault: Hashable, Sendable {
    package var action: PolicyAction
    package var effect: PolicyEffect
    package var origin: PolicyOrigin

    package init(action: PolicyAction, effect: PolicyEffect, origin: PolicyOrigin) {
        self.action = action
        self.effect = effect
        self.origin = origin
    }
}

/// A connection's identity as the policy sees it: `SO_PEERCRED` uid and gid
/// plus the supplementary groups from `SO_PEERGROUPS`, all taken at connect.
/// Two connections with equal identities share one `PolicyView`.
package struct PolicyIdentity: Hashable, Sendable, CustomStringConvertible {
    package let uid: UInt32
    /// The primary gid and the supplementary ones, sorted, without duplicates.
    package let gids: [UInt32]

    /// - Parameters:
    ///   - uid: the peer's uid (`SO_PEERCRED`).
    ///   - gid: the peer's primary gid (`SO_PEERCRED`).
    ///   - supplementaryGroups: `SO_PEERGROUPS`, in any order, duplicates allowed.
    package init(uid: UInt32, gid: UInt32, supplementaryGroups: [UInt32] = []) {
        self.uid = uid
        var all = supplementaryGroups
        all.append(gid)
        all.sort()
        var unique: [UInt32] = []
        unique.reserveCapacity(all.count)
        for g in all where unique.last != g { unique.append(g) }
        self.gids = unique
    }

    /// Whether `gid` is the primary gid or a supplementary group (binary search).
    package func isMember(of gid: UInt32) -> Bool {
        var low = 0, high = gids.count
        while low < high {
            let mid = (low + high) / 2
            if gids[mid] < gid { low = mid + 1 } else { high = mid }
        }
        return low < gids.count && gids[low] == gid
    }

    package var description: String { "uid \(uid) gids \(gids.map(String.init).joined(separator: ","))" }
}
