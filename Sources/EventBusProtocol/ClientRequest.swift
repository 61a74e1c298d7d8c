// The one encoder of client-to-broker frames (PROTOCOL.md "Requests"), used
// by the library, the CLI and the fuzz target. Op and key names come from
// the tables in Envelope.swift, the same ones the broker reads with.
//
// Before editing: a new request field is a parameter here (and its entry in
// `fields`) plus one line in `EnvelopeKey`; strings are escaped, `data` and
// `origin` are spliced as the validated `JSONText` they are. Optional fields
// left nil are not written (the broker's default applies).

/// One request a client sends, e.g. `.subscribe(pattern: "order.>")`.
public enum ClientRequest: Sendable, Hashable {
    /// `{"op":"hello","req":1,"client":"dashboard","echo":false,"overflow":"drop-new"}`
    case hello(client: String? = nil, echo: Bool? = nil, overflow: OverflowPolicy? = nil)
    /// `{"op":"subscribe","req":2,"type":"order.>"}`; (1.1) with
    /// `"last":true`, `"since":41`, `"instance":"4f0c..."`.
    case subscribe(pattern: String, last: Bool? = nil, since: UInt64? = nil, instance: String? = nil)
    /// `{"op":"unsubscribe","req":3,"type":"order.>"}`
    case unsubscribe(pattern: String)
    /// `{"op":"publish","req":4,"type":"currency.changed","source":"settings","id":"x-1","data":{"code":"EUR"}}`;
    /// (1.1) with `"retain":true` and `"origin":{"node":"host-b",...}` (an object; bridges only).
    case publish(type: String, source: String? = nil, id: String? = nil, retain: Bool? = nil, origin: JSONText? = nil, data: JSONText? = nil)
    /// (1.1) `{"op":"clear","req":5,"type":"currency.changed"}`
    case clear(type: String)
    /// (1.1) `{"op":"clients","req":6}`
    case clients
    /// `{"op":"ping","req":7}`
    case ping
    /// `{"op":"stats","req":8}`
    case stats

    /// Appends the request's frame, its LF included.
    /// - Parameter req: the `req` the reply will carry (PROTOCOL.md
    ///   "Requests"; within ±2^53), or nil for none: success is then silent.
    public func encode(req: Int64?, to out: inout [UInt8]) {
        FrameEncoder.appendASCII("{\"op\":", to: &out)
        JSONString.appendQuoted(op.name, to: &out)
        for (key, value) in [(EnvelopeKey.req, req as (any RequestValue)?)] + fields {
            guard let value else { continue }
            out.append(0x2C)
            JSONString.appendQuoted(key.name, to: &out)
            out.append(0x3A)
            value.appendJSON(to: &out)
        }
        out.append(0x7D)
        out.append(0x0A)
    }

    /// The members after `op` and `req`, in the order they are written; nil ones are not.
    private var fields: [(EnvelopeKey, (any RequestValue)?)] {
        switch self {
        case .hello(let client, let echo, let overflow): [(.client, client), (.echo, echo), (.overflow, overflow?.rawValue)]
        case .subscribe(let pattern, let last, let since, let instance): [(.type, pattern), (.last, last), (.since, since), (.instance, instance)]
        case .unsubscribe(let pattern), .clear(type: let pattern): [(.type, pattern)]
        case .publish(let type, let source, let id, let retain, let origin, let data):
            [(.type, type), (.source, source), (.id, id), (.retain, retain), (.origin, origin), (.data, data)]
        case .clients, .ping, .stats: []
        }
    }

    /// The request's frame, its LF included.
    public func encoded(req: Int64?) -> [UInt8] {
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
        case .ping: .ping
        case .stats: .stats
        }
    }
}

/// A value a request field holds, and how it is written.
private protocol RequestValue {
    func appendJSON(to out: inout [UInt8])
}

extension String: RequestValue {
    /// A JSON string, escaped.
    fileprivate func appendJSON(to out: inout [UInt8]) { JSONString.appendQuoted(self, to: &out) }
}

extension Bool: RequestValue {
    fileprivate func appendJSON(to out: inout [UInt8]) { FrameEncoder.appendASCII(self ? "true" : "false", to: &out) }
}

extension Int64: RequestValue {
    fileprivate func appendJSON(to out: inout [UInt8]) { FrameEncoder.appendInt(self, to: &out) }
}

extension UInt64: RequestValue {
    fileprivate func appendJSON(to out: inout [UInt8]) { FrameEncoder.appendInt(self, to: &out) }
}

extension JSONText: RequestValue {
    /// Spliced as it is: validated, one line.
    fileprivate func appendJSON(to out: inout [UInt8]) { out.append(contentsOf: bytes) }
}
