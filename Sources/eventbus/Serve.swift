// `eventbus serve TYPE... [--group NAME] -- COMMAND [ARGS...]`: answer the
// requests for TYPE (PROTOCOL.md "Request/reply (1.3)": a serving
// subscription per TYPE, with "Queue groups (1.3)"'s `group` when given),
// running COMMAND once per request (ServeJob.swift), at most
// `--concurrency` at a time. `serve --json TYPE...` runs nothing: it prints
// each request as the broker sent it, one JSON line, and sends each line of
// standard input (`{"to":..,"data":..}` or `{"to":..,"error":..}`) as a
// reply, so a program in any language can serve through two pipes.
//
// Before editing: one thread, one poll(2) over the broker socket, standard
// input (--json) and every running COMMAND's pipes. At `--concurrency`
// running commands the socket is not read: requests wait in the broker
// (whose flow control and deadlines apply) rather than in this process.
// A request past its deadline gets no reply (the broker has answered the
// requester already); its COMMAND is killed. Exits: 0 after `--count`
// answers or (--json) at the end of standard input; 69 when the broker goes;
// 77 when the policy forbids serving a TYPE; 126/127 when COMMAND cannot
// run.
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSession
@_spi(Package) import EventBusSystem
import Glibc

/// The tag of serve's own requests: the replies.
enum ServeTag {
    /// The reply to request `seq` (nil: one read from `--json`'s input).
    case reply(seq: UInt64?)
}

/// A request for the server: what answering it takes.
struct ServedRequest {
    var token: String
    var seq: UInt64
    /// Its `data`, as the requester sent it (`null` when absent).
    var data: [UInt8]
    /// CLOCK_MONOTONIC, ns.
    var deadline: Int64
}

/// The COMMANDs `serve -- COMMAND` runs, at most `concurrency` at a time.
private struct CommandRun {
    let commandLine: [String]
    let concurrency: Int
    /// `--string`: a COMMAND's output is sent as a JSON string.
    let string: Bool
    /// `--count`: requests to take in all.
    let count: Int?
    var jobs: [ServeJob] = []
    /// Requests taken so far.
    var started = 0

    init(commandLine: [String], concurrency: Int, string: Bool, count: Int?) {
        self.commandLine = commandLine
        self.concurrency = concurrency
        self.string = string
        self.count = count
    }

    /// Whether another request may be taken now: a slot is free and `--count` not reached.
    var hasRoom: Bool { jobs.count < concurrency && count.map { started < $0 } ?? true }

    /// Ends every running COMMAND (the broker is gone or serve failed).
    func stopAll() { for job in jobs { job.child.sendToGroup(signal: SIGTERM); _ = try? job.child.poll() } }
}

/// `serve --json`'s standard input: its lines so far.
private struct ReplyInput {
    var splitter = FrameSplitter()
    /// Lines read, for the messages about bad ones.
    var line = 0
    var isOpen = true
}

/// The `timeout` of a request frame that has none: the protocol's default.
private let defaultRequestMilliseconds: UInt64 = 25_000

func runServe(_ args: ParsedArguments, socket: String) throws(CLIError) {
    let command = "serve"
    let split = args.operandsBeforeDoubleDash ?? args.operands.count
    let patterns = Array(args.operands[..<split])
    let commandLine = Array(args.operands[split...])
    guard !patterns.isEmpty else { throw .usage(command, "missing TYPE") }
    try validatePatterns(patterns, command: command)
    let json = try args.format(command: command).map { (value) throws(CLIError) -> Bool in
        guard value == "json" else { throw .usage(command, "unknown format '\(TerminalText.escaped(value))'; serve prints requests only as json") }
        return true
    } ?? false
    if args.operandsBeforeDoubleDash != nil && commandLine.isEmpty { throw .usage(command, "missing COMMAND after '--'") }
    if json && !commandLine.isEmpty { throw .usage(command, "give --json or '-- COMMAND', not both") }
    if !json && commandLine.isEmpty { throw .usage(command, "missing '-- COMMAND' (or --json to serve through standard input and output)") }
    if json && (args.has("string") || args.has("concurrency")) { throw .usage(command, "--string and --concurrency go with '-- COMMAND'") }
    let group = try groupOption(args, command: command)
    let concurrency = try args.value("concurrency", command: command, as: parseCount) ?? 1
    guard concurrency >= 1 else { throw .usage(command, "--concurrency must be at least 1") }
    let count = try args.value("count", command: command, as: parseCount)

    var server = Server(keys: patterns.map { SubscriptionKey($0, serve: true, group: group) }, group: group)
    let connection = try connectAndSubscribe(socket) { server.connectionFrames() }
    if json {
        try server.serveThroughStandardStreams(connection, count: count)
    } else {
        try server.serveWithCommand(connection, commandLine, concurrency: concurrency, string: args.has("string"), count: count)
    }
}

/// (1.3) `--group NAME` of `listen` and `serve`: 1-64 bytes of
/// `A-Z a-z 0-9 _ . - :` (PROTOCOL.md "Requests"), checked before anything is sent.
func groupOption(_ args: ParsedArguments, command: String) throws(CLIError) -> String? {
    guard let name = args.value("group") else { return nil }
    guard RequestDecoder.isValidClientName(name) else {
        throw .usage(command, "invalid group name '\(TerminalText.escaped(name))': 1-64 bytes of A-Z a-z 0-9 _ . - :")
    }
    return name
}

/// The session of `serve` and what it has answered.
private struct Server {
    let keys: [SubscriptionKey]
    let group: String?
    var session = BusSession<ServeTag>(sessionOptions(client: "eventbus-serve"))
    var acknowledged = 0
    /// Replies sent (the `--count`).
    var answered = 0
    var failure: CLIError? = nil
    /// An `error` without `req`: the reason if the broker then closes.
    var brokerError: Reply? = nil

    init(keys: [SubscriptionKey], group: String?) {
        self.keys = keys
        self.group = group
    }

    /// The `hello` and a serving subscribe per TYPE.
    mutating func connectionFrames() -> [UInt8] {
        session.connectionStarted()
        for key in keys { session.subscribe(key) }
        return session.takeOutput()
    }

    /// Handles one frame. - Returns: the request it carries, if any.
    mutating func handle(_ frame: RawSpan) -> ServedRequest? {
        switch session.handle(frame) {
        case .request(let fields):
            return served(fields, in: frame)
        case .subscribed:
            acknowledged += 1
            if acknowledged == keys.count {
                let names = keys.map { "'\($0.pattern)'" }.joined(separator: ", ")
                printError("serving \(names)\(group.map { " in group '\($0)'" } ?? "")")
            }
        case .subscribeRefused(let key, let reply, _):
            failure = reply.failure("serving '\(key.pattern)'")
        case .revoked(let pattern, let reply):
            failure = reply.failure("serving '\(pattern)' (revoked by a policy reload)")
        case .answered(.reply(let seq), let reply):
            let which = seq.map { "the reply to request \($0)" } ?? "a reply"
            if !reply.isOK {
                printError("\(which) was refused: \(TerminalText.escaped(reply.string("message") ?? "no message")) (\(reply.string("code") ?? "unknown"))")
            } else if reply.bool("accepted") == false {
                printError("\(which) came too late (answered already, past its deadline, or its requester left)")
            }
        case .helloRefused(let reply), .error(let reply):
            brokerError = reply
        case .greeted(let info, _):
            // A broker before 1.3 would take `serve` for an unknown field and subscribe plainly.
            for (feature, what) in [("request", "serve requests"), ("groups", "have queue groups")] where !info.features.contains(feature) && (feature == "request" || group != nil) {
                failure = CLIError(.protocolError, "the broker does not \(what) (no '\(feature)' in its features: it is older than protocol 1.3)")
            }
        case .event, .held, .dropped, .gap, .unsubscribed, .settled, .other, .unreadable, .ignored, .servers:
            break
        }
        return nil
    }

    /// A request to run COMMAND for, with its deadline.
    private func served(_ fields: RequestFields, in frame: RawSpan) -> ServedRequest {
        let data = fields.event.data.map { [UInt8](copying: frame.extracting($0.start..<$0.end)) } ?? Array("null".utf8)
        let milliseconds = Int64(min(fields.timeout ?? defaultRequestMilliseconds, 1 << 40))
        let now = Clock.monotonicNanoseconds()
        var deadline = now + milliseconds * 1_000_000
        // (attacker) `timeout` is the time left when the broker queued
        // the request, not when serve reads it: one that waited behind
        // others (another user's, sent with short timeouts to fill the
        // queue) may be past its deadline already, and its COMMAND would
        // run for nobody. A first delivery was queued when the broker
        // received it (`time`), so that bounds the deadline too.
        if !fields.event.redelivered, let time = fields.event.time,
           let received = LocalTime.epochMilliseconds(fromRFC3339: JSONString.decode(frame, time)) {
            let left = received + milliseconds - Clock.wallNanoseconds() / 1_000_000
            deadline = min(deadline, now + left * 1_000_000)
        }
        return ServedRequest(token: JSONString.decode(frame, fields.token), seq: fields.event.seq, data: data, deadline: deadline)
    }

    /// Queues a reply; the caller writes `session.takeOutput()`.
    mutating func reply(to token: String, seq: UInt64?, data: JSONText?, error: String?) {
        session.send(.reply(to: token, data: data, error: error), tag: .reply(seq: seq))
        answered += 1
    }

    // MARK: -- COMMAND

    mutating func serveWithCommand(_ connection: BrokerConnection, _ commandLine: [String], concurrency: Int, string: Bool, count: Int?) throws(CLIError) {
        var run = CommandRun(commandLine: commandLine, concurrency: concurrency, string: string, count: count)
        var buffer: [UInt8] = []
        while count.map({ answered < $0 || !run.jobs.isEmpty }) ?? true {
            let reading = run.hasRoom
            var entries = [PollEntry(connection.descriptor, events: reading ? .readable : [])]
            for job in run.jobs { entries += job.pollEntries }
            let now = Clock.monotonicNanoseconds()
            let wake = run.jobs.map { $0.wakeUp(now: now) }.min()
            let timeout = reading && connection.hasBacklog ? 0 : BrokerConnection.pollTimeout(until: wake)
            do { _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: timeout) } catch { throw CLIError(.software, "\(error)") }

            finishJobs(&run, buffer: &buffer)
            if session.hasOutput { try connection.send(session.takeOutput()) }
            guard reading && (connection.hasBacklog || !entries[0].returned.isEmpty) else {
                if !entries[0].returned.intersection([.hangup, .error]).isEmpty && !reading {
                    // Gone while every slot is busy: finish nothing more.
                    run.stopAll()
                    throw connection.closedError(reason: brokerError)
                }
                continue
            }
            try readRequests(connection, &run)
        }
    }

    /// Reads requests while a slot is free, starting COMMAND for each.
    /// - Throws: (every COMMAND stopped) the broker's refusal, a COMMAND that cannot run, the broker gone.
    private mutating func readRequests(_ connection: BrokerConnection, _ run: inout CommandRun) throws(CLIError) {
        var spawnFailure: CLIError? = nil
        let outcome = try connection.receive(deadline: 0) { frame in
            if let request = handle(frame) {
                run.started += 1
                spawnFailure = start(request, in: &run)
            }
            return failure == nil && spawnFailure == nil && run.hasRoom
        }
        if session.hasOutput { try connection.send(session.takeOutput()) }
        if let error = failure ?? spawnFailure {
            run.stopAll()
            throw error
        }
        if outcome == .closed {
            run.stopAll()
            throw connection.closedError(reason: brokerError)
        }
    }

    /// Starts COMMAND for `request`, unless its deadline passed while it
    /// waited for a free slot (then no COMMAND and no reply).
    /// - Returns: the error to stop with when COMMAND cannot be run.
    private mutating func start(_ request: ServedRequest, in run: inout CommandRun) -> CLIError? {
        let name = run.commandLine[0]
        if request.deadline <= Clock.monotonicNanoseconds() {
            // Not counted for `--count`: nothing ran, and requests another
            // user lets expire in the queue must not end a `--count 1`
            // serve before the live request behind them.
            run.started -= 1
            printError("request \(request.seq) reached its deadline before '\(name)' could start: skipped")
            return nil
        }
        do throws(SystemError) {
            run.jobs.append(try ServeJob(command: run.commandLine, token: request.token, seq: request.seq, data: request.data, deadline: request.deadline))
            return nil
        } catch {
            reply(to: request.token, seq: request.seq, data: nil, error: "the server cannot run '\(name)': \(error.errno)")
            return CLIError(error.errno == .noSuchFile ? .commandNotFound : .cannotExecute, "cannot run '\(name)': \(error.errno)")
        }
    }

    /// Moves every running COMMAND on and replies for those that ended.
    private mutating func finishJobs(_ run: inout CommandRun, buffer: inout [UInt8]) {
        let now = Clock.monotonicNanoseconds()
        for job in run.jobs { job.step(now: now, buffer: &buffer) }
        for job in run.jobs where job.isDone {
            switch job.outcome(command: run.commandLine[0], string: run.string) {
            case .data(let data): reply(to: job.token, seq: job.seq, data: data, error: nil)
            case .failure(let text): reply(to: job.token, seq: job.seq, data: nil, error: text)
            case .expired:
                answered += 1
                printError("'\(run.commandLine[0])' outlived the deadline of request \(job.seq): killed, no reply sent")
            }
        }
        run.jobs.removeAll { $0.isDone }
    }

    // MARK: --json

    mutating func serveThroughStandardStreams(_ connection: BrokerConnection, count: Int?) throws(CLIError) {
        var input = ReplyInput()
        var output = StandardOutput()
        var buffer: [UInt8] = []
        while input.isOpen && count.map({ answered < $0 }) ?? true {
            var entries = [PollEntry(connection.descriptor, events: .readable), PollEntry(.standardInput, events: .readable),
                           PollEntry(.standardOutput, events: [])]
            let timeout: Int32 = connection.hasBacklog ? 0 : -1
            do { _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: timeout) } catch { throw CLIError(.software, "\(error)") }
            if !entries[2].returned.intersection([.hangup, .error]).isEmpty { return }  // the reader of the requests is gone

            if !entries[1].returned.isEmpty {
                try readReplies(&input, buffer: &buffer)
                if session.hasOutput { try connection.send(session.takeOutput()) }
            }
            if connection.hasBacklog || !entries[0].returned.isEmpty {
                let outcome = try connection.receive(deadline: 0) { frame in
                    if handle(frame) != nil {
                        output.withBuffer { $0.append(copying: frame); $0.append(0x0A) }
                    }
                    return failure == nil
                }
                try output.flush()  // its reader gone: exits 0 (nobody can answer any more)
                if let failure { throw failure }
                if outcome == .closed { throw connection.closedError(reason: brokerError) }
            }
        }
    }

    /// Reads standard input once and queues a reply for each whole line.
    private mutating func readReplies(_ input: inout ReplyInput, buffer: inout [UInt8]) throws(CLIError) {
        let read: IOResult<Int>
        buffer.removeAll(keepingCapacity: true)
        do { read = try FileDescriptor.standardInput.read(appendingTo: &buffer, limit: 1 << 16) } catch {
            throw CLIError(.ioError, "cannot read standard input: \(error.errno)")
        }
        var line = input.line
        func take(_ piece: SplitFrame) -> Bool {
            line += 1
            switch piece {
            case .frame(let bytes): replyLine(bytes, line: line)
            case .tooLarge(let size): printError("line \(line): \(size) bytes, more than \(ProtocolConstants.defaultMaxFrameBytes): ignored")
            }
            return true
        }
        switch read {
        case .complete(0):
            input.splitter.finish(take)
            input.isOpen = false
        case .complete:
            input.splitter.feed(buffer.span.bytes, take)
        case .wouldBlock:
            break
        }
        input.line = line
    }

    /// One line of `serve --json`'s standard input (EventBusCLI's
    /// `ServeReplyLine`); a bad line is reported and skipped.
    mutating func replyLine(_ bytes: RawSpan, line: Int) {
        switch ServeReplyLine.read(bytes) {
        case nil: break
        case .failure(let error)?: printError("line \(line): \(error.message)")
        case .success(let reply)?: self.reply(to: reply.to, seq: nil, data: reply.data, error: reply.error)
        }
    }
}
