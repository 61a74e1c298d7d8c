// Error codes and option values of the wire protocol (PROTOCOL.md "Errors",
// "Requests"). Raw values are the exact wire strings.

/// The `code` of an `error` frame (PROTOCOL.md "Errors").
public enum ErrorCode: String, Sendable, CaseIterable {
    case badFrame = "bad_frame"
    case frameTooLarge = "frame_too_large"
    case unknownOp = "unknown_op"
    case badType = "bad_type"
    case badRequest = "bad_request"
    case forbidden = "forbidden"
    case limit = "limit"
    case slowConsumer = "slow_consumer"
    /// (1.1) An incomplete frame made no progress for `--frame-timeout`; the
    /// connection is closed. (1.3) With a `req`: that request's deadline
    /// passed; the connection stays open.
    case timeout = "timeout"
    /// (1.3) A request reached no serving connection; it took no `seq`.
    case noResponders = "no_responders"
    /// (1.3) Every connection a request reached closed, withdrew its serving
    /// subscription or went behind without replying.
    case noReply = "no_reply"
    /// (1.3) The server answered with `error`; the `message` is its text.
    case serviceError = "service_error"
}

/// A request the broker refuses: the code and a human-readable message.
@_spi(Package) public struct ProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    @_spi(Package) public var code: ErrorCode
    @_spi(Package) public var message: String

    @_spi(Package) public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    @_spi(Package) public var description: String { "\(code.rawValue): \(message)" }
}

/// What the broker does when an event would pass a connection's outbound limit
/// (`hello` field `overflow`, PROTOCOL.md "Semantics").
public enum OverflowPolicy: String, Sendable, CaseIterable {
    /// (1.2, the default) Hold a publisher of the same uid (or of any uid
    /// with the policy's `hold` right) until the event fits; other events
    /// that do not fit are dropped as under `dropNew` (PROTOCOL.md "Flow control (1.2)").
    case wait = "wait"
    /// Drop the new event for this connection only (the first edition's default).
    case dropNew = "drop-new"
    /// Drop the oldest whole queued events to make room.
    case dropOld = "drop-old"
    /// Close the connection after trying to queue a `slow_consumer` error.
    case disconnect = "disconnect"
}

/// Protocol constants.
@_spi(Package) public enum ProtocolConstants {
    /// The `protocol` field of the `hello` reply.
    @_spi(Package) public static let version = 1
    /// Deepest JSON nesting accepted (PROTOCOL.md "Framing").
    @_spi(Package) public static let maxDepth = 512
    /// Default maximum incoming frame, bytes before the LF (1 MiB).
    @_spi(Package) public static let defaultMaxFrameBytes = 1 << 20
    /// Largest `req` integer magnitude accepted (2^53).
    @_spi(Package) public static let maxRequestInteger: UInt64 = 1 << 53
    /// `types` without `limit` lists at most this many types (PROTOCOL.md "Per-type counters (1.2)").
    @_spi(Package) public static let defaultTypesLimit = 1000
    /// (1.3) A publish's `key`: 1 to this many bytes (PROTOCOL.md "Requests").
    @_spi(Package) public static let maxKeyBytes = 255
    /// Optional features this implementation has, listed in the `hello` reply.
    @_spi(Package) public static let features = ["overflow", "echo", "drop-notice", "wildcards", "peer-credentials", "half-close", "policy", "origin", "quotas", "clients", "flow", "types", "request", "groups", "servers", "group-servers", "group-uid"]
}
