// (1.3) Typed requests (PROTOCOL.md "Request/reply"): a `Codable` request
// type names its request type and its reply type, as `BusEvent` names an
// event type, so `request(_:)` returns the reply already decoded and a
// server's handler returns it to be encoded.
@_spi(Package) import EventBusProtocol

/// A typed request: a `Codable` payload with a fixed request type name and
/// the type of its reply.
/// ```swift
/// struct MakeThumbnail: BusRequest {
///     static let requestType = "thumb.make"
///     typealias Reply = Thumbnail
///     var path: String
/// }
/// ```
public protocol BusRequest: Codable, Sendable {
    /// What a server answers with.
    associatedtype Reply: Codable & Sendable
    /// The request type: a name as for events (PROTOCOL.md "Names and
    /// patterns"); an invalid one is `EventBusError.invalidName`, never a trap.
    static var requestType: String { get }
}

/// (1.3) Who answered a request and when (PROTOCOL.md "Request/reply": the
/// server's kernel credentials, so the requester can check who answered).
public typealias ServerReply = EventBusProtocol.ServerReply

/// (1.3) A decoded reply with who sent it.
public struct Answer<Reply: Sendable>: Sendable {
    /// The decoded reply.
    public var reply: Reply
    /// The server's pid, uid, gid, when the broker received the reply, and
    /// the request's `seq`; `data` is the reply as sent.
    public var server: ServerReply
}

extension BusRequest {
    /// `requestType` validated.
    static func validatedRequestType() throws(EventBusError) -> EventType {
        guard let type = EventType(requestType), !type.isReserved else { throw .invalidName(requestType) }
        return type
    }
}
