// What this client writes to a NATS server: CONNECT, PUB, HPUB, SUB, UNSUB,
// PING, PONG (nats-io/nats.docs reference/nats-protocol).
//
// Before editing: every variable part of a control line is a validated
// `Subject`, a `SubscriptionID` or a number, and header values are
// percent-encoded by `Headers.encoded()`, so nothing a publisher controls can
// end a line early. CONNECT always spells out `verbose:false` and
// `pedantic:false`: the server's defaults for omitted fields are `true`
// (nats-server client.go `defaultOpts`).
@_spi(Package) import EventBusProtocol

/// The CONNECT options this client sends.
package struct ConnectOptions: Equatable, Sendable {
    /// CONNECT `name`, shown by the server's monitoring (`connz`).
    package var name: String
    /// CONNECT `echo`: false means the server never sends this connection its
    /// own publishes (checked on nats-server 2.9.10; the protocol page words it
    /// the other way round).
    package var echo: Bool
    /// CONNECT `version`: this client's version.
    package var version: String
    /// `user`/`pass` when the server asks for them (nil: not sent).
    package var user: String?
    package var password: String?
    /// `auth_token` (nil: not sent).
    package var token: String?

    package init(name: String, echo: Bool = false, version: String = "1.1", user: String? = nil, password: String? = nil, token: String? = nil) {
        self.name = name
        self.echo = echo
        self.version = version
        self.user = user
        self.password = password
        self.token = token
    }
}

/// Builders for client operations, each a complete line (and payload) ending in CRLF.
package enum Encoder {
    /// (issue 36: `no_responders` so that a request nobody subscribes to is
    /// answered at once with status 503; a plain PUB has no reply subject
    /// and is not affected.)
    /// `CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"echo":false,"protocol":1,"lang":"swift","version":"1.1","name":"…"}\r\n`.
    package static func connect(_ options: ConnectOptions) -> [UInt8] {
        var out = Array("CONNECT {\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\"headers\":true,\"no_responders\":true,\"echo\":".utf8)
        out.append(contentsOf: (options.echo ? "true" : "false").utf8)
        out.append(contentsOf: ",\"protocol\":1,\"lang\":\"swift\",\"version\":".utf8)
        JSONString.appendQuoted(options.version, to: &out)
        out.append(contentsOf: ",\"name\":".utf8)
        JSONString.appendQuoted(options.name, to: &out)
        if let user = options.user {
            out.append(contentsOf: ",\"user\":".utf8)
            JSONString.appendQuoted(user, to: &out)
        }
        if let password = options.password {
            out.append(contentsOf: ",\"pass\":".utf8)
            JSONString.appendQuoted(password, to: &out)
        }
        if let token = options.token {
            out.append(contentsOf: ",\"auth_token\":".utf8)
            JSONString.appendQuoted(token, to: &out)
        }
        out.append(contentsOf: "}\r\n".utf8)
        return out
    }

    /// `PUB <subject> [reply] <#bytes>\r\n<payload>\r\n`.
    package static func pub(_ subject: Subject, replyTo: Subject? = nil, payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(subject.text.utf8.count + payload.count + 24)
        appendPub(subject, replyTo: replyTo, payload: payload, to: &out)
        return out
    }

    /// `pub(_:replyTo:payload:)` appended to `out` (the outbox's wire buffer).
    public static func appendPub(_ subject: Subject, replyTo: Subject? = nil, payload: [UInt8], to out: inout [UInt8]) {
        appendHead("PUB ", subject, replyTo, to: &out)
        appendDecimal(payload.count, to: &out)
        out.append(contentsOf: [0x0D, 0x0A])
        out.append(contentsOf: payload)
        out.append(contentsOf: [0x0D, 0x0A])
    }

    /// `HPUB <subject> [reply] <#header bytes> <#total bytes>\r\n<header block><payload>\r\n`,
    /// e.g. `HPUB FOO 22 33\r\nNATS/1.0\r\nBar: Baz\r\n\r\nHello NATS!\r\n`.
    /// - Parameter headerBlock: `Headers.encoded()`.
    package static func hpub(_ subject: Subject, replyTo: Subject? = nil, headerBlock: [UInt8], payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(subject.text.utf8.count + headerBlock.count + payload.count + 32)
        appendHpub(subject, replyTo: replyTo, headerBlock: headerBlock, payload: payload, to: &out)
        return out
    }

    /// `hpub(_:replyTo:headerBlock:payload:)` appended to `out` (the outbox's wire buffer).
    public static func appendHpub(_ subject: Subject, replyTo: Subject? = nil, headerBlock: [UInt8], payload: [UInt8], to out: inout [UInt8]) {
        appendHead("HPUB ", subject, replyTo, to: &out)
        appendDecimal(headerBlock.count, to: &out)
        out.append(0x20)
        appendDecimal(headerBlock.count + payload.count, to: &out)
        out.append(contentsOf: [0x0D, 0x0A])
        out.append(contentsOf: headerBlock)
        out.append(contentsOf: payload)
        out.append(contentsOf: [0x0D, 0x0A])
    }

    /// `<verb><subject> [reply] `: what PUB and HPUB begin with, up to their sizes.
    private static func appendHead(_ verb: String, _ subject: Subject, _ replyTo: Subject?, to out: inout [UInt8]) {
        out.append(contentsOf: verb.utf8)
        out.append(contentsOf: subject.text.utf8)
        if let replyTo {
            out.append(0x20)
            out.append(contentsOf: replyTo.text.utf8)
        }
        out.append(0x20)
    }

    /// Appends the decimal digits of `value` (no String: every PUB and HPUB has one or two sizes).
    static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        precondition(value >= 0, "a size is never negative")
        appendDecimal(UInt64(value), to: &out)
    }

    /// Appends the decimal digits of `value`, at most 20.
    static func appendDecimal(_ value: UInt64, to out: inout [UInt8]) {
        out.append(addingCapacity: 20) { writeDecimal(value, into: &$0) }
    }

    /// Appends the decimal digits of `value` to `out` (room for 20 bytes).
    @inline(__always)
    static func writeDecimal(_ value: UInt64, into out: inout OutputSpan<UInt8>) {
        // Lowest digit first (divisions by a constant), then turned round in place.
        var low = out.count
        var rest = value
        repeat {
            out.append(UInt8(truncatingIfNeeded: 0x30 &+ rest % 10))
            rest /= 10
        } while rest > 0
        var high = out.count - 1
        var digits = out.mutableSpan
        while low < high {
            digits.swapAt(low, high)
            low += 1
            high -= 1
        }
    }

    /// `SUB <subject> [queue group] <sid>\r\n`.
    /// - Parameter queue: a queue group name (a one-token literal `Subject`).
    package static func sub(_ subject: Subject, queue: Subject? = nil, sid: SubscriptionID) -> [UInt8] {
        var line = "SUB " + subject.text
        if let queue { line += " " + queue.text }
        line += " \(sid)\r\n"
        return Array(line.utf8)
    }

    /// `UNSUB <sid>\r\n`.
    package static func unsub(_ sid: SubscriptionID) -> [UInt8] {
        Array("UNSUB \(sid)\r\n".utf8)
    }

    /// `PING\r\n`.
    package static let ping: [UInt8] = Array("PING\r\n".utf8)
    /// `PONG\r\n`.
    package static let pong: [UInt8] = Array("PONG\r\n".utf8)
}
