// Case 8, the one-shot shell publish: the wall time of one run of a
// command-line publisher, spawn to reap, as a shell script pays it. The
// tools sit side by side in one loop, `/bin/true` among them as the floor
// (what spawning and reaping alone cost here).
//
// Before editing: the first run of each tool is watched by a subscriber (for
// dbus-send: a dbus-monitor child) and must deliver, so a tool that exits 0
// without publishing is caught instead of timed; the loop itself does
// nothing but spawn, wait for SIGCHLD and reap.
import EventBusSystem
import Glibc

/// The command-line publishers case 8 compares, by the name `--tool` takes.
enum ShellTool: String, CaseIterable {
    /// `EVENTBUS_SOCKET=SOCK eventbus publish bench.shell {"n":1}`.
    case eventbus
    /// `redis-cli -s SOCK publish bench.shell {"n":1}`.
    case redis
    /// `mosquitto_pub --unix SOCK -t bench/shell -m {"n":1}`.
    case mosquitto
    /// `dbus-send --bus=unix:path=SOCK --type=signal /org/eventbus/Bench org.eventbus.Bench.Shell string:{"n":1}`.
    case dbus
    /// `/bin/true`: no broker, the floor of the loop.
    case floor

    /// The protocol a watcher subscribes with, for the tools that have one.
    var watchWire: Wire? {
        switch self {
        case .eventbus: return .eventbus
        case .redis: return .redis
        case .mosquitto: return .mqtt
        case .dbus, .floor: return nil
        }
    }

    /// The tool's arguments for one publish to the broker at `socket`.
    func arguments(socket: String) -> [String] {
        let data = #"{"n":1}"#
        switch self {
        case .eventbus: return ["publish", "bench.shell", data]
        case .redis: return ["-s", socket, "publish", "bench.shell", data]
        case .mosquitto: return ["--unix", socket, "-t", "bench/shell", "-m", data]
        case .dbus:
            return ["--bus=unix:path=\(socket)", "--type=signal", "/org/eventbus/Bench", "org.eventbus.Bench.Shell", "string:" + data]
        case .floor: return []
        }
    }
}

/// How `eventbus-bench shell` is configured.
struct ShellOptions {
    var tool: ShellTool
    /// The program to time (`eventbus`, `redis-cli`, `mosquitto_pub`, `dbus-send`, `/bin/true`).
    var cli: String
    /// The broker's socket (unused for `floor`).
    var socket = ""
    /// Timed runs.
    var runs = 200
    /// dbus-monitor, the watcher for dbus-send.
    var monitor = "/usr/bin/dbus-monitor"
}

/// Runs case 8 for one tool and prints its result line: `ms` (median),
/// `ms_min`, `ms_p90`, `failures`; or `skipped=REASON` when the first run
/// fails or publishes nothing a subscriber sees.
func runShell(_ options: ShellOptions) -> Never {
    guard access(options.cli, X_OK) == 0 else { fail("shell case: \(options.cli) is not executable") }
    if options.tool == .eventbus { setenv("EVENTBUS_SOCKET", options.socket, 1) }
    let arguments = options.tool.arguments(socket: options.socket)
    let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
    blockChildSignal()
    if let reason = watchedFirstRun(options, arguments, devNull: devNull) {
        writeAll(1, "skipped=\(reason)\n")
        exit(0)
    }
    var times: [Int64] = []
    var failures = 0
    for _ in 0..<options.runs {
        let start = monotonicNanos()
        let status = reapPromptly(spawn(options.cli, arguments, stdout: devNull, stderr: devNull), timeoutMs: 10_000)
        times.append(monotonicNanos() - start)
        if status != 0 { failures += 1 }
    }
    close(devNull)
    times.sort()
    var fields = Fields()
    fields["ms"] = fixed(Double(times[times.count / 2]) / 1e6, 2)
    fields["ms_min"] = fixed(Double(times[0]) / 1e6, 2)
    fields["ms_p90"] = fixed(Double(times[times.count * 9 / 10]) / 1e6, 2)
    fields["failures"] = String(failures)
    writeAll(1, fields.line + "\n")
    exit(0)
}

/// The skip reason of a CLI that exited 0 but published nothing.
private let silentRun = "CLI_did_not_publish"

/// One visible run, watched: a tool that fails says why, once, and one that
/// exits 0 without publishing is caught.
/// - Returns: nil when the run delivered, else the reason to skip the tool.
private func watchedFirstRun(_ options: ShellOptions, _ arguments: [String], devNull: Int32) -> String? {
    let run = { () -> String? in
        let status = reapPromptly(spawn(options.cli, arguments, stdout: devNull), timeoutMs: 10_000)
        guard status != 0 else { return nil }
        printErr("shell case: \(options.cli) \(arguments.joined(separator: " ")) exited \(status)")
        return "CLI_exited_\(status)"
    }
    if let wire = options.tool.watchWire {
        let watcher = openClient(wire, options.socket)
        defer { close(watcher) }
        subscribe(watcher, wire, types: ["bench.shell"])
        if let failure = run() { return failure }
        let delivered = readFrames(watcher, wire, timeoutMs: 2000, failOnTimeout: false) { frame in
            frame.hasPrefix(#"{"op":"event""#) || frame.hasPrefix("message ") || frame.hasPrefix("PUBLISH ")
        }
        if !delivered { printErr("shell case: \(options.cli) exited 0 but no event reached a subscriber within 2 s") }
        return delivered ? nil : silentRun
    }
    if options.tool == .floor { return run() }
    return watchedByMonitor(options, devNull: devNull, run: run)
}

/// `watchedFirstRun` for dbus-send: dbus-monitor prints every signal of our
/// interface; it is watching once it printed its own NameAcquired/NameLost.
private func watchedByMonitor(_ options: ShellOptions, devNull: Int32, run: () -> String?) -> String? {
    guard access(options.monitor, X_OK) == 0 else { fail("shell case: \(options.monitor) is not executable") }
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { fail("failed to create a pipe: \(errnoText())") }
    setCloseOnExec(fds[0])
    setCloseOnExec(fds[1])
    let monitor = spawn(options.monitor, ["--address", "unix:path=\(options.socket)",
                                          "type='signal',interface='org.eventbus.Bench'"], stdout: fds[1], stderr: devNull)
    close(fds[1])
    defer {
        kill(monitor, SIGTERM)
        reap(monitor, timeoutMs: 2000)
        close(fds[0])
    }
    var output: [UInt8] = []
    guard readUntil(fds[0], contains: "member=NameLost", into: &output, timeoutMs: 10_000) else {
        fail("shell case: dbus-monitor did not start watching within 10 s")
    }
    if let failure = run() { return failure }
    if readUntil(fds[0], contains: "member=Shell", into: &output, timeoutMs: 2000) { return nil }
    printErr("shell case: \(options.cli) exited 0 but dbus-monitor saw no signal within 2 s")
    return silentRun
}

/// Reads `fd` into `output` until the text `needle` appears in it, for up
/// to `timeoutMs`. - Returns: whether it appeared (false on timeout or EOF).
private func readUntil(_ fd: Int32, contains needle: String, into output: inout [UInt8], timeoutMs: Int) -> Bool {
    let deadline = monotonicNanos() + Int64(timeoutMs) * 1_000_000
    let bytes = Array(needle.utf8)
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        if !output.isEmpty, output.withUnsafeBufferPointer({ find(bytes, in: $0.baseAddress!, count: $0.count) }) != nil {
            return true
        }
        let left = Int((deadline - monotonicNanos()) / 1_000_000)
        if left <= 0 { return false }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        if poll(&p, 1, Int32(min(left, 1000))) <= 0 { continue }
        let result = chunk.withUnsafeMutableBytes { buffer in systemCall { read(fd, buffer.baseAddress, buffer.count) } }
        guard case .success(let n) = result, n > 0 else { return false }
        output += chunk[0..<n]
    }
}
