// The one encoder of client-to-broker frames (PROTOCOL.md "Requests"), used
// by the library, the CLI and the fuzz target. Op and key names come from
// the tables in Envelope.swift, the same ones the broker reads with.
//
// Before editing: a new request field is a parameter here (and its line in
// `encode`, which writes members directly, with no array per frame) plus one
// line in `EnvelopeKey`; strings are escaped, `data` and
// `origin` are spliced as the validated `JSONText` they are. Optional fields
// left nil are not written (the broker's default applies).

/// One request a client sends, e.g. `.subscribe(pattern: "order.>")`.
@_spi(Package) public enum ClientRequest: Sendable, Hashable {
    /// `{"op":"hello","req":1,"client":"dashboard","echo":false,"overflow":"drop-new"}`
    case hello(client: String? = nil, echo: Bool? = nil, overflow: OverflowPolicy? = nil)
    /// `{"op":"subscribe","req":2,"type":"order.>"}`; (1.1) with
    /// `"last":true`, `"since":41`, `"instance":"4f0c..."`; (1.3) with
    /// `"serve":true` (a serving subscription: requests, not events) and
    /// `"group":"workers"` (a queue group member).
    /// (issue 36) `"fallback":true` with `serve`: asked only when no other
    /// server is (a bridge's; PROTOCOL-NOTES.md "Requests across machines").
    /// (issue 36) `"servers":true` alone: a bridge's watch of the serving
    /// patterns that overlap `pattern` (the `ok` lists them).
    /// (attacker6) `"uid":N` with `group` and `fallback` or `servers`: only that uid's group.
    case subscribe(pattern: String, last: Bool? = nil, since: UInt64? = nil, instance: String? = nil, serve: Bool? = nil, group: String? = nil,
                   fallback: Bool? = nil, servers: Bool? = nil, uid: UInt32? = nil)
    /// `{"op":"unsubscribe","req":3,"type":"order.>"}`; (1.3) with `serve`
    /// and `group` to say which subscription of the pattern it removes;
    /// (issue 36) with `servers`: the watch of the serving patterns.
    case unsubscribe(pattern: String, serve: Bool? = nil, group: String? = nil, servers: Bool? = nil, uid: UInt32? = nil)
    /// `{"op":"publish","req":4,"type":"currency.changed","source":"settings","id":"x-1","data":{"code":"EUR"}}`;
    /// (1.1) with `"retain":true` and `"origin":{"node":"host-b",...}` (an object; bridges only);
    /// (1.3) with `"key":"customer-7"` (queue groups: one member per key).
    case publish(type: String, source: String? = nil, id: String? = nil, key: String? = nil, retain: Bool? = nil, origin: JSONText? = nil, data: JSONText? = nil)
    /// (1.3) `{"op":"request","req":10,"type":"thumb.make","key":"k","timeout":5000,"data":{...}}`:
    /// ask the connections serving `type`; `timeout` in milliseconds (nil:
    /// the broker's default, 25 s). The answer may come after later requests' answers.
    case request(type: String, source: String? = nil, id: String? = nil, key: String? = nil, timeout: UInt64? = nil, data: JSONText? = nil)
    /// (1.3) `{"op":"reply","req":11,"to":"<token>","data":{...}}`, or with
    /// `"error":"text"` (the service's own failure); `ok` carries `accepted`.
    /// (issue 36) with `"code":"no_responders"` (and `no_reply`, `timeout`,
    /// `limit`) beside `error`: a bridge relaying another machine's answer.
    case reply(to: String, data: JSONText? = nil, error: String? = nil, code: String? = nil)
    /// (1.1) `{"op":"clear","req":5,"type":"currency.changed"}`
    case clear(type: String)
    /// (1.1) `{"op":"clients","req":6}`
    case clients
    /// (1.2) `{"op":"types","req":9,"limit":100}`; nil: the broker's default (1000).
    case types(limit: Int? = nil)
    /// `{"op":"ping","req":7}`
    case ping
    /// `{"op":"stats","req":8}`
    case stats

    /// Appends the request's frame, its LF included.
    /// - Parameter req: the `req` the reply will carry (PROTOCOL.md
    ///   "Requests"; within ±2^53), or nil for none: success is then silent.
    @_spi(Package) public func encode(req: Int64?, to out: inout [UInt8]) {
        FrameEncoder.appendASCII("{\"op\":", to: &out)
        JSONString.appendQuoted(op.name, to: &out)
        if let req {
            Self.key(.req, &out)
            FrameEncoder.appendInt(req, to: &out)
        }
        // The members after `op` and `req`, in the order they are written; nil ones are not.
        switch self {
        case .hello(let client, let echo, let overflow):
            Self.put(.client, client, &out)
            Self.put(.echo, echo, &out)
            Self.put(.overflow, overflow?.rawValue, &out)
        case .subscribe(let pattern, let last, let since, let instance, let serve, let group, let fallback, let servers, let uid):
            Self.put(.type, pattern, &out)
            Self.put(.last, last, &out)
            Self.put(.since, since, &out)
            Self.put(.instance, instance, &out)
            Self.put(.serve, serve, &out)
            Self.put(.group, group, &out)
            Self.put(.fallback, fallback, &out)
            Self.put(.servers, servers, &out)
            Self.put(.uid, uid.map(UInt64.init), &out)
        case .unsubscribe(let pattern, let serve, let group, let servers, let uid):
            Self.put(.type, pattern, &out)
            Self.put(.serve, serve, &out)
            Self.put(.group, group, &out)
            Self.put(.servers, servers, &out)
            Self.put(.uid, uid.map(UInt64.init), &out)
        case .clear(let type):
            Self.put(.type, type, &out)
        case .publish(let type, let source, let id, let key, let retain, let origin, let data):
            Self.put(.type, type, &out)
            Self.put(.source, source, &out)
            Self.put(.id, id, &out)
            Self.put(.key, key, &out)
            Self.put(.retain, retain, &out)
            Self.put(.origin, origin, &out)
            Self.put(.data, data, &out)
        case .request(let type, let source, let id, let key, let timeout, let data):
            Self.put(.type, type, &out)
            Self.put(.source, source, &out)
            Self.put(.id, id, &out)
            Self.put(.key, key, &out)
            Self.put(.timeout, timeout, &out)
            Self.put(.data, data, &out)
        case .reply(let to, let data, let error, let code):
            Self.put(.to, to, &out)
            Self.put(.data, data, &out)
            Self.put(.error, error, &out)
            Self.put(.code, code, &out)
        case .types(let limit):
            if let limit {
                Self.key(.limit, &out)
                FrameEncoder.appendInt(Int64(limit), to: &out)
            }
        case .clients, .ping, .stats:
            break
        }
        out.append(0x7D)
        out.append(0x0A)
    }

    /// `,"key":`
    private static func key(_ key: EnvelopeKey, _ out: inout [UInt8]) {
        out.append(0x2C)
        JSONString.appendQuoted(key.name, to: &out)
        out.append(0x3A)
    }

    /// A string member, escaped.
    private static func put(_ name: EnvelopeKey, _ value: String?, _ out: inout [UInt8]) {
        guard let value else { return }
        key(name, &out)
        JSONString.appendQuoted(value, to: &out)
    }

    private static func put(_ name: EnvelopeKey, _ value: UInt64?, _ out: inout [UInt8]) {
        guard let value else { return }
        key(name, &out)
        FrameEncoder.appendInt(value, to: &out)
    }

    private static func put(_ name: EnvelopeKey, _ value: Bool?, _ out: inout [UInt8]) {
        guard let value else { return }
        key(name, &out)
        FrameEncoder.appendASCII(value ? "true" : "false", to: &out)
    }

    /// Validated JSON, spliced as it is (one line).
    private static func put(_ name: EnvelopeKey, _ value: JSONText?, _ out: inout [UInt8]) {
        guard let value else { return }
        key(name, &out)
        out.append(contentsOf: value.bytes)
    }

    /// The request's frame, its LF included.
    @_spi(Package) public func encoded(req: Int64?) -> [UInt8] {
        var out: [UInt8] = []
        encode(req: req, to: &out)
        return out
    }

    var op: RequestOp {
        switch self {
        case .hello: .hello
        case .subscribe: .subscribe
        case .unsubscribe: .unsubscribe
        case .publish: .publish
        case .clear: .clear
        case .clients: .clients
        case .types: .types
        case .ping: .ping
        case .stats: .stats
        case .request: .request
        case .reply: .reply
        }
    }
}
