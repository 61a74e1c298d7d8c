// What `eventbus request` makes of the broker's answer (issue 35: out of the
// executable, unit-tested by EventBusCLITests): the line it prints for a
// reply, or the error and exit status for each way of getting none (the
// service's error 2, no reply 3, no responders 67, the deadline 124, a
// timeout over the broker's maximum a usage error).
//
// Before editing: the statuses and the words are part of the interface
// (`request --help`, docs/CLI.md); the answer is read with `RequestAnswer`,
// which the library shares.
import EventBusCommandLine
@_spi(Package) import EventBusProtocol

/// One `eventbus request`: what was asked, for the words of its outcome.
package struct RequestOutcome {
    /// The request's type.
    package var type: String
    /// `--format json`: print the reply as an object with who answered.
    package var json: Bool
    /// `--timeout`, ms (nil: the broker's default).
    package var timeoutMilliseconds: UInt64?
    /// `--timeout` as the user wrote it (a bare number gets `s`), or "the broker's default (25s)".
    package var timeoutText: String

    package init(type: String, json: Bool, timeoutMilliseconds: UInt64?, timeoutText: String) {
        self.type = type
        self.json = json
        self.timeoutMilliseconds = timeoutMilliseconds
        self.timeoutText = timeoutText
    }

    /// The line to print for `reply` (ending in LF).
    /// - Throws: the `CLIError` to exit with when `reply` is no answer.
    package func output(for reply: Reply) throws(CLIError) -> [UInt8] {
        switch RequestAnswer(reply) {
        case .answered(let answer):
            var out: [UInt8] = []
            if json { Self.appendAnswerObject(answer, to: &out) } else { out += answer.data }
            out.append(0x0A)
            return out
        case .serviceError(let message, let answer):
            let who = answer.flatMap { $0.pid.map { " (pid \($0), uid \(answer?.uid.map(String.init) ?? "?"))" } } ?? ""
            throw CLIError(.serviceFailed, "the service for '\(type)' failed\(who): \(TerminalText.escaped(message))")
        case .noResponders(let message):
            // The local broker's own words add nothing to ours; another's (a
            // bridge: "on node host-b: ...", "the bridge's NATS link is down")
            // say where the request went, and a local `serve` would not help.
            guard message.isEmpty || message == "no connection serves \(type)" else {
                throw CLIError(.noResponders, "no one serves '\(type)': \(TerminalText.escaped(message))")
            }
            throw CLIError(.noResponders, "no one serves '\(type)' (start a server: eventbus serve \(type) -- COMMAND)")
        case .noReply(let message):
            throw CLIError(.noReply, "no reply to the request for '\(type)': \(TerminalText.escaped(message))")
        case .timedOut:
            throw CLIError(.timedOut, "timed out after \(timeoutText) waiting for a reply to the request for '\(type)'")
        case .refused:
            // A --timeout over the broker's --max-request-timeout is the user's
            // option, not bad data: a usage error that names the limit.
            if let timeoutMilliseconds, let limit = Self.brokerTimeoutLimit(reply), timeoutMilliseconds > limit {
                throw .usage("request", "--timeout \(timeoutText) is over the broker's maximum of \(durationText(.milliseconds(limit))) (eventbusd --max-request-timeout); ask for at most that")
            }
            throw reply.failure("request")
        }
    }

    /// The broker's largest request timeout, ms, from its `bad_request` for a
    /// timeout over it ("timeout N ms is over the broker's maximum of M ms",
    /// Broker+RequestReply.swift); nil for any other answer.
    package static func brokerTimeoutLimit(_ reply: Reply) -> UInt64? {
        guard reply.string("code") == ErrorCode.badRequest.rawValue, let message = reply.string("message"),
              message.hasPrefix("timeout "), let range = message.firstRange(of: "maximum of ") else { return nil }
        return UInt64(message[range.upperBound...].prefix { $0.isNumber })
    }

    /// `{"seq":43,"time":"...","pid":811,"uid":0,"gid":0,"data":...}`: the
    /// request's seq and the server's reply (`request --format json`).
    package static func appendAnswerObject(_ answer: ServerReply, to out: inout [UInt8]) {
        FrameEncoder.appendASCII("{", to: &out)
        var first = true
        func key(_ name: String) {
            if !first { out.append(0x2C) }
            first = false
            JSONString.appendQuoted(name, to: &out)
            out.append(0x3A)
        }
        if let seq = answer.seq { key("seq"); FrameEncoder.appendInt(seq, to: &out) }
        if let time = answer.time { key("time"); JSONString.appendQuoted(time, to: &out) }
        for (name, value) in [("pid", answer.pid), ("uid", answer.uid), ("gid", answer.gid)] {
            if let value { key(name); FrameEncoder.appendInt(value, to: &out) }
        }
        key("data")
        out += answer.data
        out.append(0x7D)
    }
}
