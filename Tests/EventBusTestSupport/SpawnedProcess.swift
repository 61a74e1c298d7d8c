// A long-running child for tests (a broker, a CLI, systemd-socket-activate): started
// with `spawnChild` (posix_spawn(3)), its stdout and stderr in files, reaped by
// bounded waitpid(2) `WNOHANG` polls.
//
// Before editing: not Foundation.Process. That starts children with the spawning
// dispatch thread's signal mask (SIGTERM blocked), and its exit monitor blocks for
// good in waitpid once a child closes the descriptors it inherited (as
// systemd-socket-activate does), hanging every other Process in the runner. Every
// wait here is bounded, and a child still running at deinit is killed and reaped.
import EventBusSystem
import Foundation
import Glibc
import Synchronization

/// Variables that would leak the test runner's systemd context into a child
/// (sd_listen_fds(3), sd_notify(3), sd_watchdog_enabled(3), systemd.exec(5)).
package let systemdEnvironmentVariables: Set<String> = [
    "NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES",
    "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM", "INVOCATION_ID",
]

/// Environment changes for `spawnChild`/`SpawnedProcess` that unset every
/// `systemdEnvironmentVariables` entry, then apply `settings`.
package func withoutSystemdVariables(_ settings: [String: String] = [:]) -> [String: String?] {
    var environment: [String: String?] = [:]
    for name in systemdEnvironmentVariables { environment[name] = .some(nil) }
    for (key, value) in settings { environment[key] = value }
    return environment
}

/// A running child whose stdout and stderr go to files in a `TemporaryDirectory`.
package final class SpawnedProcess: Sendable {
    /// The child's process id.
    package let pid: pid_t
    /// The executable as given to `init` (a path, or a name looked up in `$PATH`).
    package let executable: String
    /// The command line after the executable name.
    package let arguments: [String]
    /// The file receiving the child's stdout.
    package let stdoutPath: String
    /// The file receiving the child's stderr (equal to `stdoutPath` when merged).
    package let stderrPath: String
    private let status = Mutex<ExitStatus?>(nil)
    /// Kept so the output files outlive neither this object nor the child.
    private let directory: TemporaryDirectory

    /// Starts `executable` with `arguments` (see `spawnChild` for the signal state
    /// and descriptors the child gets).
    /// - Parameters:
    ///   - directory: where `<tag>.in/.out/.err` files are created; kept alive as long as this object.
    ///   - environment: changes to the inherited environment; `nil` unsets.
    ///   - stdin: bytes for standard input (/dev/null when nil).
    ///   - stderrPath: a file for stderr instead of a new one (truncated, keeping its inode).
    ///   - mergeStderr: stderr goes to the stdout file (one interleaved log).
    ///   - closeStandardOutput: start the child with fd 1 closed.
    /// - Throws: `ChildProcessError.system` when a file cannot be made or spawning fails.
    package init(
        _ executable: String,
        _ arguments: [String],
        in directory: TemporaryDirectory,
        environment: [String: String?] = [:],
        stdin: String? = nil,
        stderrPath: String? = nil,
        mergeStderr: Bool = false,
        closeStandardOutput: Bool = false
    ) throws {
        self.executable = executable
        self.arguments = arguments
        self.directory = directory
        let tag = directory.file(String(UUID().uuidString.prefix(8)))
        stdoutPath = tag + ".out"
        self.stderrPath = mergeStderr ? stdoutPath : (stderrPath ?? tag + ".err")
        var stdinPath = "/dev/null"
        if let stdin {
            stdinPath = tag + ".in"
            guard FileManager.default.createFile(atPath: stdinPath, contents: Data(stdin.utf8)) else {
                throw ChildProcessError.system(call: "create \(stdinPath)", errno: errno)
            }
        }
        let path = executable.contains("/") ? executable : (findInPath(executable) ?? executable)
        pid = try spawnChild(
            path, arguments, environment: environment, stdinPath: stdinPath,
            stdoutPath: stdoutPath, stderrPath: self.stderrPath, closeStandardOutput: closeStandardOutput
        )
    }

    /// Reaps the child if it has exited (one `WNOHANG` waitpid); its status once it has.
    @discardableResult
    package func reap() -> ExitStatus? {
        status.withLock { status in
            if status == nil { status = waitForChild(pid, timeout: .zero) }
            return status
        }
    }

    /// Whether the child has not exited yet (reaps it if it has).
    package var isRunning: Bool { reap() == nil }

    /// What the child has written to stdout so far.
    package func stdoutSoFar() -> String { readTextFile(stdoutPath) }

    /// What the child has written to stderr so far.
    package func stderrSoFar() -> String { readTextFile(stderrPath) }

    /// Sends `signal` (kill(2)) unless the child has already been reaped.
    package func send(signal: Int32) {
        if reap() == nil { kill(pid, signal) }
    }

    /// Waits up to `timeout` for the exit, sleeping 10 ms between polls.
    /// - Returns: the status and everything written to stdout and stderr.
    /// - Throws: `ChildProcessError.timedOut` after SIGKILLing and reaping the child.
    package func wait(timeout: Duration = .seconds(10)) async throws -> ProcessOutput {
        let deadline = ContinuousClock.now + timeout
        while reap() == nil {
            if ContinuousClock.now > deadline { throw killAfterTimeout(timeout) }
            try await Task.sleep(for: .milliseconds(10))
        }
        return output()
    }

    /// `wait(timeout:)` for synchronous callers: blocks the thread, polling every 5 ms.
    package func waitBlocking(timeout: Duration = .seconds(10)) throws -> ProcessOutput {
        guard waitForExit(timeout: timeout) != nil else { throw killAfterTimeout(timeout) }
        return output()
    }

    /// Waits up to `timeout` for the exit (blocking the thread, polling every
    /// 5 ms) and leaves the child alone if it is still running then.
    /// - Returns: how it ended, or nil while it runs.
    package func waitForExit(timeout: Duration) -> ExitStatus? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = reap() { return status }
            if ContinuousClock.now > deadline { return nil }
            usleep(5_000)
        }
    }

    /// Sends `signal` (unless the child has exited), waits up to `timeout`
    /// (blocking), then SIGKILLs and reaps it.
    /// - Returns: how it ended, and whether SIGKILL was needed.
    @discardableResult
    package func terminate(_ signal: Int32 = SIGTERM, timeout: Duration) -> (status: ExitStatus, killed: Bool) {
        send(signal: signal)
        if let status = waitForExit(timeout: timeout) { return (status, false) }
        killAndReap()
        return (reap() ?? .signaled(SIGKILL), true)
    }

    /// Sends `signal` (unless the child has exited), then waits as `wait(timeout:)` does.
    package func stop(_ signal: Int32 = SIGTERM, timeout: Duration = .seconds(10)) async throws -> ProcessOutput {
        send(signal: signal)
        return try await wait(timeout: timeout)
    }

    private func output() -> ProcessOutput {
        ProcessOutput(status: reap() ?? .signaled(SIGKILL), stdout: stdoutSoFar(), stderr: stderrSoFar(), pid: pid)
    }

    private func killAfterTimeout(_ timeout: Duration) -> ChildProcessError {
        killAndReap()
        return ChildProcessError.timedOut(
            command: ([executable] + arguments).joined(separator: " "),
            seconds: timeout.seconds, stdout: stdoutSoFar(), stderr: stderrSoFar()
        )
    }

    /// SIGKILL and a blocking waitpid (SIGKILL cannot be caught or ignored).
    private func killAndReap() {
        status.withLock { status in
            guard status == nil else { return }
            kill(pid, SIGKILL)
            var raw: Int32 = 0
            _ = systemCall { waitpid(pid, &raw, 0) }
            status = ExitStatus(waitStatus: raw)
        }
    }

    deinit { killAndReap() }
}

/// Creates (or truncates) `path` as an empty file.
/// - Throws: `TestFailure` when it cannot.
package func createEmptyFile(_ path: String) throws {
    guard FileManager.default.createFile(atPath: path, contents: nil) else { throw TestFailure("cannot create \(path)") }
}

/// A failure of a test helper, with what went wrong.
package struct TestFailure: Error, CustomStringConvertible {
    /// What went wrong, e.g. `"connect /tmp/eb-x/s failed: errno 2"`.
    package let description: String

    /// A failure described by `description`.
    package init(_ description: String) { self.description = description }
}
