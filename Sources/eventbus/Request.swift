// `eventbus request TYPE [DATA]`: ask the connections that serve TYPE and
// print the first reply's data (PROTOCOL.md "Request/reply (1.3)", the
// `request` op). Each way of getting no answer has its own exit status:
// the service's error 2, no reply 3, no responders 67, the deadline 124.
//
// Before editing: the statuses are part of the interface (`--help`,
// docs/CLI.md); the answer is read with `RequestAnswer`, which the library
// shares. `--timeout` goes to the broker, which keeps the deadline and
// answers `timeout`; the CLI waits a little longer for that answer, then
// gives up with 124 itself (a broker that never answers).
import EventBusCLI
import EventBusCommandLine
import EventBusProtocol
import EventBusSystem

/// How long past `--timeout` the CLI waits for the broker's `timeout` answer.
private let answerGraceNanoseconds: Int64 = 5_000_000_000

func runRequest(_ args: ParsedArguments, socket: String) throws(CLIError) {
    let command = "request"
    guard let typeName = args.operands.first else { throw .usage(command, "missing TYPE") }
    try validateEventType(typeName, command: command)
    guard args.operands.count <= 2 else { throw .usage(command, "too many arguments; quote DATA as one argument, e.g. '{\"a\": 1}'") }
    let json: Bool
    switch try args.format(command: command) {
    case nil, "data": json = false
    case "json": json = true
    case let other?: throw .usage(command, "unknown format '\(TerminalText.escaped(other))'; use data or json (a reply is not an event: pretty and cloudevents do not apply)")
    }
    var timeoutMilliseconds: UInt64? = nil
    var timeoutText = "the broker's default (25s)"
    if let timeout = try args.value("timeout", command: command, as: parseDuration), let text = args.value("timeout") {
        let milliseconds = (timeout.totalNanoseconds + 999_999) / 1_000_000
        guard milliseconds > 0 else { throw .usage(command, "--timeout must be at least 1ms") }
        timeoutMilliseconds = UInt64(milliseconds)
        timeoutText = text.last?.isNumber == true ? text + "s" : text
    }
    let key = try keyOption(args, command: command)
    let data = try operandData(args, command: command)

    let connection = try BrokerConnection.connect(to: socket, client: "eventbus-request")
    let wait = Int64(timeoutMilliseconds ?? 25_000) * 1_000_000 + answerGraceNanoseconds
    let reply: Reply
    do throws(CLIError) {
        reply = try connection.request(.request(type: typeName, source: args.value("source"), id: args.value("id"), key: key, timeout: timeoutMilliseconds, data: data),
                                       deadline: Clock.monotonicNanoseconds() + wait)
    } catch where error.status == ExitStatus.timedOut.rawValue {
        throw CLIError(.timedOut, "no answer to the request for '\(typeName)' from the broker at \(connection.path)")
    }
    switch RequestAnswer(reply) {
    case .answered(let answer):
        var out: [UInt8] = []
        if json { appendAnswerObject(answer, to: &out) } else { out += answer.data }
        out.append(0x0A)
        try StandardOutput.write(out)
    case .serviceError(let message, let answer):
        let who = answer.flatMap { $0.pid.map { " (pid \($0), uid \(answer?.uid.map(String.init) ?? "?"))" } } ?? ""
        throw CLIError(.serviceFailed, "the service for '\(typeName)' failed\(who): \(TerminalText.escaped(message))")
    case .noResponders(let message):
        // The local broker's own words add nothing to ours; another's (a
        // bridge: "on node host-b: ...", "the bridge's NATS link is down")
        // say where the request went, and a local `serve` would not help.
        guard message.isEmpty || message == "no connection serves \(typeName)" else {
            throw CLIError(.noResponders, "no one serves '\(typeName)': \(TerminalText.escaped(message))")
        }
        throw CLIError(.noResponders, "no one serves '\(typeName)' (start a server: eventbus serve \(typeName) -- COMMAND)")
    case .noReply(let message):
        throw CLIError(.noReply, "no reply to the request for '\(typeName)': \(TerminalText.escaped(message))")
    case .timedOut:
        throw CLIError(.timedOut, "timed out after \(timeoutText) waiting for a reply to the request for '\(typeName)'")
    case .refused:
        // A --timeout over the broker's --max-request-timeout is the user's
        // option, not bad data: a usage error that names the limit.
        if let timeoutMilliseconds, let limit = brokerTimeoutLimit(reply), timeoutMilliseconds > limit {
            throw .usage(command, "--timeout \(timeoutText) is over the broker's maximum of \(durationText(.milliseconds(limit))) (eventbusd --max-request-timeout); ask for at most that")
        }
        throw reply.failure("request")
    }
}

/// The broker's largest request timeout, ms, from its `bad_request` for a
/// timeout over it ("timeout N ms is over the broker's maximum of M ms",
/// Broker+RequestReply.swift); nil for any other answer.
func brokerTimeoutLimit(_ reply: Reply) -> UInt64? {
    guard reply.string("code") == ErrorCode.badRequest.rawValue, let message = reply.string("message"),
          message.hasPrefix("timeout "), let range = message.firstRange(of: "maximum of ") else { return nil }
    return UInt64(message[range.upperBound...].prefix { $0.isNumber })
}

/// `{"seq":43,"time":"...","pid":811,"uid":0,"gid":0,"data":...}`: the
/// request's seq and the server's reply (`request --format json`).
func appendAnswerObject(_ answer: ServerReply, to out: inout [UInt8]) {
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
