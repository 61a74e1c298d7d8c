// `BusNotice`: what the library reports on the side of events and replies
// (connection changes, `dropped` frames, events it could not decode), through
// `EventBus.notices()`.

/// Something that happened on the bus besides events and replies, reported
/// through `EventBus.notices()`.
public enum BusNotice: Equatable, Sendable, CustomStringConvertible {
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
    /// was skipped for that receiver, and (issue 37) is counted lost for it in
    /// a `droppedLocally(pattern:count: 1, sinceSeq: seq)` that follows.
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

    /// One line for logs (issue 34), e.g. `connected to eventbusd 1.3.0, instance ...`
    /// or `disconnected: connection to the event bus lost: ...`.
    public var description: String {
        switch self {
        case .connected(let info): "connected to \(info)"
        case .disconnected(let error): "disconnected (reconnecting): \(error)"
        case .dropped(let count, let since): "the broker dropped \(count) event(s) for this connection, from seq \(since)"
        case .droppedLocally(let pattern, let count, let since):
            "a local observer or stream of \(pattern) took nothing while the buffer was full and lost \(count) event(s), from seq \(since)"
        case .undecodable(let error): "skipped an event: \(error)"
        case .subscriptionRefused(let pattern, let error): "subscription to \(pattern) refused: \(error)"
        case .brokerError(let error): "error from the event bus: \(error)"
        case .gaveUp(let error): "gave up reconnecting, the bus is closed: \(error)"
        case .gap(let gap): "gap: \(gap)"
        case .postFailed(let type, let error): "a post of \(type) failed: \(error)"
        }
    }
}
