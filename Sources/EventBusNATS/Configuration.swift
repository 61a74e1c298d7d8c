// Settings of one NATS client (state machine and driver), with the defaults
// of nats.go where it has one and the reason where we differ.
//
// Before editing: there is deliberately no "max reconnect attempts": the
// client retries forever (see Backoff.swift).

/// How many messages were dropped for want of room, since the last report.
public struct DropSummary: Equatable, Sendable {
    /// Messages dropped (the outbox was full).
    public var count: Int
    /// The `tag` of the first of them, when it had one.
    public var firstTag: UInt64?

    public init(count: Int, firstTag: UInt64?) {
        self.count = count
        self.firstTag = firstTag
    }
}

/// Everything a `ClientState` needs to know up front.
public struct ClientConfiguration: Sendable {
    /// Seed servers, tried first and never forgotten. Must not be empty.
    public var servers: [ServerAddress]
    /// CONNECT options (`name`, `echo`, credentials).
    public var connect: ConnectOptions
    /// Shuffle the seeds and newly discovered servers (nats.go default: yes).
    public var randomize = true
    /// Delay between failed passes over the pool (default 250 ms to 30 s, jittered; forever).
    public var backoff = Backoff()
    /// Bound on a TCP connect (driver) and on INFO + CONNECT + PONG (state machine). nats.go: 2 s.
    public var connectTimeout: Duration = .seconds(2)
    /// How often the client PINGs an idle-or-not server (nats.go: 2 min).
    public var pingInterval: Duration = .seconds(120)
    /// PINGs without a PONG before the connection is declared stale and
    /// closed (nats.go `MaxPingsOut`: 2).
    public var maxPingsOutstanding = 2
    /// A link that stayed up this long is healthy: losing it starts the
    /// backoff afresh. A shorter one counts as a failed attempt, so a server
    /// that accepts and then drops every connection cannot make us spin.
    public var healthyLinkDuration: Duration = .seconds(1)
    /// Outbox bounds while disconnected or while the socket is slow: encoded
    /// bytes (nats.go ReconnectBufSize: 8 MiB) and messages (10,000).
    public var bufferLimitBytes = 8 << 20
    public var bufferLimitMessages = 10_000
    /// Parser bounds (see `Parser`).
    public var maxControlLineBytes = 4096
    public var maxInfoLineBytes = 64 << 10
    /// Published after every link-up, after the held messages (a hello).
    public var announcements: [OutgoingMessage] = []
    /// Builds the message that reports a gap: placed in the stream where the
    /// messages were dropped (before the next message accepted after them),
    /// or at the latest right after the held messages at the next link-up.
    /// Nil: drops are only counted.
    public var gapReport: (@Sendable (DropSummary) -> OutgoingMessage)?
    /// Seed for the shuffles and the jitter (nil: from the system generator).
    public var randomSeed: UInt64?

    /// - Precondition: `servers` is not empty.
    public init(servers: [ServerAddress], connect: ConnectOptions) {
        precondition(!servers.isEmpty, "a NATS client needs at least one server")
        self.servers = servers
        self.connect = connect
    }
}

/// Counters of one client, for status output. All counts are since the client started.
public struct ClientStatistics: Equatable, Sendable {
    /// Whether the link is up (CONNECT answered, subscriptions re-sent).
    public var linkUp = false
    /// The server connected to, when up.
    public var server: ServerAddress?
    /// Non-exempt messages and their encoded bytes in the outbox (held or not yet written).
    public var bufferedMessages = 0
    public var bufferedBytes = 0
    /// Messages accepted by `publish`.
    public var published = 0
    /// Messages dropped for want of room in the outbox.
    public var droppedBufferFull = 0
    /// Messages refused because header block plus payload exceeded `max_payload`.
    public var refusedTooLarge = 0
    /// Messages received (MSG/HMSG), and those skipped as over our payload bound.
    public var received = 0
    public var skippedOversized = 0
    /// TCP connection attempts, link-ups after the first, and -ERRs received.
    public var connectAttempts = 0
    public var reconnects = 0
    public var serverErrors = 0

    public init() {}
}
