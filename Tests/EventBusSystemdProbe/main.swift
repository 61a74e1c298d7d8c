// Test helper for EventBusSystemdTests (not installed): runs one EventBusSystemd call in
// a process whose environment and descriptors the test chose, and prints the outcome.
//
// Before editing: the tests parse this output; keep it one fact per line.
//
// Usage:
//   eventbus-systemd-probe listen [serve]   takeListeningSockets(): "socket fd=3 name=x" lines,
//                                           "not-activated", or the error on stderr and exit 1;
//                                           then the LISTEN_* variables left ("env LISTEN_FDS=unset").
//                                           With `serve`, accepts one client on each socket and
//                                           writes "served fd=3 name=x\n" to it.
//   eventbus-systemd-probe notify STEP...   STEP: ready | stopping | watchdog | status=TEXT
//   eventbus-systemd-probe watchdog         "interval-us=N" or "interval=nil"
//   eventbus-systemd-probe stderr-is-journal  "true" or "false"
//   eventbus-systemd-probe journal-capture MESSAGE [KEY=VALUE...]
//                                           Binds /run/systemd/journal/socket (refuses if it exists:
//                                           run it in a private mount namespace with a tmpfs on
//                                           /run), logs MESSAGE at .notice with JournalLogSink and
//                                           writes the datagram journald would get to stdout.
//   eventbus-systemd-probe journal-capture-run PROGRAM [ARG...]
//                                           Binds /run/systemd/journal/socket as journal-capture
//                                           does, runs PROGRAM (same stdio and environment), and
//                                           once it exited writes every datagram it sent there
//                                           to stdout; exits with PROGRAM's status.
import EventBusLog
import EventBusSystem
import EventBusSystemd
import Glibc

/// Writes `text` to `fd` unbuffered (so nothing waits in stdio before a blocking call).
func put(_ text: String, to fd: CInt = 1) {
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress, $0.count) }
}

func fail(_ line: String) -> Never {
    put("eventbus-systemd-probe: \(line)\n", to: 2)
    exit(1)
}

func env(_ name: String) -> String {
    getenv(name).map { String(cString: $0) } ?? "unset"
}

/// Calls `body` with `path` as a `sockaddr_un`.
func withUnixAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { fail("path too long: \(path)") }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}

func listen(serve: Bool) {
    let sockets: [ActivatedSocket]?
    do {
        sockets = try SocketActivation.takeListeningSockets()
    } catch {
        fail("\(error)")
    }
    if let sockets {
        for socket in sockets { put("socket fd=\(socket.fd) name=\(socket.name)\n") }
    } else {
        put("not-activated\n")
    }
    put("env LISTEN_PID=\(env("LISTEN_PID")) LISTEN_FDS=\(env("LISTEN_FDS")) LISTEN_FDNAMES=\(env("LISTEN_FDNAMES"))\n")
    guard serve, let sockets else { return }
    for socket in sockets {
        let client = accept(socket.fd, nil, nil)
        guard client >= 0 else { fail("accept on fd \(socket.fd) failed: errno \(errno)") }
        put("served fd=\(socket.fd) name=\(socket.name)\n", to: client)
        close(client)
    }
}

func notify(_ steps: ArraySlice<String>) {
    for step in steps {
        switch step {
        case "ready": ServiceManager.notifyReady()
        case "stopping": ServiceManager.notifyStopping()
        case "watchdog": ServiceManager.notifyWatchdog()
        case _ where step.hasPrefix("status="): ServiceManager.notifyStatus(String(step.dropFirst("status=".count)))
        default: fail("unknown notify step \(step)")
        }
    }
}

/// Binds the journal's native socket (only in a private mount namespace).
/// - Returns: the datagram socket.
func bindJournalSocket() -> CInt {
    let path = "/run/systemd/journal/socket"
    if access(path, F_OK) == 0 { fail("\(path) exists; run this only in a private mount namespace") }
    let fd = socket(AF_UNIX, CInt(SOCK_DGRAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { fail("socket failed: errno \(errno)") }
    guard withUnixAddress(path, { bind(fd, $0, $1) }) == 0 else { fail("bind \(path) failed: errno \(errno)") }
    return fd
}

func journalCaptureRun(_ command: [String]) -> Never {
    let fd = bindJournalSocket()
    let child: EventBusSystem.ChildProcess
    do { child = try EventBusSystem.ChildProcess.spawn(command) } catch { fail("\(error)") }
    var status: Int32 = 0
    while waitpid(child.pid, &status, 0) < 0 {
        guard errno == EINTR else { fail("waitpid failed: errno \(errno)") }
    }
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT)) }
        if count < 0 { break }
        _ = buffer.withUnsafeMutableBytes { write(1, $0.baseAddress, count) }
    }
    exit(ChildExit(waitStatus: status).shellStatus)
}

func journalCapture(message: String, fieldArguments: ArraySlice<String>) {
    let fd = bindJournalSocket()
    let fields = fieldArguments.map { argument -> (String, String) in
        let parts = argument.split(separator: "=", maxSplits: 1)
        return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
    }
    JournalLogSink(identifier: "eventbus-systemd-probe").write(level: .notice, message: message, fields: fields)
    var buffer = [UInt8](repeating: 0, count: 65536)
    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT)) }
    guard count >= 0 else { fail("no datagram arrived: errno \(errno)") }
    _ = buffer.withUnsafeMutableBytes { write(1, $0.baseAddress, count) }
}

let arguments = CommandLine.arguments
switch arguments.dropFirst().first {
case "listen": listen(serve: arguments.dropFirst(2).first == "serve")
case "notify": notify(arguments.dropFirst(2))
case "watchdog":
    if let interval = ServiceManager.watchdogPingInterval() {
        let (seconds, attoseconds) = interval.components
        put("interval-us=\(seconds * 1_000_000 + attoseconds / 1_000_000_000_000)\n")
    } else {
        put("interval=nil\n")
    }
case "stderr-is-journal": put("\(stderrIsJournal())\n")
case "journal-capture" where arguments.count >= 3: journalCapture(message: arguments[2], fieldArguments: arguments.dropFirst(3))
case "journal-capture-run" where arguments.count >= 3: journalCaptureRun(Array(arguments.dropFirst(2)))
default: fail("usage: eventbus-systemd-probe listen [serve] | notify STEP... | watchdog | stderr-is-journal | journal-capture MESSAGE [KEY=VALUE...] | journal-capture-run PROGRAM [ARG...]")
}
