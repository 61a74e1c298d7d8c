// (1.3) Serving requests (PROTOCOL.md "Request/reply") and queue groups
// ("Queue groups"), under issue 34's rules: a server is either structured
// (`try await bus.serve(R.self) { ... }` runs until its task is cancelled)
// or an observer (a class's handler on the main actor, an actor's isolated
// to it; the registration lives as long as the observer); `group:` shares
// the requests (or events) of a type among the members of a group, and a
// member's `leave()` finishes its share before it ends.
//
// Before editing: each serving registration has one ordered queue drained
// by one task, one request at a time; a request goes to one registration of
// its key in turn (ClientState+Keyed.swift), so N registrations serve N at
// once. A handler's thrown error becomes the reply's `error` (the requester's
// `EventBusError.serviceError`).
@_spi(Package) import EventBusProtocol
import EventBusSession
import Foundation

extension EventBus {
    /// (1.3) Serves requests of type `R` until the task is cancelled: each
    /// request is decoded, handed to `handler` (one at a time, in order), and
    /// its return value is the reply; an error it throws is the reply's
    /// error (the requester's `.serviceError`, with the error's description).
    /// ```swift
    /// try await bus.serve(MakeThumbnail.self, group: "thumbnailers") { request in
    ///     Thumbnail(path: request.path + ".thumb.png")
    /// }
    /// ```
    /// Run it in several tasks to serve several requests at once: each
    /// request goes to one of them in turn.
    /// - Parameter group: (1.3) a queue group (1-64 bytes of
    ///   `A-Z a-z 0-9 _ . - :`): each request goes to one member of the group
    ///   of this uid (one server per request among the processes in it).
    /// - Throws: `.invalidName` (the request type or the group name),
    ///   `.protocolError` when the broker refuses to let this process serve
    ///   (`forbidden`), the error that closed the bus (`.unavailable` when
    ///   reconnecting gave up). Returns when the task is cancelled or the bus
    ///   is closed.
    public func serve<R: BusRequest>(_ type: R.Type, group: String? = nil, handler: @escaping @Sendable (R) async throws -> R.Reply) async throws(EventBusError) {
        let key = try servingKey(R.self, group: group)
        let (sink, stream) = RequestSink.make(limit: core.configuration.maxQueuedRequests)
        let subscription = registerKeyed(sink, on: key)
        await withTaskCancellationHandler {
            for await request in stream {
                sink.took()
                await answer(request, as: R.self) { request in try await handler(request) }
            }
        } onCancel: {
            subscription.cancel()
        }
        if let error = sink.failure.withLock({ $0 }) { throw error }
    }

    /// (1.3) Serves requests of type `R` for the class `observer`, held
    /// weakly: `handler` runs on the main actor, one request at a time; the
    /// registration lives as long as the observer (or until `cancel()`).
    /// - Returns: a token to end it early; it may be dropped.
    /// - Throws: `.invalidName` (the request type or the group name).
    @discardableResult
    public func serve<Observer: AnyObject & Sendable, R: BusRequest>(
        _ observer: Observer, _ type: R.Type, group: String? = nil,
        handler: @escaping @MainActor (Observer, R) async throws -> R.Reply
    ) throws(EventBusError) -> Subscription {
        try serveRequests(for: observer, R.self, group: group) { observer, request in try await handler(observer, request) }
    }

    /// (1.3) Serves requests of type `R` for the actor `observer`, held
    /// weakly: `handler` runs isolated to it, one request at a time; the
    /// registration lives as long as the observer (or until `cancel()`).
    /// - Returns: a token to end it early; it may be dropped.
    /// - Throws: `.invalidName` (the request type or the group name).
    @discardableResult
    public func serve<Observer: Actor, R: BusRequest>(
        _ observer: Observer, _ type: R.Type, group: String? = nil,
        handler: @escaping @Sendable (isolated Observer, R) async throws -> R.Reply
    ) throws(EventBusError) -> Subscription {
        try serveRequests(for: observer, R.self, group: group) { observer, request in try await handler(observer, request) }
    }

    /// Both `serve(_:_:group:handler:)`: the registration, and a task that
    /// takes its requests one at a time while `observer` lives, `handler`
    /// running where the caller's closure puts it (the main actor, the actor).
    private func serveRequests<Observer: AnyObject & Sendable, R: BusRequest>(
        for observer: Observer, _: R.Type, group: String?,
        handler: @escaping @Sendable (Observer, R) async throws -> R.Reply
    ) throws(EventBusError) -> Subscription {
        let key = try servingKey(R.self, group: group)
        let reference = WeakReference(observer)
        let (sink, stream) = RequestSink.make(limit: core.configuration.maxQueuedRequests,
                                              observerAlive: { reference.object != nil }, observerID: ObjectIdentifier(observer))
        let subscription = registerKeyed(sink, on: key)
        Task {
            for await request in stream {
                sink.took()
                guard let observer = reference.object else { break }
                await answer(request, as: R.self) { request in try await handler(observer, request) }
            }
        }
        return subscription
    }

    /// Decodes `request`, runs `handler`, and sends its reply or error.
    private func answer<R: BusRequest>(_ request: IncomingRequest, as _: R.Type, _ handler: @Sendable (R) async throws -> R.Reply) async {
        let type = request.event.metadata.type
        var data: JSONText?
        var failure: String?
        do {
            let decoded = try request.event.decode(R.self, using: core.configuration.decoder)
            data = try encode(try await handler(decoded), type: type)
        } catch {
            failure = "\(error)"
        }
        let token = request.token
        core.changeOffThread { [data, failure] state in state.reply(to: token, data: data, error: failure) }
    }

    /// The serving subscription of `R`'s type in `group`.
    private func servingKey<R: BusRequest>(_: R.Type, group: String?) throws(EventBusError) -> SubscriptionKey {
        let type = try R.validatedRequestType().name
        return SubscriptionKey(type, serve: true, group: try Self.validate(group: group))
    }

    /// `group` when it is a valid group name (PROTOCOL.md "Queue groups").
    static func validate(group: String?) throws(EventBusError) -> String? {
        guard let group else { return nil }
        guard RequestDecoder.isValidClientName(group) else { throw .invalidName(group) }
        return group
    }

    /// Adds a serving or group registration on `key` and wraps it in a token.
    func registerKeyed(_ sink: any Registration, on key: SubscriptionKey) -> Subscription {
        guard let pattern = Pattern(key.pattern) else { preconditionFailure("pattern \(key.pattern) was validated") }
        var id: UInt64 = 0
        core.change { state in
            let (registered, step) = state.add(sink, on: key, pattern: pattern)
            id = registered
            return step
        }
        return Subscription(id: id, sink: sink, core: core)
    }
}

extension Subscription {
    /// (1.3) Leaves a queue group and finishes this member's share: the
    /// broker is asked to take the member out, and every event (or request)
    /// it had queued to this member before its `ok` is still handed to the
    /// handler or stream; then the registration ends. Returns once that
    /// `ok` came (the handler may still be taking the last of them). For
    /// other registrations it is `cancel()`.
    public func leave() async {
        guard let core else { return }
        let id = self.id
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            core.change { $0.leave(id, done: { continuation.resume() }) }
        }
    }
}
