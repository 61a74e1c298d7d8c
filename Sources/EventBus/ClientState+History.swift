// The client state's side of retained events and history (PROTOCOL.md
// "Retained events and history (1.1)"): where this process has got to in
// the broker's sequence, so that a reconnect resubscribes each pattern with
// `since` and nothing the history still holds is lost; the `gap` frames
// that say what it no longer holds; the retained events that answer a
// subscribe with `last` (`initial: .last`, `current(_:)`); and removing
// every registration of one observer.
//
// Before editing: the position and `since` are the session's
// (EventBusSession's StreamPosition.swift states the rule); this file only
// says who receives what: retained events, gaps, `current(_:)` answers.
@_spi(Package) import EventBusProtocol
import EventBusSession

/// Who receives the retained events following an `ok`.
enum RetainedTarget {
    /// Registrations made with `initial: .last`.
    case sinks([any EventSink])
    /// A `current(_:)` request (by its subscribe's `req`).
    case current(Int64)
}

extension ClientState {
    /// Subscribes `pattern` at the broker (a new connection, or its first
    /// registration, or one with `initial: .last`): with `since` where the
    /// session's position covers it, with `last` for registrations still
    /// waiting for their initial value. The library's one `subscribe`.
    mutating func subscribeAtBroker(_ pattern: String) {
        guard let entry = patterns[pattern] else { return }
        let waiting = Array(entry.waitingInitial.keys)
        session.subscribe(pattern, last: !waiting.isEmpty, tag: waiting.isEmpty ? nil : .initial(waiting))
    }

    /// A retained event (it follows the `ok` of a subscribe with `last`).
    mutating func routeRetained(_ event: RawEvent, _ step: inout Step) {
        switch retainedTarget {
        case .sinks(let sinks)?:
            if !sinks.isEmpty { step.effects.append(.deliver(event, sinks)) }
        case .current(let req)?:
            retainedTarget = nil
            if let completion = currentWaiting.removeValue(forKey: req) {
                step.effects.append(.completeCurrent(completion, .success(event)))
            }
        case nil:
            break
        }
    }

    /// The answer to a subscribe with `last` for registrations `ids`: they
    /// join the pattern's receivers now, and get the `retained` events that follow.
    mutating func initialAnswered(_ text: String, _ ids: [UInt64], retained: UInt64, _ step: inout Step) {
        var joined: [any EventSink] = []
        for id in ids {
            guard let sink = patterns[text]?.waitingInitial.removeValue(forKey: id) else { continue }
            patterns[text]?.sinks[id] = sink
            joined.append(sink)
        }
        if retained > 0 { retainedTarget = .sinks(joined) }
    }

    /// The answer to the subscribe of a `current(_:)` request `req`.
    mutating func currentAnswered(_ req: Int64, _ completion: @escaping Completion<RawEvent?>, retained: UInt64, _ step: inout Step) {
        if retained == 0 {
            step.effects.append(.completeCurrent(completion, .success(nil)))
        } else {
            currentWaiting[req] = completion
            retainedTarget = .current(req)
        }
    }

    /// A `gap` frame: posted once per connection, and attached to the next
    /// event of each registration on the pattern.
    mutating func reportGap(_ frame: SessionGap, _ step: inout Step) {
        let gap = frame.busGap
        if let entry = patterns[frame.pattern], !entry.sinks.isEmpty { step.effects.append(.markGap(Array(entry.sinks.values), gap)) }
        if frame.firstOnConnection { step.effects.append(.notice(.gap(gap))) }
    }

    /// Fails every `current(_:)` still waiting for its retained event.
    mutating func failCurrent(_ error: EventBusError, _ step: inout Step) {
        for req in currentWaiting.keys.sorted() {
            step.effects.append(.completeCurrent(currentWaiting[req]!, .failure(error)))
        }
        currentWaiting = [:]
        retainedTarget = nil
    }

    /// `current(_:)`: a subscribe with `last` (and, unless the pattern is
    /// subscribed already, the unsubscribe right after it), then a `ping`
    /// whose answer means "nothing retained" if the event did not come first.
    mutating func current(_ pattern: Pattern, _ completion: @escaping Completion<RawEvent?>) -> Step {
        var step = Step()
        if let error = notConnected {
            step.effects.append(.completeCurrent(completion, .failure(error)))
            return step
        }
        let req = session.send(.subscribe(pattern: pattern.text, last: true), tag: .current(completion))
        if !subscribed.contains(pattern.text) {
            session.send(.unsubscribe(pattern: pattern.text), tag: .currentUndo)
        }
        session.send(.ping, tag: .currentSentinel(req))
        flush(&step)
        return step
    }

    /// Ends every registration of the observer `id` (`EventBus.unsubscribe(_:)`),
    /// unsubscribing patterns left without any.
    mutating func removeRegistrations(of id: ObjectIdentifier) -> Step {
        var step = Step()
        var ids: [UInt64] = []
        for entry in patterns.values {
            for (key, sink) in entry.sinks where sink.observerID == id { ids.append(key) }
            for (key, sink) in entry.waitingInitial where sink.observerID == id { ids.append(key) }
        }
        for entry in keyed.values {
            for (key, sink) in entry.sinks where sink.observerID == id { ids.append(key) }
        }
        for key in ids.sorted() {
            let removed = remove(key)
            step.write += removed.write
            step.effects += removed.effects
        }
        return step
    }
}
