// Starting, waiting for and reaping child processes for tests (posix_spawn(3), waitpid(2)).
//
// Before editing: every wait here is bounded, children get default signal
// dispositions and an empty signal mask, and no descriptor of the test
// process except 0/1/2 leaks into a child (closefrom when glibc has it, and
// every descriptor this module opens is close-on-exec anyway). A leaked socket
// would keep a peer from ever seeing EOF in a parallel test.
import EventBusSystem
import Foundation
import Glibc

/// How a child process ended, as tests compare it (`status == 0`, `exit 3`
/// in messages); EventBusSystem's `ChildExit` is what the products use.
package enum ExitStatus: Equatable, Sendable, CustomStringConvertible {
    /// `exit(code)` or a return from `main`; `code` is 0...255.
    case exited(Int32)
    /// Killed by signal number `signal` (e.g. `SIGKILL` = 9).
    case signaled(Int32)

    /// Decodes the `status` word filled in by waitpid(2), with the one
    /// decoder of the package (EventBusSystem's `ChildExit`).
    package init(waitStatus status: Int32) {
        switch ChildExit(waitStatus: status) {
        case .exited(let code): self = .exited(code)
        case .signaled(let signal): self = .signaled(signal)
        }
    }

    /// The exit code, or nil when a signal ended the process.
    package var exitCode: Int32? {
        if case .exited(let code) = self { return code }
        return nil
    }

    /// The signal that ended the process, or nil when it exited.
    package var signal: Int32? {
        if case .signaled(let signal) = self { return signal }
        return nil
    }

    /// `exit 0`, `exit 3`, `signal 9`.
    package var description: String {
        switch self {
        case .exited(let code): "exit \(code)"
        case .signaled(let signal): "signal \(signal)"
        }
    }
}

extension ExitStatus: ExpressibleByIntegerLiteral {
    /// `0` is `.exited(0)`, so tests can write `status == 0` (a signal never equals a literal).
    package init(integerLiteral code: Int32) { self = .exited(code) }
}

/// A failure of the process helpers; every case says what was being done.
package enum ChildProcessError: Error, CustomStringConvertible {
    /// A libc call failed: `call` is its name, `errno` the error number.
    case system(call: String, errno: Int32)
    /// The built product `name` is not in `directory`.
    case productNotFound(name: String, directory: String)
    /// The child did not exit within `seconds`; it was killed with SIGKILL.
    case timedOut(command: String, seconds: Double, stdout: String, stderr: String)

    package var description: String {
        switch self {
        case .system(let call, let errno):
            "failed to \(call): \(String(cString: strerror(errno))) (errno \(errno))"
        case .productNotFound(let name, let directory):
            "built product \(name) not found in \(directory) (run `swift build --build-tests` first)"
        case .timedOut(let command, let seconds, let stdout, let stderr):
            "\(command) did not exit within \(seconds) s; killed. stdout: \(stdout.suffix(2000)) stderr: \(stderr.suffix(2000))"
        }
    }
}

/// The folder holding the built products of this build (e.g. `.build/debug`),
/// found as the folder of the running test executable (`/proc/self/exe`),
/// the way swift-argument-parser's TestHelpers find `productsDirectory` on Linux.
/// `$EVENTBUS_TEST_PRODUCTS` overrides it.
package func productsDirectory() -> String {
    if let override = ProcessInfo.processInfo.environment["EVENTBUS_TEST_PRODUCTS"], !override.isEmpty {
        return override
    }
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        ?? Bundle.main.executablePath ?? CommandLine.arguments[0]
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    // On Linux the test bundle is an executable inside the products folder; if a
    // toolchain ever nests it (`X.xctest/...`), step out of the bundle.
    while dir.path.contains(".xctest") { dir = dir.deletingLastPathComponent() }
    return dir.path
}

/// Absolute path of the built executable `name` (e.g. `"eventbusd"`) in
/// `productsDirectory()`.
/// - Throws: `ChildProcessError.productNotFound` when it is not there or not executable.
package func builtProduct(_ name: String) throws -> String {
    let dir = productsDirectory()
    let path = dir + "/" + name
    guard access(path, X_OK) == 0 else { throw ChildProcessError.productNotFound(name: name, directory: dir) }
    return path
}

/// Output of `runProcess`: exit status, the whole of stdout and stderr (UTF-8,
/// invalid bytes replaced), and the child's pid (to compare with `SO_PEERCRED`).
package struct ProcessOutput: Sendable {
    package var status: ExitStatus
    package var stdout: String
    package var stderr: String
    package var pid: pid_t
}

/// Runs `executable` with `arguments` to completion and returns what it wrote.
///
/// stdin is `stdin`'s bytes (or /dev/null when nil); stdout and stderr go to
/// temporary files, so a chatty child never blocks on a full pipe. A
/// `SpawnedProcess` waited for at once (`waitBlocking`).
/// - Parameters:
///   - executable: absolute path, or a bare name looked up in `$PATH`.
///   - environment: changes to the inherited environment; a `nil` value unsets the variable.
///   - timeout: bound on the run; the child is then killed with SIGKILL.
/// - Throws: `ChildProcessError.timedOut` (with partial output) or `.system` when spawning fails.
package func runProcess(
    _ executable: String,
    _ arguments: [String] = [],
    stdin: String? = nil,
    environment: [String: String?] = [:],
    timeout: Duration = .seconds(30)
) throws -> ProcessOutput {
    let dir = try TemporaryDirectory(prefix: "eb-run-")
    defer { dir.remove() }
    let child = try SpawnedProcess(executable, arguments, in: dir, environment: environment, stdin: stdin)
    return try child.waitBlocking(timeout: timeout)
}

/// The first executable `name` in `$PATH`, or nil.
package func findInPath(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    for dir in path.split(separator: ":") {
        let candidate = "\(dir)/\(name)"
        if access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
}

/// Starts `path` with `arguments` through posix_spawn(3): stdio from/to the
/// given files (stdout/stderr created or truncated, mode 0644; when `stderrPath`
/// equals `stdoutPath`, fd 2 is a duplicate of fd 1), all signals at their
/// default disposition, empty signal mask, no other descriptor inherited.
/// `closeStandardOutput` starts the child with fd 1 closed; `passDescriptor`
/// becomes the child's fd 3, `stdinDescriptor`/`stdoutDescriptor` its fd 0/1
/// instead of the files (e.g. pipe ends; the caller keeps its own copies).
/// - Returns: the child's pid; the caller must reap it (`waitForChild`).
/// - Throws: `ChildProcessError.system(call: "posix_spawn …")`.
package func spawnChild(
    _ path: String,
    _ arguments: [String],
    environment: [String: String?] = [:],
    stdinPath: String = "/dev/null",
    stdoutPath: String = "/dev/null",
    stderrPath: String = "/dev/null",
    closeStandardOutput: Bool = false,
    passDescriptor: Int32? = nil,
    stdinDescriptor: Int32? = nil,
    stdoutDescriptor: Int32? = nil
) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let stdinDescriptor {
        posix_spawn_file_actions_adddup2(&actions, stdinDescriptor, 0)
    } else {
        posix_spawn_file_actions_addopen(&actions, 0, stdinPath, O_RDONLY, 0)
    }
    if let stdoutDescriptor {
        posix_spawn_file_actions_adddup2(&actions, stdoutDescriptor, 1)
    } else {
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    }
    if stderrPath == stdoutPath {
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
    } else {
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    }
    if closeStandardOutput { posix_spawn_file_actions_addclose(&actions, 1) }
    if let passDescriptor { posix_spawn_file_actions_adddup2(&actions, passDescriptor, 3) }
    if let closeFrom = addCloseFrom {
        _ = closeFrom(&actions, passDescriptor == nil ? 3 : 4)
    }

    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var noSignals = sigset_t()
    sigemptyset(&noSignals)
    var allSignals = sigset_t()
    sigfillset(&allSignals)
    posix_spawnattr_setsigmask(&attributes, &noSignals)
    posix_spawnattr_setsigdefault(&attributes, &allSignals)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    var env = ProcessInfo.processInfo.environment
    for (key, value) in environment { env[key] = value }
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        for p in argv { free(p) }
        for p in envp { free(p) }
    }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
    guard rc == 0 else { throw ChildProcessError.system(call: "posix_spawn \(path)", errno: rc) }
    return pid
}

/// Waits up to `timeout` for child `pid` to exit and reaps it (waitpid(2) with
/// `WNOHANG`, polled every 5 ms). Returns nil if it is still running.
package func waitForChild(_ pid: pid_t, timeout: Duration) -> ExitStatus? {
    let deadline = ContinuousClock.now + timeout
    while true {
        var status: Int32 = 0
        switch systemCall(.retry, { waitpid(pid, &status, WNOHANG) }) {
        case .success(let rc) where rc == pid: return ExitStatus(waitStatus: status)
        case .failure: return nil
        case .success: break
        }
        if ContinuousClock.now >= deadline { return nil }
        usleep(5_000)
    }
}

/// Reads a whole file as UTF-8 (invalid bytes replaced); "" when unreadable.
func readTextFile(_ path: String) -> String {
    guard let data = FileManager.default.contents(atPath: path) else { return "" }
    return String(decoding: data, as: UTF8.self)
}

/// Reads a file of /proc (proc(5)) to its end, as UTF-8 (invalid bytes
/// replaced); nil when it cannot be opened or read. read(2) until EOF:
/// `FileManager.contents(atPath:)` and `String(contentsOfFile:)` stop after
/// the first read (one page) of a file whose size procfs reports as 0, so a
/// long /proc/net/unix or maps came back cut short.
package func readProcFile(_ path: String) -> String? {
    guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
    defer { try? handle.close() }
    guard let data = try? handle.readToEnd() else { return nil }
    return String(decoding: data, as: UTF8.self)
}

/// glibc ≥ 2.34's `posix_spawn_file_actions_addclosefrom_np`, which Swift's
/// Glibc module does not import; looked up with dlsym(3), nil when absent.
private let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
    guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
    return unsafeBitCast(
        symbol,
        to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self
    )
}()

extension Duration {
    /// This duration in seconds, as a `Double`.
    package var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }

    /// This duration in whole milliseconds, rounded up, clamped to `Int32` (for poll(2)).
    var pollMilliseconds: Int32 {
        let ms = (seconds * 1000).rounded(.up)
        return ms <= 0 ? 0 : Int32(min(ms, Double(Int32.max)))
    }
}
