// The broker as a state machine (PROTOCOL.md "Requests", "Events",
// "Semantics"): connections, subscriptions, routing, seq, the echo rule,
// outbound limits, drop accounting and stats. No fds, no threads, no clock
// reads: time comes in as an argument, and effects come out as connection
// state the server acts on (`takeConnectionsToFlush`, `wantsInput`,
// `readyToClose`).
//
// Before editing: every path that queues bytes goes through `enqueue` so the
// per-connection and global byte counts stay exact; every removal of a
// subscription updates both the connection and the index.
import EventBusProtocol

/// Limits and identity of a broker (PROTOCOL.md "Semantics" defaults).
public struct BrokerConfiguration: Sendable {
    /// Largest incoming frame in bytes (`--max-frame`, default 1 MiB).
    public var maxFrameBytes = ProtocolConstants.defaultMaxFrameBytes
    /// Per-connection outbound limit in bytes (`--max-outbound`, default 8 MiB).
    public var maxOutboundBytes = 8 << 20
    /// Connections at most (`--max-connections`, default 4096).
    public var maxConnections = 4096
    /// Patterns per connection at most (`--max-subscriptions`, default 4096).
    public var maxSubscriptionsPerConnection = 4096
    /// All outbound queues together in bytes (`--max-queued`, default 512 MiB).
    public var maxQueuedBytes = 512 << 20
    /// `server` and `version` in the `hello` reply.
    public var serverName = "eventbusd"
    public var version = EventBusRelease.version

    public init() {}
}

/// A point in time as the server read it once for a batch of input.
public struct BrokerTime: Sendable {
    /// CLOCK_REALTIME, ns since the Unix epoch: stamps events.
    public var wallNanoseconds: Int64
    /// CLOCK_MONOTONIC, ns: measures uptime.
    public var monotonicNanoseconds: Int64

    public init(wallNanoseconds: Int64, monotonicNanoseconds: Int64) {
        self.wallNanoseconds = wallNanoseconds
        self.monotonicNanoseconds = monotonicNanoseconds
    }
}

/// Counters reported by `stats` (PROTOCOL.md "Requests").
public struct BrokerStatistics: Equatable, Sendable {
    public var connections = 0
    public var subscriptions = 0
    /// Events accepted from publishers.
    public var published: UInt64 = 0
    /// Event frames queued to subscribers.
    public var delivered: UInt64 = 0
    /// Events dropped for slow subscribers.
    public var dropped: UInt64 = 0
    /// Bytes in all outbound queues.
    public var queuedBytes = 0
}

public final class Broker {
    public let configuration: BrokerConfiguration
    /// Random id of this broker run (PROTOCOL.md "Events": `instance`).
    public let instance: String
    let startMonotonic: Int64

    public internal(set) var statistics = BrokerStatistics()
    var connections: [ConnectionID: Connection] = [:]
    let index = SubscriptionIndex()
    var nextConnectionID: ConnectionID = 1
    var seq: UInt64 = 0

    /// Things worth logging, collected for the server (`takeNotices`).
    var notices: [BrokerNotice] = []
    /// Connections given new output since the server last asked.
    var toFlush: [Connection] = []
    /// Reused buffers, so a publish allocates only its shared frame.
    var scratch: [UInt8] = []
    var timeScratch: [UInt8] = []
    var timestamps = TimestampFormatter()
    var now = BrokerTime(wallNanoseconds: 0, monotonicNanoseconds: 0)

    /// - Parameters:
    ///   - configuration: limits.
    ///   - instance: this run's id, e.g. 16 random hex digits.
    ///   - startTime: when the broker started (for `uptime_s`).
    public init(configuration: BrokerConfiguration, instance: String, startTime: BrokerTime) {
        self.configuration = configuration
        self.instance = instance
        self.startMonotonic = startTime.monotonicNanoseconds
        self.now = startTime
        scratch.reserveCapacity(4096)
    }

    /// Number of open connections.
    public var connectionCount: Int { connections.count }

    /// Whether the subscription index is empty (for invariant checks).
    public var indexIsEmpty: Bool { index.isEmpty }

    // MARK: Connections

    /// Admits a new connection, or refuses it at `--max-connections`.
    /// - Returns: the connection, or the bytes of the `limit` error frame to
    ///   write before closing the socket.
    public func open(credentials: Credentials) -> Result<Connection, RefusedConnection> {
        guard connections.count < configuration.maxConnections else {
            var bytes: [UInt8] = []
            FrameEncoder.appendError(req: nil, ProtocolError(.limit, "too many connections (limit \(configuration.maxConnections))"), to: &bytes)
            return .failure(RefusedConnection(frame: bytes))
        }
        let connection = Connection(id: nextConnectionID, credentials: credentials, maxFrameBytes: configuration.maxFrameBytes)
        nextConnectionID += 1
        connections[connection.id] = connection
        statistics.connections = connections.count
        return .success(connection)
    }

    /// Forgets a connection: its subscriptions vanish (weak subscriptions,
    /// PROTOCOL.md "Semantics") and its queue is released. Idempotent.
    public func close(_ connection: Connection) {
        guard !connection.isClosed else { return }
        connection.isClosed = true
        for pattern in connection.patterns { index.remove(pattern, connection) }
        statistics.subscriptions -= connection.patterns.count
        connection.patterns = []
        statistics.queuedBytes -= connection.outbound.byteCount
        connection.outbound.removeAll()
        connections[connection.id] = nil
        statistics.connections = connections.count
    }

    // MARK: Input

    /// Handles bytes read from a connection: every complete frame in order.
    /// - Parameters:
    ///   - bytes: the chunk read; not retained.
    ///   - time: when it was read (stamps events).
    public func receive(_ connection: Connection, _ bytes: UnsafeRawBufferPointer, at time: BrokerTime) {
        guard !connection.isClosed, !connection.inputClosed else { return }
        now = time
        connection.splitter.feed(bytes) { piece in
            handle(piece, from: connection)
            return !connection.isClosed && !connection.closeAfterNextWrite
        }
        updateBackpressure(connection)
    }

    /// Handles end of input (the client shut down its writing side): a last
    /// frame without LF is handled, then a connection without subscriptions is
    /// closed once its replies are written; one with subscriptions keeps
    /// receiving events (PROTOCOL.md "Semantics": half-close).
    public func endOfInput(_ connection: Connection, at time: BrokerTime) {
        guard !connection.isClosed, !connection.inputClosed else { return }
        now = time
        connection.splitter.finish { piece in
            handle(piece, from: connection)
            return true
        }
        connection.inputClosed = true
        if connection.patterns.isEmpty { connection.closeWhenFlushed = true }
    }

    func handle(_ piece: SplitFrame, from connection: Connection) {
        switch piece {
        case .tooLarge(let size):
            reply(to: connection, req: nil, error: ProtocolError(.frameTooLarge, "frame of \(size) bytes exceeds the limit of \(configuration.maxFrameBytes) bytes; discarded"))
        case .frame(let frame):
            let decoded = RequestDecoder.decode(frame)
            let req = decoded.req.map { UnsafeRawBufferPointer(rebasing: frame[$0.start..<$0.end]) }
            switch decoded.request {
            case .failure(let error):
                reply(to: connection, req: req, error: error)
            case .success(let request):
                perform(request, frame: frame, req: req, from: connection)
            }
        }
    }

    // MARK: Output

    /// The connections that got new output since the last call, each once.
    /// The server writes their queues (`outbound`) and reports with `didWrite`.
    public func takeConnectionsToFlush() -> [Connection] {
        let list = toFlush
        toFlush.removeAll(keepingCapacity: true)
        for connection in list { connection.isMarkedForWrite = false }
        return list
    }

    /// Records that `bytes` of the connection's queue were written. Resumes
    /// reading below half the limit and queues a pending `dropped` notice then.
    public func didWrite(_ connection: Connection, bytes: Int) {
        guard bytes > 0 else { return }
        connection.outbound.consume(bytes)
        statistics.queuedBytes -= bytes
        let limit = configuration.maxOutboundBytes
        if connection.outbound.byteCount < limit / 2 {
            connection.readPaused = false
            if connection.pendingDropCount > 0 && !connection.closeAfterNextWrite { queueDropNotice(connection) }
        }
    }

    /// Starts a graceful stop: no more input is handled from any connection;
    /// each is closed once its queue is written.
    public func beginShutdown() {
        for connection in connections.values {
            connection.closeWhenFlushed = true
        }
    }

    /// Lifts backpressure regardless of the queue, for a peer that has gone:
    /// its remaining frames are handled, its replies dropped with it.
    public func resumeReading(_ connection: Connection) {
        connection.readPaused = false
    }

    /// Pauses reading a connection whose queue is over its limit.
    func updateBackpressure(_ connection: Connection) {
        if connection.outbound.byteCount > configuration.maxOutboundBytes { connection.readPaused = true }
    }

    func markForWrite(_ connection: Connection) {
        if !connection.isMarkedForWrite {
            connection.isMarkedForWrite = true
            toFlush.append(connection)
        }
    }

    /// Queues a frame (the single place that grows queues).
    func enqueue(_ frame: OutboundFrame, seq: UInt64, to connection: Connection) {
        connection.outbound.append(frame, seq: seq)
        statistics.queuedBytes += frame.count
        markForWrite(connection)
    }

    func enqueue(bytes: [UInt8], to connection: Connection) {
        let frame = bytes.withUnsafeBytes { OutboundFrame.copying($0) }
        enqueue(frame, seq: 0, to: connection)
    }

    func reply(to connection: Connection, req: UnsafeRawBufferPointer?, error: ProtocolError) {
        scratch.removeAll(keepingCapacity: true)
        FrameEncoder.appendError(req: req, error, to: &scratch)
        enqueue(bytes: scratch, to: connection)
    }

    func replyOK(to connection: Connection, req: UnsafeRawBufferPointer?, fields: (inout [UInt8]) -> Void = { _ in }) {
        scratch.removeAll(keepingCapacity: true)
        FrameEncoder.appendOK(req: req, to: &scratch, fields: fields)
        enqueue(bytes: scratch, to: connection)
    }

    func queueDropNotice(_ connection: Connection) {
        var bytes: [UInt8] = []
        FrameEncoder.appendDropped(count: connection.pendingDropCount, sinceSeq: connection.pendingDropSince, to: &bytes)
        connection.pendingDropCount = 0
        connection.pendingDropSince = 0
        enqueue(bytes: bytes, to: connection)
    }

    func recordDrops(_ connection: Connection, count: UInt64, firstSeq: UInt64) {
        guard count > 0 else { return }
        if connection.pendingDropCount == 0 {
            connection.pendingDropSince = firstSeq
            notices.append(.startedDropping(connection.id, pid: connection.credentials.pid))
        }
        connection.pendingDropCount += count
        statistics.dropped += count
    }
}

/// Something the server may log; produced only on state changes, never per event.
public enum BrokerNotice: Equatable, Sendable {
    /// A connection began losing events (its next `dropped` notice is pending).
    case startedDropping(ConnectionID, pid: Int32)
    /// A connection hit a limit (`limit` error sent).
    case limitReached(ConnectionID, pid: Int32, message: String)
    /// A connection is being closed under `overflow: disconnect`.
    case slowConsumerDisconnected(ConnectionID, pid: Int32)
}

extension Broker {
    /// Notices collected since the last call.
    public func takeNotices() -> [BrokerNotice] {
        guard !notices.isEmpty else { return [] }
        defer { notices.removeAll() }
        return notices
    }
}

/// A connection refused at `--max-connections`: write `frame`, then close.
public struct RefusedConnection: Error {
    public let frame: [UInt8]
}
