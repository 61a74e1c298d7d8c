// `BusNotice`: what the library reports on the side of events and replies
// (connection changes, `dropped` frames, events it could not decode), through
// `EventBus.notices()`.

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
