// The policy as one identity sees it (uid and gid set): its rules picked and
// `%u` expanded once, compiled into one automaton per pattern action, the
// pattern-less decisions and the per-uid limits computed up front. Shared by
// every connection with that identity (`PolicyViewCache`).
//
// Before editing: a view is immutable; a policy reload makes new views. The
// broker's per-event calls are `publish(_:)` and `receive(_:)`; keep them free
// of allocation (see the benchmark in Benchmarks/eventbus-policy-bench).
@_spi(Package) import EventBusProtocol

/// The answer to `subscribe` (PROTOCOL.md "Access policy (1.1)").
package enum SubscribeDecision: Hashable, Sendable {
    /// Every type the pattern matches may be received.
    case allowed
    /// Some may, some may not: add the subscription, answer `filtered: true`,
    /// and check `receive(_:)` for each type before delivering on it.
    case filtered
    /// Every type the pattern matches is denied: answer `forbidden`, add nothing.
    /// The verdict names a deciding rule (that of the shortest denied type).
    case forbidden(PolicyVerdict)
}

extension SubscribeDecision {
    /// Whether every type is denied.
    package var isForbidden: Bool {
        if case .forbidden = self { return true }
        return false
    }
}

/// One identity's compiled policy.
///
/// Example (shipped policy, uid 1000):
/// ```
/// view.connect.isAllowed                                 // true
/// view.publish(EventType("system.reboot")!).isAllowed    // false: config/policy.conf
/// view.subscribe(Pattern(">")!)                          // .filtered (user.1.x is not for uid 1000)
/// view.receive(EventType("user.1000.note")!).isAllowed   // true
/// ```
package final class PolicyView: Sendable {
    package let identity: PolicyIdentity
    package let policy: AccessPolicy
    /// May this identity connect? Denied: send `forbidden` and close.
    package let connect: PolicyVerdict
    /// May this identity publish with `origin` (PROTOCOL.md "Bridged events")?
    package let bridge: PolicyVerdict
    /// The `limit` lines that apply to this identity.
    package let limits: PerUIDLimits
    /// (1.2) Whose publishers a connection of this identity may hold
    /// (PROTOCOL.md "Flow control": `allow hold` any uid's, `deny hold`
    /// nobody's, no rule its own uid's).
    package let hold: HoldRight

    let publishAutomaton: DecisionAutomaton
    let subscribeAutomaton: DecisionAutomaton
    /// (1.3) `serve` rules (PROTOCOL.md "Request/reply").
    let serveAutomaton: DecisionAutomaton

    /// Compiles the view; prefer `PolicyViewCache.view(for:)`, which shares it.
    package init(policy: AccessPolicy, identity: PolicyIdentity) {
        self.policy = policy
        self.identity = identity
        let uid = identity.uid
        limits = PerUIDLimits(limits: policy.limits, identity: identity, exempt: uid == 0 || uid == policy.brokerUID)
        let denied = PolicyVerdict(effect: .deny, origin: AccessPolicy.tooComplexOrigin)
        func compile(_ action: PolicyAction) -> DecisionAutomaton? {
            DecisionAutomaton(rules: policy.automatonRules(action, identity: identity, uid: uid),
                              fallback: policy.defaultVerdict(action), maxStates: AccessPolicy.maxAutomatonStates)
        }
        // `load` checked the automaton of all rules, which bounds this one;
        // failing closed here is for safety only.
        guard let publish = compile(.publish), let subscribe = compile(.subscribe), let serve = compile(.serve) else {
            let nothing = DecisionAutomaton(rules: [], fallback: denied, maxStates: 4)!
            publishAutomaton = nothing
            subscribeAutomaton = nothing
            serveAutomaton = nothing
            connect = denied
            bridge = denied
            hold = .none
            return
        }
        publishAutomaton = publish
        subscribeAutomaton = subscribe
        serveAutomaton = serve
        connect = policy.verdictWithoutPattern(.connect, for: identity) ?? policy.defaultVerdict(.connect)
        switch policy.verdictWithoutPattern(.hold, for: identity)?.effect {
        case nil: hold = .ownUID
        case .allow: hold = .anyUID
        case .deny: hold = .none
        }
        if let verdict = policy.verdictWithoutPattern(.bridge, for: identity) {
            bridge = verdict
        } else if policy.hasFiles {
            bridge = PolicyVerdict(effect: .deny, origin: AccessPolicy.bridgeNeedsRuleOrigin)
        } else {
            bridge = PolicyVerdict(effect: uid == 0 || uid == policy.brokerUID ? .allow : .deny, origin: AccessPolicy.noPolicyFileOrigin)
        }
    }

    // MARK: Per event

    /// May this identity publish `type`? Denied: `forbidden`, no `seq`.
    /// Cost: one dictionary lookup per segment until the rest cannot matter
    /// (one for a type outside every rule's literals).
    @inline(__always)
    package func publish(_ type: EventType) -> PolicyVerdict { publishAutomaton.verdict(type) }

    /// May this identity receive `type`, i.e. subscribe to exactly it? Only
    /// needed on `filtered` subscriptions.
    @inline(__always)
    package func receive(_ type: EventType) -> PolicyVerdict { subscribeAutomaton.verdict(type) }

    /// (1.3) May this identity be given requests of `type` on a serving
    /// subscription? Both `subscribe` and `serve` must allow it (PROTOCOL.md
    /// "Request/reply"); the verdict named is the first that denies.
    @inline(__always)
    package func serve(_ type: EventType) -> PolicyVerdict {
        let receive = subscribeAutomaton.verdict(type)
        return receive.isAllowed ? serveAutomaton.verdict(type) : receive
    }

    /// The one verdict every `publish` gets, when it does not depend on the type.
    package var constantPublishVerdict: PolicyVerdict? { publishAutomaton.constantVerdict }
    /// The one verdict every `receive` gets, when it does not depend on the type
    /// (then no subscription of this identity is ever `filtered`).
    package var constantReceiveVerdict: PolicyVerdict? { subscribeAutomaton.constantVerdict }

    // MARK: Per subscribe

    /// The answer to `subscribe` with `pattern`: exact over the valid types,
    /// so with only `allow subscribe foo.*` under `default subscribe deny`,
    /// `foo.>` is `.filtered` (delivers `foo.a`, never `foo.a.b`) and `bar.>`
    /// is `.forbidden`.
    package func subscribe(_ pattern: Pattern) -> SubscribeDecision {
        let outcome = subscribeAutomaton.outcomes(of: pattern)
        switch (outcome.allow, outcome.deny) {
        case (_, nil): return .allowed
        case (nil, let deny?): return .forbidden(PolicyVerdict(effect: .deny, origin: deny))
        case (_?, _?): return .filtered
        }
    }

    /// (1.3) The answer to `subscribe` with `pattern` and `serve: true`:
    /// `subscribe` and `serve` must both allow a type. Forbidden when either
    /// denies every type of the pattern (the verdict of the `serve` rules
    /// named when both do); filtered when either denies some. (Where each
    /// allows a different part and the parts do not meet, the subscription
    /// is added filtered and receives nothing: docs/PROTOCOL-NOTES.md.)
    package func serve(_ pattern: Pattern) -> SubscribeDecision {
        let asSubscriber = subscribe(pattern)
        let outcome = serveAutomaton.outcomes(of: pattern)
        let asServer: SubscribeDecision
        switch (outcome.allow, outcome.deny) {
        case (_, nil): asServer = .allowed
        case (nil, let deny?): asServer = .forbidden(PolicyVerdict(effect: .deny, origin: deny))
        case (_?, _?): asServer = .filtered
        }
        switch (asSubscriber, asServer) {
        case (_, .forbidden): return asServer
        case (.forbidden, _): return asSubscriber
        case (.allowed, .allowed): return .allowed
        default: return .filtered
        }
    }

    // MARK: Messages

    /// What a verdict's origin stands for.
    package func origin(of verdict: PolicyVerdict) -> PolicyOrigin { policy.origin(of: verdict) }

    /// The `message` of a `forbidden` error and the log line's text, naming the
    /// rule (PROTOCOL.md "Errors"). Example:
    /// `publish system.reboot denied for uid 1000 by /etc/eventbus/policy.conf:7`.
    /// - Parameters:
    ///   - action: what was refused.
    ///   - target: the type or pattern; nil for `connect` and `bridge`.
    package func denialMessage(_ action: PolicyAction, _ target: String?, _ verdict: PolicyVerdict) -> String {
        let what = target.map { "\(action) \($0)" } ?? "\(action)"
        return "\(what) denied for uid \(identity.uid) by \(policy.label(of: verdict))"
    }
}

/// Whose publishers a connection may hold back (PROTOCOL.md "Flow control (1.2)").
package enum HoldRight: Sendable, Equatable {
    /// No `hold` rule applies: publishers of its own uid.
    case ownUID
    /// `allow hold - ...`: publishers of every uid (a trusted consumer such as the bridge).
    case anyUID
    /// `deny hold - ...`: none; events that do not fit are dropped as under `drop-new`.
    case none
}
