// Decoding of one incoming frame into a typed request (PROTOCOL.md "Framing",
// "Requests"). Field values that are forwarded (`data`, `source`, `id`, `req`)
// stay token ranges into the frame so the broker can splice them unchanged.
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
        var fields = EnvelopeFields()
        do {
            try fields.scan(frame)
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
        if let key = fields.duplicateKey {
            return DecodedFrame(req: req, request: .failure(ProtocolError(.badRequest, "duplicate key \(JSONString.quoted(key)) in frame")))
        }
        return DecodedFrame(req: req, request: decodeRequest(frame, fields))
    }

    static func decodeRequest(_ frame: UnsafeRawBufferPointer, _ fields: EnvelopeFields) -> Result<Request, ProtocolError> {
        guard let opToken = fields[.op] else { return .failure(ProtocolError(.badRequest, "missing field \"op\"")) }
        guard case .string = opToken.kind else { return .failure(ProtocolError(.badRequest, "field \"op\" must be a string")) }
        if JSONString.equals(frame, opToken, "publish") {
            return decodePublish(frame, fields)
        }
        let op = JSONString.decode(frame, opToken)
        switch op {
        case "publish":
            return decodePublish(frame, fields)
        case "subscribe", "unsubscribe":
            guard let typeToken = fields[.type] else { return .failure(ProtocolError(.badRequest, "\(op) needs a string field \"type\"")) }
            guard case .string = typeToken.kind else { return .failure(ProtocolError(.badRequest, "field \"type\" must be a string")) }
            let text = JSONString.decode(frame, typeToken)
            guard let pattern = Pattern(text) else {
                return .failure(ProtocolError(.badType, "invalid pattern \(JSONString.quoted(text)): '.'-separated segments of A-Z a-z 0-9 _ - :, a whole segment may be '*', the last may be '>'"))
            }
            return .success(op == "subscribe" ? .subscribe(pattern) : .unsubscribe(pattern))
        case "ping":
            return .success(.ping)
        case "stats":
            return .success(.stats)
        case "hello":
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
        default:
            return .failure(ProtocolError(.unknownOp, "unknown op \(JSONString.quoted(op))"))
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
            var i = token.start
            if frame[i] == 0x2D { i += 1 }
            guard token.end - i <= 16 else { return false }
            var value: UInt64 = 0
            while i < token.end { value = value * 10 + UInt64(frame[i] - 0x30); i += 1 }
            return value <= ProtocolConstants.maxRequestInteger
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

/// Top-level keys the broker reads.
enum EnvelopeKey: Int, CaseIterable {
    case op, req, type, data, source, id, client, echo, overflow

    var name: StaticString {
        switch self {
        case .op: "op"
        case .req: "req"
        case .type: "type"
        case .data: "data"
        case .source: "source"
        case .id: "id"
        case .client: "client"
        case .echo: "echo"
        case .overflow: "overflow"
        }
    }
}

/// The envelope's known members, with duplicate detection over all keys.
struct EnvelopeFields {
    // Stored one by one (not in an array) so decoding a frame allocates nothing.
    var op, req, type, data, source, id, client, echo, overflow: JSONToken?
    var duplicatedMask: UInt32 = 0
    var duplicateKey: String? = nil
    var unknownKeys: [[UInt8]] = []

    subscript(key: EnvelopeKey) -> JSONToken? {
        get {
            switch key {
            case .op: op
            case .req: req
            case .type: type
            case .data: data
            case .source: source
            case .id: id
            case .client: client
            case .echo: echo
            case .overflow: overflow
            }
        }
        set {
            switch key {
            case .op: op = newValue
            case .req: req = newValue
            case .type: type = newValue
            case .data: data = newValue
            case .source: source = newValue
            case .id: id = newValue
            case .client: client = newValue
            case .echo: echo = newValue
            case .overflow: overflow = newValue
            }
        }
    }

    func duplicated(_ key: EnvelopeKey) -> Bool { duplicatedMask & (1 << UInt32(key.rawValue)) != 0 }

    mutating func scan(_ frame: UnsafeRawBufferPointer) throws(ProtocolError) {
        var scanner = JSONScanner(frame, maxDepth: ProtocolConstants.maxDepth)
        scanner.skipWhitespace()
        guard scanner.position < frame.count, frame[scanner.position] == 0x7B else {
            // Not an object: say whether it is JSON at all.
            let whole = Result { () throws(JSONSyntaxError) in try JSONScanner.validate(frame) }
            switch whole {
            case .success: throw ProtocolError(.badFrame, "frame must be a JSON object")
            case .failure(let error): throw ProtocolError(.badFrame, "invalid JSON: \(error)")
            }
        }
        do throws(JSONSyntaxError) {
            try scanner.scanTopLevelObject { key, value in record(frame, key: key, value: value) }
        } catch {
            throw ProtocolError(.badFrame, "invalid JSON: \(error)")
        }
    }

    private mutating func record(_ frame: UnsafeRawBufferPointer, key: JSONToken, value: JSONToken) {
        if let known = EnvelopeFields.knownKey(frame, key) {
            if self[known] != nil {
                duplicatedMask |= 1 << UInt32(known.rawValue)
                if duplicateKey == nil { duplicateKey = String(describing: known.name) }
            } else {
                self[known] = value
            }
            return
        }
        let bytes = JSONString.decodeBytes(frame, key)
        if unknownKeys.contains(bytes) {
            if duplicateKey == nil { duplicateKey = String(decoding: bytes, as: UTF8.self) }
        } else {
            unknownKeys.append(bytes)
        }
    }

    static func knownKey(_ frame: UnsafeRawBufferPointer, _ key: JSONToken) -> EnvelopeKey? {
        guard case .string(escaped: false) = key.kind else {
            // Rare: an escaped key such as "\u006fp"; compare decoded.
            for candidate in EnvelopeKey.allCases where JSONString.equals(frame, key, candidate.name) { return candidate }
            return nil
        }
        let p = frame.baseAddress! + key.start + 1
        func b(_ i: Int) -> UInt8 { p.load(fromByteOffset: i, as: UInt8.self) }
        func word32(_ text: StaticString) -> UInt32 { UnsafeRawPointer(text.utf8Start).loadUnaligned(as: UInt32.self) }
        switch key.count - 2 {
        case 2:
            if b(0) == 0x6F && b(1) == 0x70 { return .op }  // op
            if b(0) == 0x69 && b(1) == 0x64 { return .id }  // id
        case 3:
            if b(0) == 0x72 && b(1) == 0x65 && b(2) == 0x71 { return .req }
        case 4:
            let w = p.loadUnaligned(as: UInt32.self)
            if w == word32("type") { return .type }
            if w == word32("data") { return .data }
            if w == word32("echo") { return .echo }
        case 6:
            if JSONString.equals(frame, key, "source") { return .source }
            if JSONString.equals(frame, key, "client") { return .client }
        case 8:
            if JSONString.equals(frame, key, "overflow") { return .overflow }
        default:
            break
        }
        return nil
    }
}
