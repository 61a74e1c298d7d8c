// `eventbus top [--interval DURATION] [--format view|json] [--json] [--count N] [--queue-limit SIZE]`:
// a live view of the bus (issue 21). On a terminal: a full screen redrawn
// every interval through termios and ANSI escapes (alternate screen, cursor
// home, erase to end of line; no ncurses: docs/OPERATING.md says why), keys
// read one at a time, and SIGINT, SIGTERM, SIGHUP, SIGTSTP, SIGCONT and
// SIGWINCH read from a signalfd so the terminal is put back on every way
// out and the view follows the window's size. Without a terminal: one plain
// snapshot (or, with --json, one JSON object) per interval, for pipes.
//
// Before editing: the terminal is restored by `Screen.leave` on every exit
// path, including a thrown error; a broker that goes away does not end the
// view: the footer says so and each interval tries again (a failed poll
// counts towards --count).
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
@_spi(Package) import EventBusSystem
import Glibc

/// Types `top` asks for per poll (the busiest are shown; the rest scroll off).
private let topTypesLimit = 1000

func runTop(_ args: ParsedArguments, socket: String) throws(CLIError) {
    guard args.operands.isEmpty else { throw .usage("top", "unexpected argument '\(args.operands[0])'") }
    let interval = try args.value("interval", command: "top", as: parseDuration) ?? .seconds(1)
    guard interval >= .milliseconds(100) else { throw .usage("top", "--interval must be at least 100ms") }
    let count = try args.value("count", command: "top", as: parseCount)
    let queueLimit = try args.value("queue-limit", command: "top", as: { (text) throws(ValueError) in try parseSize(text, minimum: 1) }) ?? (8 << 20)
    let json = try args.asksForJSON(command: "top", plain: "view")
    // The first connection must work (as for every command); later failures are retried.
    let first = try BrokerConnection.connect(to: socket, client: "eventbus-top")
    let screen: Screen? = (!json && isStandardOutputTerminal) ? try Screen.enter() : nil
    defer { screen?.leave() }
    var session = TopSession(socket: socket, queueLimit: queueLimit, screen: screen, json: json)
    session.connection = first
    let step = interval.totalNanoseconds
    var next = Clock.monotonicNanoseconds()
    var polls = 0
    while true {
        // A plain snapshot is written only for a poll that worked (stderr says why one did not).
        let worked = session.poll(deadline: next + step)
        if worked || screen != nil { try session.show() }
        // --count counts polls, failed ones too, so that a script's `top --count N` ends
        // even while the broker is away (69 when the last poll failed).
        polls += 1
        if let count, polls >= count {
            if !worked { throw CLIError(.unavailable, nil) }
            return
        }
        next += step
        let now = Clock.monotonicNanoseconds()
        if next < now { next = now }
        if try session.wait(until: next) == .quit { return }
    }
}

/// The view's state between polls.
private struct TopSession {
    let socket: String
    let queueLimit: Int
    let screen: Screen?
    let json: Bool
    var connection: BrokerConnection? = nil
    var previous: BusSnapshot? = nil
    var current: BusSnapshot? = nil
    var status: String? = nil
    var typeSort = TypeSort.events
    var clientSort = ClientSort.queue

    init(socket: String, queueLimit: Int, screen: Screen?, json: Bool) {
        self.socket = socket
        self.queueLimit = queueLimit
        self.screen = screen
        self.json = json
    }

    /// One poll; a failure drops the connection (the next poll reconnects) and says why.
    /// - Returns: whether it worked.
    mutating func poll(deadline: Int64) -> Bool {
        do throws(CLIError) {
            if connection == nil { connection = try BrokerConnection.connect(to: socket, client: "eventbus-top") }
            let snapshot = try BusSnapshot.poll(connection!, typesLimit: topTypesLimit, deadline: deadline)
            previous = current
            current = snapshot
            status = nil
            return true
        } catch {
            connection = nil
            status = "retrying every interval: \(error.message ?? "the broker did not answer in time")"
            if screen == nil { printError("top: \(status!)") }
            return false
        }
    }

    func view() -> TopView? {
        guard let current else { return nil }
        var view = TopView(snapshot: current, rates: TopRates(previous: previous, current: current), socket: socket)
        view.typeSort = typeSort
        view.clientSort = clientSort
        view.queueLimitBytes = queueLimit
        view.status = status
        return view
    }

    /// Draws the frame (terminal), or writes one snapshot (plain text or a JSON line).
    func show() throws(CLIError) {
        if let screen {
            let size = FileDescriptor.standardOutput.terminalSize ?? TerminalSize(rows: 24, columns: 80)
            let lines = view()?.lines(width: size.columns, height: size.rows, keys: true)
                ?? [TopView.cut("eventbus top  \(TerminalText.escaped(socket))  waiting for the broker: \(status ?? "")", size.columns)]
            try screen.draw(lines)
            return
        }
        guard let view = view() else { return }
        if json { return try StandardOutput.write(view.json()) }
        try StandardOutput.write(view.lines(width: 160, height: nil, keys: false).joined(separator: "\n") + "\n\n")
    }

    enum Outcome { case tick, quit }

    /// Waits until `deadline` (monotonic ns), handling keys and signals.
    mutating func wait(until deadline: Int64) throws(CLIError) -> Outcome {
        guard let screen else {
            var none: [PollEntry] = []
            while Clock.monotonicNanoseconds() < deadline {
                _ = try? FileDescriptor.poll(&none, timeoutMilliseconds: BrokerConnection.pollTimeout(until: deadline))
            }
            return .tick
        }
        while true {
            let timeout = BrokerConnection.pollTimeout(until: deadline)
            if timeout == 0 { return .tick }
            var entries = [PollEntry(screen.signals.descriptor, events: .readable)]
            if screen.keyboard != nil { entries.append(PollEntry(.standardInput, events: .readable)) }
            do {
                _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: timeout)
            } catch {
                throw CLIError(.software, "\(error)")
            }
            if !entries[0].returned.isEmpty {
                for signal in screen.signals.readSignals() {
                    switch signal {
                    case SIGINT, SIGTERM, SIGHUP: return .quit  // like q: the terminal is put back, status 0
                    case SIGTSTP: screen.suspend()
                    default: break  // SIGWINCH, SIGCONT: draw again at the new size
                    }
                }
                try show()
            }
            if entries.count > 1 && !entries[1].returned.isEmpty {
                switch readKey(screen) {
                case .quit?: return .quit
                case .tick?: try show()
                case nil: continue
                }
            }
        }
    }

    /// Reads one key: `.quit` for q, `.tick` to draw again (a sort key,
    /// space, ^L), nil for any other key or when the terminal's input ended.
    private mutating func readKey(_ screen: Screen) -> Outcome? {
        var key: [UInt8] = []
        let read = try? FileDescriptor.standardInput.read(appendingTo: &key, limit: 1)
        guard case .complete(1)? = read, let byte = key.first else {
            // The terminal's input ended: keep drawing, stop reading keys.
            screen.keyboard = nil
            return nil
        }
        switch byte {
        case UInt8(ascii: "q"), UInt8(ascii: "Q"): return .quit
        case UInt8(ascii: "e"): typeSort = .events
        case UInt8(ascii: "d"): typeSort = .deliveries
        case UInt8(ascii: "x"): typeSort = .drops
        case UInt8(ascii: "n"): typeSort = .name
        case UInt8(ascii: "c"): clientSort = clientSort == .queue ? .conn : .queue
        case UInt8(ascii: " "), 0x0C: break  // space, ^L: redraw now
        default: return nil
        }
        return .tick
    }
}

/// The terminal while `top` owns it: the alternate screen, no cursor, keys
/// one at a time, and the signals that must not kill it with the terminal
/// left that way.
private final class Screen {
    var keyboard: KeyboardMode?
    let signals: SignalDescriptor

    private init(keyboard: KeyboardMode?, signals: SignalDescriptor) {
        self.keyboard = keyboard
        self.signals = signals
    }

    /// ESC [ ?1049h: the alternate screen; ESC [ ?25l: hide the cursor.
    static let enterSequence = "\u{1B}[?1049h\u{1B}[?25l"
    /// Show the cursor, back to the normal screen.
    static let leaveSequence = "\u{1B}[?25h\u{1B}[?1049l"

    static func enter() throws(CLIError) -> Screen {
        let signals: SignalDescriptor
        do {
            signals = try SignalDescriptor(signals: [SIGINT, SIGTERM, SIGHUP, SIGTSTP, SIGCONT, SIGWINCH])
        } catch {
            throw CLIError(.software, "cannot watch signals: \(error)")
        }
        let keyboard = FileDescriptor.standardInput.isTerminal ? try? KeyboardMode(.standardInput) : nil
        let screen = Screen(keyboard: keyboard, signals: signals)
        try? StandardOutput.write(enterSequence)
        return screen
    }

    /// Puts the terminal back as it was.
    func leave() {
        try? StandardOutput.write(Self.leaveSequence)
        keyboard?.restore()
    }

    /// SIGTSTP (^Z): put the terminal back, stop (SIGSTOP cannot be caught),
    /// and take it again once continued.
    func suspend() {
        leave()
        try? ProcessSignals.send(SIGSTOP, to: ProcessIdentity.current.pid)
        try? keyboard?.enter()
        try? StandardOutput.write(Self.enterSequence)
    }

    /// Cursor home, each line erased to its end, the rest of the screen erased.
    func draw(_ lines: [String]) throws(CLIError) {
        var text = "\u{1B}[H"
        for (i, line) in lines.enumerated() {
            let header = line.hasPrefix("TYPE ") || line.hasPrefix("  CONN ")
            text += header ? "\u{1B}[7m\(line)\u{1B}[0m" : (line.hasPrefix("! ") ? "\u{1B}[1m\(line)\u{1B}[0m" : line)
            text += "\u{1B}[K"
            if i < lines.count - 1 { text += "\r\n" }
        }
        text += "\u{1B}[J"
        try StandardOutput.write(text)
    }
}
