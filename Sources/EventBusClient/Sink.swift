// Where the events of one local registration go: an AsyncStream continuation
// plus, for observers, a weak reference to the observer. Observers, typed
// streams and raw streams all use `Sink`; only the transform differs.
//
// Before editing: `deliver` and `finish` are called by the reader thread and
// by publishing tasks with no lock held; they must not block and must not
// call back into `BusCore`.
import EventBusProtocol
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
    /// The sink had `bufferLimit` events waiting; this one was dropped for it.
    case bufferFull
    /// The event's `data` does not decode as the sink's type.
    case undecodable(EventBusError)
}

/// A weak reference that can cross threads: the referent is `Sendable`, and
/// `weak let` cannot be reassigned, so the box is `Sendable` without locks.
final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    weak let object: Object?

    init(_ object: Object) { self.object = object }
}

/// Type-erased view of a sink, as the client state stores it.
protocol EventSink: AnyObject, Sendable {
    /// Decodes and queues `event`. Never blocks.
    func deliver(_ event: RawEvent) -> SinkOutcome
    /// False once the observer was deallocated or the sink was cancelled.
    var isAlive: Bool { get }
    /// Whether `object` is this registration's observer (for `publish(_:from:)`).
    func isObserver(_ object: AnyObject) -> Bool
    /// The identity of the observer it was registered for (nil for streams
    /// and handlers), comparable even while the observer is being deinitialised
    /// (for `EventBus.unsubscribe(_:)` from a `deinit`).
    var observerID: ObjectIdentifier? { get }
    /// (1.1) Attaches `gap` to the next event delivered (`EventMetadata.gap`).
    func markGap(_ gap: BusGap)
    /// Ends the stream. With `error`, the consumer sees it thrown after the
    /// events already queued. With `discardQueued`, queued events are not
    /// handed to an observer any more (cancel, observer gone).
    func finish(_ error: EventBusError?, discardQueued: Bool)
}

/// A registration's sink: transforms a `RawEvent` into `Value` and yields it.
final class Sink<Value: Sendable>: EventSink {
    typealias Transform = @Sendable (RawEvent) throws(EventBusError) -> Value

    let transform: Transform
    let continuation: AsyncStream<StreamItem<Value>>.Continuation
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
        continuation: AsyncStream<StreamItem<Value>>.Continuation,
        observerAlive: (@Sendable () -> Bool)? = nil,
        observerIdentity: (@Sendable (AnyObject) -> Bool)? = nil,
        observerID: ObjectIdentifier? = nil
    ) {
        self.transform = transform
        self.continuation = continuation
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
        switch continuation.yield(.value(value)) {
        case .enqueued: return .delivered
        case .dropped: return .bufferFull
        case .terminated: return .inactive
        @unknown default: return .inactive
        }
    }

    func finish(_ error: EventBusError?, discardQueued: Bool) {
        if discardQueued { active.store(false, ordering: .releasing) }
        if let error { continuation.yield(.failure(error)) }
        continuation.finish()
    }
}

extension Sink {
    /// A sink whose stream holds at most `bufferLimit` waiting items; newer
    /// ones are dropped (as the broker's default `drop-new`).
    static func make(
        bufferLimit: Int,
        transform: @escaping Transform,
        observerAlive: (@Sendable () -> Bool)? = nil,
        observerIdentity: (@Sendable (AnyObject) -> Bool)? = nil,
        observerID: ObjectIdentifier? = nil
    ) -> (Sink<Value>, AsyncStream<StreamItem<Value>>) {
        let (stream, continuation) = AsyncStream<StreamItem<Value>>.makeStream(bufferingPolicy: .bufferingOldest(max(1, bufferLimit)))
        let sink = Sink(transform: transform, continuation: continuation, observerAlive: observerAlive, observerIdentity: observerIdentity,
                        observerID: observerID)
        return (sink, stream)
    }
}
