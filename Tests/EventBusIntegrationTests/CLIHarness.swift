// Test harness for the `eventbus` CLI tests: a real `eventbusd` on a short
// temporary socket path, the real `eventbus` binary run with its stdout,
// stderr and exit status captured, and a raw line client for settling
// (ping round trips, subscription counts from `stats`).
//
// Before editing: every wait is bounded, every child is reaped (a test that
// fails still terminates its broker in `deinit`), and a CLI child gets
// /dev/null as standard input unless the test gives one, because `eventbus
// publish` reads standard input whenever it is not a terminal.
import Foundation
import Glibc
import Testing

/// The folder holding the built products (`eventbus`, `eventbusd`): the test
/// bundle's own folder.
let cliProductsDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
    // On some layouts the runner sits inside `<name>.xctest/...`.
    while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("eventbusd").path), directory.path != "/" {
        directory = directory.deletingLastPathComponent()
    }
    return directory.path
}()

/// Absolute path of a built product.
func cliProduct(_ name: String) -> String { cliProductsDirectory + "/" + name }

/// How a CLI run ended and what it wrote.
struct CLIRun: CustomStringConvertible {
    /// Exit status, or nil when killed by a signal.
    var status: Int32?
    /// The signal that killed it, if any.
    var signal: Int32?
    var stdout: String
    var stderr: String

    var description: String { "status \(status.map(String.init) ?? "-") signal \(signal.map(String.init) ?? "-")\nstdout: \(stdout)\nstderr: \(stderr)" }

    /// stdout split into lines (without the final empty piece).
    var stdoutLines: [String] {
        var lines = stdout.components(separatedBy: "\n")
        if lines.last == "" { lines.removeLast() }
        return lines
    }
}

/// Failures of the harness itself.
struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A private temporary folder with a short path (sun_path holds 108 bytes).
final class ScratchDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/ebcli.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed: errno \(errno)") }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A child process with stdout/stderr going to files in a scratch folder,
/// started with posix_spawn(3) so that SIGINT, SIGTERM, SIGPIPE and SIGQUIT
/// are at their defaults and no signal is blocked, however the test runner
/// itself was started (a background job has SIGINT ignored, and an ignored
/// signal would be inherited).
final class RunningProcess {
    let pid: pid_t
    let executable: String
    let arguments: [String]
    private let outPath: String
    private let errPath: String
    private var result: CLIRun?

    /// Starts `executable` with `arguments`.
    /// - Parameters:
    ///   - stdin: bytes for standard input (/dev/null when nil).
    ///   - environment: extra variables over the test's environment
    ///     (`EVENTBUS_SOCKET` and `NO_COLOR` are removed first).
    ///   - closeStandardOutput: start the child with fd 1 closed.
    init(_ executable: String, _ arguments: [String], in scratch: ScratchDirectory, stdin: String? = nil, environment: [String: String] = [:], closeStandardOutput: Bool = false) throws {
        self.executable = executable
        self.arguments = arguments
        let tag = UUID().uuidString.prefix(8)
        outPath = "\(scratch.path)/\(tag).out"
        errPath = "\(scratch.path)/\(tag).err"
        var inPath = "/dev/null"
        if let stdin {
            inPath = "\(scratch.path)/\(tag).in"
            guard FileManager.default.createFile(atPath: inPath, contents: Data(stdin.utf8)) else { throw HarnessError("cannot create \(inPath)") }
        }
        var env = ProcessInfo.processInfo.environment
        env["EVENTBUS_SOCKET"] = nil
        env["NO_COLOR"] = nil
        for (key, value) in environment { env[key] = value }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, inPath, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if closeStandardOutput { posix_spawn_file_actions_addclose(&actions, 1) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGPIPE, SIGQUIT, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, &argv, &envp)
        guard rc == 0 else { throw HarnessError("posix_spawn \(executable): \(String(cString: strerror(rc)))") }
        pid = child
    }

    /// Whether the child has not exited yet (reaps it if it has).
    var isRunning: Bool { result == nil && reap(blocking: false) == nil }

    private var exitStatus: Int32?

    /// waitpid(2); stores the status once the child is gone.
    private func reap(blocking: Bool) -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        let r = waitpid(pid, &status, blocking ? 0 : WNOHANG)
        if r == pid { exitStatus = status }
        return exitStatus
    }

    /// Waits up to `timeout` for the exit; kills with SIGKILL and throws after it.
    @discardableResult
    func wait(timeout: Duration = .seconds(10)) throws -> CLIRun {
        if let result { return result }
        let deadline = ContinuousClock.now + timeout
        while reap(blocking: false) == nil && ContinuousClock.now < deadline { usleep(5_000) }
        guard let status = reap(blocking: false) else {
            kill(pid, SIGKILL)
            _ = reap(blocking: true)
            throw HarnessError("\((executable as NSString).lastPathComponent) \(arguments) did not exit within \(timeout); stderr: \(read(errPath))")
        }
        let low = status & 0x7F
        let run = CLIRun(status: low == 0 ? (status >> 8) & 0xFF : nil, signal: low == 0 ? nil : low,
                         stdout: read(outPath), stderr: read(errPath))
        result = run
        return run
    }

    /// What the process has written to stdout so far.
    func stdoutSoFar() -> String { read(outPath) }

    func send(signal: Int32) { if reap(blocking: false) == nil { kill(pid, signal) } }

    private func read(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    deinit {
        if reap(blocking: false) == nil {
            kill(pid, SIGKILL)
            _ = reap(blocking: true)
        }
    }
}

/// A real `eventbusd` on `<scratch>/bus.sock`, ready (answered a ping) when
/// `init` returns; terminated and reaped by `stop()` or `deinit`.
final class TestBroker {
    let scratch: ScratchDirectory
    let socket: String
    /// Extra `eventbusd` options, e.g. `["--max-connections", "1"]`.
    let options: [String]
    private var process: RunningProcess?

    init(scratch: ScratchDirectory? = nil, options: [String] = []) throws {
        self.scratch = try scratch ?? ScratchDirectory()
        socket = self.scratch.path + "/bus.sock"
        self.options = options
        try start()
    }

    /// Starts the broker (again) on the same path and waits until it answers.
    func start() throws {
        process = try RunningProcess(cliProduct("eventbusd"), ["--socket", socket] + options, in: scratch)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let client = try? LineClient(socket), (try? client.request("{\"op\":\"ping\",\"req\":\"ready\"}")) != nil { return }
            if process?.isRunning == false { break }
            usleep(10_000)
        }
        throw HarnessError("eventbusd did not become ready on \(socket): \(String(describing: try? process?.wait(timeout: .seconds(1))))")
    }

    /// SIGTERM and reap; the broker unlinks its socket on a clean exit.
    func stop() throws {
        guard let process else { return }
        process.send(signal: SIGTERM)
        try process.wait(timeout: .seconds(10))
        self.process = nil
    }

    /// Runs `eventbus --socket <this broker> ARGS...` to completion.
    func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:], timeout: Duration = .seconds(10)) throws -> CLIRun {
        try RunningProcess(cliProduct("eventbus"), ["--socket", socket] + arguments, in: scratch, stdin: stdin, environment: environment).wait(timeout: timeout)
    }

    /// Starts `eventbus --socket <this broker> ARGS...` without waiting.
    func start(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> RunningProcess {
        try RunningProcess(cliProduct("eventbus"), ["--socket", socket] + arguments, in: scratch, stdin: stdin, environment: environment)
    }

    /// The broker's `stats` reply.
    func stats() throws -> [String: Any] {
        try LineClient(socket).request("{\"op\":\"stats\",\"req\":1}")
    }

    /// Waits until the broker counts at least `count` subscriptions (a
    /// listener has subscribed), bounded by `timeout`.
    func waitForSubscriptions(_ count: Int, timeout: Duration = .seconds(10)) throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let n = try stats()["subscriptions"] as? Int, n >= count { return }
            usleep(5_000)
        }
        throw HarnessError("never saw \(count) subscriptions; stats: \(try stats())")
    }

    deinit {
        if let process, process.isRunning {
            process.send(signal: SIGTERM)
            _ = try? process.wait(timeout: .seconds(5))
        }
    }
}

/// A minimal blocking client speaking raw frames, independent of the CLI.
final class LineClient {
    private let fd: Int32
    private var buffer: [UInt8] = []

    /// Connects to `path`. The descriptor is owned (and closed once, in
    /// `deinit`) only once the connection is made: closing it twice would
    /// close another parallel test's descriptor that reused the number.
    init(_ path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let e = errno
            close(fd)
            throw HarnessError("connect \(path): errno \(e)")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Sends one frame and returns the next `ok` reply's fields.
    func request(_ frame: String) throws -> [String: Any] {
        let bytes = Array((frame + "\n").utf8)
        let sent = send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL))
        guard sent == bytes.count else { throw HarnessError("send returned \(sent), errno \(errno)") }
        while true {
            let line = try readLine()
            guard let object = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else { continue }
            if object["op"] as? String == "ok" { return object }
            if object["op"] as? String == "error" { throw HarnessError("broker error: \(String(decoding: line, as: UTF8.self))") }
        }
    }

    private func readLine() throws -> [UInt8] {
        while true {
            if let lf = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<lf])
                buffer.removeSubrange(...lf)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n > 0 else { throw HarnessError("connection closed or timed out (errno \(errno))") }
            buffer.append(contentsOf: chunk[..<n])
        }
    }
}

/// Parses one line of JSON output into an object.
func jsonObject(_ line: String) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
        throw HarnessError("not a JSON object: \(line)")
    }
    return object
}
