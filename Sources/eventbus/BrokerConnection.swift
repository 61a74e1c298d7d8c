// One connection from the CLI to the broker: connect with a helpful error,
// send frames, read frames with a deadline (PROTOCOL.md "Transport",
// "Framing"). The socket is non-blocking; every wait is a poll(2).
//
// Before editing: frames handed to a `receive` callback point into a buffer
// that is reused by the next read; copy what must outlive the callback.
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSession
@_spi(Package) import EventBusSystem
import Glibc

/// What ended one `BrokerConnection.receive` call.
enum ReceiveOutcome {
    /// Bytes arrived and their complete frames were handed out.
    case frames
    /// The deadline passed with nothing to read.
    case timedOut
    /// The broker closed the connection (EOF or reset).
    case closed
    /// The callback asked to stop.
    case stopped
    /// Another watched descriptor became ready (see `receive(extra:)`).
    case extra
}

final class BrokerConnection {
    /// The socket path this connection went to (for messages).
    let path: String
    /// The connected socket; owned and closed by this object.
    let descriptor: FileDescriptor
    private var splitter = FrameSplitter(maxFrameBytes: BrokerConnection.maxIncomingFrameBytes)
    /// Whether any byte has arrived from the broker on this connection (a
    /// close before that may be a broker that failed to start, see `closedError`).
    private var heardFromBroker = false
    /// What the last read brought (its storage kept between reads).
    private var readBuffer: [UInt8] = []
    /// The session of a command's connection (`connect`): its `hello` (`req`
    /// 0) and the `req` of each `request`. `listen`, `wait` and `get` drive
    /// a session of their own (`open`), which outlives the connection.
    private var session: BusSession<Void>

    /// Whether frames read already wait to be handed out (a `receive`
    /// callback stopped early): the next `receive` gives them without reading.
    var hasBacklog: Bool { splitter.hasBacklog }

    /// The broker's `conn` for this connection, once its `hello` was answered.
    var connectionID: UInt64? { session.greeting?.connection }

    /// Largest frame accepted from the broker. Events may exceed the broker's
    /// own 1 MiB request limit by their envelope (PROTOCOL.md "Framing") and
    /// the limit is configurable there, so this is only a guard against a runaway peer.
    static let maxIncomingFrameBytes = 256 << 20

    /// The most one read takes from the socket.
    static let readBytes = 1 << 16

    private init(path: String, descriptor: FileDescriptor, session: SessionOptions) {
        self.path = path
        self.descriptor = descriptor
        self.session = BusSession(session)
        readBuffer.reserveCapacity(BrokerConnection.readBytes)
    }

    deinit {
        descriptor.close()
    }

    /// Connects to the broker's socket at `path` and names the connection:
    /// `{"op":"hello","req":0,"client":"eventbus-listen"}` is written at once
    /// (PROTOCOL.md "Requests"), without waiting for its answer, so `eventbus
    /// clients` shows which command holds a connection. Its `ok` (`req` 0)
    /// arrives before the answer to anything sent later; commands that read
    /// replies by `req` pass it by.
    /// - Parameter client: the command's name, `eventbus-<command>`.
    /// - Throws: `CLIError` 69 (`EX_UNAVAILABLE`) naming the path and how to
    ///   start the broker; 77 when permission is denied; 64 when the path does
    ///   not fit a socket address.
    static func connect(to path: String, client: String) throws(CLIError) -> BrokerConnection {
        let connection = try open(to: path, session: sessionOptions(client: client))
        connection.session.connectionStarted()
        try connection.send(connection.session.takeOutput())
        return connection
    }

    /// Connects to the broker's socket at `path` without a word: the caller
    /// drives a `BusSession` whose `connectionStarted` says the `hello`
    /// (`listen`, `wait`, `get`).
    /// - Throws: as `connect(to:client:)`.
    static func open(to path: String, session: SessionOptions = SessionOptions(hello: Hello())) throws(CLIError) -> BrokerConnection {
        do {
            let fd = try FileDescriptor.connectedUnixSocket(toPath: path, nonBlocking: true)
            return BrokerConnection(path: path, descriptor: fd, session: session)
        } catch {
            throw connectError(error, path: path)
        }
    }

    /// The message for a failed connect: names the path and how to start the broker.
    static func connectError(_ error: SystemError, path: String) -> CLIError {
        switch error.errno {
        case .connectionRefused where (try? FileSystem.kind(ofPath: path)) != .socket:
            return CLIError(.unavailable, "cannot connect to the broker at \(path): it is not a socket (give the broker's socket with --socket or $EVENTBUS_SOCKET)")
        case .noSuchFile, .connectionRefused:
            let userBus = SocketPath.userBusHint(afterFailing: path, runtimeDirectory: ProcessEnvironment.value("XDG_RUNTIME_DIR"),
                                                 effectiveUID: ProcessIdentity.effectiveUID, choice: "give --user") { (try? FileSystem.kind(ofPath: $0)) == .socket }
            return CLIError(.unavailable, "cannot connect to the broker at \(path): \(error.errno) (\(userBus.map { $0 + "; or " } ?? "")is eventbusd running? \(SocketPath.startCommand(for: path)))")
        case .permissionDenied, Errno(rawValue: EPERM):
            return CLIError(.noPermission, "cannot connect to the broker at \(path): \(error.errno) (you need write permission on the socket and search permission on its folders: see eventbusd --mode and SocketGroup= in the .socket unit)")
        case .nameTooLong:
            return CLIError(.usage, "socket path is longer than \(UnixAddress.maxPathBytes) bytes: \(path)")
        case .invalidArgument where error.call == "socket path":
            return CLIError(.usage, "invalid socket path: \(path)")
        case .wouldBlock:
            return CLIError(.unavailable, "cannot connect to the broker at \(path): its listen queue is full")
        default:
            return CLIError(.unavailable, "cannot connect to the broker at \(path): \(error)")
        }
    }

    /// The error for a connection the broker closed before the command finished.
    var closedError: CLIError { closedError(reason: nil) }

    /// The error for a closed connection, given the `error` frame without
    /// `req` the broker sent before closing (e.g. `limit` for a connection
    /// over `--max-connections`, `slow_consumer`): its message, and the exit
    /// status its code maps to. Without a reason: 69, and when nothing at all
    /// came from the broker, where to look for why it did not start
    /// (`SocketPath.startFailureHint`: under socket activation systemd accepts
    /// the connection for a broker that then fails).
    func closedError(reason: Reply?) -> CLIError {
        guard let reason else {
            guard heardFromBroker else {
                let runtime = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) }
                let hint = SocketPath.startFailureHint(for: path, runtimeDirectory: runtime)
                return CLIError(.unavailable, "the broker at \(path) closed the connection before answering: \(hint)")
            }
            return CLIError(.unavailable, "the broker at \(path) closed the connection")
        }
        var error = reason.failure("closing")
        let message = reason.string("message") ?? "no reason given", code = "(\(reason.string("code") ?? "unknown"))"
        // The code once: the broker's limit messages end with it already ("... for uid 1000 (limit)").
        error.message = "the broker at \(path) closed the connection: \(message)\(message.hasSuffix(code) ? "" : " " + code)"
        return error
    }

    /// Writes all of `bytes`, waiting as needed.
    /// - Throws: `CLIError` 69 when the broker has gone.
    func send(_ bytes: [UInt8]) throws(CLIError) {
        do throws(SystemError) {
            try descriptor.writeAll(bytes.span.bytes)
        } catch {
            throw ioError(error)
        }
    }

    /// Writes what the socket takes now without waiting.
    /// - Returns: bytes written (0 when it would block).
    /// - Throws: `CLIError` 69 when the broker has gone.
    func sendSome(_ bytes: RawSpan) throws(CLIError) -> Int {
        do {
            switch try descriptor.write(bytes) {
            case .complete(let n): return n
            case .wouldBlock: return 0
            }
        } catch {
            throw ioError(error)
        }
    }

    func ioError(_ error: SystemError) -> CLIError {
        if error.errno == .brokenPipe || error.errno == .connectionReset { return refusalOrClosed() }
        return CLIError(.unavailable, "connection to the broker at \(path) failed: \(error)")
    }

    /// After a write failed because the broker closed: an `error` frame it
    /// sent first explains why (e.g. `limit` for one connection too many,
    /// PROTOCOL.md "Semantics"); otherwise the plain "closed" error.
    private func refusalOrClosed() -> CLIError {
        var refusal: Reply? = nil
        _ = try? receive(deadline: 0) { frame in
            if case .error(let reply)? = try? BrokerFrame.read(frame) { refusal = reply; return false }
            return true
        }
        return closedError(reason: refusal)
    }

    /// Reads once (waiting until the deadline) and calls `body` for every
    /// complete frame; `body` returns false to stop.
    /// - Parameters:
    ///   - deadline: monotonic nanoseconds (`Clock.monotonicNanoseconds`), or nil to wait forever.
    ///   - extra: more descriptors to watch; when one has events (including
    ///     only `.hangup`/`.error`), `.extra` is returned and `extra` holds them.
    /// - Throws: `CLIError` 69 on a read error other than a reset.
    func receive(deadline: Int64?, extra: inout [PollEntry], _ body: (RawSpan) -> Bool) throws(CLIError) -> ReceiveOutcome {
        // Frames read before a callback stopped come first.
        if splitter.hasBacklog { return split(RawSpan(), body) }
        while true {
            switch try readOnce() {
            case .complete(0):
                return .closed
            case .complete:
                let chunk = readBuffer  // a span of a class's property lives only during its access
                return split(chunk.span.bytes, body)
            case .wouldBlock:
                var entries = [PollEntry(descriptor, events: .readable)] + extra
                let timeout = BrokerConnection.pollTimeout(until: deadline)
                if timeout == 0 { return .timedOut }
                do {
                    _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: timeout)
                } catch {
                    throw CLIError(.software, "\(error)")
                }
                if entries.count > 1 && entries.dropFirst().contains(where: { !$0.returned.isEmpty }) {
                    extra = Array(entries.dropFirst())
                    return .extra
                }
                if entries[0].returned.isEmpty, let deadline, Clock.monotonicNanoseconds() >= deadline {
                    return .timedOut
                }
            }
        }
    }

    /// Hands `body` each complete frame of what was read (`bytes`) and of the backlog.
    private func split(_ bytes: RawSpan, _ body: (RawSpan) -> Bool) -> ReceiveOutcome {
        var stopped = false
        splitter.feed(bytes) { piece in
            switch piece {
            case .frame(let frame):
                if !body(frame) { stopped = true; return false }
                return true
            case .tooLarge(let bytes):
                printError("ignoring a frame of \(bytes) bytes from the broker (larger than \(BrokerConnection.maxIncomingFrameBytes))")
                return true
            }
        }
        return stopped ? .stopped : .frames
    }

    /// `receive` without extra descriptors.
    func receive(deadline: Int64?, _ body: (RawSpan) -> Bool) throws(CLIError) -> ReceiveOutcome {
        var none: [PollEntry] = []
        return try receive(deadline: deadline, extra: &none, body)
    }

    private func readOnce() throws(CLIError) -> IOResult<Int> {
        do {
            readBuffer.removeAll(keepingCapacity: true)
            let result = try descriptor.read(appendingTo: &readBuffer, limit: BrokerConnection.readBytes)
            if case .complete(let n) = result, n > 0 { heardFromBroker = true }
            return result
        } catch {
            if error.errno == .connectionReset { return .complete(0) }
            throw ioError(error)
        }
    }

    /// Milliseconds until `deadline` for poll(2): -1 without a deadline,
    /// at least 1 while time remains (so poll never spins), 0 once it passed.
    static func pollTimeout(until deadline: Int64?) -> Int32 {
        guard let deadline else { return -1 }
        let remaining = deadline - Clock.monotonicNanoseconds()
        if remaining <= 0 { return 0 }
        let milliseconds = (remaining + 999_999) / 1_000_000
        return Int32(clamping: milliseconds)
    }

    /// Sends one request and waits for its reply (the session numbers it
    /// and matches the answer). Events and notices that come first are passed by.
    /// An `error` without `req` is taken as the answer (the broker could not
    /// read the request's `req`, PROTOCOL.md "Requests", or refused the connection).
    /// - Throws: `CLIError` 69 when the connection closes first; 124 (quiet)
    ///   at the deadline.
    func request(_ request: ClientRequest, deadline: Int64? = nil) throws(CLIError) -> Reply {
        session.send(request, tag: ())
        try send(session.takeOutput())
        var reply: Reply? = nil
        while reply == nil {
            let outcome = try receive(deadline: deadline) { bytes in
                switch session.handle(bytes) {
                case .answered(_, let answer):
                    reply = answer
                    return false
                case .error(let refusal) where refusal.req == nil:
                    reply = refusal
                    return false
                default:
                    return true
                }
            }
            switch outcome {
            case .closed: throw closedError
            case .timedOut: throw .quiet(.timedOut)
            case .frames, .stopped, .extra: break
            }
        }
        return reply!
    }
}
