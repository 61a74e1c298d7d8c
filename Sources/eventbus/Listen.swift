// `eventbus listen [PATTERN...]`: print events as they arrive, one line each,
// flushed per batch read from the broker (so per event when they trickle).
// (1.1) `--last` prints the retained events first; `--since SEQ` and
// `--resume FILE` replay the broker's history; `--reconnect` resumes from
// where the listener got to. The feed (EventBusCLI's `SubscriberFeed`, over
// EventBusSession's `BusSession`, ordered when the position is followed)
// says what each frame is; this file prints, saves the position and reconnects.
//
// Before editing: exits are part of the interface. `--count N` reached: 0.
// Standard output's reader gone (`| head -n 1`): 0, quietly, noticed even
// when no event comes (poll(2) reports POLLERR on a pipe with no reader).
// `--timeout` with nothing arriving: 124, quietly, like timeout(1). Broker
// gone: 69 unless `--reconnect`. A subscribe refused for a limit (`limit`:
// the group's member limit, the uid's subscriptions): 75 unless
// `--reconnect`, which waits for room as it waits for a broker (a new
// connection, pauses doubling to 2 s, one line on standard error). SIGINT
// keeps its default action (quiet; the shell sees 130).
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSession
@_spi(Package) import EventBusSystem

func runListen(_ args: ParsedArguments, socket: String) throws(CLIError) {
    var listener = Listener(try ListenOptions(args), socket: socket)
    try listener.run()
}

/// `listen`'s command line, checked in the order the errors are reported.
private struct ListenOptions {
    var patterns: [String]
    var format: OutputFormat
    var limit: Int?
    var idleNanoseconds: Int64?
    var reconnect: Bool
    var resumePath: String?
    var overflow: OverflowPolicy?
    var since: StreamPosition?
    var group: String?
    var last: Bool

    init(_ args: ParsedArguments) throws(CLIError) {
        let command = "listen"
        patterns = args.operands.isEmpty ? [">"] : args.operands
        try validatePatterns(patterns, command: command)
        last = args.has("last")
        if last, let first = args.operands.first, first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            // `--last 2` reads like tail's `-n 2`: say what it does instead (a type may be a number, so it is no error).
            printError("warning: '\(first)' is taken as a PATTERN (the event type '\(first)'): --last takes no number, it prints the retained event of each matching type first; for the events after a seq use --since SEQ, to stop after N events --count N")
        }
        format = try OutputFormat.chosen(args.format(command: command), command: command)
        limit = try args.value("count", command: command, as: parseCount)
        idleNanoseconds = try args.value("timeout", command: command, as: parseDuration)?.totalNanoseconds
        reconnect = args.has("reconnect")
        resumePath = args.value("resume")
        overflow = try overflowOption(args, command: command)
        since = nil
        if let text = args.value("since") {
            guard resumePath == nil else { throw .usage(command, "give --since or --resume, not both") }
            guard let seq = UInt64(text) else { throw .usage(command, "invalid seq '\(text)' for --since: a whole number, 0 or more") }
            since = StreamPosition(instance: nil, seq: seq)
        }
        // (1.3) A queue group shares live events only (PROTOCOL.md "Queue groups").
        group = try groupOption(args, command: command)
        if group != nil, let other = ["last", "since", "resume"].first(where: args.has) {
            throw .usage(command, "--group and --\(other) cannot be combined: a group shares live events only")
        }
        if let resumePath { since = try ResumeFile.read(resumePath) }
    }
}

/// One `listen` run: the feed (EventBusCLI's `SubscriberFeed`) says what
/// each frame is; this prints, saves the position and reconnects.
private struct Listener {
    let options: ListenOptions
    let socket: String
    let formatter: EventFormatter
    var feed: SubscriberFeed
    var idleDeadline: Int64?
    var output = StandardOutput()
    var printed = 0
    var failure: CLIError? = nil
    var watchingOutput = true  // false if fd 1 is not open (poll reports POLLNVAL)
    /// With `--reconnect`: a subscribe refused for a limit, to wait out on a new connection.
    var limited: CLIError? = nil
    /// The pause before the next try after a limit (grows to 2 s; said once a streak).
    var limitPause: Int32 = 100
    var waitingForRoom = false
    /// `feed.acknowledged` when the last try after a limit connected.
    var acknowledgedBeforeTry = 0

    init(_ options: ListenOptions, socket: String) {
        // Each connection ends its subscribes with the sentinel while the
        // position is followed, and events wait for it (SessionOptions.ordered).
        var session = subscriberSession(client: "eventbus-listen", overflow: options.overflow, ordered: options.reconnect || options.resumePath != nil || options.since != nil)
        if let since = options.since { session.start(at: since, covering: options.patterns) }
        self.options = options
        self.socket = socket
        feed = SubscriberFeed(session: session, patterns: options.patterns, group: options.group)
        formatter = EventFormatter(format: options.format)
        idleDeadline = options.idleNanoseconds.map { Clock.monotonicNanoseconds() + $0 }
    }

    /// A new connection's frames; `--last` asks the first connection only.
    mutating func frames() -> [UInt8] {
        feed.session.connectionFrames(options.patterns, last: options.last && feed.session.connections == 0, group: options.group)
    }

    mutating func run() throws(CLIError) {
        var connection = try connect()
        while true {
            var watchOutput = watchingOutput ? [PollEntry(.standardOutput, events: [])] : []
            let before = printed
            let outcome = try connection.receive(deadline: idleDeadline, extra: &watchOutput) { frame in take(frame) }
            try output.flush()
            if let failure { throw failure }
            try save()
            if let limit = options.limit, printed >= limit { return }
            if let error = limited {
                limited = nil
                connection = try waitForRoom(after: error)
                continue
            }
            reportBrokerError(outcome, printedSome: printed > before)
            if printed > before, let idleNanoseconds = options.idleNanoseconds { idleDeadline = Clock.monotonicNanoseconds() + idleNanoseconds }
            switch outcome {
            case .frames, .stopped:
                continue
            case .timedOut:
                throw .quiet(.timedOut)
            case .extra:
                if !watchOutput[0].returned.intersection([.hangup, .error]).isEmpty { throw .quiet(.success) }
                watchingOutput = false
            case .closed:
                connection = try reconnect(after: connection)
            }
        }
    }

    mutating func connect() throws(CLIError) -> BrokerConnection {
        do {
            return try connectAndSubscribe(socket) { frames() }
        } catch where options.reconnect && error.status == ExitStatus.unavailable.rawValue {
            if let message = error.message { printError("\(message); retrying") }
            return try reconnectLoop(socket, deadline: idleDeadline, announce: false) { frames() }
        }
    }

    /// After the broker closed: the next connection with `--reconnect`, else the error (69).
    mutating func reconnect(after connection: BrokerConnection) throws(CLIError) -> BrokerConnection {
        guard options.reconnect else { throw connection.closedError(reason: feed.brokerError) }
        printError("lost the connection to the broker at \(socket); reconnecting")
        _ = feed.session.connectionLost()
        return try reconnectLoop(socket, deadline: idleDeadline, announce: true) { frames() }
    }

    /// With `--reconnect`, a subscribe refused for a limit (the group's
    /// members, the uid's subscriptions): the connection goes (it may hold
    /// some of the subscriptions) and a new one tries again after a pause,
    /// growing to 2 s, as for a broker that is away; said once per streak.
    mutating func waitForRoom(after error: CLIError) throws(CLIError) -> BrokerConnection {
        if !waitingForRoom { printError("\(error.message ?? "a limit was reached"); retrying until there is room") }
        waitingForRoom = true
        _ = feed.session.connectionLost()
        let connection = try reconnectLoop(socket, deadline: idleDeadline, announce: nil, firstPause: limitPause) { frames() }
        acknowledgedBeforeTry = feed.acknowledged
        limitPause = min(limitPause * 2, 2000)
        return connection
    }

    /// Handles one frame; false to stop reading (`--count` reached, or the run ends).
    mutating func take(_ frame: RawSpan) -> Bool {
        let step = feed.handle(frame)
        for note in feed.takeNotes() { printError(note) }
        switch step {
        case .event(let fields):
            return print(frame, fields)
        case .released:
            while let (bytes, fields) = feed.session.takeReleased() {
                if !print(bytes.span.bytes, fields) { return false }
            }
        case .stop(let error) where options.reconnect && error.status == ExitStatus.temporaryFailure.rawValue:
            limited = error
            return false
        case .stop(let error):
            failure = error
            return false
        case .subscribed:
            if waitingForRoom && feed.acknowledged - acknowledgedBeforeTry >= options.patterns.count {
                printError("subscribed: there was room")
                waitingForRoom = false
            }
        case .none:
            break
        }
        return true
    }

    /// Prints one event; false once `--count` is reached.
    mutating func print(_ frame: RawSpan, _ fields: EventFields) -> Bool {
        let formatter = self.formatter
        var appended = false
        output.withBuffer { appended = formatter.append(event: frame, fields, to: &$0) }
        if appended { printed += 1 }
        return options.limit.map { printed < $0 } ?? true
    }

    /// Saves the position once the events it covers are printed.
    mutating func save() throws(CLIError) {
        guard let resumePath = options.resumePath, let position = feed.session.takeMovedPosition() else { return }
        try ResumeFile.write(position, to: resumePath)
    }

    /// A broker `error` is reported on its own when the connection outlived
    /// it (or is being replaced); otherwise it stays the reason for a close.
    mutating func reportBrokerError(_ outcome: ReceiveOutcome, printedSome: Bool) {
        if let error = feed.brokerError, outcome != .closed ? printedSome : options.reconnect {
            printError(error.failure("listening").message ?? "")
            feed.brokerError = nil
        }
    }
}

/// Retries connecting and sending `frames()` with growing pauses (100 ms
/// doubling to 2 s) until it works, the idle deadline passes (124) or
/// standard output's reader goes away (0). Only "unavailable" (69) and "try
/// again" (75, e.g. the broker's connection limit) are retried; other errors
/// end the run. `announce`: say "reconnected" (true), "connected" (false) or nothing (nil).
func reconnectLoop(_ socket: String, deadline: Int64?, announce: Bool?, firstPause: Int32 = 100, frames: () -> [UInt8]) throws(CLIError) -> BrokerConnection {
    var pauseMilliseconds = firstPause
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
            if let announce { printError(announce ? "reconnected to the broker at \(socket)" : "connected to the broker at \(socket)") }
            return connection
        } catch where error.status == ExitStatus.unavailable.rawValue || error.status == ExitStatus.temporaryFailure.rawValue {
            pauseMilliseconds = min(pauseMilliseconds * 2, 2000)
        }
    }
}
