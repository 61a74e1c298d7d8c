// `limit` lines (PROTOCOL.md "Quotas (1.1)": "`limit` lines in the policy
// file change a uid's limits") and the per-uid overrides they give one
// identity.
//
// Before editing: this file only says which override applies; the broker owns
// the defaults and the counting. Resource names are part of the file format
// (docs/POLICY.md), so renaming one breaks installed files.

/// A per-uid budget a `limit` line can change (the "per uid" column of
/// PROTOCOL.md's quota table).
package enum LimitResource: String, CaseIterable, Hashable, Sendable {
    /// Open connections of the uid (default 256).
    case connections
    /// Subscriptions over all the uid's connections (default 16384).
    case subscriptions
    /// Bytes of incomplete incoming frames over the uid's connections (default 16 MiB).
    case inbound
    /// Bytes in the uid's outbound queues, events and replies (default 64 MiB).
    case outbound
    /// Bytes of retained events the uid published (default 1/8 of the total).
    case retained

    /// Whether values count bytes (`--check-policy` writes those with K, M or
    /// G; every resource accepts the suffixes).
    package var isBytes: Bool { self == .inbound || self == .outbound || self == .retained }
}

/// A limit value: a number (count or bytes) or `unlimited`.
package enum LimitValue: Hashable, Sendable, CustomStringConvertible {
    case value(Int)
    case unlimited

    /// Orders values by how much they allow: `unlimited` is the largest.
    func isStricter(than other: LimitValue) -> Bool {
        switch (self, other) {
        case let (.value(a), .value(b)): a < b
        case (.value, .unlimited): true
        case (.unlimited, _): false
        }
    }

    /// As written back by `--check-policy`: `1024`, `16M`, `unlimited`.
    package var description: String {
        guard case .value(let n) = self else { return "unlimited" }
        for (suffix, shift) in [("G", 30), ("M", 20), ("K", 10)] where n >= 1 << shift && n % (1 << shift) == 0 {
            return "\(n >> shift)\(suffix)"
        }
        return String(n)
    }
}

/// One `limit RESOURCE VALUE [user=U] [group=G]` line, names resolved.
/// Example: `limit connections 1024 user=eventbus-bridge`.
package struct PolicyLimit: Hashable, Sendable {
    package var resource: LimitResource
    /// A count (`connections`, `subscriptions`) or bytes (the others).
    package var value: LimitValue
    /// `user=` and `group=`, resolved; the names as written when they were names.
    package var uid: UInt32?
    package var gid: UInt32?
    package var userName: String?
    package var groupName: String?
    /// The file:line of the `limit` line.
    package var origin: PolicyOrigin

    package init(resource: LimitResource, value: LimitValue, uid: UInt32? = nil, gid: UInt32? = nil,
                userName: String? = nil, groupName: String? = nil, origin: PolicyOrigin) {
        self.resource = resource
        self.value = value
        self.uid = uid
        self.gid = gid
        self.userName = userName
        self.groupName = groupName
        self.origin = origin
    }

    var level: PolicyLevel { uid != nil ? .user : gid != nil ? .group : .everyone }

    func applies(to identity: PolicyIdentity) -> Bool {
        if let uid, uid != identity.uid { return false }
        if let gid, !identity.isMember(of: gid) { return false }
        return true
    }
}

/// The overrides that apply to one identity: for each resource, the value of
/// the deciding `limit` line, or nil where the broker's default stands.
///
/// Which line decides: as for rules, a line naming `user` beats one naming
/// `group`, which beats one naming neither; among lines of the same level the
/// smallest value wins (as `deny` beats `allow`: file order never matters).
/// uid 0 and the broker's own uid have no per-uid limit (PROTOCOL.md
/// "Quotas"), so for them only lines naming their `user` apply.
package struct PerUIDLimits: Hashable, Sendable {
    var overrides: [LimitResource: PolicyLimit] = [:]

    package init() {}

    /// The deciding line for `resource`, nil when none applies.
    package subscript(resource: LimitResource) -> PolicyLimit? { overrides[resource] }

    /// Whether no line applies at all.
    package var isEmpty: Bool { overrides.isEmpty }

    /// - Parameters:
    ///   - limits: every `limit` line of the policy.
    ///   - identity: the connection's identity.
    ///   - exempt: uid 0 or the broker's own uid (only `user=` lines apply).
    init(limits: [PolicyLimit], identity: PolicyIdentity, exempt: Bool) {
        for line in limits where line.applies(to: identity) {
            if exempt && line.level != .user { continue }
            guard let current = overrides[line.resource] else {
                overrides[line.resource] = line
                continue
            }
            if line.level > current.level || (line.level == current.level && line.value.isStricter(than: current.value)) {
                overrides[line.resource] = line
            }
        }
    }
}
