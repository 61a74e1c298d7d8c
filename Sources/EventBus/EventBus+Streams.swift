// Events as AsyncSequences: `events(of:)` for typed events, `events(matching:)`
// for raw events on a pattern. Ending the iteration (break, return, throw,
// task cancelled) or dropping a stream never iterated removes the
// registration and, if it was the pattern's last, the broker subscription.
//
// Before editing: the registration is made when the stream is created, not
// when iteration starts, so events published after `events(...)` returns (and
// a `ping()`) are not missed. A stream is single-pass: its one iterator owns
// the registration and cancels it when it goes away.
@_spi(Package) import EventBusProtocol

/// An `AsyncSequence` of events that throws only `EventBusError`.
///
/// It ends normally when the bus is closed, and throws when the broker
/// refuses the subscription (`.protocolError`, e.g. `limit`) or the bus gives
/// up reconnecting (`.unavailable`). Typed streams skip events that do not
/// decode (reported as `BusNotice.undecodable`).
///
/// Single-pass: iterate it once. When that iteration ends the registration
/// ends with it, even if the stream value is still held.
public struct EventStream<Element: Sendable>: AsyncSequence, Sendable {
    /// Streams throw only `EventBusError`.
    public typealias Failure = EventBusError

    let base: SinkStream<Element>
    let subscription: Subscription

    /// (1.3) For a queue-group stream: leaves the group and finishes this
    /// member's share: every event queued to it before the broker's `ok`
    /// still comes out of the iteration, which then ends (`nil`). Call it
    /// from another task than the one iterating. For other streams it ends
    /// the registration as breaking out of the loop does.
    public func leave() async {
        await subscription.leave()
    }

    /// The one iterator of this stream; when it goes away the registration ends.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), owner: IterationOwner(subscription))
    }

    /// Cancels the registration when the iterator holding it goes away.
    final class IterationOwner {
        let subscription: Subscription
        init(_ subscription: Subscription) { self.subscription = subscription }
        deinit { subscription.cancel() }
    }

    /// Iterator of an `EventStream`.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: SinkStream<Element>.Iterator
        let owner: IterationOwner

        /// The next event, nil once the stream ended.
        /// - Throws: the `EventBusError` that ended the stream.
        public mutating func next() async throws(EventBusError) -> Element? {
            switch await base.next() {
            case .value(let element): return element
            case .failure(let error): throw error
            case nil: return nil
            }
        }

        /// As `next()`, staying on the caller's isolation.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(EventBusError) -> Element? {
            switch await base.next(isolation: actor) {
            case .value(let element): return element
            case .failure(let error): throw error
            case nil: return nil
            }
        }
    }
}

extension EventBus {
    /// Events of type `Event`, decoded, with their metadata, in `seq` order.
    ///
    /// Includes this process's own publishes (`metadata.isLocal`). After a
    /// reconnect that could not recover everything, the next event carries
    /// `metadata.gap`.
    /// ```swift
    /// for try await delivery in bus.events(of: CurrencyChanged.self, initial: .last) {
    ///     print(delivery.event.code, delivery.metadata.seq)
    /// }
    /// ```
    ///
    /// Cancelling the consuming task ends the iteration (`next()` returns
    /// nil) and with it the registration. An invalid `Event.eventType`: the
    /// first `next()` throws `.invalidName`.
    /// - Parameter initial: (1.1) `.last`: the retained event first.
    /// - Parameter group: (1.3) a queue group: each event goes to one member
    ///   of the group of this uid (PROTOCOL.md "Queue groups"); not with
    ///   `initial: .last` (the first `next()` throws `bad_request`).
    ///   `EventStream.leave()` finishes the member's share.
    public func events<Event: BusEvent>(of type: Event.Type, initial: Initial = .none, group: String? = nil) -> EventStream<Delivery<Event>> {
        let decoder = core.configuration.decoder
        return stream(on: typedPattern(Event.self), initial: initial, group: group) { raw throws(EventBusError) in
            Delivery(event: try raw.decode(Event.self, using: decoder), metadata: raw.metadata)
        }
    }

    /// Raw events whose type matches `pattern`: `*` stands for one segment,
    /// a final `>` for one or more (`order.>`), `>` alone for everything
    /// (PROTOCOL.md "Names and patterns").
    /// - Parameter initial: (1.1) `.last`: first the retained event of every
    ///   type the pattern matches, oldest first.
    /// - Parameter group: (1.3) a queue group, as for `events(of:initial:group:)`.
    /// - Throws: `.invalidName` when `pattern` or `group` is not valid;
    ///   `.protocolError` (`bad_request`) for `group` with `initial: .last`.
    public func events(matching pattern: String, initial: Initial = .none, group: String? = nil) throws(EventBusError) -> EventStream<RawEvent> {
        guard Pattern(pattern) != nil else { throw .invalidName(pattern) }
        try Self.checkGroup(group, initial: initial)
        return stream(on: .success(pattern), initial: initial, group: group) { raw throws(EventBusError) in raw }
    }

    private func stream<Element: Sendable>(on pattern: Result<String, EventBusError>, initial: Initial, group: String?, transform: @escaping Sink<Element>.Transform) -> EventStream<Element> {
        let (sink, base) = Sink<Element>.make(flow: core.flow, pattern: (try? pattern.get()) ?? "", transform: transform)
        let subscription = register(sink, on: pattern, initial: initial, group: group)
        sink.continuation.onTermination = { _ in subscription.cancel() }
        return EventStream(base: base, subscription: subscription)
    }
}
