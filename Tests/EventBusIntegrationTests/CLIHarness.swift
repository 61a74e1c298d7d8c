// Test harness for the `eventbus` CLI tests: a real `eventbusd` on a short
// temporary socket path, the real `eventbus` binary run with its stdout,
// stderr and exit status captured, and a line client for settling (ping
// round trips, subscription counts from `stats`). Processes, scratch folders
// and the line client are EventBusTestSupport's.
//
// Before editing: every wait is bounded, every child is reaped (a test that
// fails still terminates its broker in `deinit`), and a CLI child gets
// /dev/null as standard input unless the test gives one, because `eventbus
// publish` reads standard input whenever it is not a terminal.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// Absolute path of a built product (`eventbus`, `eventbusd`).
func cliProduct(_ name: String) -> String { productsDirectory() + "/" + name }

/// How a CLI run ended and what it wrote.
struct CLIRun: CustomStringConvertible {
    /// Exit status, or nil when killed by a signal.
    var status: Int32?
    /// The signal that killed it, if any.
    var signal: Int32?
    var stdout: String
    var stderr: String

    /// The outcome of a finished `SpawnedProcess`.
    init(_ output: ProcessOutput) {
        status = output.status.exitCode
        signal = output.status.signal
        stdout = output.stdout
        stderr = output.stderr
    }

    var description: String { "status \(status.map(String.init) ?? "-") signal \(signal.map(String.init) ?? "-")\nstdout: \(stdout)\nstderr: \(stderr)" }

    /// stdout split into lines (without the final empty piece).
    var stdoutLines: [String] {
        var lines = stdout.components(separatedBy: "\n")
        if lines.last == "" { lines.removeLast() }
        return lines
    }
}

/// A child process with stdout/stderr going to files in a scratch folder (a
/// `SpawnedProcess`: posix_spawn(3) with every signal at its default and none
/// blocked, however the test runner itself was started — a background job has
/// SIGINT ignored, and an ignored signal would be inherited), reporting `CLIRun`s.
final class RunningProcess {
    let process: SpawnedProcess
    var pid: pid_t { process.pid }

    /// Starts `executable` with `arguments`.
    /// - Parameters:
    ///   - stdin: bytes for standard input (/dev/null when nil).
    ///   - environment: extra variables over the test's environment
    ///     (`EVENTBUS_SOCKET` and `NO_COLOR` are removed first).
    ///   - closeStandardOutput: start the child with fd 1 closed.
    init(_ executable: String, _ arguments: [String], in scratch: TemporaryDirectory, stdin: String? = nil, environment: [String: String] = [:], closeStandardOutput: Bool = false) throws {
        var changes: [String: String?] = ["EVENTBUS_SOCKET": nil, "NO_COLOR": nil]
        for (key, value) in environment { changes[key] = value }
        process = try SpawnedProcess(executable, arguments, in: scratch, environment: changes, stdin: stdin,
                                     closeStandardOutput: closeStandardOutput)
    }

    /// Whether the child has not exited yet (reaps it if it has).
    var isRunning: Bool { process.isRunning }

    /// Waits up to `timeout` for the exit; kills with SIGKILL and throws after it.
    @discardableResult
    func wait(timeout: Duration = .seconds(10)) throws -> CLIRun { CLIRun(try process.waitBlocking(timeout: timeout)) }

    /// What the process has written to stdout so far.
    func stdoutSoFar() -> String { process.stdoutSoFar() }

    /// What the process has written to stderr so far.
    func stderrSoFar() -> String { process.stderrSoFar() }

    /// Waits (up to 10 s) until what the process wrote to stderr so far satisfies `done`.
    func waitForStderr(_ done: (String) -> Bool) throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !done(stderrSoFar()) {
            guard ContinuousClock.now < deadline else { throw TestFailure("stderr of pid \(pid) never got there: '\(stderrSoFar())'") }
            usleep(5_000)
        }
    }

    func send(signal: Int32) { process.send(signal: signal) }
}

/// A real `eventbusd` on `<scratch>/bus.sock`, ready (answered a ping) when
/// `init` returns; terminated and reaped by `stop()` or `deinit`.
final class TestBroker {
    let scratch: TemporaryDirectory
    let socket: String
    /// Extra `eventbusd` options, e.g. `["--max-connections", "1"]`.
    let options: [String]
    private var process: BrokerProcess?

    init(scratch: TemporaryDirectory? = nil, options: [String] = []) throws {
        self.scratch = try scratch ?? TemporaryDirectory(prefix: "ebcli.")
        socket = self.scratch.path + "/bus.sock"
        self.options = options
        try start()
    }

    /// Starts the broker (again) on the same path and waits until it answers
    /// (an EventBusTestSupport `BrokerProcess`).
    /// - Throws: `BrokerProcessError.notReady`/`.exitedEarly` (with the broker's stderr).
    func start() throws {
        process = try BrokerProcess(arguments: options, socketPath: socket)
    }

    /// SIGTERM and reap (SIGKILL after 10 s); the broker unlinks its socket on a clean exit.
    func stop() throws {
        guard let process else { return }
        process.terminate(timeout: .seconds(10))
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
        throw TestFailure("never saw \(count) subscriptions; stats: \(try stats())")
    }

    deinit {
        process?.terminate(timeout: .seconds(5))
    }
}

/// Parses one line of JSON output into an object (EventBusTestSupport's `Frame`).
/// - Throws: `RawClientError.invalidFrame` when it is not a JSON object.
func jsonObject(_ line: String) throws -> [String: Any] {
    try Frame(line: Array(line.utf8)).fields
}
