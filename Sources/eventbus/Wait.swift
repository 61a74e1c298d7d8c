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
import EventBusCommandLine
import EventBusProtocol
import EventBusSession
import EventBusSystem
import Glibc

/// How often a running COMMAND is checked for having exited, in milliseconds.
private let childPollMilliseconds: Int64 = 20

func runWait(_ args: ParsedArguments, socket: String) throws(CLIError) {
    let command = "wait"
    let split = args.operandsBeforeDoubleDash ?? args.operands.count
    let patterns = Array(args.operands[..<split])
    let commandLine = Array(args.operands[split...])
    guard !patterns.isEmpty else { throw .usage(command, "missing PATTERN") }
    if args.operandsBeforeDoubleDash != nil && commandLine.isEmpty { throw .usage(command, "missing COMMAND after '--'") }
    try validatePatterns(patterns, command: command)
    let format = try OutputFormat.chosen(args.format(command: command), command: command)
    let quiet = args.has("quiet")
    let overflow = try overflowOption(args, command: command)
    var timeoutText = "" as String
    var deadline: Int64? = nil
    if let timeout = try args.value("timeout", command: command, as: parseDuration), let text = args.value("timeout") {
        deadline = Clock.monotonicNanoseconds() + timeout.totalNanoseconds
        timeoutText = text.last?.isNumber == true ? text + "s" : text
    }
    let formatter = EventFormatter(format: format)

    var session = subscriberSession(client: "eventbus-wait", overflow: overflow)
    let connection = try connectAndSubscribe(socket) { session.connectionFrames(patterns) }
    var acknowledged = 0
    var child: ChildProcess? = nil
    var childDone = commandLine.isEmpty
    var eventSeen = false
    var failure: CLIError? = nil
    var brokerError: Reply? = nil  // an `error` without `req`: the reason if the broker then closes
    var revokedPatterns = RevokedPatterns(patterns)
    var output = StandardOutput()

    while !(eventSeen && childDone) {
        // While COMMAND runs, wake up often enough to notice it exit.
        var sliceDeadline = deadline
        if child != nil && !childDone {
            let soon = Clock.monotonicNanoseconds() + childPollMilliseconds * 1_000_000
            sliceDeadline = min(deadline ?? .max, soon)
        }
        let outcome: ReceiveOutcome
        if eventSeen {
            // Only COMMAND is left to wait for.
            _ = sleepWatchingStandardOutput(milliseconds: BrokerConnection.pollTimeout(until: sliceDeadline))
            outcome = .timedOut
        } else {
            outcome = try connection.receive(deadline: sliceDeadline) { frame in
                switch session.handle(frame) {
                case .event(let fields):
                    guard acknowledged == patterns.count else { return true }
                    if !quiet { output.withBuffer { _ = formatter.append(event: frame, fields, to: &$0) } }
                    eventSeen = true
                    return false
                case .subscribed:
                    acknowledged += 1
                    if acknowledged == patterns.count && !commandLine.isEmpty {
                        do throws(SystemError) {
                            child = try ChildProcess.spawn(commandLine)
                        } catch {
                            let status: ExitStatus = error.errno == .noSuchFile ? .commandNotFound : .cannotExecute
                            failure = CLIError(status, "cannot run '\(commandLine[0])': \(error.errno)")
                            return false
                        }
                    }
                case .subscribeRefused(let pattern, let reply, _):
                    failure = reply.failure("subscribing to '\(pattern)'")
                    return false
                case .revoked(let pattern, let reply):
                    if let error = revokedPatterns.revoke(pattern, reply) {
                        failure = error
                        return false
                    }
                case .helloRefused(let reply), .error(let reply):
                    brokerError = reply
                case .dropped(let count, let since):
                    reportDropped(count: count, sinceSeq: since)
                case .held, .gap, .greeted, .unsubscribed, .answered, .settled, .other, .unreadable, .ignored, .request:
                    break
                }
                return true
            }
        }
        try output.flush()
        if let failure { throw failure }

        if let running = child, !childDone {
            let exit: ChildExit?
            do { exit = try running.poll() } catch { throw CLIError(.software, "\(error)") }
            if let exit {
                childDone = true
                guard exit == .exited(0) else {
                    throw CLIError(status: exit.shellStatus, message: "'\(commandLine[0])' failed (\(exit))")
                }
            }
        }
        if eventSeen && childDone { return }
        switch outcome {
        case .closed:
            if !eventSeen { throw connection.closedError(reason: brokerError) }
        case .timedOut:
            if let deadline, Clock.monotonicNanoseconds() >= deadline {
                if let running = child, !childDone { running.send(signal: SIGTERM) }
                let what = eventSeen ? "for '\(commandLine[0])' to finish" : "for an event matching \(patterns.map { "'\($0)'" }.joined(separator: " or "))"
                throw CLIError(.timedOut, "timed out after \(timeoutText) waiting \(what)")
            }
        case .frames, .stopped, .extra:
            break
        }
    }
}
