// One client connection as the broker core sees it: identity, options from
// `hello`, its subscriptions, framing state, outbound queue, drop accounting.
//
// Before editing: the core never touches fds; the server maps its fds to these
// objects. Fields the server reads are public; all changes go through `Broker`.
import EventBusProtocol

/// Broker-assigned connection number, unique within one broker run; 1, 2, 3...
public typealias ConnectionID = UInt64

/// The peer's kernel credentials (`SO_PEERCRED`), captured at connect time.
public struct Credentials: Equatable, Sendable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

public final class Connection {
    public let id: ConnectionID
    public let credentials: Credentials

    /// `hello` options (PROTOCOL.md "Requests").
    public internal(set) var clientName: String?
    public internal(set) var echo = false
    public internal(set) var overflow = OverflowPolicy.dropNew
    var saidHello = false
    /// The value used for `source` when a publish has none: client name or `pid/<pid>`.
    var defaultSource: String

    /// This connection's patterns (PROTOCOL.md "Semantics": weak, gone with it).
    public internal(set) var patterns: Set<Pattern> = []

    var splitter: FrameSplitter
    public internal(set) var outbound = OutboundQueue()

    /// Events lost since the last `dropped` notice, and the seq of the first.
    public internal(set) var pendingDropCount: UInt64 = 0
    var pendingDropSince: UInt64 = 0
    /// Last seq routed here (so one event is delivered at most once).
    var lastRoutedSeq: UInt64 = 0

    /// The client shut down its writing side (EOF read).
    public internal(set) var inputClosed = false
    /// The broker will close this connection once its queue is written
    /// (EOF without subscriptions, `slow_consumer`, shutdown).
    public internal(set) var closeWhenFlushed = false
    /// Close right after the next write attempt, written or not (`overflow: disconnect`).
    public internal(set) var closeAfterNextWrite = false
    /// Requests are not read while the queue is over the outbound limit
    /// (PROTOCOL.md "Semantics": requests are back-pressured).
    public internal(set) var readPaused = false
    /// Closed by the core; the server must release it.
    public internal(set) var isClosed = false
    /// In the broker's list of connections with new output.
    var isMarkedForWrite = false

    /// Free for the server (e.g. the fd and its epoll interest).
    public var serverTag: Int = -1
    public var serverInterest: UInt32 = 0

    init(id: ConnectionID, credentials: Credentials, maxFrameBytes: Int) {
        self.id = id
        self.credentials = credentials
        self.splitter = FrameSplitter(maxFrameBytes: maxFrameBytes)
        self.defaultSource = "pid/\(credentials.pid)"
    }

    /// Whether the server should watch this connection for readable input.
    public var wantsInput: Bool { !inputClosed && !readPaused && !isClosed && !closeWhenFlushed && !closeAfterNextWrite }

    /// Whether the server should close it now: nothing left to write and the
    /// core asked to close after flushing.
    public var readyToClose: Bool { isClosed || (closeWhenFlushed && outbound.isEmpty) }
}
