// What `ClientState` tells its driver: the effects of a state change, the
// outcome of a publish, the link states, and which server errors end the
// connection.
//
// Before editing: effects are performed in order; `.connect` and
// `.closeConnection` are the driver's own business, every other effect is
// reported to the user of the client.

/// What the driver must do after a state change, in order.
package enum Effect: Sendable, Equatable {
    /// Open a TCP connection to this server, then call `connectionEstablished`
    /// or `connectFailed`.
    case connect(ServerAddress)
    /// Close the current connection now; do not report its end.
    case closeConnection
    /// A message for one of our subscriptions.
    case message(Message)
    /// The handshake finished: subscriptions re-sent, held messages released.
    case linkUp(server: ServerAddress, info: ServerInfo, isReconnect: Bool)
    /// The link went down (`reason`: what ended it); the client retries by itself.
    case linkDown(reason: String)
    /// A connection attempt failed before the link was up (TCP connect, or
    /// the handshake); the client goes on to the next server by itself.
    case attemptFailed(ServerAddress, reason: String)
    /// An `-ERR` from the server; `closesConnection` when the server closes
    /// the connection after it (the client has reconnected on its own).
    case serverError(String, closesConnection: Bool)
    /// A held message was refused at release: over the new server's `max_payload`.
    case refusedTooLarge(subject: Subject, size: Int, limit: Int, tag: UInt64?)
    /// A MSG/HMSG over our payload bound was skipped unread.
    case skippedOversized(subject: String, bytes: Int)
    /// INFO made new servers known.
    case discovered([ServerAddress])
    /// The server announced lame duck mode; the client moves to another one.
    case lameDuck(ServerAddress)
}

/// The effects of one state change.
package struct Step: Sendable, Equatable {
    package var effects: [Effect] = []

    package init(effects: [Effect] = []) { self.effects = effects }
}

/// What `publish` did with a message.
package enum PublishOutcome: Equatable, Sendable {
    /// Queued to be written on the current connection.
    case queued
    /// Held until a connection is ready.
    case held
    /// Header block plus payload is over `max_payload` (counted; not sent).
    case tooLarge(size: Int, limit: Int)
    /// The outbox is full (counted; not sent).
    case dropped
    /// The client was closed.
    case closed
}

/// The link to the server pool.
package enum LinkState: Equatable, Sendable {
    /// `start` not called yet.
    case idle
    /// The driver is opening a TCP connection.
    case connecting(ServerAddress)
    /// TCP is up; waiting for INFO (`info` nil) or for the PONG after CONNECT.
    case handshaking(ServerAddress, info: ServerInfo?, deadline: Int64)
    /// Ready: subscriptions sent, messages flow.
    case connected(ServerAddress, ServerInfo, since: Int64)
    /// Between failed passes over the pool; `next` is tried at `until`.
    case waiting(until: Int64, next: ServerAddress)
    case closed
}

/// Which `-ERR`s the server follows by closing the connection.
package enum ErrorClassification {
    /// False for the errors after which nats-server keeps the connection open
    /// (`Invalid Subject`, `Invalid Publish Subject`, `Permissions Violation
    /// for Subscription/Publish to ...`); true for every other one (unknown
    /// operation, authorization, parser error, maximum payload or control line,
    /// slow consumer, stale connection...). Case-insensitive: 2.9.10 writes
    /// `maximum control line exceeded` in lower case.
    package static func closesConnection(_ text: String) -> Bool {
        let lower = text.lowercased()
        let survivable = ["invalid subject", "invalid publish subject", "permissions violation"]
        return !survivable.contains { lower.hasPrefix($0) }
    }
}
