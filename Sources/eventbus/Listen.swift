// `eventbus listen [PATTERN...]`: print events as they arrive, one line each,
// flushed per batch read from the broker (so per event when they trickle).
//
// Before editing: exits are part of the interface. `--count N` reached: 0.
// Standard output's reader gone (`| head -n 1`): 0, quietly, noticed even
// when no event comes (poll(2) reports POLLERR on a pipe with no reader).
// `--timeout` with nothing arriving: 124, quietly, like timeout(1). Broker
// gone: 69 unless `--reconnect`. SIGINT keeps its default action (quiet;
// the shell sees 130).
import EventBusCommandLine
import EventBusProtocol
import EventBusSystem

let listenOptions: [OptionSpec] = globalOptions + [
    OptionSpec("format", "f", value: true),
    OptionSpec("count", "n", value: true),
    OptionSpec("timeout", "t", value: true),
    OptionSpec("reconnect", "r"),
]

func runListen(_ args: ParsedArguments, socket: String) throws(CLIError) {
    let command = "listen"
    let patterns = args.operands.isEmpty ? [">"] : args.operands
    try validatePatterns(patterns, command: command)
    let format = try OutputFormat.chosen(args.value("format"), command: command)
    let limit = try args.value("count", command: command, as: parseCount)
    let idleNanoseconds = try args.value("timeout", command: command, as: parseDuration)?.totalNanoseconds
    let reconnect = args.has("reconnect")
    let formatter = EventFormatter(format: format)

    var idleDeadline = idleNanoseconds.map { Clock.monotonicNanoseconds() + $0 }
    var connection: BrokerConnection
    do {
        connection = try connectAndSubscribe(socket, patterns: patterns)
    } catch where reconnect && error.status == ExitStatus.unavailable.rawValue {
        if let message = error.message { printError("\(message); retrying") }
        connection = try reconnectLoop(socket, patterns: patterns, deadline: idleDeadline, announce: false)
    }

    var output = StandardOutput()
    var printed = 0
    var failure: CLIError? = nil
    var brokerError: Reply? = nil
    var watchingOutput = true  // false if fd 1 is not open (poll reports POLLNVAL)
    while true {
        var watchOutput = watchingOutput ? [PollEntry(.standardOutput, events: [])] : []
        let before = printed
        let outcome = try connection.receive(deadline: idleDeadline, extra: &watchOutput) { frame in
            switch SubscriberFrame(frame) {
            case .event(let fields):
                output.withBuffer { buffer in
                    if formatter.append(event: frame, fields, to: &buffer) { printed += 1 }
                }
                if let limit, printed >= limit { return false }
            case .dropped(let count, let since):
                reportDropped(count: count, sinceSeq: since)
            case .reply(let reply):
                if reply.isOK { break }
                if let req = reply.req, req >= 1 && req <= Int64(patterns.count) {
                    failure = reply.failure("subscribing to '\(patterns[Int(req) - 1])'")
                    return false
                }
                brokerError = reply  // reported below: as the reason if the broker then closes
            case .other:
                break
            }
            return true
        }
        try output.flush()
        if let failure { throw failure }
        if let limit, printed >= limit { return }
        if let error = brokerError, outcome != .closed ? printed > before : reconnect {
            // The connection outlived the error (or is being replaced): report it on its own.
            printError(error.failure("listening").message ?? "")
            brokerError = nil
        }
        if printed > before, let idleNanoseconds { idleDeadline = Clock.monotonicNanoseconds() + idleNanoseconds }
        switch outcome {
        case .frames, .stopped:
            continue
        case .timedOut:
            throw .quiet(.timedOut)
        case .extra:
            if !watchOutput[0].returned.intersection([.hangup, .error]).isEmpty { throw .quiet(.success) }
            watchingOutput = false
        case .closed:
            guard reconnect else { throw connection.closedError(reason: brokerError) }
            printError("lost the connection to the broker at \(socket); reconnecting")
            connection = try reconnectLoop(socket, patterns: patterns, deadline: idleDeadline, announce: true)
        }
    }
}

/// Retries connecting and subscribing with growing pauses (100 ms doubling
/// to 2 s) until it works, the idle deadline passes (124) or standard
/// output's reader goes away (0). Only "unavailable" (69) and "try again"
/// (75, e.g. the broker's connection limit) are retried; other errors end the run.
func reconnectLoop(_ socket: String, patterns: [String], deadline: Int64?, announce: Bool) throws(CLIError) -> BrokerConnection {
    var pauseMilliseconds: Int32 = 100
    while true {
        var pause = pauseMilliseconds
        if deadline != nil {
            let remaining = BrokerConnection.pollTimeout(until: deadline)
            if remaining == 0 { throw .quiet(.timedOut) }
            pause = min(pause, remaining)
        }
        if sleepWatchingStandardOutput(milliseconds: pause) { throw .quiet(.success) }
        do {
            let connection = try connectAndSubscribe(socket, patterns: patterns)
            if announce { printError("reconnected to the broker at \(socket)") } else { printError("connected to the broker at \(socket)") }
            return connection
        } catch where error.status == ExitStatus.unavailable.rawValue || error.status == ExitStatus.temporaryFailure.rawValue {
            pauseMilliseconds = min(pauseMilliseconds * 2, 2000)
        }
    }
}
