// Helpers for EventBusSystemdTests: running the probe and other processes with a chosen
// environment, temp directories, and small AF_UNIX sockets for the test's side.
//
// Before editing: every helper has a bounded wait; a test never hangs on a child.
import Foundation
import Glibc

/// The `eventbus-systemd-probe` built next to this test bundle.
let probePath: String = {
    let bundle = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: bundle).deletingLastPathComponent().appendingPathComponent("eventbus-systemd-probe").path
}()

/// Whether `name` is an executable on PATH.
func haveExecutable(_ name: String) -> Bool {
    (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").contains {
        access("\($0)/\(name)", X_OK) == 0
    }
}

/// A private directory under /tmp (short, so socket paths fit in `sun_path`), removed on deinit.
final class TempDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/ebsd.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp failed: errno \(errno)") }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String) -> String { "\(path)/\(name)" }
}

/// Creates (or truncates) `path` as an empty file.
func createEmptyFile(_ path: String) throws {
    guard FileManager.default.createFile(atPath: path, contents: nil) else { throw TestFailure("cannot create \(path)") }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// How a child process ended.
struct Finished {
    /// The exit status, or 128 + the signal number when a signal ended it.
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Variables that would leak systemd context from the test runner into a child.
private let systemdVariables: Set<String> = ["NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES",
                                             "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM", "INVOCATION_ID"]

/// A running child whose stdout and stderr go to files, started with `posix_spawnp(3)`.
///
/// Not Foundation.Process: it starts children with the spawning thread's signal mask
/// (SIGTERM blocked, from a dispatch worker), and its exit monitor blocks for good in
/// `waitpid` when a child closes the descriptors it inherited (systemd-socket-activate
/// does), hanging every other Process in the runner. Here the mask is emptied, every
/// signal set to default, and the exit is polled with `WNOHANG`.
final class Child {
    let pid: pid_t
    private let outPath: String
    private let errPath: String
    private var exitStatus: Int32?

    /// Starts `executable` (looked up on PATH) with `arguments`, the runner's environment
    /// minus the systemd variables, plus `environment`; stdin is /dev/null.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
         stderrTo stderrPath: String? = nil, in directory: TempDirectory) throws {
        let tag = UUID().uuidString.prefix(8)
        outPath = directory.file("out.\(tag)")
        errPath = stderrPath ?? directory.file("err.\(tag)")

        var env = ProcessInfo.processInfo.environment.filter { !systemdVariables.contains($0.key) }
        env.merge(environment) { $1 }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var child = pid_t()
        let result = posix_spawnp(&child, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw TestFailure("posix_spawnp \(executable) failed: errno \(result)") }
        pid = child
    }

    /// Reaps the child if it has exited; true once it has.
    private func reaped() -> Bool {
        if exitStatus != nil { return true }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return false }
        let signal = raw & 0x7f
        exitStatus = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
        return true
    }

    var isRunning: Bool { !reaped() }

    /// Waits up to `timeout` for the exit (then SIGKILLs and throws) and returns the outputs.
    func wait(timeout: Duration = .seconds(10)) async throws -> Finished {
        let deadline = ContinuousClock.now + timeout
        while !reaped() {
            if ContinuousClock.now > deadline {
                kill(pid, SIGKILL)
                while !reaped() { try await Task.sleep(for: .milliseconds(10)) }
                throw TestFailure("child \(pid) did not exit within \(timeout); stderr: \(stderrSoFar())")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return Finished(status: exitStatus ?? -1, stdout: read(outPath), stderr: stderrSoFar())
    }

    /// Blocks until the child exits (for synchronous callers with quick children).
    func waitBlocking() -> Int32 {
        while !reaped() { usleep(10_000) }
        return exitStatus ?? -1
    }

    /// What the child has written to stderr so far.
    func stderrSoFar() -> String { read(errPath) }

    /// Sends `signal`, then waits as `wait(timeout:)` does.
    func stop(_ signal: Int32 = SIGTERM, timeout: Duration = .seconds(10)) async throws -> Finished {
        if isRunning { kill(pid, signal) }
        return try await wait(timeout: timeout)
    }

    private func read(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    deinit {
        if exitStatus == nil {
            kill(pid, SIGKILL)
            var raw: Int32 = 0
            _ = waitpid(pid, &raw, 0)
        }
    }
}

/// Runs a child to completion (see `Child`).
func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
         in directory: TempDirectory) async throws -> Finished {
    try await Child(executable, arguments, environment: environment, in: directory).wait()
}

/// Calls `body` with `path` as a `sockaddr_un`.
func withUnixAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) throws -> R) throws -> R {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw TestFailure("path too long: \(path)") }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    return try withUnsafePointer(to: &address) {
        try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}

/// Polls `condition` every 10 ms until it holds; throws after `timeout`.
func waitUntil(_ what: @autoclosure () -> String, timeout: Duration = .seconds(10), _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while try !condition() {
        if ContinuousClock.now > deadline { throw TestFailure("\(what()) did not happen within \(timeout)") }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// Waits until `path` exists, at most `timeout`.
func waitForPath(_ path: String, timeout: Duration = .seconds(10)) async throws {
    try await waitUntil("\(path) appearing", timeout: timeout) { access(path, F_OK) == 0 }
}

/// A connected `AF_UNIX` stream client socket, closed on deinit.
final class StreamClient {
    let fd: CInt

    init(connectingTo path: String) throws {
        fd = socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
        let result = try withUnixAddress(path) { connect(fd, $0, $1) }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw TestFailure("connect \(path) failed: errno \(code)")
        }
    }

    deinit { close(fd) }

    /// Everything the peer writes until it closes, waiting at most `timeout` in all.
    func readToEnd(timeout: Duration = .seconds(10)) throws -> String {
        var received: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while true {
            guard try waitReadable(fd, until: deadline) else { throw TestFailure("no EOF within \(timeout); got \(String(decoding: received, as: UTF8.self))") }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw TestFailure("read failed: errno \(errno)") }
            if count == 0 { return String(decoding: received, as: UTF8.self) }
            received += chunk[..<count]
        }
    }
}

/// An `AF_UNIX` datagram socket bound to a path: the test's own `NOTIFY_SOCKET`.
final class DatagramReceiver {
    let fd: CInt
    let path: String

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, CInt(SOCK_DGRAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
        guard try withUnixAddress(path, { bind(fd, $0, $1) }) == 0 else { throw TestFailure("bind \(path) failed: errno \(errno)") }
    }

    deinit { close(fd) }

    /// The next datagram, or nil when none arrives within `timeout`.
    func receive(timeout: Duration = .seconds(10)) throws -> String? {
        guard try waitReadable(fd, until: ContinuousClock.now + timeout) else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count >= 0 else { throw TestFailure("recv failed: errno \(errno)") }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }
}

/// `poll(2)` for input on `fd` until `deadline`; false on timeout.
func waitReadable(_ fd: CInt, until deadline: ContinuousClock.Instant) throws -> Bool {
    while true {
        let left = deadline - ContinuousClock.now
        let milliseconds = max(0, Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&entry, 1, milliseconds)
        if ready < 0 && errno == EINTR { continue }
        guard ready >= 0 else { throw TestFailure("poll failed: errno \(errno)") }
        return ready > 0
    }
}
