// `BrokerStats`: the broker's counters, from the `ok` of `stats`.

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
