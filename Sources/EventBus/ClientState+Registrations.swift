// The client state's registrations (ClientState.swift): adding and removing
// observers and streams on a pattern, sweeping those whose observer is gone,
// and finding the receivers of an event type.
//
// Before editing: a pattern is subscribed at the broker exactly while it has
// at least one registration (in `sinks` or `waitingInitial`) and the link is
// up; `unsubscribeIfUnused` is the one place that withdraws it (through the
// session, which sends the `unsubscribe` only when connected).
@_spi(Package) import EventBusProtocol
import EventBusSession

extension ClientState {
    /// Adds a local registration on `pattern`; subscribes at the broker when it
    /// is the pattern's first and the link is up (otherwise the next
    /// connection subscribes it).
    /// - Returns: the registration id (for `remove`) and the step. On a closed
    ///   bus the sink is ended at once.
    /// - Parameter initial: (1.1) first hand it the retained events of the
    ///   pattern (`initial: .last`): it waits for the answer to a subscribe
    ///   with `last`, sent now when connected, or on the next connection.
    mutating func add(_ sink: any EventSink, on pattern: Pattern, initial: Bool = false) -> (UInt64, Step) {
        var step = Step()
        let (id, open) = newRegistration(sink, &step)
        guard open else { return (id, step) }
        patternOfRegistration[id] = pattern.text
        if initial {
            patterns[pattern.text, default: PatternEntry(pattern: pattern)].waitingInitial[id] = sink
            if isConnected {
                subscribeAtBroker(pattern.text)
                flush(&step)
            }
            return (id, step)
        }
        patterns[pattern.text, default: PatternEntry(pattern: pattern)].sinks[id] = sink
        if isConnected && !subscribed.contains(pattern.text) {
            subscribeAtBroker(pattern.text)
            flush(&step)
        }
        return (id, step)
    }

    /// Removes registration `id` (cancel, stream ended); unsubscribes at the
    /// broker when it was its pattern's last.
    mutating func remove(_ id: UInt64) -> Step {
        var step = Step()
        if keyOfRegistration[id] != nil {
            removeKeyed(id, &step)
            return step
        }
        guard let text = patternOfRegistration.removeValue(forKey: id),
              let sink = patterns[text]?.sinks.removeValue(forKey: id) ?? patterns[text]?.waitingInitial.removeValue(forKey: id) else { return step }
        step.effects.append(.finish([sink], nil, discardQueued: true))
        unsubscribeIfUnused(text, &step)
        flush(&step)
        return step
    }

    /// Removes registrations whose observer was deallocated (observers are
    /// held weakly and may go away without cancelling).
    mutating func sweep() -> Step {
        var step = Step()
        var dead: [any EventSink] = []
        for (text, entry) in patterns {
            let gone = entry.sinks.filter { !$0.value.isAlive }.merging(entry.waitingInitial.filter { !$0.value.isAlive }) { a, _ in a }
            guard !gone.isEmpty else { continue }
            for id in gone.keys {
                patterns[text]?.sinks[id] = nil
                patterns[text]?.waitingInitial[id] = nil
                patternOfRegistration[id] = nil
            }
            dead += gone.values
            unsubscribeIfUnused(text, &step)
        }
        if !dead.isEmpty { step.effects.append(.finish(dead, nil, discardQueued: true)) }
        sweepKeyed(&step)
        flush(&step)
        return step
    }

    /// Whether any registration's observer is gone (cheap pre-check for `sweep`).
    var hasDeadRegistrations: Bool {
        patterns.values.contains { $0.sinks.values.contains { !$0.isAlive } || $0.waitingInitial.values.contains { !$0.isAlive } } || hasDeadKeyed
    }

    mutating func unsubscribeIfUnused(_ text: String, _ step: inout Step) {
        guard let entry = patterns[text], entry.isEmpty else { return }
        patterns[text] = nil
        session.unsubscribe(text)
    }

    /// The sinks whose pattern matches `type`, minus the registrations of `excluding`.
    /// - Parameter groups: (1.3) include queue-group registrations: yes for
    ///   events from the broker (it chose this member), no for this process's
    ///   own publishes (the broker shares those among the other members).
    func sinks(matching type: String, excluding: AnyObject? = nil, groups: Bool = true) -> [any EventSink] {
        var result: [any EventSink] = []
        if let exact = patterns[type] { result += exact.sinks.values }
        if let eventType = EventType(type) {
            for entry in patterns.values where entry.pattern.hasWildcards && entry.pattern.matches(eventType) {
                result += entry.sinks.values
            }
            if groups && !keyed.isEmpty { result += groupSinks(matching: eventType) }
        }
        if let excluding { result.removeAll { $0.isObserver(excluding) } }
        return result
    }
}
