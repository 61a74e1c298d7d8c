// (1.3) Where the requests of one local serving registration go (PROTOCOL.md
// "Request/reply"): an ordered queue its one handler task drains, and the
// weak observer, if any. The client state hands each request to one serving
// registration of its pattern (EventBus+Serving.swift answers it).
//
// Before editing: `offer` is called by the reader thread with no lock held;
// it must not block. The queue is bounded (`limit`): a request past it is
// answered at once with an error rather than queued (the requester gets
// `service_error` instead of waiting for its deadline).
@_spi(Package) import EventBusProtocol
import Synchronization

/// A request as a serving registration receives it.
struct IncomingRequest: Sendable {
    /// The request's fields as an event's (`type`, `seq`, credentials, `data`).
    var event: RawEvent
    /// The token its reply must carry (`ClientRequest.reply(to:)`).
    var token: String
}

/// A serving registration's queue.
final class RequestSink: Registration {
    let continuation: AsyncStream<IncomingRequest>.Continuation
    let observerAlive: (@Sendable () -> Bool)?
    let observerID: ObjectIdentifier?
    let active = Atomic<Bool>(true)
    let queued = Atomic<Int>(0)
    let limit: Int
    /// Why the registration ended, when the broker refused it or the bus gave up.
    let failure = Locked<EventBusError?>(nil)

    init(continuation: AsyncStream<IncomingRequest>.Continuation, limit: Int, observerAlive: (@Sendable () -> Bool)?, observerID: ObjectIdentifier?) {
        self.continuation = continuation
        self.limit = limit
        self.observerAlive = observerAlive
        self.observerID = observerID
    }

    /// A sink and the stream its handler task drains.
    static func make(limit: Int, observerAlive: (@Sendable () -> Bool)? = nil, observerID: ObjectIdentifier? = nil) -> (RequestSink, AsyncStream<IncomingRequest>) {
        let (stream, continuation) = AsyncStream<IncomingRequest>.makeStream(bufferingPolicy: .unbounded)
        return (RequestSink(continuation: continuation, limit: limit, observerAlive: observerAlive, observerID: observerID), stream)
    }

    var isAlive: Bool { active.load(ordering: .acquiring) && (observerAlive?() ?? true) }

    /// Queues `request`; false when the queue is full or the sink ended (answer it at once).
    func offer(_ request: IncomingRequest) -> Bool {
        guard isAlive, queued.add(1, ordering: .relaxed).newValue <= limit else {
            queued.subtract(1, ordering: .relaxed)
            return false
        }
        if case .enqueued = continuation.yield(request) { return true }
        queued.subtract(1, ordering: .relaxed)
        return false
    }

    /// The handler took one off the queue.
    func took() { queued.subtract(1, ordering: .relaxed) }

    func finish(_ error: EventBusError?, discardQueued: Bool) {
        if discardQueued { active.store(false, ordering: .releasing) }
        if let error { failure.withLock { $0 = error } }
        continuation.finish()
    }
}
