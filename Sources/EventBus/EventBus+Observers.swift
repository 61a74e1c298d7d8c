// Observers, the way Swift apps already write them in-process: a registry
// keyed by event type, observers held weakly, handlers called on the actor
// they were registered from. Each observer gets an ordered queue (an
// AsyncStream) drained by one task that hops to the handler's isolation.
//
// Before editing: the handler receives the observer as an argument so it
// never needs to capture it; nothing here may hold the observer strongly
// except for the duration of one handler call.
import EventBusProtocol

/// A registration of an observer or handler; `cancel()` ends it.
///
/// For `EventBus.subscribe(_:to:handler:)` the registration lives as long as
/// its observer: the token may be dropped. For `EventBus.subscribe(to:handler:)`
/// (no observer) it lives as long as this token: deinit cancels.
public final class Subscription: Sendable, Hashable {
    let id: UInt64
    let sink: any EventSink
    weak let core: BusCore?
    let cancelsOnDeinit: Bool

    init(id: UInt64, sink: any EventSink, core: BusCore, cancelsOnDeinit: Bool) {
        self.id = id
        self.sink = sink
        self.core = core
        self.cancelsOnDeinit = cancelsOnDeinit
    }

    deinit {
        if cancelsOnDeinit { cancel() }
    }

    /// Ends the registration: the handler is not called again (calls already
    /// running finish), and if it was the last on its event type the broker
    /// subscription is withdrawn. Idempotent.
    public func cancel() {
        sink.finish(nil, discardQueued: true)
        core?.change { $0.remove(id) }
    }

    /// False once cancelled, or once the observer was deallocated.
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

    /// Observes events of type `Event` for `observer`, held weakly.
    ///
    /// `handler` is called once per event, in order, isolated like the code
    /// that registered it (from `@MainActor` code it runs on the main actor),
    /// with the observer passed in: do not capture the observer strongly in
    /// the handler, or it is never released. When the observer is
    /// deallocated its handler is dropped without a call, and once no local
    /// observer or stream of the type is left the broker subscription is
    /// withdrawn (within `Configuration.sweepInterval`).
    ///
    /// Events this process publishes reach the observer too, except those
    /// published `from:` this very observer.
    /// - Parameters:
    ///   - observer: the object whose lifetime bounds the registration.
    ///   - type: the event type to observe (`Event.eventType`).
    ///   - initial: (1.1) `.last` calls the handler with the retained event
    ///     first, so a view made after the change shows the current value at
    ///     once: `bus.subscribe(self, to: CurrencyChanged.self, initial: .last) { view, event in ... }`.
    ///   - handler: `(observer, event)`.
    /// - Returns: a token to cancel early; it need not be kept (or end every
    ///   registration of the observer with `unsubscribe(_:)`).
    // `@_inheritActorContext` (the attribute `Task.init` uses) makes a closure
    // written in `@MainActor` code main-actor isolated, so the handler can
    // touch the observer's state; `@isolated(any)` lets us read that isolation
    // and call the handler on it. Without the attribute a `@Sendable` closure
    // is nonisolated and `view.label = ...` would not compile.
    @discardableResult
    public func subscribe<Observer: AnyObject & Sendable, Event: BusEvent>(
        _ observer: Observer,
        to type: Event.Type,
        initial: Initial = .none,
        @_inheritActorContext handler: @escaping @isolated(any) @Sendable (Observer, Event) -> Void
    ) -> Subscription {
        let (subscription, sink, stream, reference) = registerObserver(observer, to: type, initial: initial)
        Task {
            for await item in stream {
                guard case .value(let event) = item else { continue }
                await Self.call(handler, on: handler.isolation, sink: sink, reference: reference, event: event)
            }
        }
        return subscription
    }

    /// Calls `handler` for `reference`'s observer, on the handler's own
    /// isolation, unless the sink was cancelled or the observer is gone by then.
    private static func call<Observer: AnyObject & Sendable, Event: BusEvent>(
        _ handler: @isolated(any) @Sendable (Observer, Event) -> Void,
        on isolation: isolated (any Actor)?,
        sink: Sink<Event>,
        reference: WeakReference<Observer>,
        event: Event
    ) async {
        guard sink.isActive, let observer = reference.object else { return }
        await handler(observer, event)
    }

    /// Calls `handler` with each event of type `Event` and its metadata, until
    /// the returned token is cancelled or deinitialised.
    ///
    /// `handler` runs in order, isolated like the code that registered it.
    /// - Parameter initial: (1.1) `.last`: the retained event first.
    /// - Returns: the token that keeps the registration alive: keep it.
    public func subscribe<Event: BusEvent>(
        to type: Event.Type,
        initial: Initial = .none,
        @_inheritActorContext handler: @escaping @isolated(any) @Sendable (Delivery<Event>) -> Void
    ) -> Subscription {
        let decoder = core.configuration.decoder
        let (sink, stream) = Sink<Delivery<Event>>.make(
            flow: core.flow, pattern: Event.validatedEventType.name,
            transform: { raw throws(EventBusError) in
                Delivery(event: try raw.decode(Event.self, using: decoder), metadata: raw.metadata)
            }
        )
        let subscription = register(sink, on: Event.validatedEventType.name, initial: initial, cancelsOnDeinit: true)
        Task {
            for await item in stream {
                guard case .value(let delivery) = item else { continue }
                await Self.call(handler, on: handler.isolation, sink: sink, delivery: delivery)
            }
        }
        return subscription
    }

    private static func call<Event: BusEvent>(
        _ handler: @isolated(any) @Sendable (Delivery<Event>) -> Void,
        on isolation: isolated (any Actor)?,
        sink: Sink<Delivery<Event>>,
        delivery: Delivery<Event>
    ) async {
        guard sink.isActive else { return }
        await handler(delivery)
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

    /// The registration of a weakly held `observer` on `Event`'s type: its
    /// sink, the ordered stream its one delivery task drains, and the weak
    /// reference that task reads before each call (shared by the observer
    /// overloads of `subscribe`).
    func registerObserver<Observer: AnyObject & Sendable, Event: BusEvent>(
        _ observer: Observer, to type: Event.Type, initial: Initial
    ) -> (Subscription, Sink<Event>, SinkStream<Event>, WeakReference<Observer>) {
        let reference = WeakReference(observer)
        let decoder = core.configuration.decoder
        let (sink, stream) = Sink<Event>.make(
            flow: core.flow, pattern: Event.validatedEventType.name,
            transform: { raw throws(EventBusError) in try raw.decode(Event.self, using: decoder) },
            observerAlive: { reference.object != nil },
            observerIdentity: { $0 === reference.object },
            observerID: ObjectIdentifier(observer)
        )
        let subscription = register(sink, on: Event.validatedEventType.name, initial: initial, cancelsOnDeinit: false)
        return (subscription, sink, stream, reference)
    }

    /// Adds `sink` on `pattern` (already validated) and wraps it in a token.
    func register(_ sink: any EventSink, on pattern: String, initial: Initial = .none, cancelsOnDeinit: Bool) -> Subscription {
        guard let valid = Pattern(pattern) else { preconditionFailure("pattern \(pattern) was validated") }
        var id: UInt64 = 0
        core.change { state in
            let (registered, step) = state.add(sink, on: valid, initial: initial == .last)
            id = registered
            return step
        }
        return Subscription(id: id, sink: sink, core: core, cancelsOnDeinit: cancelsOnDeinit)
    }
}
