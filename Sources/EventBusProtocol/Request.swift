// Decoding of one incoming frame into a typed request (PROTOCOL.md "Framing",
// "Requests"). Field values that are forwarded (`data`, `source`, `id`, `req`)
// stay token ranges into the frame so the broker can splice them unchanged.
// The op and key names, and the reading of the envelope, are in Envelope.swift.
//
// Before editing: the order of checks decides which error a broken frame gets
// and whether its `req` is echoed; it follows PROTOCOL.md "Requests" exactly:
// bad JSON -> bad_frame (no req); duplicate key / bad req -> bad_request (no
// req unless req itself is readable); then op; then fields.

/// A validated request, its forwarded fields still pointing into the frame.
@_spi(Package) public enum Request {
    case hello(HelloRequest)
    case subscribe(SubscribeRequest)
    case unsubscribe(UnsubscribeRequest)
    case publish(PublishRequest)
    /// (issue 36) A bridge's import of another machine's queue-group event:
    /// for the local members of the group named `group` only
    /// (PROTOCOL-NOTES.md "Queue groups across machines (issue 36)").
    /// (attacker6) `uid`: only that uid's group of the name (`"uid":N`).
    indirect case publishToGroup(PublishRequest, group: String, uid: UInt32?)
    /// (1.3) Ask the connections serving the type (PROTOCOL.md "Request/reply").
    case request(ServiceRequest)
    /// (1.3) Answer a request this connection was given.
    case reply(ServiceReply)
    /// (1.1) Remove the retained event of this type.
    case clear(EventType)
    /// (1.1) List the connections the caller may see.
    case clients
    /// (1.2) The per-type counters, at most `limit` types (PROTOCOL.md "Per-type counters").
    case types(limit: Int)
    case ping
    case stats
}

/// `{"op":"hello","client":"dashboard","echo":false,"overflow":"drop-new"}`
/// (PROTOCOL.md "Requests").
@_spi(Package) public struct HelloRequest: Equatable {
    /// 1-64 bytes of `A-Z a-z 0-9 _ . - :`, or nil.
    @_spi(Package) public var client: String?
    @_spi(Package) public var echo: Bool
    @_spi(Package) public var overflow: OverflowPolicy

    @_spi(Package) public init(client: String? = nil, echo: Bool = false, overflow: OverflowPolicy = .wait) {
        self.client = client
        self.echo = echo
        self.overflow = overflow
    }
}

/// `{"op":"subscribe","type":"order.>","last":true,"since":41,"instance":"9f2c..."}`
/// (PROTOCOL.md "Requests"; `last`, `since`, `instance` are 1.1, see
/// "Retained events and history").
@_spi(Package) public struct SubscribeRequest: Equatable {
    @_spi(Package) public var pattern: Pattern
    /// Send the retained events the pattern matches right after the `ok`.
    @_spi(Package) public var last: Bool
    /// Replay the history ring's events after this seq.
    @_spi(Package) public var since: UInt64?
    /// The broker instance `since` refers to.
    @_spi(Package) public var instance: String?
    /// (1.3) A serving subscription: it receives requests, never events
    /// (PROTOCOL.md "Request/reply").
    @_spi(Package) public var serve: Bool
    /// (1.3) The queue group it joins (PROTOCOL.md "Queue groups"): 1-64
    /// bytes of `A-Z a-z 0-9 _ . - :`; never with `last` or `since`.
    @_spi(Package) public var group: String?
    /// (issue 36) A serving subscription asked only when no other server
    /// is reached (a bridge's, for requests across machines; needs `serve`
    /// and the `bridge` right, never with `group`). PROTOCOL-NOTES.md.
    @_spi(Package) public var fallback: Bool
    /// (issue 36) Not a subscription to events or requests: a watch of the
    /// serving patterns that overlap the pattern (the `ok` lists them; a
    /// `servers` frame says they changed). A bridge's, for the request types
    /// it imports; needs the `bridge` right. PROTOCOL-NOTES.md. With
    /// `group` (issue 36): the watch of the patterns of that event group's
    /// members instead (a bridge's, for the groups it imports).
    @_spi(Package) public var servers: Bool
    /// (attacker6) `"uid":N` with `group` and `fallback` or `servers`: the
    /// local group of that one uid is the one that crosses machines (other
    /// uids' groups of the name are their own). PROTOCOL-NOTES.md.
    @_spi(Package) public var groupUID: UInt32?

    @_spi(Package) public init(pattern: Pattern, last: Bool = false, since: UInt64? = nil, instance: String? = nil, serve: Bool = false, group: String? = nil,
                fallback: Bool = false, servers: Bool = false, groupUID: UInt32? = nil) {
        self.pattern = pattern
        self.last = last
        self.since = since
        self.instance = instance
        self.serve = serve
        self.group = group
        self.fallback = fallback
        self.servers = servers
        self.groupUID = groupUID
    }
}

/// `{"op":"unsubscribe","type":"order.>","serve":true,"group":"workers"}`
/// (PROTOCOL.md "Requests"; `serve` and `group` are 1.3: which subscription
/// of the pattern goes).
@_spi(Package) public struct UnsubscribeRequest: Equatable {
    @_spi(Package) public var pattern: Pattern
    /// (1.3) Remove the serving subscription of the pattern, not the plain one.
    @_spi(Package) public var serve: Bool
    /// (1.3) The queue group to leave; nil: the subscription outside any group.
    @_spi(Package) public var group: String?
    /// (issue 36) End the watch of the serving patterns (`subscribe` with
    /// `servers`), or with `group` the watch of that group's members.
    @_spi(Package) public var servers: Bool
    /// (attacker6) With `servers` and `group`: the watch of that uid's group.
    @_spi(Package) public var groupUID: UInt32?

    @_spi(Package) public init(pattern: Pattern, serve: Bool = false, group: String? = nil, servers: Bool = false, groupUID: UInt32? = nil) {
        self.pattern = pattern
        self.serve = serve
        self.group = group
        self.servers = servers
        self.groupUID = groupUID
    }
}
/// (1.3) `{"op":"request","type":"thumb.make","data":{...},"timeout":5000,"req":7}`
/// (PROTOCOL.md "Request/reply"): the fields of a publish (`type`, `data`,
/// `source`, `id`; `key` once queue groups add it to `PublishRequest`), and
/// the deadline. `req` is required (checked by the decoder).
@_spi(Package) public struct ServiceRequest: Equatable {
    /// What the request carries, as a publish would (`retain` false, `origin` nil).
    @_spi(Package) public var publish: PublishRequest
    /// `timeout` in milliseconds; nil: the broker's default (25000).
    @_spi(Package) public var timeoutMilliseconds: UInt64?

    @_spi(Package) public init(publish: PublishRequest, timeoutMilliseconds: UInt64? = nil) {
        self.publish = publish
        self.timeoutMilliseconds = timeoutMilliseconds
    }
}

/// (1.3) `{"op":"reply","to":"<token>","data":{...},"req":3}`, or with
/// `"error":"disk full"` (PROTOCOL.md "Request/reply").
@_spi(Package) public struct ServiceReply: Equatable {
    /// The token the request carried (`to`), a string token.
    @_spi(Package) public var to: JSONToken
    /// The answer's `data`, any JSON value; nil: null.
    @_spi(Package) public var data: JSONToken?
    /// The service's own failure, a string token; nil: a plain answer.
    @_spi(Package) public var error: JSONToken?
    /// (issue 36) The error code the requester gets instead of
    /// `service_error`: `no_responders`, `no_reply`, `timeout` or `limit`, what a
    /// bridge learnt on another machine; only with `error`, only from a
    /// connection with a fallback serving subscription. PROTOCOL-NOTES.md.
    @_spi(Package) public var code: ErrorCode?

    /// The codes a `reply` may carry (what a request can end in on another machine).
    @_spi(Package) public static let relayedCodes: Set<ErrorCode> = [.noResponders, .noReply, .timeout, .limit]

    @_spi(Package) public init(to: JSONToken, data: JSONToken? = nil, error: JSONToken? = nil, code: ErrorCode? = nil) {
        self.to = to
        self.data = data
        self.error = error
        self.code = code
    }
}

/// `{"op":"publish","type":"order.created","data":{...},"source":"s","id":"i","retain":true}`
/// (PROTOCOL.md "Requests"; `retain` and `origin` are 1.1).
@_spi(Package) public struct PublishRequest: Equatable {
    @_spi(Package) public var type: EventType
    /// Token ranges in the frame (validated JSON): `data` any value,
    /// `source` and `id` strings, `origin` an object.
    @_spi(Package) public var data: JSONToken?
    @_spi(Package) public var source: JSONToken?
    @_spi(Package) public var id: JSONToken?
    /// Keep it as the retained event of its type.
    @_spi(Package) public var retain: Bool
    /// A bridge's remote identity of the event (PROTOCOL.md "Bridged events").
    @_spi(Package) public var origin: JSONToken?
    /// (1.3) The key that picks one member of each queue group (PROTOCOL.md
    /// "Queue groups"): a string token of 1-255 bytes (decoded); events carry it.
    @_spi(Package) public var key: JSONToken?

    @_spi(Package) public init(type: EventType, data: JSONToken? = nil, source: JSONToken? = nil, id: JSONToken? = nil, retain: Bool = false, origin: JSONToken? = nil,
                key: JSONToken? = nil) {
        self.type = type
        self.data = data
        self.source = source
        self.id = id
        self.retain = retain
        self.origin = origin
        self.key = key
    }
}

/// The result of decoding one frame.
@_spi(Package) public struct DecodedFrame {
    /// The `req` token to echo (a string or an integer within ±2^53), if readable.
    @_spi(Package) public var req: JSONToken?
    /// The request, or the error to answer with.
    @_spi(Package) public var request: Result<Request, ProtocolError>
}

@_spi(Package) public enum RequestDecoder {
    /// Decodes one frame (the bytes before its LF/CRLF).
    ///
    /// Shape: `{"op":"publish","req":7,"type":"order.created","data":{...}}`.
    /// - Parameter frame: the frame's bytes; the returned tokens index into it.
    /// - Returns: the `req` to echo (nil when absent or unreadable) and the
    ///   request or the `ProtocolError` to answer (`bad_frame`, `bad_request`,
    ///   `unknown_op`, `bad_type`, `forbidden`).
    static func decode(_ frame: ByteView) -> DecodedFrame {
        KeyedTokens<EnvelopeKey>.withEmpty { tokens in decode(frame, into: tokens) }
    }

    /// `decode(_:)` of a span (the broker's frames).
    @_spi(Package) public static func decode(_ frame: RawSpan) -> DecodedFrame {
        frame.withByteView { decode($0) }
    }

    private static func decode(_ frame: ByteView, into tokens: KeyedTokens<EnvelopeKey>) -> DecodedFrame {
        let fields: EnvelopeFields
        do {
            fields = try EnvelopeFields(frame, into: tokens)
        } catch {
            return DecodedFrame(req: nil, request: .failure(error))
        }
        return decoded(frame, fields)
    }

    /// The request of a frame whose envelope was read (`decode`, or a
    /// frame read as it arrived: RequestScan.swift): one code for both.
    static func decoded(_ frame: ByteView, _ fields: EnvelopeFields) -> DecodedFrame {
        var req: JSONToken? = nil
        if let token = fields[.req] {
            guard !fields.duplicated(.req), isValidRequestID(frame, token) else {
                return DecodedFrame(req: nil, request: .failure(ProtocolError(.badRequest, "req must be a string or an integer within ±2^53")))
            }
            req = token
        }
        if let key = fields.duplicateKey(in: frame) {
            return DecodedFrame(req: req, request: .failure(ProtocolError(.badRequest, "duplicate key \(JSONString.quoted(key)) in frame")))
        }
        return DecodedFrame(req: req, request: decodeRequest(frame, fields))
    }

    static func decodeRequest(_ frame: ByteView, _ fields: EnvelopeFields) -> Result<Request, ProtocolError> {
        guard let opToken = fields[.op] else { return .failure(ProtocolError(.badRequest, "missing field \"op\"")) }
        guard case .string = opToken.kind else { return .failure(ProtocolError(.badRequest, "field \"op\" must be a string")) }
        guard let op = RequestOp.find(opToken, in: frame) else {
            return .failure(ProtocolError(.unknownOp, "unknown op \(JSONString.quoted(JSONString.decode(frame, opToken)))"))
        }
        switch op {
        case .publish:
            return decodePublish(frame, fields)
        case .subscribe, .unsubscribe:
            guard let typeToken = fields[.type] else { return .failure(ProtocolError(.badRequest, "\(op.name) needs a string field \"type\"")) }
            guard case .string = typeToken.kind else { return .failure(ProtocolError(.badRequest, "field \"type\" must be a string")) }
            let text = JSONString.decode(frame, typeToken)
            guard let pattern = Pattern(text) else {
                return .failure(ProtocolError(.badType, "invalid pattern \(JSONString.quoted(text)): '.'-separated segments of A-Z a-z 0-9 _ - :, a whole segment may be '*', the last may be '>'"))
            }
            let serve: Bool
            switch boolField(.serve, fields) {
            case .success(let value): serve = value
            case .failure(let error): return .failure(error)
            }
            let group: String?
            switch groupField(frame, fields) {
            case .success(let value): group = value
            case .failure(let error): return .failure(error)
            }
            let servers: Bool
            switch boolField(.servers, fields) {
            case .success(let value): servers = value
            case .failure(let error): return .failure(error)
            }
            if servers && serve {
                return .failure(ProtocolError(.badRequest, "\"servers\" takes no \"serve\" (a watch of the serving patterns, or with \"group\" of a group's members, not a subscription to requests)"))
            }
            let uid: UInt32?
            switch groupUIDField(frame, fields) {
            case .success(let value): uid = value
            case .failure(let error): return .failure(error)
            }
            let uidMisplaced = ProtocolError(.badRequest, "\"uid\" goes with \"group\" and \"fallback\" or \"servers\" (a bridge naming the one uid whose group crosses machines)")
            if uid != nil && (group == nil || !(servers || op == .subscribe)) { return .failure(uidMisplaced) }
            guard op == .subscribe else { return .success(.unsubscribe(UnsubscribeRequest(pattern: pattern, serve: serve, group: group, servers: servers, groupUID: uid))) }
            if servers {
                if fields[.last] != nil || fields[.since] != nil || fields[.instance] != nil || fields[.fallback] != nil {
                    return .failure(ProtocolError(.badRequest, "\"servers\" takes no \"last\", \"since\", \"instance\" or \"fallback\" (a watch of the serving patterns, or with \"group\" of a group's members)"))
                }
                return .success(.subscribe(SubscribeRequest(pattern: pattern, group: group, servers: true, groupUID: uid)))
            }
            return decodeSubscribe(pattern, serve: serve, group: group, frame, fields).flatMap { decoded in
                guard let uid, case .subscribe(var request) = decoded else { return .success(decoded) }
                guard request.fallback else { return .failure(uidMisplaced) }
                request.groupUID = uid
                return .success(.subscribe(request))
            }
        case .ping:
            return .success(.ping)
        case .stats:
            return .success(.stats)
        case .hello:
            var client: String? = nil
            if let token = fields[.client] {
                guard token.isString else { return .failure(ProtocolError(.badRequest, "field \"client\" must be a string")) }
                let name = JSONString.decode(frame, token)
                guard isValidClientName(name) else {
                    return .failure(ProtocolError(.badRequest, "field \"client\" must be 1-64 bytes of A-Z a-z 0-9 _ . - :"))
                }
                client = name
            }
            let echo: Bool
            switch boolField(.echo, fields) {
            case .success(let value): echo = value
            case .failure(let error): return .failure(error)
            }
            var overflow = OverflowPolicy.wait
            if let token = fields[.overflow] {
                guard token.isString, let policy = OverflowPolicy(rawValue: JSONString.decode(frame, token)) else {
                    return .failure(ProtocolError(.badRequest, "field \"overflow\" must be \"wait\", \"drop-new\", \"drop-old\" or \"disconnect\""))
                }
                overflow = policy
            }
            return .success(.hello(HelloRequest(client: client, echo: echo, overflow: overflow)))
        case .clear:
            return decodeEventType(frame, fields, op: op).map { .clear($0) }
        case .clients:
            return .success(.clients)
        case .types:
            var limit = ProtocolConstants.defaultTypesLimit
            if let token = fields[.limit] {
                guard let value = JSONInteger.unsigned(frame, token) else {
                    return .failure(ProtocolError(.badRequest, "field \"limit\" must be a non-negative integer"))
                }
                limit = Int(min(value, UInt64(Int.max)))
            }
            return .success(.types(limit: limit))
        case .request:
            return decodeServiceRequest(frame, fields)
        case .reply:
            return decodeServiceReply(frame, fields)
        }
    }

    /// (1.3) `request`: a `req`, then the fields of a publish, then `timeout`.
    static func decodeServiceRequest(_ frame: ByteView, _ fields: EnvelopeFields) -> Result<Request, ProtocolError> {
        guard fields[.req] != nil else { return .failure(ProtocolError(.badRequest, "request needs a field \"req\" (its answer carries it)")) }
        if fields[.retain] != nil || fields[.origin] != nil {
            return .failure(ProtocolError(.badRequest, "a request takes no \"retain\" or \"origin\" (requests are never retained; a bridge carries one to another machine by asking there itself, so it never carries origin)"))
        }
        var timeout: UInt64? = nil
        if let token = fields[.timeout] {
            guard let value = JSONInteger.unsigned(frame, token), value > 0 else {
                return .failure(ProtocolError(.badRequest, "field \"timeout\" must be a positive integer (milliseconds)"))
            }
            timeout = value
        }
        return decodeEventType(frame, fields, op: .request).flatMap { type in
            finishPublish(type, frame, fields).map { decoded in
                guard case .publish(let publish) = decoded else { preconditionFailure("finishPublish makes a publish") }
                return .request(ServiceRequest(publish: publish, timeoutMilliseconds: timeout))
            }
        }
    }

    /// (1.3) `reply`: `to` a string, `data` any value, `error` a string.
    static func decodeServiceReply(_ frame: ByteView, _ fields: EnvelopeFields) -> Result<Request, ProtocolError> {
        guard let to = fields[.to], to.isString else {
            return .failure(ProtocolError(.badRequest, "reply needs a string field \"to\" (the token of the request it answers)"))
        }
        let error = fields[.error]
        if let error, !error.isString { return .failure(ProtocolError(.badRequest, "field \"error\" must be a string")) }
        var code: ErrorCode? = nil
        if let token = fields[.code] {
            guard error != nil, token.isString, let value = ErrorCode(rawValue: JSONString.decode(frame, token)), ServiceReply.relayedCodes.contains(value) else {
                return .failure(ProtocolError(.badRequest, "field \"code\" must be \"no_responders\", \"no_reply\", \"timeout\" or \"limit\", with \"error\" (a bridge relaying another machine's answer)"))
            }
            code = value
        }
        return .success(.reply(ServiceReply(to: to, data: fields[.data], error: error, code: code)))
    }

    static func decodePublish(_ frame: ByteView, _ fields: EnvelopeFields) -> Result<Request, ProtocolError> {
        let decoded = decodeEventType(frame, fields, op: .publish).flatMap { finishPublish($0, frame, fields) }
        // Without `group` a `uid` is ignored, as every credential a publisher
        // writes is (PROTOCOL.md: "a publisher cannot forge them").
        guard fields[.group] != nil else { return decoded }
        // (issue 36) A bridge's group publish (PROTOCOL-NOTES.md "Queue groups across machines").
        return decoded.flatMap { request in
            guard case .publish(let publish) = request else { return .success(request) }
            if publish.retain { return .failure(ProtocolError(.badRequest, "a publish with \"group\" takes no \"retain\" (another machine's group event)")) }
            return groupField(frame, fields).flatMap { name in groupUIDField(frame, fields).map { .publishToGroup(publish, group: name!, uid: $0) } }
        }
    }

    /// (attacker6) `uid`: an integer 0..<2^32-1 (nil when absent).
    static func groupUIDField(_ frame: ByteView, _ fields: EnvelopeFields) -> Result<UInt32?, ProtocolError> {
        guard let token = fields[.uid] else { return .success(nil) }
        guard let value = JSONInteger.unsigned(frame, token), value < UInt64(UInt32.max) else {
            return .failure(ProtocolError(.badRequest, "field \"uid\" must be a uid (an integer from 0 to 4294967294)"))
        }
        return .success(UInt32(value))
    }

    /// The `type` of a `publish` or `clear`: an event type, not a pattern, not reserved.
    static func decodeEventType(_ frame: ByteView, _ fields: EnvelopeFields, op: RequestOp) -> Result<EventType, ProtocolError> {
        guard let typeToken = fields[.type] else { return .failure(ProtocolError(.badRequest, "\(op.name) needs a string field \"type\"")) }
        guard case .string = typeToken.kind else { return .failure(ProtocolError(.badRequest, "field \"type\" must be a string")) }
        var type: EventType? = nil
        if case .string(escaped: false) = typeToken.kind {
            // Fast path: validate the raw bytes, build the String only once valid.
            let raw = frame.extracting((typeToken.start + 1)..<(typeToken.end - 1))
            if EventType.isValid(raw: raw) { type = EventType(unchecked: String(decoding: raw, as: UTF8.self)) }
        }
        if type == nil {
            let name = JSONString.decode(frame, typeToken)
            type = EventType(name)
            if type == nil {
                if Pattern(name) != nil {
                    return .failure(ProtocolError(.badType, "patterns are not allowed in \(op.name): \(JSONString.quoted(name))"))
                }
                return .failure(ProtocolError(.badType, "invalid event type \(JSONString.quoted(name)): 1-255 bytes of '.'-separated segments of A-Z a-z 0-9 _ - :"))
            }
        }
        if type!.isReserved {
            return .failure(ProtocolError(.forbidden, "event types beginning \"eventbus.\" are reserved for the broker"))
        }
        return .success(type!)
    }

    static func finishPublish(_ type: EventType, _ frame: ByteView, _ fields: EnvelopeFields) -> Result<Request, ProtocolError> {
        let source = fields[.source]
        if let source, !source.isString { return .failure(ProtocolError(.badRequest, "field \"source\" must be a string")) }
        let id = fields[.id]
        if let id, !id.isString { return .failure(ProtocolError(.badRequest, "field \"id\" must be a string")) }
        let retain: Bool
        switch boolField(.retain, fields) {
        case .success(let value): retain = value
        case .failure(let error): return .failure(error)
        }
        let origin = fields[.origin]
        if let origin, case .object = origin.kind {} else if origin != nil {
            return .failure(ProtocolError(.badRequest, "field \"origin\" must be an object"))
        }
        let key = fields[.key]
        if let key, !key.isString || !isValidKeyLength(frame, key) {
            return .failure(ProtocolError(.badRequest, "field \"key\" must be a string of 1-255 bytes"))
        }
        return .success(.publish(PublishRequest(type: type, data: fields[.data], source: source, id: id, retain: retain, origin: origin, key: key)))
    }

    /// `isValidKeyLength(_:_:)` of a span.
    @_spi(Package) public static func isValidKeyLength(_ frame: RawSpan, _ token: JSONToken) -> Bool {
        frame.withByteView { isValidKeyLength($0, token) }
    }

    /// (1.3) A `key` of 1-255 bytes once decoded (an escape-free string is
    /// measured between its quotes, an escaped one decoded).
    static func isValidKeyLength(_ frame: ByteView, _ token: JSONToken) -> Bool {
        let count: Int
        if case .string(escaped: false) = token.kind { count = token.end - token.start - 2 } else { count = JSONString.decode(frame, token).utf8.count }
        return count >= 1 && count <= ProtocolConstants.maxKeyBytes
    }

    /// (1.3) `group` on `subscribe`/`unsubscribe`: nil when absent, a name of
    /// 1-64 bytes of `A-Z a-z 0-9 _ . - :` (as `client`), else `bad_request`.
    static func groupField(_ frame: ByteView, _ fields: EnvelopeFields) -> Result<String?, ProtocolError> {
        guard let token = fields[.group] else { return .success(nil) }
        guard token.isString else { return .failure(ProtocolError(.badRequest, "field \"group\" must be a string")) }
        let name = JSONString.decode(frame, token)
        guard isValidClientName(name) else {
            return .failure(ProtocolError(.badRequest, "field \"group\" must be 1-64 bytes of A-Z a-z 0-9 _ . - :"))
        }
        return .success(name)
    }

    static func decodeSubscribe(_ pattern: Pattern, serve: Bool, group: String?, _ frame: ByteView, _ fields: EnvelopeFields) -> Result<Request, ProtocolError> {
        let last: Bool
        switch boolField(.last, fields) {
        case .success(let value): last = value
        case .failure(let error): return .failure(error)
        }
        var since: UInt64? = nil
        if let token = fields[.since] {
            guard let value = JSONInteger.unsigned(frame, token) else {
                return .failure(ProtocolError(.badRequest, "field \"since\" must be a non-negative integer seq"))
            }
            since = value
        }
        var instance: String? = nil
        if let token = fields[.instance] {
            guard token.isString else { return .failure(ProtocolError(.badRequest, "field \"instance\" must be a string")) }
            instance = JSONString.decode(frame, token)
        }
        if serve && (last || since != nil) {
            return .failure(ProtocolError(.badRequest, "a serving subscription takes no \"last\" or \"since\" (requests are never retained or replayed)"))
        }
        if group != nil && (last || since != nil) {
            return .failure(ProtocolError(.badRequest, "a group subscription takes no \"last\" or \"since\" (a group shares live events only)"))
        }
        let fallback: Bool
        switch boolField(.fallback, fields) {
        case .success(let value): fallback = value
        case .failure(let error): return .failure(error)
        }
        if fallback && (serve == (group != nil)) {
            return .failure(ProtocolError(.badRequest, "\"fallback\" needs either \"serve\": true and no \"group\" (a bridge's serving subscription, asked when no other server is) or \"group\" without \"serve\" (a bridge's fallback membership, given what no local member takes)"))
        }
        return .success(.subscribe(SubscribeRequest(pattern: pattern, last: last, since: since, instance: instance, serve: serve, group: group, fallback: fallback)))
    }

    /// An optional boolean field: false when absent, `bad_request` when not `true`/`false`.
    static func boolField(_ key: EnvelopeKey, _ fields: EnvelopeFields) -> Result<Bool, ProtocolError> {
        guard let token = fields[key] else { return .success(false) }
        switch token.kind {
        case .true: return .success(true)
        case .false: return .success(false)
        default: return .failure(ProtocolError(.badRequest, "field \"\(key.name)\" must be true or false"))
        }
    }

    /// A `req` is a string, or an integer (no fraction or exponent) within ±2^53.
    static func isValidRequestID(_ frame: ByteView, _ token: JSONToken) -> Bool {
        switch token.kind {
        case .string: return true
        case .number(integer: true):
            guard let value = JSONInteger.signed(frame, token) else { return false }
            return value.magnitude <= ProtocolConstants.maxRequestInteger
        default: return false
        }
    }

    /// `client` names: 1-64 bytes of `A-Z a-z 0-9 _ . - :` (PROTOCOL.md "Requests").
    @_spi(Package) public static func isValidClientName(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard utf8.count >= 1 && utf8.count <= 64 else { return false }
        return utf8.allSatisfy { EventType.isSegmentByte($0) || $0 == 0x2E }
    }
}

extension JSONToken {
    /// Whether the token is a JSON string.
    @inlinable @_spi(Package) public var isString: Bool {
        if case .string = kind { return true }
        return false
    }
}

extension Request {
    /// The op's wire name, e.g. `"publish"`.
    @_spi(Package) public var opName: String {
        switch self {
        case .hello: RequestOp.hello.name
        case .subscribe: RequestOp.subscribe.name
        case .unsubscribe: RequestOp.unsubscribe.name
        case .publish, .publishToGroup: RequestOp.publish.name
        case .clear: RequestOp.clear.name
        case .clients: RequestOp.clients.name
        case .types: RequestOp.types.name
        case .ping: RequestOp.ping.name
        case .stats: RequestOp.stats.name
        case .request: RequestOp.request.name
        case .reply: RequestOp.reply.name
        }
    }
}
