// The client's side of the wire format: encoding request frames and reading
// the frames a broker sends (`ok`, `error`, `event`, `dropped`), per
// PROTOCOL.md "Requests", "Events" and "Errors".
//
// Before editing: every request carries an integer `req` so each reply can be
// matched; `data` is spliced in as the validated, single-line JSON it is and
// never re-serialised here.
import EventBusProtocol

/// Builds one request frame (a JSON object and its LF) at a time.
enum RequestFrame {
    /// `{"op":"hello","req":0,"client":"dashboard","echo":false,"overflow":"drop-new"}`
    static func hello(req: Int64, client: String?, overflow: OverflowPolicy) -> [UInt8] {
        var out = head("hello", req: req)
        if let client { FrameEncoder.appendField("client", string: client, to: &out) }
        FrameEncoder.appendField("echo", bool: false, to: &out)
        FrameEncoder.appendField("overflow", string: overflow.rawValue, to: &out)
        return tail(out)
    }

    /// `{"op":"subscribe","req":1,"type":"order.>"}`
    static func subscribe(req: Int64, pattern: String) -> [UInt8] {
        var out = head("subscribe", req: req)
        FrameEncoder.appendField("type", string: pattern, to: &out)
        return tail(out)
    }

    /// `{"op":"unsubscribe","req":2,"type":"order.>"}`
    static func unsubscribe(req: Int64, pattern: String) -> [UInt8] {
        var out = head("unsubscribe", req: req)
        FrameEncoder.appendField("type", string: pattern, to: &out)
        return tail(out)
    }

    /// `{"op":"publish","req":3,"type":"currency.changed","data":{"code":"EUR"}[,"source":"s"][,"id":"i"]}`
    /// - Parameter data: one JSON value without LF or CR (see `OutgoingData`).
    static func publish(req: Int64, type: String, data: [UInt8], source: String?, id: String?) -> [UInt8] {
        var out = head("publish", req: req)
        FrameEncoder.appendField("type", string: type, to: &out)
        data.withUnsafeBytes { FrameEncoder.appendField("data", raw: $0, to: &out) }
        if let source { FrameEncoder.appendField("source", string: source, to: &out) }
        if let id { FrameEncoder.appendField("id", string: id, to: &out) }
        return tail(out)
    }

    /// `{"op":"ping","req":4}`
    static func ping(req: Int64) -> [UInt8] { tail(head("ping", req: req)) }

    /// `{"op":"stats","req":5}`
    static func stats(req: Int64) -> [UInt8] { tail(head("stats", req: req)) }

    private static func head(_ op: StaticString, req: Int64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96)
        FrameEncoder.appendASCII("{\"op\":\"", to: &out)
        FrameEncoder.appendASCII(op, to: &out)
        FrameEncoder.appendASCII("\",\"req\":", to: &out)
        FrameEncoder.appendInt(req, to: &out)
        return out
    }

    private static func tail(_ frame: [UInt8]) -> [UInt8] {
        var out = frame
        out.append(0x7D)
        out.append(0x0A)
        return out
    }
}

/// Event `data` ready to splice into a publish frame.
enum OutgoingData {
    /// Validates `bytes` as one JSON value (RFC 8259) and returns it on one
    /// line: pretty-printed output has its insignificant whitespace removed,
    /// since a raw LF would end the frame (PROTOCOL.md "Framing").
    /// - Throws: `EventBusError.invalidJSON` with the scanner's reason.
    static func prepare(_ bytes: [UInt8]) throws(EventBusError) -> [UInt8] {
        let result: Result<[UInt8], JSONSyntaxError> = bytes.withUnsafeBytes { raw in
            do throws(JSONSyntaxError) {
                let token = try JSONScanner.validate(raw, maxDepth: ProtocolConstants.maxDepth)
                if !raw.contains(0x0A) && !raw.contains(0x0D) && token.start == 0 && token.end == raw.count {
                    return .success(bytes)
                }
                var out: [UInt8] = []
                out.reserveCapacity(token.count)
                JSONObject.appendCompacted(raw, token, to: &out)
                return .success(out)
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let data): return data
        case .failure(let error): throw .invalidJSON(error.description)
        }
    }
}

/// A scalar or list field of an `ok` reply.
enum ReplyValue: Equatable, Sendable {
    /// A JSON number, kept as its text.
    case number(String)
    case string(String)
    case bool(Bool)
    /// An array whose elements are all strings.
    case strings([String])
    /// null, an object, or a mixed array.
    case other
}

/// The fields of an `ok` reply besides `op` and `req`.
struct Reply: Equatable, Sendable {
    var fields: [String: ReplyValue] = [:]

    func string(_ key: String) -> String? {
        if case .string(let s) = fields[key] { return s }
        return nil
    }

    func uint(_ key: String) -> UInt64? {
        if case .number(let text) = fields[key] { return UInt64(text) }
        return nil
    }

    func double(_ key: String) -> Double? {
        if case .number(let text) = fields[key] { return Double(text) }
        return nil
    }

    func bool(_ key: String) -> Bool? {
        if case .bool(let b) = fields[key] { return b }
        return nil
    }

    func strings(_ key: String) -> [String]? {
        if case .strings(let list) = fields[key] { return list }
        return nil
    }
}

/// One frame from the broker.
enum ServerFrame: Equatable, Sendable {
    /// `{"op":"ok","req":7,...}`; `req` nil when absent or not an integer.
    case ok(req: Int64?, Reply)
    /// `{"op":"error","req":7,"code":"bad_type","message":"..."}`, as
    /// `EventBusError.protocolError` (or `.malformedFrame` for a code this
    /// client does not know).
    case error(req: Int64?, EventBusError)
    /// `{"op":"event","seq":42,"type":"t",...,"data":{...}}`
    case event(RawEvent)
    /// `{"op":"dropped","count":N,"since_seq":S}`
    case dropped(count: UInt64, sinceSeq: UInt64)
    /// A frame with an `op` this client does not know (ignored: forward compatibility).
    case unknown(op: String)

    /// Reads one frame (the bytes before its LF).
    /// - Throws: `EventBusError.malformedFrame` when it is not a JSON object,
    ///   has no string `op`, or an `event`/`dropped` lacks a required field.
    static func parse(_ frame: UnsafeRawBufferPointer) throws(EventBusError) -> ServerFrame {
        let members: [JSONMember]
        do {
            members = try JSONObject.members(frame)
        } catch {
            throw .malformedFrame(error.description)
        }
        var op: String?
        var req: Int64?
        for member in members {
            switch member.key {
            case "op" where member.value.isString: op = JSONString.decode(frame, member.value)
            case "req": req = integer(frame, member.value).flatMap { Int64(exactly: $0) }
            default: break
            }
        }
        guard let op else { throw .malformedFrame("no \"op\" in \(preview(frame))") }
        switch op {
        case "ok":
            var reply = Reply()
            for member in members where member.key != "op" && member.key != "req" {
                reply.fields[member.key] = value(frame, member.value)
            }
            return .ok(req: req, reply)
        case "error":
            var codeText = ""
            var message = ""
            for member in members where member.value.isString {
                if member.key == "code" { codeText = JSONString.decode(frame, member.value) }
                if member.key == "message" { message = JSONString.decode(frame, member.value) }
            }
            guard let code = ErrorCode(rawValue: codeText) else {
                return .error(req: req, .malformedFrame("error with unknown code \"\(codeText)\": \(message)"))
            }
            return .error(req: req, .protocolError(code: code, message: message))
        case "event":
            return .event(try event(frame, members))
        case "dropped":
            var count: UInt64?
            var since: UInt64?
            for member in members {
                if member.key == "count" { count = integer(frame, member.value) }
                if member.key == "since_seq" { since = integer(frame, member.value) }
            }
            guard let count, let since else { throw .malformedFrame("dropped without count/since_seq: \(preview(frame))") }
            return .dropped(count: count, sinceSeq: since)
        default:
            return .unknown(op: op)
        }
    }

    private static func event(_ frame: UnsafeRawBufferPointer, _ members: [JSONMember]) throws(EventBusError) -> RawEvent {
        var seq: UInt64?
        var type: String?
        var time = ""
        var source = ""
        var id = ""
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        var data: [UInt8] = Array("null".utf8)
        for member in members {
            let v = member.value
            switch member.key {
            case "seq": seq = integer(frame, v)
            case "type" where v.isString: type = JSONString.decode(frame, v)
            case "time" where v.isString: time = JSONString.decode(frame, v)
            case "source" where v.isString: source = JSONString.decode(frame, v)
            case "id" where v.isString: id = JSONString.decode(frame, v)
            case "pid": pid = signedInteger(frame, v).flatMap { Int32(exactly: $0) } ?? 0
            case "uid": uid = integer(frame, v).flatMap { UInt32(exactly: $0) } ?? 0
            case "gid": gid = integer(frame, v).flatMap { UInt32(exactly: $0) } ?? 0
            case "data": data = Array(UnsafeRawBufferPointer(rebasing: frame[v.start..<v.end]))
            default: break
            }
        }
        guard let seq, let type else { throw .malformedFrame("event without seq/type: \(preview(frame))") }
        let metadata = EventMetadata(type: type, seq: seq, time: time, source: source, id: id, pid: pid, uid: uid, gid: gid)
        return RawEvent(metadata: metadata, data: data)
    }

    /// A non-negative JSON integer token as `UInt64`, nil otherwise.
    static func integer(_ frame: UnsafeRawBufferPointer, _ token: JSONToken) -> UInt64? {
        guard case .number(integer: true) = token.kind else { return nil }
        return UInt64(String(decoding: UnsafeRawBufferPointer(rebasing: frame[token.start..<token.end]), as: UTF8.self))
    }

    static func signedInteger(_ frame: UnsafeRawBufferPointer, _ token: JSONToken) -> Int64? {
        guard case .number(integer: true) = token.kind else { return nil }
        return Int64(String(decoding: UnsafeRawBufferPointer(rebasing: frame[token.start..<token.end]), as: UTF8.self))
    }

    static func value(_ frame: UnsafeRawBufferPointer, _ token: JSONToken) -> ReplyValue {
        let text = { String(decoding: UnsafeRawBufferPointer(rebasing: frame[token.start..<token.end]), as: UTF8.self) }
        switch token.kind {
        case .number: return .number(text())
        case .string: return .string(JSONString.decode(frame, token))
        case .true: return .bool(true)
        case .false: return .bool(false)
        case .array:
            // Arrays in replies are lists of names (`features`): read them as such.
            let inner = UnsafeRawBufferPointer(rebasing: frame[token.start..<token.end])
            var scanner = JSONScanner(inner)
            var items: [String] = []
            scanner.position = 1
            scanner.skipWhitespace()
            while scanner.position < inner.count, inner[scanner.position] != 0x5D {
                guard let item = try? scanner.scanValue(depth: 1), item.isString else { return .other }
                items.append(JSONString.decode(inner, item))
                scanner.skipWhitespace()
                if scanner.position < inner.count, inner[scanner.position] == 0x2C {
                    scanner.position += 1
                    scanner.skipWhitespace()
                }
            }
            return .strings(items)
        case .object, .null: return .other
        }
    }

    static func preview(_ frame: UnsafeRawBufferPointer) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: frame[0..<min(frame.count, 120)]), as: UTF8.self)
    }
}
