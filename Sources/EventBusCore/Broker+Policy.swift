// The access policy applied by the broker (PROTOCOL.md "Access policy
// (1.1)", "Bridged events (1.1)"; docs/POLICY.md "How the broker applies
// it"): the checks at connect, publish (and `clear`), subscribe and receive,
// the `bridge` right that `origin` needs, a reload that swaps the policy and
// revokes the subscriptions it now forbids, the broker's own
// `eventbus.policy.*` events, and the rate-limited denial log.
//
// Before editing: the decisions are EventBusPolicy's (`PolicyView`, compiled
// once per identity); this file only asks and answers. Other ops call the
// four `may…` functions and nothing else. Routing asks nothing per event: a
// connection's `filteredCount` tells `SubscriptionIndex.buildMatches` whether
// to check it when a type's route list is built, so every path that changes a
// subscription's filtered mark goes through `setFiltered`, and a policy swap
// empties the route cache.
import EventBusPolicy
@_spi(Package) import EventBusProtocol

/// What `Broker.maySubscribe` allows.
struct SubscribePermission {
    /// Some of the pattern's types are denied: add it marked filtered and
    /// answer `filtered: true`.
    let filtered: Bool
}

extension Broker {
    /// The access policy in force.
    package var policy: AccessPolicy { policyState.policy }

    /// The broker's own event announcing a reload, e.g.
    /// `{"op":"event",...,"type":"eventbus.policy.reloaded",...,"data":{"generation":3,"files":["/etc/eventbus/policy.conf"]}}`.
    package static let policyReloadedType = EventType("eventbus.policy.reloaded")!
    /// The broker's own event announcing a refused reload, e.g. `"data":{"generation":2,"error":"/etc/eventbus/policy.conf:4: unknown action \"publsh\" ..."}`.
    package static let policyRefusedType = EventType("eventbus.policy.refused")!

    // MARK: Checks for the ops

    /// Whether `connection` may publish (or `clear`, PROTOCOL.md "Requests")
    /// an event of `type`. Call it before taking a `seq`. When it may not,
    /// this has already answered `forbidden` (with `req`; the message names
    /// the rule's file:line) and logged the denial (once per uid and rule per
    /// minute): just return.
    ///
    /// Example: uid 1000 under the shipped policy, `type` `system.reboot`:
    /// false, and the connection got
    /// `{"op":"error","req":7,"code":"forbidden","message":"publish system.reboot denied for uid 1000 by /usr/share/eventbus/policy.conf:22"}`.
    @inline(__always)
    func mayPublish(_ connection: Connection, _ type: EventType, req: RawSpan?) -> Bool {
        if policyState.publishIsOpen { return true }
        let verdict = connection.policy.publish(type)
        if verdict.isAllowed { return true }
        deny(connection, .publish, type.name, verdict, req: req)
        return false
    }

    /// Whether `connection` has the `bridge` right, which a `publish` with
    /// `origin` needs (PROTOCOL.md "Bridged events"). Without a policy file
    /// only uid 0 and the broker's own uid have it. When it has not, this has
    /// answered `forbidden` and logged the denial, as `mayPublish` does.
    func mayBridge(_ connection: Connection, req: RawSpan?) -> Bool {
        let verdict = connection.policy.bridge
        if verdict.isAllowed { return true }
        deny(connection, .bridge, nil, verdict, req: req, note: " (publish with origin needs the bridge right)")
        return false
    }

    /// Whether `connection` may receive an event of `type`: for events that
    /// do not come through routing (retained events after `last: true`,
    /// history replays after `since`). Silent: an event it may not receive
    /// is simply not sent. Live routing does not need it (the route cache is
    /// built with the policy applied).
    @inline(__always)
    func mayReceive(_ connection: Connection, _ type: EventType) -> Bool {
        connection.policy.receive(type).isAllowed
    }

    /// Whether `connection` may subscribe to `pattern` (a pattern it does
    /// not have yet). nil: every type the pattern matches is denied, and this
    /// has answered `forbidden` and logged the denial; otherwise add the
    /// subscription with the permission's `filtered` mark.
    func maySubscribe(_ connection: Connection, _ pattern: Pattern, req: RawSpan?) -> SubscribePermission? {
        let decision = connection.policy.subscribe(pattern)
        guard case .forbidden(let verdict) = decision else { return SubscribePermission(filtered: decision == .filtered) }
        deny(connection, .subscribe, pattern.text, verdict, req: req)
        return nil
    }

    /// (1.3) Whether `connection` may make a serving subscription of
    /// `pattern` (PROTOCOL.md "Request/reply": `subscribe` and `serve` both
    /// needed). nil: refused, and this has answered `forbidden` (naming the
    /// rule) and logged the denial, as `maySubscribe` does.
    func mayServe(_ connection: Connection, _ pattern: Pattern, req: RawSpan?) -> SubscribePermission? {
        let decision = connection.policy.serve(pattern)
        guard case .forbidden(let verdict) = decision else { return SubscribePermission(filtered: decision == .filtered) }
        let action: PolicyAction = connection.policy.subscribe(pattern).isForbidden ? .subscribe : .serve
        deny(connection, action, pattern.text, verdict, req: req)
        return nil
    }

    /// Sets a subscription's filtered mark and the connection's count of them
    /// (the only place that changes either).
    func setFiltered(_ subscription: Subscription, _ filtered: Bool, on connection: Connection) {
        guard subscription.isFiltered != filtered else { return }
        subscription.isFiltered = filtered
        connection.session.countFiltered(filtered, serving: subscription.serves)
    }

    /// The refusal of a connection whose identity may not `connect`, or nil.
    func connectRefusal(_ credentials: Credentials, _ view: PolicyView) -> RefusedConnection? {
        let verdict = view.connect
        guard !verdict.isAllowed else { return nil }
        let message = view.denialMessage(.connect, nil, verdict)
        var bytes: [UInt8] = []
        FrameEncoder.appendError(req: nil, ProtocolError(.forbidden, message), to: &bytes)
        let line = denialLogLine(uid: credentials.uid, pid: credentials.pid, connection: nil, client: nil, verdict: verdict, message: message)
        return RefusedConnection(frame: bytes, logLine: line, forbidden: true)
    }

    /// Answers `forbidden` and logs the denial (rate-limited).
    func deny(_ connection: Connection, _ action: PolicyAction, _ target: String?, _ verdict: PolicyVerdict,
                      req: RawSpan?, note: String = "") {
        let message = connection.policy.denialMessage(action, target, verdict) + note
        reply(to: connection, req: req, error: ProtocolError(.forbidden, message))
        let credentials = connection.credentials
        if let line = denialLogLine(uid: credentials.uid, pid: credentials.pid, connection: connection.id,
                                    client: connection.clientName, verdict: verdict, message: message) {
            notice(.denied(connection.id, pid: credentials.pid, uid: credentials.uid, line: line))
        }
    }

    /// The log line of a denial, or nil when `DenialLogLimiter` holds it back
    /// (one line per uid and rule per minute). Example:
    /// `publish system.reboot denied for uid 1000 by /usr/share/eventbus/policy.conf:22 (pid 4242, connection 7, client "dashboard")`.
    private func denialLogLine(uid: UInt32, pid: Int32, connection: ConnectionID?, client: String?, verdict: PolicyVerdict, message: String) -> String? {
        let who = "pid \(pid)" + (connection.map { ", connection \(Broker.publicConnectionID($0))" } ?? "") + (client.map { ", client \"\($0)\"" } ?? "")
        switch policyState.admitDenial(uid: uid, origin: verdict.origin, nowNanoseconds: now.monotonicNanoseconds) {
        case .suppress:
            return nil
        case .log(let suppressed):
            let more = suppressed > 0 ? "; \(suppressed) more by this rule for this uid since its last line" : ""
            return "\(message) (\(who))\(more)"
        case .logOverflow(let count):
            return "\(count) denials of too many different uids and rules in a minute to log each; the latest: \(message) (\(who))"
        }
    }

    // MARK: Reload

    /// A reload's decision applied to one subscription of `connection`, plain
    /// or serving (`serve`): its filtered mark set, or, when forbidden, the
    /// subscription removed and the connection told (if routable) with the
    /// revocation frame, `denial(verdict)` its message.
    /// - Returns: whether the subscription was removed.
    private func judgeAgain(_ subscription: Subscription, _ pattern: Pattern, _ decision: SubscribeDecision, serve: Bool, on connection: Connection,
                            _ denial: (PolicyVerdict) -> String) -> Bool {
        switch decision {
        case .allowed:
            setFiltered(subscription, false, on: connection)
            return false
        case .filtered:
            setFiltered(subscription, true, on: connection)
            return false
        case .forbidden(let verdict):
            if serve { removeServing(pattern, from: connection) } else { removeSubscription(pattern, from: connection) }
            guard connection.isRoutable else { return true }
            let what = serve ? "serving subscription" : "subscription"
            let message = denial(verdict) + "; \(what) removed by the policy reload (generation \(policyState.generation))"
            writer.writeReply { out in FrameEncoder.appendRevocation(pattern: pattern.text, serve: serve, message: message, to: &out) }
            enqueue(bytes: writer.scratch, to: connection)
            return true
        }
    }

    /// Swaps in a new policy (SIGHUP, once every file was read and parsed;
    /// PROTOCOL.md "Access policy (1.1)", reload): `policyState.generation` + 1;
    /// every connection gets the view of the new policy; each subscription is
    /// judged again: one now forbidden is removed and its connection told
    /// `{"op":"error","code":"forbidden","type":"secret.>","message":"..."}`
    /// (no `req`; the connection stays open), the others get their filtered
    /// mark recomputed; the route cache is emptied; and
    /// `eventbus.policy.reloaded` is published. A half-closed connection left
    /// without subscriptions is closed once its queue is written.
    /// Cost: one `PolicyView.subscribe` per distinct (identity, pattern).
    /// - Returns: output for the revocations and the event, closes, and a
    ///   `.policyReloaded` notice.
    package func reloadPolicy(_ policy: AccessPolicy, at time: BrokerTime) -> BrokerStep {
        now = time
        policyState.replace(with: policy)  // the views, the generation, the denial log, the publish verdict
        var decisions: [DecisionKey: SubscribeDecision] = [:]
        var revoked = 0
        for connection in connections.values.sorted(by: { $0.id < $1.id }) where !connection.isClosed {
            let view = policyState.views.view(for: connection.credentials.policyIdentity)
            connection.session.setPolicy(view)
            for (pattern, subscription) in connection.subscriptions.sorted(by: { $0.key.text < $1.key.text }) {
                let key = DecisionKey(view: ObjectIdentifier(view), pattern: pattern)
                let decision = decisions[key] ?? view.subscribe(pattern)
                decisions[key] = decision
                if judgeAgain(subscription, pattern, decision, serve: false, on: connection, { view.denialMessage(.subscribe, pattern.text, $0) }) {
                    revoked += 1
                }
            }
            // (1.3) Serving subscriptions: `subscribe` and `serve` judged again;
            // (issue 36) a fallback one also needs the bridge right still.
            for (pattern, subscription) in connection.servings.sorted(by: { $0.key.text < $1.key.text }) {
                var decision = view.serve(pattern)
                let bridgeRevoked = connection.fallbackServings.contains(pattern) && !view.bridge.isAllowed
                if bridgeRevoked { decision = .forbidden(view.bridge) }
                let revokedServing = judgeAgain(subscription, pattern, decision, serve: true, on: connection) { verdict in
                    let action: PolicyAction = bridgeRevoked ? .bridge : view.subscribe(pattern).isForbidden ? .subscribe : .serve
                    return view.denialMessage(action, pattern.text, verdict)
                }
                if revokedServing { revoked += 1 }
            }
            revoked += judgeGroupsAgain(of: connection, view)  // (1.3) Broker+Groups.swift
            // (issue 36) Watches of the serving patterns need the bridge right.
            if !connection.serverWatches.isEmpty && !view.bridge.isAllowed { forgetServerWatches(of: connection, tell: true) }
            if connection.inputClosed && connection.isIdleAfterInput { closeWhenFlushed(connection) }
        }
        index.removeAllCached()
        serveIndex.removeAllCached()
        fallbackIndex.removeAllCached()
        refreshLimits()
        notice(.policyReloaded(generation: policyState.generation, revokedSubscriptions: revoked))
        var data: [UInt8] = []
        FrameEncoder.appendASCII("{\"generation\":", to: &data)
        FrameEncoder.appendInt(policyState.generation, to: &data)
        FrameEncoder.appendASCII(",\"files\":[", to: &data)
        for (i, path) in policy.paths.enumerated() {
            if i > 0 { data.append(0x2C) }
            JSONString.appendQuoted(path, to: &data)
        }
        FrameEncoder.appendASCII("]}", to: &data)
        publishBrokerEvent(Broker.policyReloadedType, data: data)
        return finishStep()
    }

    /// Announces a reload that was refused (a file was unreadable or
    /// invalid; the policy in force stays, PROTOCOL.md "Access policy
    /// (1.1)"): publishes `eventbus.policy.refused` with the generation still
    /// in force and the reason, so `eventbus reload --wait` can report it.
    /// - Parameter reason: every error, `file:line: message`, one per line.
    package func refusePolicyReload(_ reason: String, at time: BrokerTime) -> BrokerStep {
        now = time
        var data: [UInt8] = []
        FrameEncoder.appendASCII("{\"generation\":", to: &data)
        FrameEncoder.appendInt(policyState.generation, to: &data)
        FrameEncoder.appendASCII(",\"error\":", to: &data)
        JSONString.appendQuoted(reason, to: &data)
        data.append(0x7D)
        publishBrokerEvent(Broker.policyRefusedType, data: data)
        return finishStep()
    }

    /// Routes one of the broker's own events (PROTOCOL.md "Names and
    /// patterns": `eventbus.` types are the broker's): it takes a `seq`, is
    /// counted in `published`, carries the broker's pid/uid/gid and `source`
    /// `eventbusd`, and reaches the subscribers the policy lets receive it.
    /// - Parameter data: one valid JSON value.
    func publishBrokerEvent(_ type: EventType, data: [UInt8]) {
        seq += 1
        let seq = self.seq
        statistics.published += 1
        _ = fanOut(seq: seq, type: type, publisher: nil) {
            writer.brokerEvent(seq: seq, type: type, data: data, source: configuration.serverName, instance: instance,
                               credentials: configuration.ownCredentials, wallNanoseconds: now.wallNanoseconds, history: &retention.history)
        }
        if groupsInUse != 0 { _ = routeToGroups(seq: seq, type: type, entry: nil, publisher: nil, keyHash: nil) }  // (1.3)
    }
}

/// One subscribe decision of a reload, shared by the connections of one identity.
private struct DecisionKey: Hashable {
    let view: ObjectIdentifier
    let pattern: Pattern
}
