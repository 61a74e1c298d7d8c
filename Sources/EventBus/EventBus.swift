// `EventBus`: how a Swift program joins the bus. Connecting, publishing,
// requests (`ping`, `stats`) and notices live here; observers are in
// EventBus+Observers.swift and streams in EventBus+Streams.swift.
//
// Before editing: `EventBus` is a thin `Sendable` handle over `BusCore`; all
// state sits behind `BusCore`'s locks (see BusCore.swift for lock order).
@_spi(Package) import EventBusProtocol
import EventBusSystem
import Foundation

/// A connection to an eventbus broker, shared by any number of observers and
/// streams in this process.
///
/// ```swift
/// let bus = try await EventBus.connect()
/// bus.subscribe(self, to: CurrencyChanged.self) { view, event in view.show(event.code) }
/// try await bus.publish(CurrencyChanged(code: "EUR"), from: self)
/// ```
///
/// - One broker subscription per pattern, however many local observers and
///   streams share it; the last one going away unsubscribes.
/// - A publish reaches other processes through the broker (which does not
///   echo it back) and this process's other observers directly, in the same
///   `seq` order as remote events.
/// - After the broker goes away the bus reconnects with backoff and subscribes
///   everything again (`Configuration.reconnect`); `notices()` reports it.
/// - Closing: `close()`, or dropping the last reference to the `EventBus`.
public final class EventBus: Sendable {
    let core: BusCore

    private init(core: BusCore) {
        self.core = core
    }

    deinit {
        core.close()
    }

    /// Connects to the broker and says `hello` (PROTOCOL.md "Requests").
    ///
    /// Only the first connection must succeed; later losses are retried by
    /// `configuration.reconnect`.
    /// - Parameter configuration: socket choice, client name, policies.
    /// - Returns: the connected bus, once the broker answered `hello`.
    /// - Throws: `EventBusError.unavailable(path:reason:)` naming the socket
    ///   path tried (PROTOCOL.md "Transport"), `.invalidClientName`, or
    ///   `.protocolError` if the broker refused `hello`.
    public static func connect(_ configuration: Configuration = Configuration()) async throws(EventBusError) -> EventBus {
        if let name = configuration.clientName, !RequestDecoder.isValidClientName(name) {
            throw .invalidClientName(name)
        }
        let path: String
        do {
            path = try SocketPath.resolve(configuration.bus, environment: configuration.environment, effectiveUID: ProcessIdentity.effectiveUID)
        } catch {
            throw .unavailable(path: "(none)", reason: error.description)
        }
        // Cancelled while connecting: stop waiting at once and close the core
        // (its reader thread ends; a `hello` reply that comes later is ignored).
        let started = Locked<BusCore?>(nil)
        let slot = ReplySlot<EventBus>()
        let result: Result<EventBus, EventBusError>
        do {
            result = .success(try await slot.wait(start: { completion in
                let core = BusCore(configuration: configuration, path: path) { result in
                    // Taken out of the box: the box must not keep the core alive.
                    let core = started.withLock { $0.take() }
                    switch result {
                    case .success: completion(.success(EventBus(core: core!)))
                    case .failure(let error): completion(.failure(error))
                    }
                }
                started.withLock { $0 = core }
                core.start()
            }, onCancel: {
                started.withLock { $0 }?.close()
            }))
        } catch {
            result = .failure(error)
        }
        if case .failure(.unavailable(let tried, let reason)) = result {
            // Root with a user bus (issue 23): PROTOCOL.md "Transport" picks the system bus; say the other is there.
            if let hint = SocketPath.userBusHint(afterFailing: tried, runtimeDirectory: configuration.environment["XDG_RUNTIME_DIR"], effectiveUID: ProcessIdentity.effectiveUID,
                                                 choice: "use Configuration(bus: .user)", isSocket: { (try? FileSystem.kind(ofPath: $0)) == .socket }) {
                throw .unavailable(path: tried, reason: "\(reason) (\(hint))")
            }
        }
        return try result.get()
    }

    /// Connects to the broker listening on `socketPath` (like `--socket PATH`).
    /// - Throws: as `connect(_:)`.
    public static func connect(socketPath: String, clientName: String? = Configuration.defaultClientName()) async throws(EventBusError) -> EventBus {
        try await connect(Configuration(bus: .path(socketPath), clientName: clientName))
    }

    /// The socket path this bus connects to.
    public var socketPath: String { core.path }

    /// The current connection's `hello` reply; nil while disconnected.
    public var connectionInfo: ConnectionInfo? { core.state.withLock { $0.connectionInfo } }

    /// Whether a connection is up and greeted.
    public var isConnected: Bool { connectionInfo != nil }

    /// The patterns this client is subscribed to at the broker right now,
    /// sorted (one per pattern, however many local observers share it).
    public var subscribedPatterns: [String] { core.state.withLock { $0.subscribed.sorted() } }

    /// Closes the connection: pending requests fail with `.closed`, streams
    /// end, observers are dropped, reconnecting stops. Idempotent.
    public func close() {
        core.close()
    }

    /// (Issue 34) Runs the bus for as long as the calling task wants it: the
    /// structured-concurrency way to own its lifetime, as a server's
    /// `ServiceGroup` or task group owns its services (the shape of
    /// swift-service-lifecycle's `Service`, see `BusService`).
    ///
    /// It returns when the task is cancelled, after a graceful shutdown:
    /// every `post`, `enqueue` and `publish` made before is written first,
    /// then the bus closes (pending requests fail with `.closed`, streams
    /// end, observers are dropped). It also returns when `close()` is called
    /// elsewhere.
    /// ```swift
    /// try await withThrowingTaskGroup(of: Void.self) { group in
    ///     group.addTask { try await bus.run() }            // the bus lives as long as the group
    ///     group.addTask { for try await order in bus.events(of: OrderPlaced.self) { print(order.event.id) } }
    ///     _ = try await group.next()
    ///     group.cancelAll()                                 // shuts the bus down gracefully
    /// }
    /// ```
    /// - Throws: the error that closed the bus when it closed by itself:
    ///   `.unavailable` when reconnecting gave up (`ReconnectPolicy.maxAttempts`).
    public func run() async throws(EventBusError) {
        let core = self.core
        let slot = ReplySlot<EventBusError?>()
        let error: EventBusError?
        do {
            error = try await slot.wait(start: { completion in
                core.whenClosed { completion(.success($0)) }
            }, onCancel: {
                // After what the writer queue holds: those frames are written first.
                core.writeQueue.async { core.close() }
            })
        } catch .cancelled {
            // Graceful shutdown: wait until the writer got to the close.
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                core.whenClosed { _ in continuation.resume() }
            }
            return
        } catch {
            throw error
        }
        if let error { throw error }
    }

    // MARK: Publishing

    /// Publishes a typed event: encoded with the configuration's `JSONEncoder`,
    /// sent to the broker, and handed to this process's other observers and
    /// streams of its type once the broker accepted it.
    ///
    /// Frame: `{"op":"publish","req":3,"type":"currency.changed","data":{"code":"EUR"}}`.
    /// - Parameters:
    ///   - event: the payload.
    ///   - observer: the observer that triggered the change; it is not
    ///     notified of its own event (other observers are; so is every other
    ///     process through the broker).
    ///   - source: the `source` attribute (default: the client name).
    ///   - id: the `id` attribute (default: `<instance>-<seq>`).
    ///   - key: (1.3) the queue-group key, 1-255 bytes: within each queue
    ///     group the events of one key go to one member, in order, while the
    ///     group's members stay the same (PROTOCOL.md "Queue groups"); nil:
    ///     round robin. Subscribers outside groups get every event as usual.
    ///   - retain: (1.1) also keep it as the retained event of its type, the
    ///     current value that `current(_:)` and `initial: .last` hand out
    ///     (`"retain":true`, PROTOCOL.md "Retained events and history").
    ///
    /// (1.2) While the broker holds this connection it awaits, without
    /// blocking the caller's thread (the frame is written from the bus's
    /// writer queue): nothing is dropped, and each waiting call holds only
    /// its own frame (PROTOCOL.md "Flow control (1.2)").
    ///
    /// Cancelling the task stops the wait at once with `.cancelled`. A
    /// publish the bus had not started writing is then never sent (also one
    /// waiting for a connection); one already written stays published (the
    /// broker's answer is ignored), so after `.cancelled` it may or may not
    /// have been published, as after `.connectionLost`.
    /// - Returns: the event's `seq` and how many connections and local
    ///   registrations received it.
    /// - Throws: `.invalidName` (an invalid `Event.eventType`),
    ///   `.protocolError` (`bad_request`) for a `key` that is not 1-255
    ///   bytes (before anything is sent), `.encodingFailed`, `.unavailable`
    ///   (no connection and policy `.fail`, or the wait bound passed), `.connectionLost` (lost before the
    ///   broker answered), `.protocolError` (e.g. `frame_too_large`; with
    ///   `retain`, `limit` when the retained events' limits are reached: then
    ///   nothing was published), `.closed`, `.cancelled`.
    @discardableResult
    public func publish<Event: BusEvent>(_ event: Event, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, key: String? = nil, retain: Bool = false) async throws(EventBusError) -> PublishReceipt {
        let type = try Event.validatedEventType().name
        let key = try Self.validate(key: key)
        let data = try encode(event, type: type)
        return try await send(OutgoingPublish(type: type, data: data, source: source, id: id, key: key, retain: retain, exclude: observer, completion: { _ in }))
    }

    /// (1.1) Publishes from synchronous code, in call order, and returns once
    /// the frame is written: a blocking call, for code that must know its
    /// events left in order before it goes on (a command-line tool, a worker
    /// thread). Calls from one thread or actor reach the broker, and every
    /// subscriber, in the order they were made, also mixed with
    /// `enqueue(_:from:source:id:key:retain:)`; the in-process
    /// `notifyObservers()` of the seeds.
    ///
    /// **It blocks the calling thread while the broker holds this
    /// connection** (1.2: a subscriber of this uid has no room, PROTOCOL.md
    /// "Flow control (1.2)"), and while the bus's writer finishes the async
    /// `publish`es and `enqueue`s made before it: nothing is dropped and
    /// nothing is queued in the library, so a poster goes no faster than its
    /// slowest steady observer (docs/CLIENT.md "Flow control"). On the main
    /// thread of an app that would freeze the UI: use `enqueue` there.
    /// ```swift
    /// for line in input { try bus.post(LineRead(text: line)) }   // a worker thread
    /// ```
    /// It does not wait for the broker's answer; a failure after it returned
    /// is reported as `BusNotice.postFailed`.
    /// - Parameters: as `publish(_:from:source:id:key:retain:)`.
    /// - Throws: `.invalidName`, `.protocolError` (a bad `key`),
    ///   `.encodingFailed`, `.closed`; `.unavailable` while disconnected
    ///   with `whileDisconnected: .fail` or too many waiting.
    public func post<Event: BusEvent>(_ event: Event, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, key: String? = nil, retain: Bool = false) throws(EventBusError) {
        try post(payload(event), from: observer, source: source, id: id, key: key, retain: retain)
    }

    /// As `post(_:from:source:id:key:retain:)`, for any `Encodable` payload
    /// under an event type given at run time.
    /// - Throws: `.invalidName` for a bad or reserved type, then as `post(_:from:source:id:key:retain:)`.
    public func post(type: String, data: some Encodable, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, key: String? = nil, retain: Bool = false) throws(EventBusError) {
        try post(payload(type: type, data: data), from: observer, source: source, id: id, key: key, retain: retain)
    }

    private func post(_ payload: Payload, from observer: (AnyObject & Sendable)?, source: String?, id: String?, key: String?, retain: Bool) throws(EventBusError) {
        let failure = Locked<EventBusError?>(nil)
        let returned = Locked(false)
        let core = self.core
        let type = payload.type
        let publish = try outgoing(payload, from: observer, source: source, id: id, key: key, retain: retain) { result in
            guard case .failure(let error) = result else { return }
            // Failed at once (closed, unavailable): thrown below; later: a notice.
            let late = returned.withLock { done in
                if !done { failure.withLock { $0 = error } }
                return done
            }
            if late { core.post(.postFailed(type: type, error)) }
        }
        // On the writer queue, after the async publishes and `enqueue`s made
        // before it (one order for all three), and on this thread's time.
        core.writeQueue.sync {
            let now = Clock.monotonicNanoseconds()
            core.change { $0.publish(publish, now: now) }
        }
        let immediate = returned.withLock { done in
            done = true
            return failure.withLock { $0 }
        }
        if let immediate { throw immediate }
    }

    /// Publishes from synchronous code without blocking: the counterpart of
    /// `post` for the main thread of an app (an `@IBAction`, a `didSet`, a
    /// gesture handler). The event is queued on the bus's writer in call
    /// order and written as soon as the broker takes it, so calls from one
    /// thread or actor (and `post`s among them) keep their order; the caller
    /// never waits for the broker.
    /// ```swift
    /// @IBAction func tapped() { try? bus.enqueue(Tap(n: count), from: self) }
    /// ```
    /// At most `Configuration.maxEnqueued` events wait on the writer (while
    /// the broker holds this connection); past that it throws `.unavailable`
    /// rather than let memory grow. Failures after it returned (refused,
    /// connection lost, no connection within the wait bound) are reported as
    /// `BusNotice.postFailed`.
    /// - Parameters: as `publish(_:from:source:id:key:retain:)`.
    /// - Throws: `.invalidName`, `.protocolError` (a bad `key`),
    ///   `.encodingFailed`, `.closed`, `.unavailable` (`maxEnqueued` events
    ///   already waiting).
    public func enqueue<Event: BusEvent>(_ event: Event, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, key: String? = nil, retain: Bool = false) throws(EventBusError) {
        try enqueue(payload(event), from: observer, source: source, id: id, key: key, retain: retain)
    }

    /// As `enqueue(_:from:source:id:key:retain:)`, for any `Encodable` payload
    /// under an event type given at run time.
    /// - Throws: `.invalidName` for a bad or reserved type, then as `enqueue(_:from:source:id:key:retain:)`.
    public func enqueue(type: String, data: some Encodable, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, key: String? = nil, retain: Bool = false) throws(EventBusError) {
        try enqueue(payload(type: type, data: data), from: observer, source: source, id: id, key: key, retain: retain)
    }

    private func enqueue(_ payload: Payload, from observer: (AnyObject & Sendable)?, source: String?, id: String?, key: String?, retain: Bool) throws(EventBusError) {
        let core = self.core
        let type = payload.type
        let publish = try outgoing(payload, from: observer, source: source, id: id, key: key, retain: retain) { result in
            if case .failure(let error) = result { core.post(.postFailed(type: type, error)) }
        }
        if let error = core.state.withLock({ $0.isClosed ? $0.notConnected : nil }) { throw error }
        let limit = core.configuration.maxEnqueued
        guard core.enqueued.add(1, ordering: .relaxed).newValue <= limit else {
            core.enqueued.subtract(1, ordering: .relaxed)
            throw .unavailable(path: core.path, reason: "\(limit) events already enqueued while the broker holds this connection (Configuration.maxEnqueued)")
        }
        core.writeQueue.async {
            core.enqueued.subtract(1, ordering: .relaxed)
            let now = Clock.monotonicNanoseconds()
            core.change { $0.publish(publish, now: now) }
        }
    }

    /// (1.1) The retained event of type `Event`, decoded: the current value,
    /// as last published with `retain: true` (by any process), or nil when
    /// there is none (PROTOCOL.md "Retained events and history": a
    /// `subscribe` with `last`).
    /// ```swift
    /// if let now = try await bus.current(CurrencyChanged.self) { print(now.event.code) }
    /// ```
    /// Cancelling the task stops the wait at once with `.cancelled`; the
    /// broker's answer, if it comes, is dropped.
    /// - Throws: `.invalidName`, `.decodingFailed`, `.unavailable` when
    ///   disconnected, `.connectionLost`, `.protocolError`, `.closed`, `.cancelled`.
    public func current<Event: BusEvent>(_ type: Event.Type) async throws(EventBusError) -> Delivery<Event>? {
        guard let raw = try await currentEvent(of: try Event.validatedEventType().name) else { return nil }
        return Delivery(event: try raw.decode(Event.self, using: core.configuration.decoder), metadata: raw.metadata)
    }

    /// (1.1) The retained event of the type named `type`, raw, or nil.
    /// - Throws: `.invalidName`, then as `current(_:)`.
    public func current(type: String) async throws(EventBusError) -> RawEvent? {
        try await currentEvent(of: try Self.validate(type: type))
    }

    private func currentEvent(of type: String) async throws(EventBusError) -> RawEvent? {
        guard let pattern = Pattern(type) else { throw .invalidName(type) }
        let slot = ReplySlot<RawEvent?>()
        return try await slot.wait { completion in
            core.changeOffThread { state in
                guard !slot.isCancelled else { return Step() }
                return state.current(pattern, completion)
            }
        }
    }

    /// Publishes any `Encodable` payload under an event type given at run time.
    /// - Throws: `.invalidName` for a bad or reserved type, then as `publish(_:from:source:id:key:retain:)`.
    @discardableResult
    public func publish(type: String, data: some Encodable, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, key: String? = nil, retain: Bool = false) async throws(EventBusError) -> PublishReceipt {
        let type = try Self.validate(type: type)
        let key = try Self.validate(key: key)
        let bytes = try encode(data, type: type)
        return try await send(OutgoingPublish(type: type, data: bytes, source: source, id: id, key: key, retain: retain, exclude: observer, completion: { _ in }))
    }

    /// Publishes pre-encoded JSON `data` (any JSON value; pretty-printed input
    /// is put on one line) under an event type given at run time.
    /// - Throws: `.invalidName`, `.invalidJSON`, then as `publish(_:from:source:id:key:retain:)`.
    @discardableResult
    public func publish(type: String, json: some Sequence<UInt8>, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, key: String? = nil, retain: Bool = false) async throws(EventBusError) -> PublishReceipt {
        let type = try Self.validate(type: type)
        let key = try Self.validate(key: key)
        let bytes = try OutgoingData.prepare(Array(json))
        return try await send(OutgoingPublish(type: type, data: bytes, source: source, id: id, key: key, retain: retain, exclude: observer, completion: { _ in }))
    }

    /// An event's type (checked) and its data (encoded), as `post` and `enqueue` send them.
    private typealias Payload = (type: String, data: JSONText)

    /// `Event.eventType`, checked (`.invalidName`), and `event` encoded (`.encodingFailed`).
    private func payload<Event: BusEvent>(_ event: Event) throws(EventBusError) -> Payload {
        let type = try Event.validatedEventType().name
        return (type, try encode(event, type: type))
    }

    /// `type`, checked (`.invalidName`), and `data` encoded (`.encodingFailed`).
    private func payload(type: String, data: some Encodable) throws(EventBusError) -> Payload {
        let type = try Self.validate(type: type)
        return (type, try encode(data, type: type))
    }

    /// The publish `post` and `enqueue` hand the writer, its `key` checked
    /// first (`.protocolError`, nothing sent).
    private func outgoing(_ payload: Payload, from observer: (AnyObject & Sendable)?, source: String?, id: String?, key: String?, retain: Bool,
                          completion: @escaping Completion<PublishReceipt>) throws(EventBusError) -> OutgoingPublish {
        OutgoingPublish(type: payload.type, data: payload.data, source: source, id: id, key: try Self.validate(key: key), retain: retain,
                        exclude: observer, completion: completion)
    }

    func encode(_ value: some Encodable, type: String) throws(EventBusError) -> JSONText {
        let data: Data
        do {
            data = try core.configuration.encoder.encode(value)
        } catch {
            throw .encodingFailed(type: type, reason: RawEvent.describe(error))
        }
        return try OutgoingData.prepare(Array(data))
    }

    /// (1.3) A publish's `key`: nil, or 1-255 bytes (PROTOCOL.md "Queue
    /// groups"); anything else is the broker's `bad_request`, said before
    /// anything is sent.
    static func validate(key: String?) throws(EventBusError) -> String? {
        guard let key else { return nil }
        guard (1...ProtocolConstants.maxKeyBytes).contains(key.utf8.count) else {
            throw .protocolError(code: .badRequest, message: "key must be a string of 1-\(ProtocolConstants.maxKeyBytes) bytes, not \(key.utf8.count)")
        }
        return key
    }

    static func validate(type: String) throws(EventBusError) -> String {
        guard let valid = EventType(type), !valid.isReserved else { throw .invalidName(type) }
        return valid.name
    }

    /// Sends `publish` from the writer queue and waits for its answer; a
    /// cancelled caller stops waiting, and the publish is not sent unless the
    /// bus already started writing it (see `publish(_:from:source:id:key:retain:)`).
    private func send(_ publish: OutgoingPublish) async throws(EventBusError) -> PublishReceipt {
        let slot = ReplySlot<PublishReceipt>()
        let core = self.core
        return try await slot.wait(start: { completion in
            var publish = publish
            publish.completion = completion
            publish.isCancelled = { slot.isCancelled }
            let started = publish
            core.changeOffThread { $0.publish(started, now: Clock.monotonicNanoseconds()) }
        }, onCancel: {
            // One waiting for a connection is forgotten now, not at the reconnect.
            core.update { $0.forgetCancelledWaiting() }
        })
    }

    // MARK: Requests

    /// Round trip to the broker. Requests on a connection are handled in
    /// order (PROTOCOL.md "Semantics"), so when this returns the broker has
    /// handled every subscribe and unsubscribe made before it.
    /// - Throws: `.unavailable` when disconnected, `.connectionLost`,
    ///   `.closed`, `.cancelled` (the task was cancelled: it stops waiting at once).
    public func ping() async throws(EventBusError) {
        _ = try await request(stats: false)
    }

    /// The broker's counters (PROTOCOL.md "Requests": `stats`).
    /// - Throws: as `ping()`.
    public func stats() async throws(EventBusError) -> BrokerStats {
        let reply = try await request(stats: true)
        return BrokerStats(
            connections: Int(reply.unsigned("connections") ?? 0),
            subscriptions: Int(reply.unsigned("subscriptions") ?? 0),
            published: reply.unsigned("published") ?? 0,
            delivered: reply.unsigned("delivered") ?? 0,
            dropped: reply.unsigned("dropped") ?? 0,
            queuedBytes: reply.unsigned("queued_bytes") ?? 0,
            uptimeSeconds: reply.double("uptime_s") ?? 0,
            instance: reply.string("instance") ?? "",
            retained: Int(reply.unsigned("retained") ?? 0),
            historyFirstSeq: reply.unsigned("history_first_seq") ?? 0,
            historyEvents: Int(reply.unsigned("history_events") ?? 0),
            held: Int(reply.unsigned("held") ?? 0),
            holds: reply.unsigned("holds") ?? 0,
            stalls: reply.unsigned("stalls") ?? 0
        )
    }

    private func request(stats: Bool) async throws(EventBusError) -> Reply {
        let slot = ReplySlot<Reply>()
        return try await slot.wait { completion in
            core.changeOffThread { state in
                guard !slot.isCancelled else { return Step() }
                return state.request(stats: stats, completion)
            }
        }
    }

    // MARK: Notices

    /// A stream of what happens besides events: connects and disconnects,
    /// `dropped` frames from the broker, events that could not be decoded,
    /// refused subscriptions. Each call makes a new stream (the newest 1000
    /// are kept if it is not read); all end when the bus closes.
    public func notices() -> AsyncStream<BusNotice> {
        core.notices()
    }
}
