// Observers that are actors: the handler runs isolated to the observer itself
// (`(isolated Observer, Event) -> Void`), so it may read and change the
// actor's state. The class form of EventBus+Observers.swift runs its handler
// on the main actor; for an actor these overloads are the ones chosen (their
// `Observer: Actor` is the more specific constraint), whatever code registers.
//
// Before editing: order is kept by one long-lived task per registration that
// drains the registration's ordered stream and awaits each call before taking
// the next event (a task per event would lose the order). Between events the
// task holds only the weak reference; the observer is held strongly for the
// duration of one call, and the task ends once the observer is gone.
@_spi(Package) import EventBusProtocol

extension EventBus {
    /// Observes events of type `Event` for the actor `observer`, held weakly;
    /// `handler` runs isolated to `observer`.
    ///
    /// ```swift
    /// actor Counter {
    ///     var seen: [Int] = []
    ///     func start(bus: EventBus) {
    ///         bus.subscribe(self, to: Tick.self) { counter, tick in counter.seen.append(tick.i) }
    ///     }
    /// }
    /// ```
    ///
    /// `handler` is called once per event, in order (the next call starts
    /// after the previous one returned), on the observer's executor, with the
    /// observer passed in as its `isolated` first parameter: do not capture
    /// the observer in the handler, or it is never released. When the
    /// observer is deallocated its handler is dropped without a call (events
    /// still queued are discarded), its delivery task ends, and once no local
    /// observer or stream of the type is left the broker subscription is
    /// withdrawn (within `Configuration.sweepInterval`).
    ///
    /// Events this process publishes reach the observer too, except those
    /// published `from:` this very observer.
    /// - Parameters:
    ///   - observer: the actor whose lifetime bounds the registration.
    ///   - type: the event type to observe (`Event.eventType`).
    ///   - initial: (1.1) `.last` calls the handler with the retained event first.
    ///   - group: (1.3) a queue group: each event goes to one member
    ///     (PROTOCOL.md "Queue groups"); `Subscription.leave()` finishes the share.
    ///   - handler: `(observer, event)`, isolated to `observer`.
    /// - Returns: a token to end the registration early; it may be dropped.
    @discardableResult
    public func subscribe<Observer: Actor, Event: BusEvent>(
        _ observer: Observer,
        to type: Event.Type,
        initial: Initial = .none,
        group: String? = nil,
        handler: @escaping @Sendable (isolated Observer, Event) -> Void
    ) -> Subscription {
        let (subscription, stream, reference) = registerObserver(observer, on: typedPattern(Event.self), initial: initial, group: group, transform: typedTransform(Event.self))
        Self.deliverOnActor(stream, to: reference, subscription: subscription, handler: handler)
        return subscription
    }

    /// Observes raw events whose type matches `pattern` for the actor
    /// `observer`, held weakly; `handler` runs isolated to `observer`.
    /// - Returns: a token to end the registration early; it may be dropped.
    /// - Throws: `.invalidName` when `pattern` or `group` is not valid;
    ///   `.protocolError` (`bad_request`) for `group` with `initial: .last`.
    @discardableResult
    public func subscribe<Observer: Actor>(
        _ observer: Observer,
        matching pattern: String,
        initial: Initial = .none,
        group: String? = nil,
        handler: @escaping @Sendable (isolated Observer, RawEvent) -> Void
    ) throws(EventBusError) -> Subscription {
        let (subscription, stream, reference) = try registerObserver(observer, matching: pattern, initial: initial, group: group)
        Self.deliverOnActor(stream, to: reference, subscription: subscription, handler: handler)
        return subscription
    }

    /// The one delivery task of an actor observer's registration.
    private static func deliverOnActor<Observer: Actor, Value: Sendable>(
        _ stream: SinkStream<Value>,
        to reference: WeakReference<Observer>,
        subscription: Subscription,
        handler: @escaping @Sendable (isolated Observer, Value) -> Void
    ) {
        let sink = subscription.sink
        Task {
            for await item in stream {
                guard case .value(let value) = item, sink.isAlive else { continue }
                // Gone: end the task; the sweep withdraws the registration.
                guard let observer = reference.object else { break }
                await Self.call(handler, observer, value)
            }
        }
    }

    /// One call of an actor observer's handler: the strong reference lives
    /// for this call only, and the `isolated` parameter makes the call hop
    /// onto the observer's executor.
    private static func call<Observer: Actor, Value: Sendable>(
        _ handler: @Sendable (isolated Observer, Value) -> Void,
        _ observer: Observer,
        _ value: Value
    ) async {
        await handler(observer, value)
    }
}
