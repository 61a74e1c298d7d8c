// The client state's side of retained events and history (PROTOCOL.md
// "Retained events and history (1.1)"): where this process has got to in
// the broker's sequence, so that a reconnect resubscribes each pattern with
// `since` and nothing the history still holds is lost; the `gap` frames
// that say what it no longer holds; the retained events that answer a
// subscribe with `last` (`initial: .last`, `current(_:)`); and removing
// every registration of one observer.
//
// Before editing: the reconnect always sends the last broker run's
// `instance` with `since`, so the broker decides: the same run replays after
// `since`; a new run sends a `gap` (`since_seq` 0) and replays its whole
// ring, i.e. everything published on the new broker before this process was
// back. `lastSeq` is the highest seq of any event or publish `ok` read on a
// connection of that run: the broker routes in seq order into one queue per
// connection, so every matching event up to it has been read (or announced
// lost by a `dropped` frame). Retained events never move it.
import EventBusProtocol

/// Where a process has got to in one broker run's sequence.
struct HistoryPosition {
    /// The broker run of `lastSeq` (nil before the first `hello` reply).
    private(set) var instance: String?
    private(set) var lastSeq: UInt64 = 0
    /// Patterns whose events up to `lastSeq` were offered to this process:
    /// subscribed and acknowledged (the others subscribe without `since`).
    var covered: Set<String> = []
    /// This connection's `hello` named a run other than `instance`'s.
    private(set) var restarted = false
    /// A `gap` notice was posted on this connection already.
    var gapReported = false

    mutating func connectionStarted() {
        restarted = false
        gapReported = false
    }

    /// The `hello` reply named the run: a new one resets the position (its
    /// seqs start again), after the subscribes already asked for the old one.
    mutating func greeted(instance: String) {
        guard instance != self.instance else { return }
        restarted = self.instance != nil
        self.instance = instance
        lastSeq = 0
    }

    mutating func saw(_ seq: UInt64) { lastSeq = max(lastSeq, seq) }

    mutating func forget(_ pattern: String) { covered.remove(pattern) }

    /// `since` and `instance` for a resubscribe of `pattern`, nil for a plain one.
    func since(for pattern: String) -> (seq: UInt64, instance: String)? {
        guard covered.contains(pattern), let instance else { return nil }
        return (lastSeq, instance)
    }
}

/// Who receives the retained events following an `ok`.
enum RetainedTarget {
    /// Registrations made with `initial: .last`.
    case sinks([any EventSink])
    /// A `current(_:)` request (by its subscribe's `req`).
    case current(Int64)
}

extension ClientState {
    /// Subscribes `pattern` on a new connection: with `since` where the
    /// position covers it, with `last` for registrations still waiting for
    /// their initial value.
    mutating func resubscribe(_ pattern: String, _ step: inout Step) {
        guard let entry = patterns[pattern] else { return }
        let since = history.since(for: pattern)
        let waiting = Array(entry.waitingInitial.keys)
        let req = takeReq()
        pending[req] = waiting.isEmpty ? .subscribe(pattern) : .subscribeInitial(pattern, waiting)
        subscribed.insert(pattern)
        step.send(.subscribe(pattern: pattern, last: waiting.isEmpty ? nil : true, since: since?.seq, instance: since?.instance), req: req)
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
        history.covered.insert(text)
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
    mutating func reportGap(pattern: String, sinceSeq: UInt64, firstSeq: UInt64, _ step: inout Step) {
        let gap = BusGap(sinceSeq: sinceSeq, firstSeq: firstSeq, brokerRestarted: history.restarted)
        if let entry = patterns[pattern], !entry.sinks.isEmpty { step.effects.append(.markGap(Array(entry.sinks.values), gap)) }
        if !history.gapReported {
            history.gapReported = true
            step.effects.append(.notice(.gap(gap)))
        }
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
        switch link {
        case .connected:
            let req = takeReq()
            pending[req] = .current(completion)
            step.send(.subscribe(pattern: pattern.text, last: true), req: req)
            if !subscribed.contains(pattern.text) {
                let undo = takeReq()
                pending[undo] = .unsubscribe(pattern.text)
                step.send(.unsubscribe(pattern: pattern.text), req: undo)
            }
            let sentinel = takeReq()
            pending[sentinel] = .currentSentinel(req)
            step.send(.ping, req: sentinel)
        case .closed(let error):
            step.effects.append(.completeCurrent(completion, .failure(error ?? .closed)))
        case .disconnected:
            step.effects.append(.completeCurrent(completion, .failure(.unavailable(path: path, reason: lastFailure))))
        }
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
        for key in ids.sorted() {
            let removed = remove(key)
            step.write += removed.write
            step.effects += removed.effects
        }
        return step
    }
}
