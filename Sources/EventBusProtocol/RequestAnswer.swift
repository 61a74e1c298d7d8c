// (1.3) The answer to a `request` (PROTOCOL.md "Request/reply"), read from
// the `ok` or `error` reply that carries its `req`: the server's reply, the
// service's own failure, or why there is none. Shared by the library, the
// CLI and the bridge so that each tells the cases apart the same way.
//
// Before editing: `reply` is an object member of both the `ok` and the
// `service_error` frames; every other error is the broker's and has none.

/// What the server that answered sent, and who it was (kernel credentials).
public struct ServerReply: Sendable, Equatable {
    /// The request's `seq`, from the `ok` (nil in a `service_error`).
    public var seq: UInt64?
    /// When the broker received the reply, RFC 3339 UTC.
    public var time: String?
    /// The server's process, user and group ids (`SO_PEERCRED`).
    public var pid: Int64?
    public var uid: Int64?
    public var gid: Int64?
    /// The reply's `data`, byte for byte as the server sent it (`null` when absent).
    public var data: [UInt8]

    /// Reads the `reply` object of `answer`; nil when it has none.
    @_spi(Package) public init?(_ answer: Reply) {
        guard let raw = answer.raw("reply") else { return nil }
        let read: ServerReply? = raw.withByteView { bytes in
            guard let members = try? JSONObject.members(bytes) else { return nil }
            func token(_ key: String) -> JSONToken? { members.first { $0.key == key }?.value }
            func integer(_ key: String) -> Int64? { token(key).flatMap { JSONInteger.signed(bytes, $0) } }
            let time = token("time").flatMap { $0.isString ? JSONString.decode(bytes, $0) : nil }
            let data = token("data").map { Array(bytes[$0.start..<$0.end]) } ?? Array("null".utf8)
            return ServerReply(seq: answer.unsigned("seq"), time: time, pid: integer("pid"), uid: integer("uid"), gid: integer("gid"), data: data)
        }
        guard let read else { return nil }
        self = read
    }

    @_spi(Package) public init(seq: UInt64?, time: String?, pid: Int64?, uid: Int64?, gid: Int64?, data: [UInt8]) {
        self.seq = seq
        self.time = time
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.data = data
    }
}

/// The outcome of one `request`, as its answer says.
@_spi(Package) public enum RequestAnswer: Sendable, Equatable {
    /// `ok`: the first reply of a server.
    case answered(ServerReply)
    /// `service_error`: the server answered with `error`; `message` is its text.
    case serviceError(message: String, ServerReply?)
    /// `no_responders`: nobody serves the type (or may, or could take it); it took no `seq`.
    case noResponders(message: String)
    /// `no_reply`: every server it reached closed, withdrew or went behind without replying.
    case noReply(message: String)
    /// `timeout` with the `req`: the deadline passed first.
    case timedOut(message: String)
    /// Any other `error` (`forbidden`, `limit`, `bad_type`, `bad_request`, ...).
    case refused(code: String, message: String)

    /// Reads the `ok` or `error` reply that carries the request's `req`.
    @_spi(Package) public init(_ reply: Reply) {
        let message = reply.string("message") ?? ""
        if reply.isOK {
            self = .answered(ServerReply(reply) ?? ServerReply(seq: reply.unsigned("seq"), time: nil, pid: nil, uid: nil, gid: nil, data: Array("null".utf8)))
            return
        }
        switch reply.errorCode {
        case .serviceError: self = .serviceError(message: message, ServerReply(reply))
        case .noResponders: self = .noResponders(message: message)
        case .noReply: self = .noReply(message: message)
        case .timeout: self = .timedOut(message: message)
        default: self = .refused(code: reply.string("code") ?? "", message: message)
        }
    }
}
