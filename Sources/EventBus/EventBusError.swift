// The one error type of the client library, and the protocol names the
// library re-exports (the notices, receipts and counters it reports have a
// file each: BusNotice.swift, BusGap.swift, ConnectionInfo.swift,
// PublishReceipt.swift, BrokerStats.swift).
//
// Before editing: every failure a caller can see is an `EventBusError` case;
// keep `description` one line that names the path, type or code involved.
@_spi(Package) import EventBusProtocol
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
    /// (1.3) Nobody serves the request type `type` (or may, or can take the
    /// request now): the broker said so at once.
    case noResponders(type: String)
    /// (1.3) Every server the request reached closed, withdrew or fell
    /// behind without replying (`reason` is the broker's message).
    case noReply(type: String, reason: String)
    /// (1.3) The request's deadline passed without a reply.
    case timeout(type: String)
    /// (1.3) The server answered with an error (its handler threw):
    /// `message` is its text.
    case serviceError(type: String, message: String)
    /// (Issue 34) The calling task was cancelled: the call stopped waiting.
    /// A publish may or may not have been published (see `EventBus.publish`).
    case cancelled

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
        case .cancelled: "the task was cancelled while waiting for the event bus"
        case .noResponders(let type): "no server of \(type) (nobody serves it, the policy lets no server take it, or none can take it now)"
        case .noReply(let type, let reason): "no reply to \(type): \(reason)"
        case .timeout(let type): "no reply to \(type) before its deadline"
        case .serviceError(let type, let message): "the server of \(type) failed: \(message)"
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
    package static func closedBeforeAnswering(path: String, runtimeDirectory: String?) -> EventBusError {
        let hint = SocketPath.startFailureHint(for: path, runtimeDirectory: runtimeDirectory)
        return .unavailable(path: path, reason: "the broker closed the connection before answering: \(hint)")
    }
}
