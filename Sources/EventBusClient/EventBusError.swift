// The one error type of the client library and the notices it reports on the
// side (connection changes, `dropped` frames, events it could not decode).
//
// Before editing: every failure a caller can see is an `EventBusError` case;
// keep `description` one line that names the path, type or code involved.
import EventBusProtocol
import EventBusSession

/// The `code` of an `error` frame from the broker (PROTOCOL.md "Errors").
public typealias ErrorCode = EventBusProtocol.ErrorCode
/// What the broker does when this connection's outbound queue is full (`hello` `overflow`).
public typealias OverflowPolicy = EventBusProtocol.OverflowPolicy
/// Which bus to join: `.path`, `.system`, `.user` or `.automatic` (PROTOCOL.md "Transport").
public typealias BusSelection = EventBusProtocol.BusSelection

/// Everything that can go wrong in the client library.
public enum EventBusError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No broker could be reached at `path`: connect(2) failed (`reason` is its
    /// error, e.g. `connect: No such file or directory`), or the bus is
    /// disconnected and the publish could not wait (policy `.fail`, the wait
    /// bound passed, or too many publishes were waiting), or the broker closed
    /// the first connection before answering (`closedBeforeAnswering`).
    case unavailable(path: String, reason: String)
    /// The connection was lost after the request was written: the broker may
    /// or may not have handled it (delivery is at-most-once).
    case connectionLost(reason: String)
    /// The broker answered with an `error` frame (PROTOCOL.md "Errors").
    case protocolError(code: ErrorCode, message: String)
    /// An event type or subscription pattern that breaks PROTOCOL.md
    /// "Names and patterns" (or a reserved `eventbus.` type in a publish).
    case invalidName(String)
    /// A client name that is not 1-64 bytes of `A-Z a-z 0-9 _ . - :`.
    case invalidClientName(String)
    /// Pre-encoded `data` that is not one valid JSON value.
    case invalidJSON(String)
    /// `JSONEncoder` could not encode the payload of an event of `type`.
    case encodingFailed(type: String, reason: String)
    /// An event of `type` arrived whose `data` does not decode as the expected Swift type.
    case decodingFailed(type: String, reason: String)
    /// The broker sent something this client cannot read (a bug in one of the two).
    case malformedFrame(String)
    /// The bus was closed with `close()` (or gave up reconnecting).
    case closed

    /// One line naming the path, type or code involved.
    public var description: String {
        switch self {
        case .unavailable(let path, let reason): "event bus unavailable at \(path): \(reason)"
        case .connectionLost(let reason): "connection to the event bus lost: \(reason)"
        case .protocolError(let code, let message): "event bus refused the request: \(code.rawValue): \(message)"
        case .invalidName(let name): "invalid event type or pattern: \"\(name)\""
        case .invalidClientName(let name): "invalid client name: \"\(name)\" (1-64 bytes of A-Z a-z 0-9 _ . - :)"
        case .invalidJSON(let reason): "event data is not valid JSON: \(reason)"
        case .encodingFailed(let type, let reason): "could not encode \(type) event: \(reason)"
        case .decodingFailed(let type, let reason): "could not decode \(type) event: \(reason)"
        case .malformedFrame(let reason): "unreadable frame from the event bus: \(reason)"
        case .closed: "the event bus connection was closed"
        }
    }
}

extension EventBusError {
    /// The error for a first connection the broker closed before sending
    /// anything: `.unavailable` whose reason says where to look, e.g.
    /// `the broker closed the connection before answering: it may have failed
    /// to start (see 'systemctl --user status eventbus.service' and
    /// 'journalctl --user -u eventbus')` for the user bus, the system
    /// manager's commands for the system bus, `it may have exited` for another
    /// path (`SocketPath.startFailureHint`).
    /// - Parameter runtimeDirectory: `$XDG_RUNTIME_DIR`, to recognise the user bus.
    public static func closedBeforeAnswering(path: String, runtimeDirectory: String?) -> EventBusError {
        let hint = SocketPath.startFailureHint(for: path, runtimeDirectory: runtimeDirectory)
        return .unavailable(path: path, reason: "the broker closed the connection before answering: \(hint)")
    }
}

/// Something that happened on the bus besides events and replies, reported
/// through `EventBus.notices()`.
public enum BusNotice: Equatable, Sendable {
    /// A connection was established and `hello` answered (the first one and
    /// every reconnect). Subscriptions have been sent again on it.
    case connected(ConnectionInfo)
    /// The connection was lost; the bus reconnects by its `ReconnectPolicy`.
    case disconnected(EventBusError)
    /// The broker dropped `count` events for this connection, the first with
    /// `sinceSeq` (PROTOCOL.md "Semantics": the `dropped` frame).
    case dropped(count: UInt64, sinceSeq: UInt64)
    /// (1.2) A local observer or stream on `pattern` (its event type, for a
    /// typed one) took nothing for `Configuration.localStallTimeout` while
    /// the bus's buffer was full, and lost `count` events, the first with
    /// `sinceSeq`, until it had caught up: one notice per such run, sent
    /// when it has taken its last queued event (or ended).
    case droppedLocally(pattern: String, count: UInt64, sinceSeq: UInt64)
    /// An event arrived that a typed observer or stream could not decode; it
    /// was skipped for that receiver.
    case undecodable(EventBusError)
    /// The broker refused to subscribe to `pattern` (e.g. `limit`); the
    /// observers and streams on it were ended.
    case subscriptionRefused(pattern: String, EventBusError)
    /// An `error` frame that answered no request of ours.
    case brokerError(EventBusError)
    /// Reconnecting stopped (`ReconnectPolicy.maxAttempts` reached); the bus is closed.
    case gaveUp(EventBusError)
    /// (1.1) After a reconnect the broker's history could not replay
    /// everything this process may have missed (the broker restarted, or
    /// its ring no longer reaches back): reported once per reconnect, and on
    /// the next event of each registration (`EventMetadata.gap`).
    case gap(BusGap)
    /// (1.1) A `post(_:from:)` failed after it returned (the broker refused
    /// it, or the connection was lost before its answer).
    case postFailed(type: String, EventBusError)
}

/// (1.1) What a reconnect could not recover (EventBusSession).
public typealias BusGap = EventBusSession.BusGap
/// What the broker said in its `hello` reply (EventBusSession).
public typealias ConnectionInfo = EventBusSession.ConnectionInfo

/// The broker's answer to a publish (PROTOCOL.md "Requests": `ok` of `publish`).
public struct PublishReceipt: Equatable, Sendable {
    /// The event's broker-wide sequence number.
    public var seq: UInt64
    /// How many other connections it was queued to.
    public var delivered: Int
    /// How many local observers and streams of this process it was handed to.
    public var deliveredLocally: Int

    /// The fields of a `publish` reply plus the local count.
    public init(seq: UInt64, delivered: Int, deliveredLocally: Int) {
        self.seq = seq
        self.delivered = delivered
        self.deliveredLocally = deliveredLocally
    }
}

/// The broker's counters (PROTOCOL.md "Requests": `ok` of `stats`).
public struct BrokerStats: Equatable, Sendable {
    /// Open connections, this one included.
    public var connections: Int
    /// Subscription patterns over all connections.
    public var subscriptions: Int
    /// Events accepted since the broker started.
    public var published: UInt64
    /// Event copies queued to subscribers.
    public var delivered: UInt64
    /// Event copies dropped by overflow rules.
    public var dropped: UInt64
    /// Bytes waiting in all outbound queues.
    public var queuedBytes: UInt64
    /// Seconds since the broker started.
    public var uptimeSeconds: Double
    /// The broker run's random id.
    public var instance: String
    /// (1.1) Retained events the broker holds.
    public var retained: Int
    /// (1.1) The oldest seq in the broker's history (one past the newest when empty).
    public var historyFirstSeq: UInt64
    /// (1.1) Events in the broker's history.
    public var historyEvents: Int
    /// (1.2) Publisher connections held back now (PROTOCOL.md "Flow control"); 0 from a 1.1 broker.
    public var held: Int
    /// (1.2) Times a publisher was held since the broker started.
    public var holds: UInt64
    /// (1.2) Times a connection went behind (took nothing for the stall timeout while holding one).
    public var stalls: UInt64

    /// The fields of a `stats` reply.
    public init(connections: Int, subscriptions: Int, published: UInt64, delivered: UInt64, dropped: UInt64, queuedBytes: UInt64, uptimeSeconds: Double, instance: String,
                retained: Int = 0, historyFirstSeq: UInt64 = 0, historyEvents: Int = 0, held: Int = 0, holds: UInt64 = 0, stalls: UInt64 = 0) {
        self.connections = connections
        self.subscriptions = subscriptions
        self.published = published
        self.delivered = delivered
        self.dropped = dropped
        self.queuedBytes = queuedBytes
        self.uptimeSeconds = uptimeSeconds
        self.instance = instance
        self.retained = retained
        self.historyFirstSeq = historyFirstSeq
        self.historyEvents = historyEvents
        self.held = held
        self.holds = holds
        self.stalls = stalls
    }
}
