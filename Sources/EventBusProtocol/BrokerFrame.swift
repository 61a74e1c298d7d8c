// The one reader of broker-to-client frames (PROTOCOL.md "Requests",
// "Events", "Errors", "Semantics", the 1.1 `gap` frame and revocation
// error, and the 1.3 `request` frame a serving subscription gets), used by the library, the CLI and the fuzz target. Event fields
// stay token ranges into the frame, read in place without allocating
// (`eventbus listen` formats thousands a second); replies own a copy.
//
// Before editing: a frame whose `op` this reader does not know is
// `.unknown`, not an error (PROTOCOL.md "Framing": forward compatibility);
// an extra member is ignored. A key is read where it first appears.

/// One frame from the broker.
@_spi(Package) public enum BrokerFrame: Sendable, Equatable {
    /// `{"op":"ok","req":7,"seq":42,"delivered":2}`
    case ok(Reply)
    /// `{"op":"error","req":7,"code":"bad_type","message":"..."}`, and (1.1)
    /// `{"op":"error","code":"forbidden","type":"a.>","message":"..."}` when a
    /// policy reload removed a subscription (`Reply.revokedPattern`).
    case error(Reply)
    /// `{"op":"event","seq":42,"type":"order.created",...,"data":{...}}`:
    /// token ranges into the frame that was read.
    case event(EventFields)
    /// (1.3) `{"op":"request","seq":43,"type":"thumb.make",...,"data":{...},"reply":"<token>","timeout":4987}`:
    /// a request for a serving subscription, its event fields as token ranges
    /// like an event's, the token to answer with and the milliseconds left.
    case request(RequestFields)
    /// `{"op":"dropped","count":3,"since_seq":17}`: `count` events lost, the first was `since_seq`.
    case dropped(count: UInt64, sinceSeq: UInt64)
    /// (1.1) `{"op":"gap","type":"a.>","since_seq":10,"first_seq":50}`: the
    /// history no longer reaches back to `since_seq + 1`; replay starts at `first_seq`.
    case gap(pattern: String, sinceSeq: UInt64, firstSeq: UInt64)
    /// (issue 36) `{"op":"servers","type":"svc.>"}`: the serving patterns that
    /// overlap a watched pattern changed since the watch's last list (a
    /// bridge subscribes with `servers` again to read them). With `group`
    /// (`"group":"work"`): the patterns of that event group's members did.
    case servers(pattern: String, group: String?)
    /// `{"op":"hello-from-the-future",...}`: an op this reader does not know (ignore it).
    case unknown(op: String)

    /// Reads one frame (the bytes before its LF; a CR before it is whitespace).
    /// - Throws: `BrokerFrameError` when it is not a JSON object, has no
    ///   string `op`, or an `event`, `request`, `dropped` or `gap` lacks a field it must have.
    @_spi(Package) public static func read(_ frame: RawSpan) throws(BrokerFrameError) -> BrokerFrame {
        try frame.withByteView { (frame) throws(BrokerFrameError) in try read(frame) }
    }

    static func read(_ frame: ByteView) throws(BrokerFrameError) -> BrokerFrame {
        try KeyedTokens<BrokerFrameKey>.withEmpty { (fields) throws(BrokerFrameError) -> BrokerFrame in
            do throws(JSONObject.ReadError) {
                try fields.scan(frame)
            } catch {
                throw .unreadable(error)
            }
            guard let opToken = fields[.op], opToken.isString else { throw .noOp(frame: preview(frame)) }
            guard let op = BrokerOp.find(opToken, in: frame) else { return .unknown(op: JSONString.decode(frame, opToken)) }
            func missing() -> BrokerFrameError { .missingFields(op: op.name, fields: op.requiredFields, frame: preview(frame)) }
            switch op {
            case .ok, .error:
                let req = fields[.req].flatMap { JSONInteger.signed(frame, $0) }
                let reply = Reply(isOK: op == .ok, req: req, frame: frame)
                return op == .ok ? .ok(reply) : .error(reply)
            case .event, .request:
                guard let seq = fields[.seq].flatMap({ JSONInteger.unsigned(frame, $0) }),
                      let type = fields[.type], type.isString else { throw missing() }
                func string(_ key: BrokerFrameKey) -> JSONToken? { fields[key].flatMap { $0.isString ? $0 : nil } }
                func integer(_ key: BrokerFrameKey) -> Int64? { fields[key].flatMap { JSONInteger.signed(frame, $0) } }
                let event = EventFields(
                    seq: seq, type: type, time: string(.time), source: string(.source), id: string(.id),
                    pid: integer(.pid), uid: integer(.uid), gid: integer(.gid), data: fields[.data],
                    retained: fields[.retained]?.kind == .true, replayed: fields[.replayed]?.kind == .true,
                    origin: fields[.origin].flatMap { $0.kind == .object ? $0 : nil },
                    key: string(.key), redelivered: fields[.redelivered]?.kind == .true
                )
                guard op == .request else { return .event(event) }
                guard let token = string(.reply) else { throw missing() }
                return .request(RequestFields(event: event, token: token,
                                              timeout: fields[.timeout].flatMap { JSONInteger.unsigned(frame, $0) }))
            case .dropped:
                guard let count = fields[.count].flatMap({ JSONInteger.unsigned(frame, $0) }),
                      let since = fields[.sinceSeq].flatMap({ JSONInteger.unsigned(frame, $0) }) else { throw missing() }
                return .dropped(count: count, sinceSeq: since)
            case .gap:
                guard let pattern = fields[.type], pattern.isString,
                      let since = fields[.sinceSeq].flatMap({ JSONInteger.unsigned(frame, $0) }),
                      let first = fields[.firstSeq].flatMap({ JSONInteger.unsigned(frame, $0) }) else { throw missing() }
                return .gap(pattern: JSONString.decode(frame, pattern), sinceSeq: since, firstSeq: first)
            case .servers:
                guard let pattern = fields[.type], pattern.isString else { throw missing() }
                let group = fields[.group].flatMap { $0.isString ? JSONString.decode(frame, $0) : nil }
                return .servers(pattern: JSONString.decode(frame, pattern), group: group)
            }
        }
    }

    /// The reply of an `ok` or `error` frame, nil for any other frame.
    @_spi(Package) public var reply: Reply? {
        switch self {
        case .ok(let reply), .error(let reply): reply
        default: nil
        }
    }

    /// The first 120 bytes of a frame, for messages.
    static func preview(_ frame: ByteView) -> String {
        String(decoding: frame.extracting(0..<min(frame.count, 120)), as: UTF8.self)
    }
}

/// The members of one `event` frame (PROTOCOL.md "Events"), as token ranges
/// of the frame it was read from: read strings with `JSONString.decode(frame, token)`.
@_spi(Package) public struct EventFields: Sendable, Equatable {
    /// Broker-wide sequence number.
    @_spi(Package) public var seq: UInt64
    /// The event type, a string token.
    @_spi(Package) public var type: JSONToken
    /// `"2026-11-29T13:00:00.123Z"`, a string token; nil when absent or not a string.
    @_spi(Package) public var time: JSONToken?
    /// `"billing"`, a string token; nil when absent or not a string.
    @_spi(Package) public var source: JSONToken?
    /// `"3f9a1c07-42"`, a string token; nil when absent or not a string.
    @_spi(Package) public var id: JSONToken?
    /// The publisher's process id; nil when absent or not an integer within `Int64`.
    @_spi(Package) public var pid: Int64?
    /// The publisher's user id; nil when absent or not an integer within `Int64`.
    @_spi(Package) public var uid: Int64?
    /// The publisher's group id; nil when absent or not an integer within `Int64`.
    @_spi(Package) public var gid: Int64?
    /// The publisher's `data`, byte for byte; nil when absent (then it is `null`).
    @_spi(Package) public var data: JSONToken?
    /// (1.1) `"retained":true`: sent after a `subscribe` with `last`.
    @_spi(Package) public var retained: Bool
    /// (1.1) `"replayed":true`: sent from the history after a `subscribe` with `since`.
    @_spi(Package) public var replayed: Bool
    /// (1.1) The remote identity of a bridged event, an object token.
    @_spi(Package) public var origin: JSONToken?
    /// (1.3) The publisher's `key` (queue groups), a string token; nil when absent.
    @_spi(Package) public var key: JSONToken? = nil
    /// (1.3) `"redelivered":true`: a queue group member closed before this
    /// event was written to it, and it came to this member instead.
    @_spi(Package) public var redelivered: Bool = false
}

/// (1.3) The members of one `request` frame (PROTOCOL.md "Request/reply"):
/// the event fields of the request and what answering it takes.
@_spi(Package) public struct RequestFields: Sendable, Equatable {
    /// The request's `seq`, `type`, `data`, the requester's credentials, `key`.
    @_spi(Package) public var event: EventFields
    /// The `reply` token to answer with (`ClientRequest.reply(to:)`), a string token.
    @_spi(Package) public var token: JSONToken
    /// Milliseconds left before the request's deadline; nil when absent.
    @_spi(Package) public var timeout: UInt64?
}

/// Why a frame from the broker could not be read.
@_spi(Package) public enum BrokerFrameError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not JSON, or JSON that is not an object.
    case unreadable(JSONObject.ReadError)
    /// No `op`, or an `op` that is not a string; `frame` is its first 120 bytes.
    case noOp(frame: String)
    /// An `event`, `request`, `dropped` or `gap` without a field it must have, e.g. `seq/type`.
    case missingFields(op: String, fields: String, frame: String)

    @_spi(Package) public var description: String {
        switch self {
        case .unreadable(let error): "\(error)"
        case .noOp(let frame): "no \"op\" in \(frame)"
        case .missingFields(let op, let fields, let frame): "\(op) without \(fields): \(frame)"
        }
    }
}

/// The ops a broker sends, in the wire spelling of their case names.
enum BrokerOp: Int, FrameKey {
    case ok, error, event, dropped, gap
    case request  // 1.3
    case servers  // issue 36: a bridge's watch of the serving patterns

    static let table = KeyTable(Self.self)

    /// For messages: the fields `read` requires of this op.
    var requiredFields: String {
        switch self {
        case .ok, .error: ""
        case .event: "seq/type"
        case .request: "seq/type/reply"
        case .dropped: "count/since_seq"
        case .gap: "type/since_seq/first_seq"
        case .servers: "type"
        }
    }
}

/// The members of broker frames that `BrokerFrame.read` reads, in the wire
/// spelling of their case names (`sinceSeq` is `since_seq`).
enum BrokerFrameKey: Int, FrameKey {
    case op, req
    case seq, type, time, source, id, pid, uid, gid, data  // event
    case retained, replayed, origin  // event (1.1)
    case count, sinceSeq  // dropped, gap
    case firstSeq  // gap (1.1)
    case key, redelivered, reply, timeout  // event, request (1.3)
    case group  // servers (issue 36)

    static let table = KeyTable(Self.self)
}
