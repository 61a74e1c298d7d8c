// The broker's policy state (PROTOCOL.md "Access policy (1.1)"; docs/POLICY.md
// "How the broker applies it"): the policy in force with its per-identity
// views, its generation, the rate-limited denial log and the publish verdict
// that lets `mayPublish` skip the policy. Broker+Policy.swift asks and
// answers with it; the per-type publish verdicts of each view are kept with
// the types (`EventTypeTable.isAllowedPublisher`).
//
// Before editing: the invariants. `views` is the cache of the policy in
// force, and only `replace(with:)` changes it, together with the rest:
// `generation` is 1 for the policy loaded at start and grows by exactly one
// per swap; `denialLog` starts afresh with each policy (its keys are rule
// indexes of one policy); `publishIsOpen` is `PolicyState.publishIsOpen`
// of the policy in force, so it is true exactly while no publish can be denied.

import EventBusPolicy

/// The access policy in force and what the broker derives from it; held by
/// `Broker.policyState` and changed in place (invariants in this file's header).
struct PolicyState {
    /// The policy in force and its per-identity views.
    private(set) var views: PolicyViewCache
    /// `stats.policy_generation`: 1 for the policy loaded at start, +1 per reload.
    private(set) var generation: UInt64 = 1
    /// Denials are logged once per (uid, rule) per minute (`admitDenial`).
    private(set) var denialLog = DenialLogLimiter()
    /// The policy has no `publish` rule and no `default publish deny`: every
    /// publish is allowed but the reserved `eventbus.` types, which the
    /// decoder already refuses, so `mayPublish` need not ask.
    private(set) var publishIsOpen: Bool

    /// The state of the policy loaded at start (generation 1).
    init(policy: AccessPolicy) {
        views = PolicyViewCache(policy: policy)
        publishIsOpen = PolicyState.publishIsOpen(policy)
    }

    /// The policy in force.
    var policy: AccessPolicy { views.policy }

    /// Swaps in a reloaded policy: new views, the next generation, a fresh
    /// denial log, its publish verdict.
    mutating func replace(with policy: AccessPolicy) {
        views = PolicyViewCache(policy: policy)
        publishIsOpen = PolicyState.publishIsOpen(policy)
        generation += 1
        denialLog = DenialLogLimiter()  // verdict origins index the old policy
    }

    /// Whether a denial by rule `origin` of the policy in force may be
    /// logged for `uid` now (`DenialLogLimiter.admit`).
    mutating func admitDenial(uid: UInt32, origin: Int32, nowNanoseconds now: Int64) -> DenialLogLimiter.Decision {
        denialLog.admit(uid: uid, origin: origin, nowNanoseconds: now)
    }

    /// Whether `policy` allows every publish but the reserved types (no
    /// `publish` rule, no `default publish deny`). The reserved
    /// `eventbus.` types never reach `mayPublish`: `RequestDecoder` refuses
    /// them for `publish` and `clear` (PROTOCOL.md "Names and patterns").
    static func publishIsOpen(_ policy: AccessPolicy) -> Bool {
        !policy.rules.contains { $0.action == .publish } && policy.defaultVerdict(.publish).isAllowed
    }
}
