// Observers that are actors: the handler runs isolated to the observer itself
// (`(isolated Observer, Event) -> Void`), so it may read and change the
// actor's state. The closure-isolation route of EventBus+Observers.swift
// cannot do this: a closure written in an actor method that does not capture
// `self` is nonisolated, and the observer must not be captured (it is held
// weakly).
//
// Before editing: order is kept by one long-lived task per registration that
// drains the registration's ordered stream and awaits each call before taking
// the next event (a task per event would lose the order). Between events the
// task holds only the weak reference; the observer is held strongly for the
// duration of one call, and the task ends once the observer is gone.
import EventBusProtocol

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
    /// published `from:` this very observer. (For `@MainActor` classes use the
    /// other `subscribe(_:to:initial:handler:)`, whose handler runs on the
    /// main actor.)
    /// - Parameters:
    ///   - observer: the actor whose lifetime bounds the registration.
    ///   - type: the event type to observe (`Event.eventType`).
    ///   - initial: (1.1) `.last` calls the handler with the retained event first.
    ///   - handler: `(observer, event)`, isolated to `observer`.
    /// - Returns: a token to cancel early; it need not be kept (or end every
    ///   registration of the observer with `unsubscribe(_:)`).
    @discardableResult
    public func subscribe<Observer: Actor, Event: BusEvent>(
        _ observer: Observer,
        to type: Event.Type,
        initial: Initial = .none,
        handler: @escaping @Sendable (isolated Observer, Event) -> Void
    ) -> Subscription {
        let (subscription, sink, stream, reference) = registerObserver(observer, to: type, initial: initial)
        Task {
            for await item in stream {
                guard case .value(let event) = item else { continue }
                guard sink.isActive else { continue }
                // Gone: end the task; the sweep withdraws the registration.
                guard let observer = reference.object else { break }
                await Self.call(handler, observer, event)
            }
        }
        return subscription
    }

    /// One call of an actor observer's handler: the strong reference lives
    /// for this call only, and the `isolated` parameter makes the call hop
    /// onto the observer's executor.
    private static func call<Observer: Actor, Event: BusEvent>(
        _ handler: @Sendable (isolated Observer, Event) -> Void,
        _ observer: Observer,
        _ event: Event
    ) async {
        await handler(observer, event)
    }
}
