// One `PolicyView` per identity, shared by every connection with that uid and
// gid set, so a policy is compiled once per identity, not once per connection.
//
// Before editing: the cache is bounded; when full it starts over (connections
// keep their own reference to their view, so only sharing is lost, never a
// decision). A reload makes a new cache for the new policy.

/// Compiled views of one policy, by identity.
///
/// Example: `let view = cache.view(for: PolicyIdentity(uid: 1000, gid: 1000))`
/// at accept; keep it with the connection.
package final class PolicyViewCache {
    package let policy: AccessPolicy
    /// Views kept at most (distinct identities).
    package let capacity: Int
    private var views: [PolicyIdentity: PolicyView] = [:]

    /// - Parameters:
    ///   - policy: the policy in force; a reload makes a new cache.
    ///   - capacity: identities kept at most (1024).
    package init(policy: AccessPolicy, capacity: Int = 1024) {
        precondition(capacity > 0)
        self.policy = policy
        self.capacity = capacity
    }

    /// The view of `identity`: the shared one, or a new one.
    package func view(for identity: PolicyIdentity) -> PolicyView {
        if let view = views[identity] { return view }
        if views.count >= capacity { views.removeAll(keepingCapacity: true) }
        let view = PolicyView(policy: policy, identity: identity)
        views[identity] = view
        return view
    }

    /// Identities with a view in the cache now.
    package var count: Int { views.count }
}
