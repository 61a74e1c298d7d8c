// `EventBus`: how a Swift program joins the bus. Connecting, publishing,
// requests (`ping`, `stats`) and notices live here; observers are in
// EventBus+Observers.swift and streams in EventBus+Streams.swift.
//
// Before editing: `EventBus` is a thin `Sendable` handle over `BusCore`; all
// state sits behind `BusCore`'s locks (see BusCore.swift for lock order).
import EventBusProtocol
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
        let result: Result<EventBus, EventBusError> = await withCheckedContinuation { continuation in
            let box = Locked<BusCore?>(nil)
            let core = BusCore(configuration: configuration, path: path) { result in
                let core = box.withLock { $0.take() }
                switch result {
                case .success: continuation.resume(returning: .success(EventBus(core: core!)))
                case .failure(let error): continuation.resume(returning: .failure(error))
                }
            }
            box.withLock { $0 = core }
            core.start()
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
    ///   - retain: (1.1) also keep it as the retained event of its type, the
    ///     current value that `current(_:)` and `initial: .last` hand out
    ///     (`"retain":true`, PROTOCOL.md "Retained events and history").
    ///
    /// (1.2) While the broker holds this connection it awaits, without
    /// blocking the caller's thread (the frame is written from the bus's
    /// writer queue): nothing is dropped, and each waiting call holds only
    /// its own frame (PROTOCOL.md "Flow control (1.2)").
    /// - Returns: the event's `seq` and how many connections and local
    ///   registrations received it.
    /// - Throws: `.encodingFailed`, `.unavailable` (no connection and policy
    ///   `.fail`, or the wait bound passed), `.connectionLost` (lost before the
    ///   broker answered), `.protocolError` (e.g. `frame_too_large`; with
    ///   `retain`, `limit` when the retained events' limits are reached: then
    ///   nothing was published), `.closed`.
    @discardableResult
    public func publish<Event: BusEvent>(_ event: Event, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, retain: Bool = false) async throws(EventBusError) -> PublishReceipt {
        let type = Event.validatedEventType.name
        let data = try encode(event, type: type)
        return try await send(OutgoingPublish(type: type, data: data, source: source, id: id, retain: retain, exclude: observer, completion: { _ in }))
    }

    /// (1.1) Publishes from synchronous code, in call order: the frame is
    /// written (or queued while disconnected, `Configuration.whileDisconnected`)
    /// before `post` returns, so calls from one thread or actor reach the
    /// broker, and every subscriber, in the order they were made. The
    /// in-process `notifyObservers()` of the seeds:
    /// ```swift
    /// @IBAction func tapped() { try? bus.post(Tap(n: count), from: self) }
    /// ```
    /// It does not wait for the broker's answer; a failure after it returned
    /// is reported as `BusNotice.postFailed`. (1.2) It blocks while the
    /// broker holds this connection (a subscriber of this uid has no room,
    /// PROTOCOL.md "Flow control (1.2)") or back-pressures it: the frame is
    /// written before it returns, nothing is dropped and nothing is queued
    /// in the library, so a poster goes no faster than its slowest steady
    /// observer (docs/CLIENT.md "Flow control").
    /// - Parameters: as `publish(_:from:source:id:retain:)`.
    /// - Throws: `.encodingFailed`, `.closed`; `.unavailable` while
    ///   disconnected with `whileDisconnected: .fail` or too many waiting.
    public func post<Event: BusEvent>(_ event: Event, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, retain: Bool = false) throws(EventBusError) {
        let type = Event.validatedEventType.name
        let data = try encode(event, type: type)
        let failure = Locked<EventBusError?>(nil)
        let returned = Locked(false)
        let core = self.core
        let publish = OutgoingPublish(type: type, data: data, source: source, id: id, retain: retain, exclude: observer, completion: { result in
            guard case .failure(let error) = result else { return }
            // Failed at once (closed, unavailable): thrown below; later: a notice.
            let late = returned.withLock { done in
                if !done { failure.withLock { $0 = error } }
                return done
            }
            if late { core.post(.postFailed(type: type, error)) }
        })
        let now = Clock.monotonicNanoseconds()
        core.change { $0.publish(publish, now: now) }
        let immediate = returned.withLock { done in
            done = true
            return failure.withLock { $0 }
        }
        if let immediate { throw immediate }
    }

    /// (1.1) The retained event of type `Event`, decoded: the current value,
    /// as last published with `retain: true` (by any process), or nil when
    /// there is none (PROTOCOL.md "Retained events and history": a
    /// `subscribe` with `last`).
    /// ```swift
    /// if let now = try await bus.current(CurrencyChanged.self) { show(now.event.code) }
    /// ```
    /// - Throws: `.decodingFailed`, `.unavailable` when disconnected,
    ///   `.connectionLost`, `.protocolError`, `.closed`.
    public func current<Event: BusEvent>(_ type: Event.Type) async throws(EventBusError) -> Delivery<Event>? {
        guard let raw = try await currentEvent(of: Event.validatedEventType.name) else { return nil }
        return Delivery(event: try raw.decode(Event.self, using: core.configuration.decoder), metadata: raw.metadata)
    }

    /// (1.1) The retained event of the type named `type`, raw, or nil.
    /// - Throws: `.invalidName`, then as `current(_:)`.
    public func current(type: String) async throws(EventBusError) -> RawEvent? {
        try await currentEvent(of: try Self.validate(type: type))
    }

    private func currentEvent(of type: String) async throws(EventBusError) -> RawEvent? {
        guard let pattern = Pattern(type) else { throw .invalidName(type) }
        let result: Result<RawEvent?, EventBusError> = await withCheckedContinuation { continuation in
            core.changeOffThread { $0.current(pattern) { continuation.resume(returning: $0) } }
        }
        return try result.get()
    }

    /// Publishes any `Encodable` payload under an event type given at run time.
    /// - Throws: `.invalidName` for a bad or reserved type, then as `publish(_:from:source:id:)`.
    @discardableResult
    public func publish(type: String, data: some Encodable, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, retain: Bool = false) async throws(EventBusError) -> PublishReceipt {
        let type = try Self.validate(type: type)
        let bytes = try encode(data, type: type)
        return try await send(OutgoingPublish(type: type, data: bytes, source: source, id: id, retain: retain, exclude: observer, completion: { _ in }))
    }

    /// Publishes pre-encoded JSON `data` (any JSON value; pretty-printed input
    /// is put on one line) under an event type given at run time.
    /// - Throws: `.invalidName`, `.invalidJSON`, then as `publish(_:from:source:id:)`.
    @discardableResult
    public func publish(type: String, json: some Sequence<UInt8>, from observer: (AnyObject & Sendable)? = nil, source: String? = nil, id: String? = nil, retain: Bool = false) async throws(EventBusError) -> PublishReceipt {
        let type = try Self.validate(type: type)
        let bytes = try OutgoingData.prepare(Array(json))
        return try await send(OutgoingPublish(type: type, data: bytes, source: source, id: id, retain: retain, exclude: observer, completion: { _ in }))
    }

    private func encode(_ value: some Encodable, type: String) throws(EventBusError) -> JSONText {
        let data: Data
        do {
            data = try core.configuration.encoder.encode(value)
        } catch {
            throw .encodingFailed(type: type, reason: RawEvent.describe(error))
        }
        return try OutgoingData.prepare(Array(data))
    }

    static func validate(type: String) throws(EventBusError) -> String {
        guard let valid = EventType(type), !valid.isReserved else { throw .invalidName(type) }
        return valid.name
    }

    private func send(_ publish: OutgoingPublish) async throws(EventBusError) -> PublishReceipt {
        let result: Result<PublishReceipt, EventBusError> = await withCheckedContinuation { continuation in
            var publish = publish
            publish.completion = { continuation.resume(returning: $0) }
            let started = publish
            core.changeOffThread { $0.publish(started, now: Clock.monotonicNanoseconds()) }
        }
        return try result.get()
    }

    // MARK: Requests

    /// Round trip to the broker. Requests on a connection are handled in
    /// order (PROTOCOL.md "Semantics"), so when this returns the broker has
    /// handled every subscribe and unsubscribe made before it.
    /// - Throws: `.unavailable` when disconnected, `.connectionLost`, `.closed`.
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
        let result: Result<Reply, EventBusError> = await withCheckedContinuation { continuation in
            core.changeOffThread { $0.request(stats: stats) { continuation.resume(returning: $0) } }
        }
        return try result.get()
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
