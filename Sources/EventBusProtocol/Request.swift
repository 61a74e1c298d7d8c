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
public enum Request {
    case hello(client: String?, echo: Bool, overflow: OverflowPolicy)
    case subscribe(Pattern)
    case unsubscribe(Pattern)
    /// `data`, `source`, `id` are token ranges in the frame (validated JSON).
    case publish(type: EventType, data: JSONToken?, source: JSONToken?, id: JSONToken?)
    case ping
    case stats
}

/// The result of decoding one frame.
public struct DecodedFrame {
    /// The `req` token to echo (a string or an integer within ±2^53), if readable.
    public var req: JSONToken?
    /// The request, or the error to answer with.
    public var request: Result<Request, ProtocolError>
}

public enum RequestDecoder {
    /// Decodes one frame (the bytes before its LF/CRLF).
    ///
    /// Shape: `{"op":"publish","req":7,"type":"order.created","data":{...}}`.
    /// - Parameter frame: the frame's bytes; the returned tokens index into it.
    /// - Returns: the `req` to echo (nil when absent or unreadable) and the
    ///   request or the `ProtocolError` to answer (`bad_frame`, `bad_request`,
    ///   `unknown_op`, `bad_type`, `forbidden`).
    public static func decode(_ frame: UnsafeRawBufferPointer) -> DecodedFrame {
        KeyedTokens<EnvelopeKey>.withEmpty { tokens in decode(frame, into: tokens) }
    }

    private static func decode(_ frame: UnsafeRawBufferPointer, into tokens: KeyedTokens<EnvelopeKey>) -> DecodedFrame {
        let fields: EnvelopeFields
        do {
            fields = try EnvelopeFields(frame, into: tokens)
        } catch {
            return DecodedFrame(req: nil, request: .failure(error))
        }
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

    static func decodeRequest(_ frame: UnsafeRawBufferPointer, _ fields: EnvelopeFields) -> Result<Request, ProtocolError> {
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
            return .success(op == .subscribe ? .subscribe(pattern) : .unsubscribe(pattern))
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
            var echo = false
            if let token = fields[.echo] {
                switch token.kind {
                case .true: echo = true
                case .false: echo = false
                default: return .failure(ProtocolError(.badRequest, "field \"echo\" must be true or false"))
                }
            }
            var overflow = OverflowPolicy.dropNew
            if let token = fields[.overflow] {
                guard token.isString, let policy = OverflowPolicy(rawValue: JSONString.decode(frame, token)) else {
                    return .failure(ProtocolError(.badRequest, "field \"overflow\" must be \"drop-new\", \"drop-old\" or \"disconnect\""))
                }
                overflow = policy
            }
            return .success(.hello(client: client, echo: echo, overflow: overflow))
        case .clear, .clients:
            // 1.1 ops this broker does not implement yet.
            return .failure(ProtocolError(.unknownOp, "unknown op \(JSONString.quoted(op.name))"))
        }
    }

    static func decodePublish(_ frame: UnsafeRawBufferPointer, _ fields: EnvelopeFields) -> Result<Request, ProtocolError> {
        guard let typeToken = fields[.type] else { return .failure(ProtocolError(.badRequest, "publish needs a string field \"type\"")) }
        guard case .string = typeToken.kind else { return .failure(ProtocolError(.badRequest, "field \"type\" must be a string")) }
        if case .string(escaped: false) = typeToken.kind {
            // Fast path: validate the raw bytes, build the String only once valid.
            let raw = UnsafeRawBufferPointer(rebasing: frame[(typeToken.start + 1)..<(typeToken.end - 1)])
            if EventType.isValid(raw: raw) {
                let type = EventType(unchecked: String(decoding: raw, as: UTF8.self))
                return finishPublish(type, fields)
            }
        }
        let name = JSONString.decode(frame, typeToken)
        guard let type = EventType(name) else {
            if Pattern(name) != nil {
                return .failure(ProtocolError(.badType, "patterns are not allowed in publish: \(JSONString.quoted(name))"))
            }
            return .failure(ProtocolError(.badType, "invalid event type \(JSONString.quoted(name)): 1-255 bytes of '.'-separated segments of A-Z a-z 0-9 _ - :"))
        }
        return finishPublish(type, fields)
    }

    static func finishPublish(_ type: EventType, _ fields: EnvelopeFields) -> Result<Request, ProtocolError> {
        if type.isReserved {
            return .failure(ProtocolError(.forbidden, "event types beginning \"eventbus.\" are reserved for the broker"))
        }
        let source = fields[.source]
        if let source, !source.isString { return .failure(ProtocolError(.badRequest, "field \"source\" must be a string")) }
        let id = fields[.id]
        if let id, !id.isString { return .failure(ProtocolError(.badRequest, "field \"id\" must be a string")) }
        return .success(.publish(type: type, data: fields[.data], source: source, id: id))
    }

    /// A `req` is a string, or an integer (no fraction or exponent) within ±2^53.
    static func isValidRequestID(_ frame: UnsafeRawBufferPointer, _ token: JSONToken) -> Bool {
        switch token.kind {
        case .string: return true
        case .number(integer: true):
            guard let value = JSONInteger.signed(frame, token) else { return false }
            return value.magnitude <= ProtocolConstants.maxRequestInteger
        default: return false
        }
    }

    /// `client` names: 1-64 bytes of `A-Z a-z 0-9 _ . - :` (PROTOCOL.md "Requests").
    public static func isValidClientName(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard utf8.count >= 1 && utf8.count <= 64 else { return false }
        return utf8.allSatisfy { EventType.isSegmentByte($0) || $0 == 0x2E }
    }
}

extension JSONToken {
    /// Whether the token is a JSON string.
    @inlinable public var isString: Bool {
        if case .string = kind { return true }
        return false
    }
}
