// `eventbus reload [--wait] [--timeout DURATION]`: ask the broker to read its
// access-policy files again (SIGHUP, docs/POLICY.md "Reload") and, with
// `--wait`, report the outcome: the new `policy_generation`, or the broker's
// reason for keeping the old policy (exit 65). The service unit's
// `ExecReload=` runs `eventbus reload --wait`.
//
// Before editing: the broker's pid is `$MAINPID` when systemd runs us as the
// unit's `ExecReload=`, else the SO_PEERCRED pid of our own connection, never
// a pid file. Under socket activation SO_PEERCRED names the process that
// called listen(2), i.e. the service manager, not the broker: a peer whose
// /proc/PID/comm is not `eventbusd` is refused, never signalled (SIGHUP to
// systemd is a daemon-reload). The outcome arrives as the broker's own
// event, `eventbus.policy.reloaded` or `eventbus.policy.refused`
// (docs/PROTOCOL-NOTES.md); we subscribe and have the `ok` before the signal
// is sent, so the event cannot be missed.
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSystem
import Glibc

func runReload(_ args: ParsedArguments, socket: String) throws(CLIError) {
    let command = "reload"
    guard args.operands.isEmpty else { throw .usage(command, "unexpected argument '\(args.operands[0])'") }
    let wait = args.has("wait")
    if args.has("timeout") && !wait { throw .usage(command, "--timeout needs --wait") }
    let timeoutText = args.value("timeout") ?? defaultReloadTimeoutText
    let timeoutNanoseconds = try args.value("timeout", command: command, as: parseDuration)?.totalNanoseconds
        ?? (try! parseDuration(defaultReloadTimeoutText)).totalNanoseconds
    let deadline = Clock.monotonicNanoseconds() + timeoutNanoseconds

    let connection = try BrokerConnection.connect(to: socket, client: "eventbus-reload")
    let pid = try brokerPID(connection, socket: socket)
    if wait {
        let reply = try connection.request(.subscribe(pattern: "eventbus.policy.>"), deadline: deadline)
        guard reply.isOK else { throw reply.failure("subscribing to the broker's reload events") }
    }
    do {
        try ProcessSignals.send(SIGHUP, to: pid)
    } catch {
        let status: ExitStatus = error.errno == Errno(rawValue: EPERM) ? .noPermission : .unavailable
        throw CLIError(status, "cannot send SIGHUP to the broker (pid \(pid)): \(error.errno) (run as root or as the broker's user)")
    }
    guard wait else { return }
    try waitForReload(connection, pid: pid, deadline: deadline, timeoutText: timeoutText)
}

/// `--wait`: reads until the broker's `eventbus.policy.reloaded` or
/// `.refused` event, and reports it (0, or 65 with the broker's reason).
private func waitForReload(_ connection: BrokerConnection, pid: pid_t, deadline: Int64, timeoutText: String) throws(CLIError) {
    var outcome: ReloadOutcome? = nil
    while outcome == nil {
        let result = try connection.receive(deadline: deadline) { frame in
            outcome = ReloadOutcome(frame)
            return outcome == nil
        }
        switch result {
        case .closed: throw connection.closedError
        case .timedOut: throw CLIError(.timedOut, "timed out after \(timeoutText) waiting for the broker (pid \(pid)) to reload its policy")
        case .frames, .stopped, .extra: break
        }
    }
    switch outcome! {
    case .reloaded(let generation):
        try StandardOutput.write("policy reloaded: generation \(generation)\n")
    case .refused(let generation, let reason):
        throw CLIError(.dataError, "the broker kept its policy (generation \(generation)): \(reason)")
    }
}

/// The pid to signal: `$MAINPID` (systemd sets it for `ExecReload=`), else
/// the SO_PEERCRED pid of `connection`.
/// - Throws: `CLIError` 70 when the peer's pid cannot be read; 69 when that
///   process is not an `eventbusd` (under socket activation the socket's peer
///   is the service manager), with the command that does work.
private func brokerPID(_ connection: BrokerConnection, socket: String) throws(CLIError) -> pid_t {
    let pid: pid_t
    if let text = ProcessEnvironment.value("MAINPID"), let mainPID = pid_t(text), mainPID > 0 {
        pid = mainPID
    } else {
        do {
            pid = try connection.descriptor.peerCredentials().pid
        } catch {
            throw CLIError(.software, "cannot tell the broker's pid: \(error)")
        }
    }
    guard let name = processName(pid), name != "eventbusd" else { return pid }
    let systemctl = socket == SocketPath.systemBus ? "systemctl reload eventbus" : "systemctl --user reload eventbus"
    throw CLIError(.unavailable, "the process at the other end of \(socket) is pid \(pid) (\(TerminalText.escaped(name))), not eventbusd, so it was not signalled: under socket activation the service manager holds the socket; run '\(systemctl)' (it gives the broker's pid as $MAINPID), or set MAINPID to the broker's pid")
}

/// The command name of process `pid` (/proc/PID/comm, proc(5)), or nil when
/// it cannot be read (gone, or hidden by `hidepid`/`ProtectProc=`).
private func processName(_ pid: pid_t) -> String? {
    guard var bytes = try? FileSystem.readFile("/proc/\(pid)/comm", maxBytes: 256) else { return nil }
    if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
    return String(decoding: bytes, as: UTF8.self)
}

/// What the broker announced about a reload.
enum ReloadOutcome: Equatable {
    /// `eventbus.policy.reloaded`, `{"generation":3,"files":[...]}`.
    case reloaded(generation: UInt64)
    /// `eventbus.policy.refused`, `{"generation":2,"error":"file:line: ..."}`.
    case refused(generation: UInt64, reason: String)

    /// Reads an event frame of either type; nil for any other frame.
    init?(_ frame: RawSpan) {
        guard case .event(let event)? = try? BrokerFrame.read(frame), let dataToken = event.data else { return nil }
        let type = JSONString.decode(frame, event.type)
        let data = frame.extracting(dataToken.start..<dataToken.end)
        guard let members = try? JSONObject.members(data) else { return nil }
        func member(_ key: String) -> JSONToken? { members.first { $0.key == key }?.value }
        guard let generationToken = member("generation"), let generation = JSONInteger.unsigned(data, generationToken) else { return nil }
        switch type {
        case "eventbus.policy.reloaded":
            self = .reloaded(generation: generation)
        case "eventbus.policy.refused":
            let reason = member("error").flatMap { $0.isString ? JSONString.decode(data, $0) : nil } ?? "no reason given"
            self = .refused(generation: generation, reason: reason)
        default:
            return nil
        }
    }
}
