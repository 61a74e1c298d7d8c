// `eventbus wait [--timeout DURATION] PATTERN... [-- COMMAND ARGS...]`:
// subscribe, and only once the broker has acknowledged every subscription
// run COMMAND, then print the first matching event and exit 0. The
// subscription exists before COMMAND starts, so an event COMMAND causes
// cannot be missed (no "published before I subscribed" window).
//
// Before editing: the run ends when both the event has arrived and COMMAND
// (if any) has exited 0; COMMAND failing first ends it at once with
// COMMAND's status (as timeout(1) and env(1) pass it on). The timeout covers
// subscribing, COMMAND and the wait; if it passes while COMMAND still runs,
// COMMAND gets SIGTERM, as with timeout(1).
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSession
@_spi(Package) import EventBusSystem
import Glibc

/// How often a running COMMAND is checked for having exited, in milliseconds.
private let childPollMilliseconds: Int64 = 20

func runWait(_ args: ParsedArguments, socket: String) throws(CLIError) {
    var waiter = try Waiter(try WaitOptions(args), socket: socket)
    try waiter.run()
}

/// `wait`'s command line, checked in the order the errors are reported.
private struct WaitOptions {
    var patterns: [String]
    var commandLine: [String]
    var format: OutputFormat
    var quiet: Bool
    var overflow: OverflowPolicy?
    var timeoutText = ""
    var deadline: Int64? = nil

    init(_ args: ParsedArguments) throws(CLIError) {
        let command = "wait"
        let split = args.operandsBeforeDoubleDash ?? args.operands.count
        patterns = Array(args.operands[..<split])
        commandLine = Array(args.operands[split...])
        guard !patterns.isEmpty else { throw .usage(command, "missing PATTERN") }
        if args.operandsBeforeDoubleDash != nil && commandLine.isEmpty { throw .usage(command, "missing COMMAND after '--'") }
        try validatePatterns(patterns, command: command)
        format = try OutputFormat.chosen(args.format(command: command), command: command)
        quiet = args.has("quiet")
        overflow = try overflowOption(args, command: command)
        if let timeout = try args.value("timeout", command: command, as: parseDuration), let text = args.value("timeout") {
            deadline = Clock.monotonicNanoseconds() + timeout.totalNanoseconds
            timeoutText = text.last?.isNumber == true ? text + "s" : text
        }
    }
}

/// One `wait` run: the feed (EventBusCLI's `SubscriberFeed`) says what each
/// frame is; this starts COMMAND, prints the event and watches the child.
private struct Waiter {
    let options: WaitOptions
    let formatter: EventFormatter
    let connection: BrokerConnection
    var feed: SubscriberFeed
    var child: ChildProcess? = nil
    var childDone: Bool
    var eventSeen = false
    var failure: CLIError? = nil
    var output = StandardOutput()

    init(_ options: WaitOptions, socket: String) throws(CLIError) {
        formatter = EventFormatter(format: options.format)
        var session = subscriberSession(client: "eventbus-wait", overflow: options.overflow)
        connection = try connectAndSubscribe(socket) { session.connectionFrames(options.patterns) }
        feed = SubscriberFeed(session: session, patterns: options.patterns)
        childDone = options.commandLine.isEmpty
        self.options = options
    }

    mutating func run() throws(CLIError) {
        while !(eventSeen && childDone) {
            let outcome = try receiveSlice()
            try output.flush()
            if let failure { throw failure }
            try pollChild()
            if eventSeen && childDone { return }
            try check(outcome)
        }
    }

    /// Reads from the broker until the slice ends; while COMMAND runs, the
    /// slice is short enough to notice it exit.
    mutating func receiveSlice() throws(CLIError) -> ReceiveOutcome {
        var sliceDeadline = options.deadline
        if child != nil && !childDone {
            let soon = Clock.monotonicNanoseconds() + childPollMilliseconds * 1_000_000
            sliceDeadline = min(options.deadline ?? .max, soon)
        }
        guard !eventSeen else {
            // Only COMMAND is left to wait for.
            _ = sleepWatchingStandardOutput(milliseconds: BrokerConnection.pollTimeout(until: sliceDeadline))
            return .timedOut
        }
        let connection = self.connection
        return try connection.receive(deadline: sliceDeadline) { frame in take(frame) }
    }

    /// Handles one frame; false to stop reading (the event came, or the run ends).
    mutating func take(_ frame: RawSpan) -> Bool {
        let step = feed.handle(frame)
        for note in feed.takeNotes() { printError(note) }
        switch step {
        case .event(let fields):
            guard feed.allSubscribed else { return true }
            if !options.quiet {
                let formatter = self.formatter
                output.withBuffer { _ = formatter.append(event: frame, fields, to: &$0) }
            }
            eventSeen = true
            return false
        case .subscribed:
            if feed.allSubscribed && !options.commandLine.isEmpty { return spawn() }
        case .stop(let error):
            failure = error
            return false
        case .released, .none:
            break
        }
        return true
    }

    /// Starts COMMAND once every subscription is acknowledged; false (with
    /// `failure` set: 127 or 126, as the shell says) when it cannot run.
    mutating func spawn() -> Bool {
        do throws(SystemError) {
            child = try ChildProcess.spawn(options.commandLine)
            return true
        } catch {
            let status: ExitStatus = error.errno == .noSuchFile ? .commandNotFound : .cannotExecute
            failure = CLIError(status, "cannot run '\(options.commandLine[0])': \(error.errno)")
            return false
        }
    }

    /// Notes COMMAND's exit; its failure ends the run with its status.
    mutating func pollChild() throws(CLIError) {
        guard let running = child, !childDone else { return }
        let exit: ChildExit?
        do { exit = try running.poll() } catch { throw CLIError(.software, "\(error)") }
        guard let exit else { return }
        childDone = true
        guard exit == .exited(0) else {
            throw CLIError(status: exit.shellStatus, message: "'\(options.commandLine[0])' failed (\(exit))")
        }
    }

    /// Ends the run when the broker closed before the event came, or at `--timeout`.
    func check(_ outcome: ReceiveOutcome) throws(CLIError) {
        switch outcome {
        case .closed:
            if !eventSeen { throw connection.closedError(reason: feed.brokerError) }
        case .timedOut:
            if let deadline = options.deadline, Clock.monotonicNanoseconds() >= deadline {
                if let running = child, !childDone { running.send(signal: SIGTERM) }
                let what = eventSeen ? "for '\(options.commandLine[0])' to finish" : "for an event matching \(options.patterns.map { "'\($0)'" }.joined(separator: " or "))"
                throw CLIError(.timedOut, "timed out after \(options.timeoutText) waiting \(what)")
            }
        case .frames, .stopped, .extra:
            break
        }
    }
}
