// (1.3) The client state's serving and group registrations (PROTOCOL.md
// "Request/reply", "Queue groups"): kept by their `SubscriptionKey` (pattern,
// `serve`, `group`), one broker subscription per key however many local
// registrations share it, as plain ones are kept by pattern
// (ClientState+Registrations.swift).
//
// Before editing: a key is subscribed at the broker exactly while it has a
// registration in `sinks` and the link is up. A group registration that
// leaves (`leave`) as its key's last stays a receiver until the broker's `ok`
// to the unsubscribe, which comes after every event queued to this member:
// then it ends without discarding, so its handler gets its whole share.
// Requests go to one serving registration of their key, in turn.
@_spi(Package) import EventBusProtocol
import EventBusSession

/// (1.3) The registrations of one serving or group subscription.
struct KeyedEntry {
    let key: SubscriptionKey
    let pattern: Pattern
    /// Registrations that receive its events (group) or requests (serving).
    var sinks: [UInt64: any Registration] = [:]
    /// Group registrations that left as the key's last: receivers until the
    /// unsubscribe's `ok`, then ended; with what to call then.
    var leaving: [UInt64: (sink: any Registration, done: @Sendable () -> Void)] = [:]
    /// The registration that took the last request (requests go round in id order).
    var lastServed: UInt64 = 0

    var isEmpty: Bool { sinks.isEmpty && leaving.isEmpty }
}

extension ClientState {
    /// Adds a serving or group registration on `key`; subscribes at the
    /// broker when it is the key's first and the link is up.
    mutating func add(_ sink: any Registration, on key: SubscriptionKey, pattern: Pattern) -> (UInt64, Step) {
        var step = Step()
        let (id, open) = newRegistration(sink, &step)
        guard open else { return (id, step) }
        keyOfRegistration[id] = key
        let first = keyed[key]?.sinks.isEmpty ?? true
        keyed[key, default: KeyedEntry(key: key, pattern: pattern)].sinks[id] = sink
        if first && isConnected && !session.isSubscribed(key) {
            session.subscribe(key)
            flush(&step)
        }
        return (id, step)
    }

    /// Removes keyed registration `id` at once (cancel, observer gone).
    mutating func removeKeyed(_ id: UInt64, _ step: inout Step) {
        guard let key = keyOfRegistration.removeValue(forKey: id) else { return }
        if let sink = keyed[key]?.sinks.removeValue(forKey: id) ?? keyed[key]?.leaving.removeValue(forKey: id)?.sink {
            step.effects.append(.finish([sink], nil, discardQueued: true))
        }
        unsubscribeKeyedIfUnused(key, &step)
    }

    /// A group registration leaves: when it is its key's last, the broker is
    /// asked to take the member out and the registration keeps receiving
    /// until that `ok` (its whole share), then ends and `done` is called;
    /// otherwise (others share the key, or no connection) it ends at once,
    /// keeping what it had queued.
    mutating func leave(_ id: UInt64, done: @escaping @Sendable () -> Void) -> Step {
        var step = Step()
        guard let key = keyOfRegistration[id], let sink = keyed[key]?.sinks[id] else {
            // Not a keyed registration (or gone): as `cancel()`.
            step = remove(id)
            step.effects.append(.call(done))
            return step
        }
        keyed[key]?.sinks[id] = nil
        if keyed[key]?.sinks.isEmpty == true, isConnected, session.isSubscribed(key) {
            keyed[key]?.leaving[id] = (sink, done)
            session.unsubscribe(key)
            flush(&step)
            return step
        }
        keyOfRegistration[id] = nil
        step.effects.append(.finish([sink], nil, discardQueued: false))
        step.effects.append(.call(done))
        unsubscribeKeyedIfUnused(key, &step)
        return step
    }

    /// The broker answered the unsubscribe of `key`: its leaving registrations end now.
    mutating func left(_ key: SubscriptionKey, _ step: inout Step) {
        guard let leaving = keyed[key]?.leaving, !leaving.isEmpty else { return }
        keyed[key]?.leaving = [:]
        finishLeaving(leaving, &step)
        if keyed[key]?.isEmpty == true { keyed[key] = nil }
        // Joined again meanwhile: subscribe again (the ok above took the old
        // member out), from the writer queue (the reader does not write).
        if let entry = keyed[key], !entry.sinks.isEmpty {
            step.effects.append(.deferred { $0.rejoin(key) })
        }
    }

    /// Subscribes `key` again when it has registrations and is not subscribed.
    mutating func rejoin(_ key: SubscriptionKey) -> Step {
        var step = Step()
        if let entry = keyed[key], !entry.sinks.isEmpty, isConnected, !session.isSubscribed(key) {
            session.subscribe(key)
            flush(&step)
        }
        return step
    }

    private mutating func finishLeaving(_ leaving: [UInt64: (sink: any Registration, done: @Sendable () -> Void)], _ step: inout Step) {
        for (id, entry) in leaving.sorted(by: { $0.key < $1.key }) {
            keyOfRegistration[id] = nil
            step.effects.append(.finish([entry.sink], nil, discardQueued: false))
            step.effects.append(.call(entry.done))
        }
    }

    private mutating func unsubscribeKeyedIfUnused(_ key: SubscriptionKey, _ step: inout Step) {
        guard let entry = keyed[key], entry.sinks.isEmpty else { return }
        if entry.leaving.isEmpty { keyed[key] = nil }
        session.unsubscribe(key)
        flush(&step)
    }

    /// The connection was lost: a leave waiting for its `ok` is over (the
    /// broker took the member out with the connection).
    mutating func keyedConnectionLost(_ step: inout Step) {
        for key in keyed.keys.sorted() {
            guard let leaving = keyed[key]?.leaving, !leaving.isEmpty else { continue }
            keyed[key]?.leaving = [:]
            finishLeaving(leaving, &step)
            if keyed[key]?.isEmpty == true { keyed[key] = nil }
        }
    }

    /// A new connection: every key with registrations is subscribed again
    /// (serving and group subscriptions never replay); a leave that was
    /// waiting for its `ok` is over (the old connection took the member out).
    mutating func resubscribeKeyed(_ step: inout Step) {
        for key in keyed.keys.sorted() {
            if let leaving = keyed[key]?.leaving, !leaving.isEmpty {
                keyed[key]?.leaving = [:]
                finishLeaving(leaving, &step)
            }
            guard let entry = keyed[key] else { continue }
            if entry.sinks.isEmpty { keyed[key] = nil; continue }
            session.subscribe(key)
        }
    }

    /// The broker refused to subscribe `key`: its registrations end.
    mutating func refuseKeyed(_ key: SubscriptionKey, _ error: EventBusError, _ step: inout Step) {
        guard let entry = keyed.removeValue(forKey: key) else { return }
        for id in entry.sinks.keys { keyOfRegistration[id] = nil }
        step.effects.append(.finish(Array(entry.sinks.values), error, discardQueued: false))
        finishLeaving(entry.leaving, &step)
        step.effects.append(.notice(.subscriptionRefused(pattern: key.description, error)))
    }

    /// Every keyed registration and leave, for `close`.
    mutating func takeAllKeyed(_ step: inout Step) -> [any Registration] {
        var sinks: [any Registration] = []
        for entry in keyed.values {
            sinks += entry.sinks.values
            for (_, leaving) in entry.leaving { sinks.append(leaving.sink); step.effects.append(.call(leaving.done)) }
        }
        keyed = [:]
        keyOfRegistration = [:]
        return sinks
    }

    /// Removes keyed registrations whose observer is gone.
    mutating func sweepKeyed(_ step: inout Step) {
        for (key, entry) in keyed {
            let gone = entry.sinks.filter { !$0.value.isAlive }
            guard !gone.isEmpty else { continue }
            for id in gone.keys {
                keyed[key]?.sinks[id] = nil
                keyOfRegistration[id] = nil
            }
            step.effects.append(.finish(Array(gone.values), nil, discardQueued: true))
            unsubscribeKeyedIfUnused(key, &step)
        }
    }

    var hasDeadKeyed: Bool { keyed.values.contains { $0.sinks.values.contains { !$0.isAlive } } }

    /// The group registrations whose pattern matches `type` (leaving ones too, until their `ok`).
    func groupSinks(matching type: EventType) -> [any EventSink] {
        var result: [any EventSink] = []
        for entry in keyed.values where entry.key.group != nil && !entry.key.serve && entry.pattern.matches(type) {
            for sink in entry.sinks.values { if let sink = sink as? any EventSink { result.append(sink) } }
            for leaving in entry.leaving.values { if let sink = leaving.sink as? any EventSink { result.append(sink) } }
        }
        return result
    }

    /// A request for our serving subscriptions: to one serving registration
    /// of a matching key, in turn; none left: answered at once with an error.
    mutating func routeRequest(_ fields: RequestFields, in frame: RawSpan, _ step: inout Step) {
        let request = IncomingRequest(event: RawEvent(fields.event, in: frame), token: JSONString.decode(frame, fields.token))
        guard let type = EventType(request.event.metadata.type) else { return }
        for key in keyed.keys.sorted() where key.serve {
            guard var entry = keyed[key], entry.pattern.matches(type) else { continue }
            let alive = entry.sinks.filter { $0.value.isAlive }.keys.sorted()
            guard let chosen = alive.first(where: { $0 > entry.lastServed }) ?? alive.first,
                  let sink = entry.sinks[chosen] as? RequestSink else { continue }
            entry.lastServed = chosen
            keyed[key] = entry
            step.effects.append(.serve(sink, request))
            return
        }
        let token = request.token, message = "no server of \(request.event.metadata.type) is left in this process"
        step.effects.append(.deferred { $0.reply(to: token, data: nil, error: message) })  // the reader does not write
    }

    /// Sends the reply to the request with `token` (its `ok` is not waited for).
    mutating func answer(_ token: String, data: JSONText?, error: String?, _ step: inout Step) {
        guard isConnected else { return }  // the token was good on the lost connection only
        session.send(.reply(to: token, data: data, error: error), tag: .replied)
        flush(&step)
    }

    /// Answers a request from a handler (after it returned or threw).
    mutating func reply(to token: String, data: JSONText?, error: String?) -> Step {
        var step = Step()
        answer(token, data: data, error: error, &step)
        return step
    }

    /// Starts a `request` (1.3); fails at once when not connected. The answer
    /// comes whenever the reply is known (`RequestAnswer` reads it).
    mutating func ask(_ request: ClientRequest, _ completion: @escaping Completion<Reply>) -> Step {
        var step = Step()
        if let error = notConnected {
            step.effects.append(.reply(completion, .failure(error)))
            return step
        }
        session.send(request, tag: .ask(completion))
        flush(&step)
        return step
    }
}
