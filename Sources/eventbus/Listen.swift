// `eventbus listen [PATTERN...]`: print events as they arrive, one line each,
// flushed per batch read from the broker (so per event when they trickle).
// (1.1) `--last` prints the retained events first; `--since SEQ` and
// `--resume FILE` replay the broker's history; `--reconnect` resumes from
// where the listener got to. The session (EventBusSession's `BusSession`,
// ordered when the position is followed) says what each frame is; this
// file prints, saves the position and reconnects.
//
// Before editing: exits are part of the interface. `--count N` reached: 0.
// Standard output's reader gone (`| head -n 1`): 0, quietly, noticed even
// when no event comes (poll(2) reports POLLERR on a pipe with no reader).
// `--timeout` with nothing arriving: 124, quietly, like timeout(1). Broker
// gone: 69 unless `--reconnect`. SIGINT keeps its default action (quiet;
// the shell sees 130).
import EventBusCommandLine
import EventBusProtocol
import EventBusSession
import EventBusSystem

func runListen(_ args: ParsedArguments, socket: String) throws(CLIError) {
    let command = "listen"
    let patterns = args.operands.isEmpty ? [">"] : args.operands
    try validatePatterns(patterns, command: command)
    if args.has("last"), let first = args.operands.first, first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
        // `--last 2` reads like tail's `-n 2`: say what it does instead (a type may be a number, so it is no error).
        printError("warning: '\(first)' is taken as a PATTERN (the event type '\(first)'): --last takes no number, it prints the retained event of each matching type first; for the events after a seq use --since SEQ, to stop after N events --count N")
    }
    let format = try OutputFormat.chosen(args.format(command: command), command: command)
    let limit = try args.value("count", command: command, as: parseCount)
    let idleNanoseconds = try args.value("timeout", command: command, as: parseDuration)?.totalNanoseconds
    let reconnect = args.has("reconnect")
    let resumePath = args.value("resume")
    let overflow = try overflowOption(args, command: command)
    var since: StreamPosition? = nil
    if let text = args.value("since") {
        guard resumePath == nil else { throw .usage(command, "give --since or --resume, not both") }
        guard let seq = UInt64(text) else { throw .usage(command, "invalid seq '\(text)' for --since: a whole number, 0 or more") }
        since = StreamPosition(instance: nil, seq: seq)
    }
    // (1.3) A queue group shares live events only (PROTOCOL.md "Queue groups").
    let group = try groupOption(args, command: command)
    if group != nil, let other = ["last", "since", "resume"].first(where: args.has) {
        throw .usage(command, "--group and --\(other) cannot be combined: a group shares live events only")
    }
    if let resumePath { since = try ResumeFile.read(resumePath) }
    // Each connection ends its subscribes with the sentinel while the
    // position is followed, and events wait for it (SessionOptions.ordered).
    var session = subscriberSession(client: "eventbus-listen", overflow: overflow, ordered: reconnect || resumePath != nil || since != nil)
    if let since { session.start(at: since, covering: patterns) }
    let last = args.has("last")
    /// `--last` asks the first connection only.
    func frames() -> [UInt8] { session.connectionFrames(patterns, last: last && session.connections == 0, group: group) }
    let formatter = EventFormatter(format: format)

    var idleDeadline = idleNanoseconds.map { Clock.monotonicNanoseconds() + $0 }
    var connection: BrokerConnection
    do {
        connection = try connectAndSubscribe(socket, frames: frames)
    } catch where reconnect && error.status == ExitStatus.unavailable.rawValue {
        if let message = error.message { printError("\(message); retrying") }
        connection = try reconnectLoop(socket, deadline: idleDeadline, announce: false, frames: frames)
    }

    var output = StandardOutput()
    var printed = 0
    var failure: CLIError? = nil
    var brokerError: Reply? = nil
    var revokedPatterns = RevokedPatterns(patterns)
    var watchingOutput = true  // false if fd 1 is not open (poll reports POLLNVAL)
    /// Saves the position once the events it covers are printed.
    func save() throws(CLIError) {
        guard let resumePath, let position = session.takeMovedPosition() else { return }
        try ResumeFile.write(position, to: resumePath)
    }
    while true {
        var watchOutput = watchingOutput ? [PollEntry(.standardOutput, events: [])] : []
        let before = printed
        let outcome = try connection.receive(deadline: idleDeadline, extra: &watchOutput) { frame in
            /// Prints one event; false once `--count` is reached.
            func print(_ frame: UnsafeRawBufferPointer, _ fields: EventFields) -> Bool {
                output.withBuffer { buffer in
                    if formatter.append(event: frame, fields, to: &buffer) { printed += 1 }
                }
                return limit.map { printed < $0 } ?? true
            }
            switch session.handle(frame) {
            case .event(let fields):
                if !print(frame, fields) { return false }
            case .settled(let ahead):
                if let ahead { reportSinceAhead(asked: ahead.asked, newest: ahead.newest) }
                while let (bytes, fields) = session.takeReleased() {
                    if !bytes.withUnsafeBytes({ print($0, fields) }) { return false }
                }
            case .dropped(let count, let since):
                reportDropped(count: count, sinceSeq: since)
            case .gap(let gap):
                reportGap(gap, instance: session.greeting?.instance)
            case .subscribeRefused(let pattern, let reply, _):
                failure = reply.failure("subscribing to '\(pattern)'")
                return false
            case .revoked(let pattern, let reply):
                if let error = revokedPatterns.revoke(pattern, reply) {
                    failure = error
                    return false
                }
            case .helloRefused(let reply), .error(let reply):
                brokerError = reply  // reported below: as the reason if the broker then closes
            case .greeted(let info, _) where group != nil && !info.features.contains("groups"):
                // A broker before 1.3 would take `group` for an unknown field: every listener would get every event.
                failure = CLIError(.protocolError, "the broker has no queue groups (no 'groups' in its features: it is older than protocol 1.3), so --group cannot share the events")
                return false
            case .held, .greeted, .subscribed, .unsubscribed, .other, .unreadable, .ignored, .request:
                break
            }
            return true
        }
        try output.flush()
        if let failure { throw failure }
        try save()
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
            _ = session.connectionLost()
            connection = try reconnectLoop(socket, deadline: idleDeadline, announce: true, frames: frames)
        }
    }
}

/// Retries connecting and sending `frames()` with growing pauses (100 ms
/// doubling to 2 s) until it works, the idle deadline passes (124) or
/// standard output's reader goes away (0). Only "unavailable" (69) and "try
/// again" (75, e.g. the broker's connection limit) are retried; other errors
/// end the run.
func reconnectLoop(_ socket: String, deadline: Int64?, announce: Bool, frames: () -> [UInt8]) throws(CLIError) -> BrokerConnection {
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
            let connection = try BrokerConnection.open(to: socket)
            try connection.send(frames())
            if announce { printError("reconnected to the broker at \(socket)") } else { printError("connected to the broker at \(socket)") }
            return connection
        } catch where error.status == ExitStatus.unavailable.rawValue || error.status == ExitStatus.temporaryFailure.rawValue {
            pauseMilliseconds = min(pauseMilliseconds * 2, 2000)
        }
    }
}
