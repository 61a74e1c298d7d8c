// The library's side of the bus session: local registrations grouped by
// pattern (one broker subscription per pattern), the completions of requests
// waiting for their reply, publishes waiting for a connection, and the link
// state. The session itself (`hello`, subscribes with `since`, `req`
// matching, gaps, the position) is EventBusSession's `BusSession`, which
// this drives. Every method updates the state and returns a `Step`: bytes to
// write and effects to perform, both done by `BusCore` after the lock is
// released. No I/O, no threads, no clock reads.
//
// Before editing: a pattern is subscribed (`session.subscribed`) exactly
// while it has at least one local registration and the link is up; every
// public method ends with `finish(step)`, which takes the session's output.
@_spi(Package) import EventBusProtocol
import EventBusSession

/// The whole client state, behind `BusCore`'s state lock.
struct ClientState {
    let path: String
    let clientName: String?
    /// The `hello` `overflow`; nil: none sent (the broker's default, 1.2 `wait`).
    let overflow: OverflowPolicy?
    let whileDisconnected: EventBus.DisconnectedPublishing
    let identity: (pid: Int32, uid: UInt32, gid: UInt32)

    private(set) var link: Link = .disconnected
    /// The session: `hello`, subscriptions, `req` matching, the position.
    var session: BusSession<LibraryRequest>
    /// Local registrations by pattern text.
    var patterns: [String: PatternEntry] = [:]
    /// Pattern text of each registration id.
    var patternOfRegistration: [UInt64: String] = [:]
    /// (1.3) Serving and group registrations, by their subscription.
    var keyed: [SubscriptionKey: KeyedEntry] = [:]
    /// (1.3) The subscription of each serving or group registration id.
    var keyOfRegistration: [UInt64: SubscriptionKey] = [:]
    /// (1.1) Who gets the retained events that follow the last `ok` of a
    /// subscribe with `last` (they come right after it, before any other reply).
    var retainedTarget: RetainedTarget?
    /// (1.1) `current(_:)` requests answered with a count of retained events
    /// still to come, by the subscribe's `req`.
    var currentWaiting: [Int64: Completion<RawEvent?>] = [:]
    /// Publishes waiting for a connection, oldest first, with their deadline (monotonic ns).
    private(set) var waiting: [(publish: OutgoingPublish, deadline: Int64)] = []
    /// Resumes `EventBus.connect` once.
    private var firstConnect: Completion<ConnectionInfo>?
    /// Why the last connection attempt or connection failed (for error messages).
    private(set) var lastFailure: String = "not connected yet"
    /// `$XDG_RUNTIME_DIR` of the configuration, to name the user bus in messages.
    let runtimeDirectory: String?
    /// Whether a frame arrived on the current connection; a first connection
    /// lost before one did is reported with `EventBusError.closedBeforeAnswering`.
    private var heardOnConnection = false
    /// The last `error` frame without `req` on the current connection, as `code: message`.
    private var refusalOnConnection: String?
    private var nextRegistration: UInt64 = 1
    private var timestamps = TimestampFormatter()

    init(path: String, clientName: String?, overflow: OverflowPolicy?, whileDisconnected: EventBus.DisconnectedPublishing, identity: (pid: Int32, uid: UInt32, gid: UInt32), firstConnect: Completion<ConnectionInfo>?, runtimeDirectory: String? = nil) {
        self.path = path
        self.runtimeDirectory = runtimeDirectory
        self.clientName = clientName
        self.overflow = overflow
        self.whileDisconnected = whileDisconnected
        self.identity = identity
        self.firstConnect = firstConnect
        session = BusSession(SessionOptions(hello: Hello(client: clientName, echo: false, overflow: overflow)))
    }

    var isClosed: Bool {
        if case .closed = link { return true }
        return false
    }

    var isConnected: Bool {
        if case .connected = link { return true }
        return false
    }

    /// The `hello` reply of the current connection, once it arrived.
    var connectionInfo: ConnectionInfo? {
        if case .connected(let info) = link { return info }
        return nil
    }

    /// Registrations in total (observers and streams).
    var registrationCount: Int { patternOfRegistration.count }

    /// The earliest deadline among waiting publishes.
    var earliestWaitingDeadline: Int64? { waiting.map(\.deadline).min() }

    /// Patterns subscribed at the broker on the current connection.
    var subscribed: Set<String> { session.subscribed }

    /// `req`s of requests written on the current connection and not answered.
    var pending: [Int64] { session.waitingReqs }

    /// Moves what the session encoded into `step`'s bytes.
    mutating func flush(_ step: inout Step) { session.takeOutput(appendingTo: &step.write) }

    /// A new registration id for `sink` (ClientState+Registrations.swift,
    /// ClientState+Keyed.swift); on a closed bus `sink` is ended at once (in
    /// `step`) under it and `open` is false: the caller keeps nothing.
    mutating func newRegistration(_ sink: any Registration, _ step: inout Step) -> (id: UInt64, open: Bool) {
        let id = nextRegistration
        nextRegistration += 1
        guard case .closed(let error) = link else { return (id, true) }
        step.effects.append(.finish([sink], error ?? .closed, discardQueued: true))
        return (id, false)
    }

    // MARK: Connection

    /// A socket is connected: queue `hello`, a `subscribe` per pattern and the
    /// publishes that waited (PROTOCOL.md: requests are handled in order, so
    /// they can be written at once).
    /// - Returns: nil when the bus was closed meanwhile (close the socket).
    mutating func connectionEstablished() -> Step? {
        if isClosed { return nil }
        // Observers that died while disconnected are dropped before their
        // patterns are subscribed again (no unsubscribe: not connected yet).
        var step = sweep()
        link = .connected(nil)
        heardOnConnection = false
        refusalOnConnection = nil
        session.connectionStarted()
        for pattern in patterns.keys.sorted() {
            subscribeAtBroker(pattern)
        }
        resubscribeKeyed(&step)
        for (publish, _) in waiting where !publish.isCancelled() {
            session.send(publish.request, tag: .publish(publish))
        }
        waiting = []
        flush(&step)
        return step
    }

    /// The connection ended (EOF, reset, write failure). Requests in flight
    /// fail with `connectionLost`; registrations stay and are subscribed again
    /// on the next connection.
    /// - Parameter reason: e.g. `the broker closed the connection`.
    mutating func connectionLost(reason: String) -> Step {
        var step = Step()
        let wasUp = connectionInfo != nil
        if case .connected = link { link = .disconnected }
        lastFailure = reason
        let error = EventBusError.connectionLost(reason: reason)
        failPending(error, &step)
        failCurrent(error, &step)
        keyedConnectionLost(&step)
        if let first = firstConnect {
            // Lost before the first `hello` reply: `connect` fails, no retry.
            // Silence may be a broker that failed to start; a refusal (`limit`) is named.
            firstConnect = nil
            let failure: EventBusError
            if !heardOnConnection {
                failure = .closedBeforeAnswering(path: path, runtimeDirectory: runtimeDirectory)
            } else if let refusal = refusalOnConnection {
                failure = .unavailable(path: path, reason: "\(reason) (\(refusal))")
            } else {
                failure = .unavailable(path: path, reason: reason)
            }
            step.effects.append(.firstConnect(first, .failure(failure)))
            step.effects += close(error: failure, notice: false).effects
        } else if wasUp {
            step.effects.append(.notice(.disconnected(error)))
        }
        return step
    }

    /// Fails every request in flight with `error`, oldest first, and forgets them.
    private mutating func failPending(_ error: EventBusError, _ step: inout Step) {
        for request in session.connectionLost() {
            switch request {
            case .publish(let p): step.effects.append(.failPublish(p.completion, error))
            case .ping(let c), .stats(let c), .ask(let c): step.effects.append(.reply(c, .failure(error)))
            case .current(let c): step.effects.append(.completeCurrent(c, .failure(error)))
            case .initial, .currentSentinel, .currentUndo, .replied: break
            }
        }
    }

    /// A connection attempt failed with `reason` (connect(2)'s error).
    /// - Returns: the step, and whether this was the first attempt (the bus then closes).
    mutating func connectFailed(reason: String) -> Step {
        lastFailure = reason
        var step = Step()
        if let first = firstConnect {
            firstConnect = nil
            step.effects.append(.firstConnect(first, .failure(.unavailable(path: path, reason: reason))))
            step.effects += close(error: .unavailable(path: path, reason: reason), notice: false).effects
        }
        return step
    }

    /// Fails waiting publishes whose deadline is at or before `now` (monotonic ns).
    mutating func expireWaiting(now: Int64) -> Step {
        var step = Step()
        guard waiting.contains(where: { $0.deadline <= now }) else { return step }
        let error = EventBusError.unavailable(path: path, reason: "no connection within the wait limit (\(lastFailure))")
        waiting.removeAll { entry in
            guard entry.deadline <= now else { return false }
            step.effects.append(.failPublish(entry.publish.completion, error))
            return true
        }
        return step
    }

    /// Forgets the waiting publishes whose caller was cancelled.
    mutating func forgetCancelledWaiting() -> Step {
        waiting.removeAll { $0.publish.isCancelled() }
        return Step()
    }

    /// Closes the bus for good: everything pending or waiting fails, every
    /// sink ends (with `error` when it is not a plain `close()`).
    mutating func close(error: EventBusError?, notice: Bool = true) -> Step {
        var step = Step()
        if isClosed { return step }
        link = .closed(error)
        let failure = error ?? .closed
        failPending(failure, &step)
        failCurrent(failure, &step)
        for (publish, _) in waiting { step.effects.append(.failPublish(publish.completion, failure)) }
        waiting = []
        if let first = firstConnect {
            firstConnect = nil
            step.effects.append(.firstConnect(first, .failure(failure)))
        }
        let sinks: [any Registration] = patterns.values.flatMap { Array($0.sinks.values) + Array($0.waitingInitial.values) } + takeAllKeyed(&step)
        patterns = [:]
        patternOfRegistration = [:]
        if !sinks.isEmpty { step.effects.append(.finish(sinks, error, discardQueued: false)) }
        if notice, let error { step.effects.append(.notice(.gaveUp(error))) }
        step.effects.append(.dropConnection)
        step.effects.append(.closed(error))
        return step
    }

    // MARK: Requests

    /// Starts a publish: written at once when connected; otherwise waiting or
    /// failed by `whileDisconnected`.
    /// - Parameter now: monotonic clock in nanoseconds (for the wait deadline).
    mutating func publish(_ publish: OutgoingPublish, now: Int64) -> Step {
        var step = Step()
        if publish.isCancelled() { return step }  // its caller stopped waiting before it was written
        switch link {
        case .connected:
            session.send(publish.request, tag: .publish(publish))
            flush(&step)
        case .closed(let error):
            step.effects.append(.failPublish(publish.completion, error ?? .closed))
        case .disconnected:
            switch whileDisconnected {
            case .fail:
                step.effects.append(.failPublish(publish.completion, .unavailable(path: path, reason: lastFailure)))
            case .wait(let limit, let maxWaiting):
                if waiting.count >= maxWaiting {
                    let reason = "\(maxWaiting) publishes already waiting for a connection (\(lastFailure))"
                    step.effects.append(.failPublish(publish.completion, .unavailable(path: path, reason: reason)))
                } else {
                    let (seconds, attoseconds) = limit.components
                    let deadline = now &+ seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
                    waiting.append((publish, deadline))
                    step.effects.append(.wakeReader)
                }
            }
        }
        return step
    }

    /// Starts a `ping` (`stats` when `stats` is true); fails at once when not connected.
    mutating func request(stats: Bool, _ completion: @escaping Completion<Reply>) -> Step {
        var step = Step()
        if let error = notConnected {
            step.effects.append(.reply(completion, .failure(error)))
            return step
        }
        session.send(stats ? .stats : .ping, tag: stats ? .stats(completion) : .ping(completion))
        flush(&step)
        return step
    }

    /// Why a request cannot start now (closed, or between connections); nil when connected.
    var notConnected: EventBusError? {
        switch link {
        case .connected: nil
        case .closed(let error): error ?? .closed
        case .disconnected: .unavailable(path: path, reason: lastFailure)
        }
    }

    // MARK: Incoming frames

    /// Handles one frame from the broker (the bytes before its LF).
    /// - Parameter wallNanoseconds: wall clock, used to stamp local deliveries.
    mutating func handle(_ bytes: RawSpan, wallNanoseconds: Int64) -> Step {
        var step = Step()
        heardOnConnection = true
        switch session.handle(bytes) {
        case .event(let fields):
            let event = RawEvent(fields, in: bytes)
            if fields.retained {
                routeRetained(event, &step)  // (1.1) an answer to a subscribe with `last`
                break
            }
            let sinks = sinks(matching: event.metadata.type)
            if !sinks.isEmpty { step.effects.append(.deliver(event, sinks)) }
        case .held, .ignored, .servers:
            break  // not ordered; PROTOCOL.md "Framing": unknown ops are for newer peers.
        case .request(let fields):
            routeRequest(fields, in: bytes, &step)  // (1.3) for a serving registration
        case .dropped(let count, let since):
            step.effects.append(.notice(.dropped(count: count, sinceSeq: since)))
        case .gap(let gap):
            reportGap(gap, &step)
        case .greeted(let info, _):
            retainedTarget = nil
            link = .connected(info)
            if let first = firstConnect {
                firstConnect = nil
                step.effects.append(.firstConnect(first, .success(info)))
            }
            step.effects.append(.notice(.connected(info)))
        case .helloRefused(let reply):
            retainedTarget = nil
            helloFailed(EventBusError(errorReply: reply), &step)
        case .subscribed(let key, let reply, let request):
            retainedTarget = nil
            if case .initial(let ids)? = request { initialAnswered(key.pattern, ids, retained: reply.unsigned("retained") ?? 0, &step) }
        case .subscribeRefused(let key, let reply, let request):
            retainedTarget = nil
            if key.isPlain {
                subscribeFailed(key.pattern, request, EventBusError(errorReply: reply), &step)
            } else {
                refuseKeyed(key, EventBusError(errorReply: reply), &step)
            }
        case .unsubscribed(let key, let reply):
            retainedTarget = nil
            if !reply.isOK { step.effects.append(.notice(.brokerError(EventBusError(errorReply: reply)))) }
            if !key.isPlain { left(key, &step) }  // (1.3) a group member's share is finished
        case .answered(.ask(let completion), let reply):
            retainedTarget = nil
            step.effects.append(.reply(completion, .success(reply)))  // ok or error: RequestAnswer reads it
        case .answered(let request, let reply):
            retainedTarget = nil
            if reply.isOK {
                succeeded(request, reply, wallNanoseconds: wallNanoseconds, &step)
            } else {
                failed(request, EventBusError(errorReply: reply), &step)
            }
        case .settled:
            break  // not ordered
        case .revoked(_, let reply), .error(let reply):
            retainedTarget = nil
            let error = EventBusError(errorReply: reply)
            if case .protocolError(let code, let message) = error {
                lastFailure = "\(code.rawValue): \(message)"
                if reply.req == nil { refusalOnConnection = lastFailure }
            }
            step.effects.append(.notice(.brokerError(error)))
        case .other:
            retainedTarget = nil
        case .unreadable(let error):
            step.effects.append(.notice(.brokerError(.malformedFrame(error.description))))
        }
        flush(&step)
        return step
    }

    private mutating func succeeded(_ request: LibraryRequest, _ reply: Reply, wallNanoseconds: Int64, _ step: inout Step) {
        switch request {
        case .initial, .currentUndo, .replied:
            break
        case .current(let completion):
            currentAnswered(reply.req ?? 0, completion, retained: reply.unsigned("retained") ?? 0, &step)
        case .currentSentinel(let subscribeReq):
            if let completion = currentWaiting.removeValue(forKey: subscribeReq) {
                step.effects.append(.completeCurrent(completion, .success(nil)))
            }
        case .publish(let publish):
            let seq = reply.unsigned("seq") ?? 0
            session.published(seq: seq)
            let delivered = Int(reply.unsigned("delivered") ?? 0)
            let time = timestamps.string(nanosecondsSinceEpoch: wallNanoseconds)
            let instance = connectionInfo?.instance ?? ""
            let metadata = EventMetadata(
                type: publish.type, seq: seq, time: time,
                source: publish.source ?? clientName ?? "pid/\(identity.pid)",
                id: publish.id ?? "\(instance)-\(seq)",
                pid: identity.pid, uid: identity.uid, gid: identity.gid, isLocal: true, key: publish.key
            )
            let sinks = sinks(matching: publish.type, excluding: publish.exclude, groups: false)
            step.effects.append(.published(RawEvent(metadata: metadata, data: publish.data.bytes), sinks, delivered: delivered, publish.completion))
        case .ping(let completion), .stats(let completion), .ask(let completion):
            step.effects.append(.reply(completion, .success(reply)))
        }
    }

    /// The broker refused to subscribe `text`: every registration on it ends.
    private mutating func refuse(_ text: String, _ error: EventBusError, _ step: inout Step) {
        guard let entry = patterns.removeValue(forKey: text) else { return }
        for id in entry.sinks.keys { patternOfRegistration[id] = nil }
        for id in entry.waitingInitial.keys { patternOfRegistration[id] = nil }
        step.effects.append(.finish(Array(entry.sinks.values) + Array(entry.waitingInitial.values), error, discardQueued: false))
        step.effects.append(.notice(.subscriptionRefused(pattern: text, error)))
    }

    /// The `hello` was refused.
    private mutating func helloFailed(_ error: EventBusError, _ step: inout Step) {
        // The connection stays usable without a name (PROTOCOL.md), but a
        // refused hello is a bug worth reporting.
        if let first = firstConnect {
            firstConnect = nil
            step.effects.append(.firstConnect(first, .failure(error)))
            step.effects += close(error: error, notice: false).effects
        } else {
            step.effects.append(.notice(.brokerError(error)))
        }
    }

    /// A subscribe of `text` (for the registrations `ids` of `.initial(ids)`, or all) was refused.
    private mutating func subscribeFailed(_ text: String, _ request: LibraryRequest?, _ error: EventBusError, _ step: inout Step) {
        guard case .initial(let ids)? = request, !(patterns[text]?.sinks.isEmpty ?? true) else {
            refuse(text, error, &step)
            return
        }
        // The pattern stays subscribed for the others; only these end.
        var ended: [any EventSink] = []
        for id in ids {
            if let sink = patterns[text]?.waitingInitial.removeValue(forKey: id) { ended.append(sink) }
            patternOfRegistration[id] = nil
        }
        step.effects.append(.finish(ended, error, discardQueued: false))
        step.effects.append(.notice(.subscriptionRefused(pattern: text, error)))
    }

    private mutating func failed(_ request: LibraryRequest, _ error: EventBusError, _ step: inout Step) {
        switch request {
        case .initial, .currentSentinel, .replied:
            break
        case .current(let completion):
            step.effects.append(.completeCurrent(completion, .failure(error)))
        case .currentUndo:
            step.effects.append(.notice(.brokerError(error)))
        case .publish(let publish):
            step.effects.append(.failPublish(publish.completion, error))
        case .ping(let completion), .stats(let completion), .ask(let completion):
            step.effects.append(.reply(completion, .failure(error)))
        }
    }
}
