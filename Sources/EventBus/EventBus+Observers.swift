// Observers, the way Swift apps already write them in-process: a registry
// keyed by event type, observers held weakly, the observer passed to its
// handler. Two kinds of observer, one overload each (issue 34): a class
// observer's handler runs on the main actor (`@MainActor (Observer, Event)`),
// an actor observer's handler runs isolated to the actor itself
// (`(isolated Observer, Event)`, EventBus+ActorObservers.swift). Each
// registration has an ordered queue (an AsyncStream) drained by one task.
//
// The token rule, the same for every registration (issue 34): a
// registration lives as long as its owner (the observer, held weakly; a
// stream's iteration); the `Subscription` token only ends it early, so it
// may always be dropped (`@discardableResult` on every form that returns one).
//
// Before editing: the handler receives the observer as an argument so it
// never needs to capture it; nothing here may hold the observer strongly
// except for the duration of one handler call.
@_spi(Package) import EventBusProtocol
import EventBusSession

/// A registration of an observer; `cancel()` ends it early.
///
/// One rule for every registration: it lives as long as its observer (held
/// weakly) and ends by itself when the observer goes away, so the token may
/// be dropped; keep it only to end the registration sooner (or end all of
/// an observer's registrations with `EventBus.unsubscribe(_:)`).
public final class Subscription: Sendable, Hashable {
    let id: UInt64
    let sink: any Registration
    weak let core: BusCore?

    init(id: UInt64, sink: any Registration, core: BusCore) {
        self.id = id
        self.sink = sink
        self.core = core
    }

    /// Ends the registration: the handler is not called again (calls already
    /// running finish), and if it was the last on its event type the broker
    /// subscription is withdrawn. Idempotent.
    public func cancel() {
        sink.finish(nil, discardQueued: true)
        core?.change { $0.remove(id) }
    }

    /// False once cancelled, once the observer was deallocated, or when the
    /// registration was refused (`BusNotice.subscriptionRefused`).
    public var isActive: Bool { sink.isAlive }

    /// Identity: two tokens are equal when they are the same registration.
    public static func == (lhs: Subscription, rhs: Subscription) -> Bool { lhs === rhs }
    /// Hashes the identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

extension EventBus {
    /// (1.1) What a new registration receives before new events.
    public enum Initial: Sendable, Equatable {
        /// Nothing: only events published from now on.
        case none
        /// The retained event of the type (or pattern) first, if there is one:
        /// the current value, as last published with `retain: true`
        /// (`EventMetadata.isRetained`); then newer events, none older.
        case last
    }

    /// Observes events of type `Event` for `observer`, held weakly; `handler`
    /// runs on the main actor (for an actor observer, the other
    /// `subscribe(_:to:initial:handler:)` is chosen: its handler runs
    /// isolated to the actor).
    ///
    /// ```swift
    /// bus.subscribe(self, to: CurrencyChanged.self) { view, event in view.currency = event.code }
    /// ```
    ///
    /// `handler` is called once per event, in order, with the observer
    /// passed in: do not capture the observer strongly in the handler, or it
    /// is never released. When the observer is deallocated its handler is
    /// dropped without a call, and once no local observer or stream of the
    /// type is left the broker subscription is withdrawn (within
    /// `Configuration.sweepInterval`).
    ///
    /// Events this process publishes reach the observer too, except those
    /// published `from:` this very observer. An invalid `Event.eventType`
    /// ends the registration at once with `BusNotice.subscriptionRefused`.
    /// - Parameters:
    ///   - observer: the object whose lifetime bounds the registration: a
    ///     `Sendable` class (`@MainActor` classes are).
    ///   - type: the event type to observe (`Event.eventType`).
    ///   - initial: (1.1) `.last` calls the handler with the retained event
    ///     first, so a view made after the change shows the current value at
    ///     once.
    ///   - group: (1.3) a queue group: each event goes to one member of the
    ///     group of this uid (PROTOCOL.md "Queue groups"); not with
    ///     `initial: .last`. `Subscription.leave()` finishes the member's share.
    ///   - handler: `(observer, event)`, on the main actor.
    /// - Returns: a token to end the registration early; it may be dropped.
    @discardableResult
    public func subscribe<Observer: AnyObject & Sendable, Event: BusEvent>(
        _ observer: Observer,
        to type: Event.Type,
        initial: Initial = .none,
        group: String? = nil,
        handler: @escaping @MainActor (Observer, Event) -> Void
    ) -> Subscription {
        let (subscription, stream, reference) = registerObserver(observer, on: typedPattern(Event.self), initial: initial, group: group, transform: typedTransform(Event.self))
        Self.deliverOnMainActor(stream, to: reference, subscription: subscription, handler: handler)
        return subscription
    }

    /// Observes raw events whose type matches `pattern` for `observer`, held
    /// weakly; `handler` runs on the main actor. As
    /// `subscribe(_:to:initial:handler:)`, for types given at run time:
    /// `*` stands for one segment, a final `>` for one or more
    /// (PROTOCOL.md "Names and patterns").
    /// ```swift
    /// try bus.subscribe(self, matching: "order.>") { log, event in log.lines.append(event.metadata.type) }
    /// ```
    /// - Parameter initial: (1.1) `.last`: first the retained event of every
    ///   type the pattern matches, oldest first.
    /// - Returns: a token to end the registration early; it may be dropped.
    /// - Throws: `.invalidName` when `pattern` or `group` is not valid;
    ///   `.protocolError` (`bad_request`) for `group` with `initial: .last`.
    @discardableResult
    public func subscribe<Observer: AnyObject & Sendable>(
        _ observer: Observer,
        matching pattern: String,
        initial: Initial = .none,
        group: String? = nil,
        handler: @escaping @MainActor (Observer, RawEvent) -> Void
    ) throws(EventBusError) -> Subscription {
        let (subscription, stream, reference) = try registerObserver(observer, matching: pattern, initial: initial, group: group)
        Self.deliverOnMainActor(stream, to: reference, subscription: subscription, handler: handler)
        return subscription
    }

    /// The one delivery task of a class observer's registration: on the main
    /// actor, one call per event, in order; it ends with the registration or
    /// the observer.
    private static func deliverOnMainActor<Observer: AnyObject & Sendable, Value: Sendable>(
        _ stream: SinkStream<Value>,
        to reference: WeakReference<Observer>,
        subscription: Subscription,
        handler: @escaping @MainActor (Observer, Value) -> Void
    ) {
        let sink = subscription.sink
        Task { @MainActor in
            for await item in stream {
                guard case .value(let value) = item, sink.isAlive else { continue }
                guard let observer = reference.object else { break }
                handler(observer, value)
            }
        }
    }

    /// (1.1) Ends every registration of `observer` at once (all its event
    /// types), as the in-process observer registries of the seeds do; the
    /// broker subscriptions left without registrations are withdrawn.
    /// Synchronous and nonisolated, so a `@MainActor` observer can call it
    /// from its `deinit` (a plain `deinit` is nonisolated, and `bus` is a
    /// `Sendable` `let`): `deinit { bus.unsubscribe(self) }`; with Swift 6.2's
    /// `isolated deinit` it works the same. (Without it the registrations
    /// end anyway once the observer is gone, within `sweepInterval`.)
    public func unsubscribe(_ observer: AnyObject) {
        let id = ObjectIdentifier(observer)
        core.change { $0.removeRegistrations(of: id) }
    }

    /// (1.3) A valid `group` not combined with `initial: .last` (PROTOCOL.md
    /// "Queue groups": a group shares live events only).
    static func checkGroup(_ group: String?, initial: Initial) throws(EventBusError) {
        guard try validate(group: group) != nil else { return }
        if initial == .last {
            throw .protocolError(code: .badRequest, message: "initial: .last cannot be combined with group: a group shares live events only")
        }
    }

    /// The pattern of a typed registration: `Event.eventType`, or why it is invalid.
    func typedPattern<Event: BusEvent>(_: Event.Type) -> Result<String, EventBusError> {
        Result { () throws(EventBusError) in try Event.validatedEventType().name }
    }

    /// Decodes a raw event as `Event` with the configuration's decoder.
    func typedTransform<Event: BusEvent>(_: Event.Type) -> Sink<Event>.Transform {
        let decoder = core.configuration.decoder
        return { raw throws(EventBusError) in try raw.decode(Event.self, using: decoder) }
    }

    /// The registration of a weakly held `observer` on `pattern`: its token,
    /// the ordered stream its one delivery task drains, and the weak
    /// reference that task reads before each call (shared by every observer
    /// form of `subscribe`). An invalid pattern gives a token that is
    /// already ended and a `subscriptionRefused` notice.
    func registerObserver<Observer: AnyObject & Sendable, Value: Sendable>(
        _ observer: Observer, on pattern: Result<String, EventBusError>, initial: Initial, group: String? = nil, transform: @escaping Sink<Value>.Transform
    ) -> (Subscription, SinkStream<Value>, WeakReference<Observer>) {
        let reference = WeakReference(observer)
        let (sink, stream) = Sink<Value>.make(
            flow: core.flow, pattern: (try? pattern.get()) ?? "",
            transform: transform,
            observerAlive: { reference.object != nil },
            observerIdentity: { $0 === reference.object },
            observerID: ObjectIdentifier(observer)
        )
        return (register(sink, on: pattern, initial: initial, group: group), stream, reference)
    }

    /// `registerObserver(_:on:initial:group:transform:)` for raw events on a
    /// pattern given at run time (both observer forms of
    /// `subscribe(_:matching:initial:group:handler:)`), checked first.
    /// - Throws: `.invalidName` (`pattern`, `group`), `.protocolError` (`group` with `.last`).
    func registerObserver<Observer: AnyObject & Sendable>(
        _ observer: Observer, matching pattern: String, initial: Initial, group: String?
    ) throws(EventBusError) -> (Subscription, SinkStream<RawEvent>, WeakReference<Observer>) {
        guard Pattern(pattern) != nil else { throw .invalidName(pattern) }
        try Self.checkGroup(group, initial: initial)
        return registerObserver(observer, on: .success(pattern), initial: initial, group: group, transform: { raw throws(EventBusError) in raw })
    }

    /// Adds `sink` on `pattern` (validated by the caller) and wraps it in a
    /// token; an invalid pattern ends the sink at once (with the error, for
    /// a stream to throw) and is reported as `subscriptionRefused`.
    func register(_ sink: any EventSink, on pattern: Result<String, EventBusError>, initial: Initial = .none, group: String? = nil) -> Subscription {
        if let group, case .success(let text) = pattern {
            // (1.3) A group member: its own subscription (pattern, group).
            do throws(EventBusError) {
                try Self.checkGroup(group, initial: initial)
            } catch {
                sink.finish(error, discardQueued: true)
                core.post(.subscriptionRefused(pattern: text, error))
                return Subscription(id: 0, sink: sink, core: core)
            }
            return registerKeyed(sink, on: SubscriptionKey(text, group: group))
        }
        let valid: Pattern
        switch pattern {
        case .success(let text):
            guard let pattern = Pattern(text) else { preconditionFailure("pattern \(text) was validated") }
            valid = pattern
        case .failure(let error):
            sink.finish(error, discardQueued: true)
            if case .invalidName(let name) = error { core.post(.subscriptionRefused(pattern: name, error)) }
            return Subscription(id: 0, sink: sink, core: core)
        }
        var id: UInt64 = 0
        core.change { state in
            let (registered, step) = state.add(sink, on: valid, initial: initial == .last)
            id = registered
            return step
        }
        return Subscription(id: id, sink: sink, core: core)
    }
}
