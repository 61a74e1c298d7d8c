// The real `eventbusd` as a child process on a temporary socket, for integration tests.
//
// Before editing: a broker must never outlive its test. `withBroker` terminates
// it on every path, `deinit` kills it as a last resort, and clients made with
// `connect()` are kept alive by the fixture (ARC may free a local that a test
// no longer mentions, which would close its socket and drop its subscriptions).
import Foundation
import Glibc

/// Why a broker fixture failed; the broker's stderr is attached where useful.
package enum BrokerProcessError: Error, CustomStringConvertible {
    /// The broker did not answer a ping within the readiness timeout.
    case notReady(seconds: Double, reason: String, stderr: String)
    /// The broker exited while it was expected to run.
    case exitedEarly(status: ExitStatus, stderr: String)
    /// The test body failed; `stderr` is the broker's, `status` how it ended.
    case testFailed(underlying: any Error, status: ExitStatus, stderr: String)
    /// SIGTERM after a passing test did not give exit status 0.
    case uncleanExit(status: ExitStatus, stderr: String)

    package var description: String {
        switch self {
        case .notReady(let seconds, let reason, let stderr):
            "eventbusd not ready within \(seconds) s: \(reason)\n--- eventbusd stderr ---\n\(stderr.suffix(4000))"
        case .exitedEarly(let status, let stderr):
            "eventbusd exited (\(status)) while the test still needed it\n--- eventbusd stderr ---\n\(stderr.suffix(4000))"
        case .testFailed(let error, let status, let stderr):
            "\(error)\n--- eventbusd (\(status)) stderr ---\n\(stderr.suffix(4000))"
        case .uncleanExit(let status, let stderr):
            "eventbusd ended with \(status) on SIGTERM, expected exit 0\n--- eventbusd stderr ---\n\(stderr.suffix(4000))"
        }
    }
}

/// A running `eventbusd` started from the build products folder.
///
/// Started as `eventbusd --socket PATH ARGUMENTS…` (PATH defaults to
/// `/tmp/eb-XXXXXX/s`), stdout and stderr captured to files, ready once
/// `{"op":"ping","req":"ready"}` got its `ok`. Not thread-safe; one test owns it.
package final class BrokerProcess {
    /// The broker's process id.
    package var pid: pid_t { process.pid }
    /// The socket path the broker serves (the `--socket` value, or the path it was told by other means).
    package let socketPath: String
    /// The private temporary directory holding the default socket and the captured output.
    package let directory: TemporaryDirectory
    /// The command line after the executable name.
    package let arguments: [String]
    /// How the broker ended, once it has exited (reaps it if it has).
    package var exitStatus: ExitStatus? { process.reap() }
    /// True if `terminate` had to fall back to SIGKILL.
    package private(set) var neededSIGKILL = false

    /// The child (its stdout in `directory`, its stderr in `directory/stderr`).
    private let process: SpawnedProcess
    private var clients: [RawClient] = []
    private var cleanedUp = false

    /// Starts `eventbusd`.
    /// - Parameters:
    ///   - arguments: extra flags, e.g. `["--max-frame", "100"]`.
    ///   - socketPath: where the broker should listen; default `directory.path + "/s"`.
    ///   - passSocketFlag: when false, no `--socket` is passed (for `--user`, `$EVENTBUS_SOCKET`);
    ///     `socketPath` must then name where the broker is expected to listen.
    ///   - environment: changes to the inherited environment (`nil` unsets). `LISTEN_*`,
    ///     `NOTIFY_SOCKET` and `WATCHDOG_*` are unset unless given here.
    ///   - shellPrefix: shell commands run before the broker in the same process
    ///     (`/bin/sh -c 'PREFIX; exec eventbusd …'`), e.g. `"ulimit -n 32"` or `"umask 077"`.
    ///   - waitUntilReady: wait for the ping round trip (false for brokers expected to refuse to start).
    ///   - readyTimeout: bound on that wait.
    /// - Throws: `ChildProcessError.productNotFound`, `BrokerProcessError.notReady`/`.exitedEarly`.
    package init(
        arguments: [String] = [],
        socketPath: String? = nil,
        passSocketFlag: Bool = true,
        environment: [String: String?] = [:],
        shellPrefix: String? = nil,
        waitUntilReady: Bool = true,
        readyTimeout: Duration = .seconds(10)
    ) throws {
        let executable = try builtProduct("eventbusd")
        directory = try TemporaryDirectory()
        let path = socketPath ?? directory.path + "/s"
        self.socketPath = path
        var argv = arguments
        if passSocketFlag { argv = ["--socket", path] + argv }
        self.arguments = argv

        var env = withoutSystemdVariables()
        for (key, value) in environment { env[key] = value }

        var program = executable
        var programArguments = argv
        if let shellPrefix {
            program = "/bin/sh"
            programArguments = ["-c", shellPrefix + "; exec \"$0\" \"$@\"", executable] + argv
        }
        process = try SpawnedProcess(program, programArguments, in: directory, environment: env,
                                     stderrPath: directory.path + "/stderr")
        if waitUntilReady {
            do {
                try self.waitUntilReady(timeout: readyTimeout)
            } catch {
                cleanUp()
                throw error
            }
        }
    }

    deinit { cleanUp() }

    /// What the broker wrote to stderr so far.
    package func stderrText() -> String { process.stderrSoFar() }

    /// Connects a new `RawClient` to the broker; the fixture keeps it open until
    /// the broker is terminated (or the test closes it).
    package func connect(timeout: Duration = RawClient.defaultTimeout) throws -> RawClient {
        let client = try RawClient(path: socketPath, timeout: timeout)
        clients.append(client)
        return client
    }

    /// Waits until a fresh connection gets `{"op":"ok","req":"ready"}` to `{"op":"ping","req":"ready"}`.
    /// - Throws: `.exitedEarly` if the broker exits, `.notReady` after `timeout`.
    package func waitUntilReady(timeout: Duration = .seconds(10)) throws {
        let deadline = ContinuousClock.now + timeout
        var lastReason = "no connection yet"
        while ContinuousClock.now < deadline {
            if let status = reapIfExited() {
                throw BrokerProcessError.exitedEarly(status: status, stderr: stderrText())
            }
            do {
                let probe = try RawClient(path: socketPath, timeout: .seconds(1))
                defer { probe.close() }
                try probe.send(#"{"op":"ping","req":"ready"}"#)
                let reply = try probe.readFrame(timeout: max(deadline - ContinuousClock.now, .milliseconds(1)))
                if reply.op == "ok" && reply.req == .string("ready") { return }
                lastReason = "unexpected reply to the readiness ping: \(reply.raw)"
            } catch {
                lastReason = "\(error)"
            }
            usleep(10_000)
        }
        throw BrokerProcessError.notReady(seconds: timeout.seconds, reason: lastReason, stderr: stderrText())
    }

    /// Resident set size in KiB (`VmRSS` in /proc/PID/status, proc(5)).
    /// - Throws: `ChildProcessError.system` when the file cannot be read (process gone).
    package func rssKiB() throws -> Int {
        let text = try procFile("status")
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let digits = line.dropFirst("VmRSS:".count).filter(\.isNumber)
            if let value = Int(digits) { return value }
        }
        throw ChildProcessError.system(call: "find VmRSS in /proc/\(pid)/status", errno: ENOENT)
    }

    /// Number of open descriptors (entries of /proc/PID/fd).
    package func fdCount() throws -> Int {
        do {
            return try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        } catch {
            throw ChildProcessError.system(call: "list /proc/\(pid)/fd", errno: ENOENT)
        }
    }

    /// CPU time used so far, user + system, in seconds (`utime`+`stime` of /proc/PID/stat, proc(5)).
    package func cpuSeconds() throws -> Double {
        let text = try procFile("stat")
        guard let close = text.lastIndex(of: ")") else {
            throw ChildProcessError.system(call: "parse /proc/\(pid)/stat", errno: EINVAL)
        }
        // Fields after "(comm)": state is field 3, utime 14, stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw ChildProcessError.system(call: "parse /proc/\(pid)/stat", errno: EINVAL)
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Sends `signal` to the broker without waiting.
    package func send(signal: Int32) { process.send(signal: signal) }

    /// Reaps the broker if it has exited; returns its status, or nil while it runs.
    @discardableResult
    package func reapIfExited() -> ExitStatus? { process.reap() }

    /// Waits up to `timeout` for the broker to exit on its own (e.g. refusing to start).
    package func waitForExit(timeout: Duration = .seconds(10)) -> ExitStatus? { process.waitForExit(timeout: timeout) }

    /// Stops the broker: `signal` (SIGTERM by default), waits up to `timeout`,
    /// then SIGKILL (`neededSIGKILL` becomes true). Idempotent.
    /// - Returns: how it ended, e.g. `.exited(0)` after a clean SIGTERM.
    @discardableResult
    package func terminate(signal: Int32 = SIGTERM, timeout: Duration = .seconds(8)) -> ExitStatus {
        let (status, killed) = process.terminate(signal, timeout: timeout)
        if killed { neededSIGKILL = true }
        return status
    }

    /// Closes every client made by `connect()`, kills and reaps the broker if
    /// it still runs, and removes the temporary directory. Idempotent.
    package func cleanUp() {
        guard !cleanedUp else { return }
        cleanedUp = true
        for client in clients { client.close() }
        clients.removeAll()
        process.terminate(SIGKILL, timeout: .seconds(10))
        directory.remove()
    }

    private func procFile(_ name: String) throws -> String {
        guard let text = readProcFile("/proc/\(pid)/\(name)") else {
            throw ChildProcessError.system(call: "read /proc/\(pid)/\(name)", errno: ENOENT)
        }
        return text
    }

    /// Closes the clients, then stops the broker with SIGTERM (PROTOCOL.md,
    /// Transport: clean exit). Used by `withBroker` after the body.
    fileprivate func finish(bodyError: (any Error)?, expectCleanExit: Bool) throws {
        let diedDuringTest = reapIfExited()
        for client in clients { client.close() }
        clients.removeAll()
        let status = terminate()
        let stderr = stderrText()
        cleanUp()
        if let bodyError {
            throw BrokerProcessError.testFailed(underlying: bodyError, status: status, stderr: stderr)
        }
        if let diedDuringTest, expectCleanExit {
            throw BrokerProcessError.exitedEarly(status: diedDuringTest, stderr: stderr)
        }
        if expectCleanExit && status != .exited(0) {
            throw BrokerProcessError.uncleanExit(status: status, stderr: stderr)
        }
    }
}

/// Runs `body` with a fresh ready broker, then always closes its clients,
/// sends SIGTERM and reaps it.
///
/// - Parameters:
///   - arguments: extra broker flags.
///   - expectCleanExit: when true (default) and `body` succeeded, the broker
///     must still be running at the end and exit with status 0 on SIGTERM;
///     a crash during the test thus fails it. Pass false when the test itself
///     stops or kills the broker.
/// - Throws: what `BrokerProcess.init` throws; `BrokerProcessError.testFailed`
///   wrapping the body's error (with the broker's stderr); `.exitedEarly` or
///   `.uncleanExit` after a passing body.
@discardableResult
package func withBroker<T>(
    _ arguments: [String] = [],
    environment: [String: String?] = [:],
    shellPrefix: String? = nil,
    expectCleanExit: Bool = true,
    _ body: (BrokerProcess) throws -> T
) throws -> T {
    let broker = try BrokerProcess(arguments: arguments, environment: environment, shellPrefix: shellPrefix)
    let result: T
    do {
        result = try body(broker)
    } catch {
        try broker.finish(bodyError: error, expectCleanExit: expectCleanExit)
        throw error  // not reached: finish always throws when given an error
    }
    try broker.finish(bodyError: nil, expectCleanExit: expectCleanExit)
    return result
}
