// `eventbus request TYPE [DATA]`: ask the connections that serve TYPE and
// print the first reply's data (PROTOCOL.md "Request/reply (1.3)", the
// `request` op). Each way of getting no answer has its own exit status:
// the service's error 2, no reply 3, no responders 67, the deadline 124.
//
// Before editing: the statuses are part of the interface (`--help`,
// docs/CLI.md); what each answer prints or exits with is EventBusCLI's
// `RequestOutcome` (unit-tested). `--timeout` goes to the broker, which keeps the deadline and
// answers `timeout`; the CLI waits a little longer for that answer, then
// gives up with 124 itself (a broker that never answers).
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSystem

/// How long past `--timeout` the CLI waits for the broker's `timeout` answer.
private let answerGraceNanoseconds: Int64 = 5_000_000_000

func runRequest(_ args: ParsedArguments, socket: String) throws(CLIError) {
    let command = "request"
    guard let typeName = args.operands.first else { throw .usage(command, "missing TYPE") }
    try validateEventType(typeName, command: command)
    guard args.operands.count <= 2 else { throw .usage(command, "too many arguments; quote DATA as one argument, e.g. '{\"a\": 1}'") }
    let outcome = try requestOutcome(args, type: typeName)
    let key = try keyOption(args, command: command)
    let data = try operandData(args, command: command)

    let connection = try BrokerConnection.connect(to: socket, client: "eventbus-request")
    let wait = Int64(outcome.timeoutMilliseconds ?? 25_000) * 1_000_000 + answerGraceNanoseconds
    let reply: Reply
    do throws(CLIError) {
        reply = try connection.request(.request(type: typeName, source: args.value("source"), id: args.value("id"), key: key, timeout: outcome.timeoutMilliseconds, data: data),
                                       deadline: Clock.monotonicNanoseconds() + wait)
    } catch where error.status == ExitStatus.timedOut.rawValue {
        throw CLIError(.timedOut, "no answer to the request for '\(typeName)' from the broker at \(connection.path)")
    }
    try StandardOutput.write(try outcome.output(for: reply))
}

/// `--format` and `--timeout` of `request`, checked.
private func requestOutcome(_ args: ParsedArguments, type: String) throws(CLIError) -> RequestOutcome {
    let command = "request"
    let json = try args.asksForJSON(command: command, plain: "data", note: " (a reply is not an event: pretty and cloudevents do not apply)")
    var timeoutMilliseconds: UInt64? = nil
    var timeoutText = "the broker's default (25s)"
    if let timeout = try args.value("timeout", command: command, as: parseDuration), let text = args.value("timeout") {
        let milliseconds = (timeout.totalNanoseconds + 999_999) / 1_000_000
        guard milliseconds > 0 else { throw .usage(command, "--timeout must be at least 1ms") }
        timeoutMilliseconds = UInt64(milliseconds)
        timeoutText = text.last?.isNumber == true ? text + "s" : text
    }
    return RequestOutcome(type: type, json: json, timeoutMilliseconds: timeoutMilliseconds, timeoutText: timeoutText)
}
