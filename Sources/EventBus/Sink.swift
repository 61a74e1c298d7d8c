// Where the events of one local registration go: an AsyncStream continuation
// plus, for observers, a weak reference to the observer. Observers, typed
// streams and raw streams all use `Sink`; only the transform differs.
//
// Before editing: `deliver` and `finish` are called by the reader thread and
// by publishing tasks with no lock held; they must not block and must not
// call back into `BusCore`. Each queued event is counted in the bus's
// `FlowGate` (1.2 flow control): `SinkStream`'s iterator reports each one
// taken, `finish` stops the count; the stream itself is unbounded because
// the gate bounds all queues of the bus together.
@_spi(Package) import EventBusProtocol
import Synchronization

/// One item of a registration's stream: a value, or the error that ends it.
enum StreamItem<Value: Sendable>: Sendable {
    case value(Value)
    case failure(EventBusError)
}

/// What happened when an event was handed to a sink.
enum SinkOutcome: Equatable, Sendable {
    case delivered
    /// The observer is gone or the registration was cancelled: nothing was queued.
    case inactive
    /// The registration is behind (its consumer took nothing for the local
    /// stall timeout while the bus's buffer was full): dropped for it, and
    /// counted in the one notice that reports the run (`FlowGate`).
    case droppedBehind
    /// The event's `data` does not decode as the sink's type.
    case undecodable(EventBusError)
}

/// A weak reference that can cross threads: the referent is `Sendable`, and
/// `weak let` cannot be reassigned, so the box is `Sendable` without locks.
final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    weak let object: Object?

    init(_ object: Object) { self.object = object }
}

/// What every local registration is to the client state (events, and 1.3 requests).
protocol Registration: AnyObject, Sendable {
    /// False once the observer was deallocated or the sink was cancelled.
    var isAlive: Bool { get }
    /// The identity of the observer it was registered for (nil for streams
    /// and handlers), comparable even while the observer is being deinitialised
    /// (for `EventBus.unsubscribe(_:)` from a `deinit`).
    var observerID: ObjectIdentifier? { get }
    /// Ends the stream. With `error`, the consumer sees it thrown after the
    /// events already queued. With `discardQueued`, queued events are not
    /// handed to an observer any more (cancel, observer gone).
    func finish(_ error: EventBusError?, discardQueued: Bool)
}

/// Type-erased view of an event sink, as the client state stores it.
protocol EventSink: Registration {
    /// Decodes and queues `event`. Never blocks.
    func deliver(_ event: RawEvent) -> SinkOutcome
    /// The registration's pattern (its type for typed ones), for loss notices.
    var pattern: String { get }
    /// Whether `object` is this registration's observer (for `publish(_:from:)`).
    func isObserver(_ object: AnyObject) -> Bool
    /// (1.1) Attaches `gap` to the next event delivered (`EventMetadata.gap`).
    func markGap(_ gap: BusGap)
}

/// A registration's sink: transforms a `RawEvent` into `Value` and yields it.
final class Sink<Value: Sendable>: EventSink {
    typealias Transform = @Sendable (RawEvent) throws(EventBusError) -> Value

    let transform: Transform
    /// Each item with its cost in bytes (`DeliveryLedger.cost`), -1 for an
    /// item the gate did not count (the error that ends the stream).
    let continuation: AsyncStream<(StreamItem<Value>, Int)>.Continuation
    /// The bus's flow gate, where queued events are counted.
    let gate: FlowGate
    /// The registration's pattern (its type for typed ones), for loss notices.
    let pattern: String
    /// Checks the weak observer; nil for streams, which live until cancelled.
    let observerAlive: (@Sendable () -> Bool)?
    let observerIdentity: (@Sendable (AnyObject) -> Bool)?
    let observerID: ObjectIdentifier?
    /// Cleared by `finish(_:discardQueued: true)`; observers check it before each call.
    let active = Atomic<Bool>(true)
    /// A gap to attach to the next event (`markGap`).
    let pendingGap = Locked<BusGap?>(nil)

    init(
        transform: @escaping Transform,
        continuation: AsyncStream<(StreamItem<Value>, Int)>.Continuation,
        gate: FlowGate,
        pattern: String,
        observerAlive: (@Sendable () -> Bool)? = nil,
        observerIdentity: (@Sendable (AnyObject) -> Bool)? = nil,
        observerID: ObjectIdentifier? = nil
    ) {
        self.transform = transform
        self.continuation = continuation
        self.gate = gate
        self.pattern = pattern
        self.observerAlive = observerAlive
        self.observerIdentity = observerIdentity
        self.observerID = observerID
    }

    func markGap(_ gap: BusGap) { pendingGap.withLock { $0 = gap } }

    var isActive: Bool { active.load(ordering: .acquiring) }

    var isAlive: Bool { isActive && (observerAlive?() ?? true) }

    func isObserver(_ object: AnyObject) -> Bool { observerIdentity?(object) ?? false }

    func deliver(_ event: RawEvent) -> SinkOutcome {
        guard isAlive else { return .inactive }
        var event = event
        if let gap = pendingGap.withLock({ $0.take() }) { event.metadata.gap = gap }
        let value: Value
        do {
            value = try transform(event)
        } catch {
            return .undecodable(error)
        }
        let cost = DeliveryLedger.cost(of: event)
        let id = ObjectIdentifier(self)
        guard gate.admit(id, pattern: pattern, cost: cost, seq: event.metadata.seq) == .queue else { return .droppedBehind }
        switch continuation.yield((.value(value), cost)) {
        case .enqueued: return .delivered
        case .dropped, .terminated:
            gate.close(id)  // finished meanwhile: no consumer will take it
            return .inactive
        @unknown default: return .inactive
        }
    }

    func finish(_ error: EventBusError?, discardQueued: Bool) {
        if discardQueued { active.store(false, ordering: .releasing) }
        if let error { continuation.yield((.failure(error), -1)) }
        continuation.finish()
        gate.close(ObjectIdentifier(self))
    }
}

/// The consumer's side of a sink: its items in order; each event taken is
/// reported to the bus's flow gate, which lets the reader read on.
struct SinkStream<Value: Sendable>: AsyncSequence, Sendable {
    typealias Element = StreamItem<Value>
    typealias Failure = Never

    let base: AsyncStream<(StreamItem<Value>, Int)>
    let gate: FlowGate
    let sink: ObjectIdentifier

    func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), gate: gate, sink: sink) }

    /// The one iterator of a sink's stream.
    struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<(StreamItem<Value>, Int)>.Iterator
        let gate: FlowGate
        let sink: ObjectIdentifier

        mutating func next() async -> StreamItem<Value>? {
            taken(await base.next())
        }

        mutating func next(isolation actor: isolated (any Actor)?) async -> StreamItem<Value>? {
            taken(await base.next(isolation: actor))
        }

        private func taken(_ entry: (StreamItem<Value>, Int)?) -> StreamItem<Value>? {
            guard let (item, cost) = entry else { return nil }
            if cost >= 0 { gate.took(sink, cost: cost) }
            return item
        }
    }
}

extension Sink {
    /// A sink on `pattern` whose queued events are counted in `flow` (the
    /// bus's buffer, `Configuration.bufferLimit`), and its stream.
    static func make(
        flow: FlowGate,
        pattern: String,
        transform: @escaping Transform,
        observerAlive: (@Sendable () -> Bool)? = nil,
        observerIdentity: (@Sendable (AnyObject) -> Bool)? = nil,
        observerID: ObjectIdentifier? = nil
    ) -> (Sink<Value>, SinkStream<Value>) {
        let (stream, continuation) = AsyncStream<(StreamItem<Value>, Int)>.makeStream(bufferingPolicy: .unbounded)
        let sink = Sink(transform: transform, continuation: continuation, gate: flow, pattern: pattern,
                        observerAlive: observerAlive, observerIdentity: observerIdentity, observerID: observerID)
        return (sink, SinkStream(base: stream, gate: flow, sink: ObjectIdentifier(sink)))
    }
}
