// Settings of one NATS client (state machine and driver), with the defaults
// of nats.go where it has one and the reason where we differ.
//
// Before editing: there is deliberately no "max reconnect attempts": the
// client retries forever (see Backoff.swift).

/// How many messages were dropped for want of room, since the last report.
package struct DropSummary: Equatable, Sendable {
    /// Messages dropped (the outbox was full).
    package var count: Int
    /// The `tag` of the first of them, when it had one.
    package var firstTag: UInt64?

    package init(count: Int, firstTag: UInt64?) {
        self.count = count
        self.firstTag = firstTag
    }
}

/// Everything a `ClientState` needs to know up front.
package struct ClientConfiguration: Sendable {
    /// Seed servers, tried first and never forgotten. Must not be empty.
    package var servers: [ServerAddress]
    /// CONNECT options (`name`, `echo`, credentials).
    package var connect: ConnectOptions
    /// Shuffle the seeds and newly discovered servers (nats.go default: yes).
    package var randomize = true
    /// Delay between failed passes over the pool (default 250 ms to 30 s, jittered; forever).
    package var backoff = Backoff()
    /// Bound on a TCP connect (driver) and on INFO + CONNECT + PONG (state machine). nats.go: 2 s.
    package var connectTimeout: Duration = .seconds(2)
    /// How often the client PINGs an idle-or-not server (nats.go: 2 min).
    package var pingInterval: Duration = .seconds(120)
    /// PINGs without a PONG before the connection is declared stale and
    /// closed (nats.go `MaxPingsOut`: 2).
    package var maxPingsOutstanding = 2
    /// A link that stayed up this long is healthy: losing it starts the
    /// backoff afresh. A shorter one counts as a failed attempt, so a server
    /// that accepts and then drops every connection cannot make us spin.
    package var healthyLinkDuration: Duration = .seconds(1)
    /// Outbox bounds while disconnected or while the socket is slow: encoded
    /// bytes (nats.go ReconnectBufSize: 8 MiB) and messages (10,000).
    package var bufferLimitBytes = 8 << 20
    package var bufferLimitMessages = 10_000
    /// Parser bounds (see `Parser`).
    package var maxControlLineBytes = 4096
    package var maxInfoLineBytes = 64 << 10
    /// Published after every link-up, after the held messages (a hello).
    package var announcements: [OutgoingMessage] = []
    /// Builds the message that reports a gap: placed in the stream where the
    /// messages were dropped (before the next message accepted after them),
    /// or at the latest right after the held messages at the next link-up.
    /// Nil: drops are only counted.
    package var gapReport: (@Sendable (DropSummary) -> OutgoingMessage)?
    /// Seed for the shuffles and the jitter (nil: from the system generator).
    package var randomSeed: UInt64?

    /// - Precondition: `servers` is not empty.
    package init(servers: [ServerAddress], connect: ConnectOptions) {
        precondition(!servers.isEmpty, "a NATS client needs at least one server")
        self.servers = servers
        self.connect = connect
    }
}

/// Counters of one client, for status output. All counts are since the client started.
package struct ClientStatistics: Equatable, Sendable {
    /// Whether the link is up (CONNECT answered, subscriptions re-sent).
    package var linkUp = false
    /// The server connected to, when up.
    package var server: ServerAddress?
    /// Non-exempt messages and their encoded bytes in the outbox (held or not yet written).
    package var bufferedMessages = 0
    package var bufferedBytes = 0
    /// Messages accepted by `publish`.
    package var published = 0
    /// Messages dropped for want of room in the outbox.
    package var droppedBufferFull = 0
    /// Messages refused because header block plus payload exceeded `max_payload`.
    package var refusedTooLarge = 0
    /// Messages received (MSG/HMSG), and those skipped as over our payload bound.
    package var received = 0
    package var skippedOversized = 0
    /// TCP connection attempts, link-ups after the first, and -ERRs received.
    package var connectAttempts = 0
    package var reconnects = 0
    package var serverErrors = 0

    package init() {}
}
