// Test fixtures for the client's integration tests: a real `eventbusd` on a
// short temporary socket path, child processes built from this package
// (the Examples), and bounded polling.
//
// Before editing: every wait here is bounded, every child is killed and
// reaped by the test that started it (or by deinit), and each broker gets its
// own directory so tests can run in parallel. Children are EventBusTestSupport's
// `SpawnedProcess` (posix_spawn, emptied signal mask), never Foundation.Process.
@testable import EventBus
import EventBusTestSupport
import Foundation
import Synchronization
import Testing

/// Polls `condition` every 10 ms until it holds or `limit` passes, and in any
/// case at least 200 times: while other tests hold the cooperative pool's few
/// threads (2 on a 2-CPU machine) a waiting task can sleep through the whole
/// `limit` at once, and one look after that says nothing about the condition
/// (CancellationTests' hold was missed so in a full run, its task resumed
/// only 150 s later).
/// - Returns: whether it held.
func eventually(within limit: Duration = .seconds(10), isolation: isolated (any Actor)? = #isolation, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    var looks = 0
    while clock.now < deadline || looks < 200 {
        if try await condition() { return true }
        looks += 1
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}

/// A running `eventbusd --socket <dir>/bus.sock` that can be stopped and started
/// again on the same path: one EventBusTestSupport `BrokerProcess` per run
/// (which this name shadows here), stopped and reaped on `stop()` or deinit.
final class BrokerProcess {
    let directory: TemporaryDirectory
    let socketPath: String
    private let arguments: [String]
    private var process: EventBusTestSupport.BrokerProcess?

    /// Starts a broker on a new temporary path and waits until it answers `ping`.
    /// - Parameter arguments: extra options, e.g. `["--max-outbound", "64K"]`.
    init(arguments: [String] = []) async throws {
        directory = try TemporaryDirectory(prefix: "ebc-")
        socketPath = directory.file("bus.sock")
        self.arguments = arguments
        try await start()
    }

    /// Starts (or restarts) the broker on the same path; returns once it answers `ping`.
    /// - Throws: `BrokerProcessError.notReady`/`.exitedEarly` (with the broker's stderr).
    func start() async throws {
        precondition(process == nil, "broker already running")
        process = try EventBusTestSupport.BrokerProcess(arguments: ["--log-level", "warning"] + arguments, socketPath: socketPath)
    }

    /// Sends `signal` to the running broker (SIGSTOP: a broker that does not answer).
    func send(signal: Int32) { process?.send(signal: signal) }

    /// SIGTERM (a clean stop: the broker unlinks its socket), then reap; SIGKILL after 5 s.
    /// With `signal: SIGKILL`, a crash: nothing is flushed or written.
    func stop(signal: Int32 = SIGTERM) async {
        guard let process else { return }
        self.process = nil
        process.terminate(signal: signal, timeout: .seconds(5))
        process.cleanUp()
    }
}

/// A child process built from this package (a `SpawnedProcess`: posix_spawn, not
/// Foundation.Process), its stdout and stderr collected in files.
final class ChildProcess: Sendable {
    let name: String
    private let process: SpawnedProcess

    /// Starts product `name` with `arguments`.
    init(_ name: String, _ arguments: [String]) throws {
        self.name = name
        process = try SpawnedProcess(productsDirectory() + "/" + name, arguments, in: try TemporaryDirectory(prefix: "ebc-"))
    }

    var stdout: String { process.stdoutSoFar() }
    var stderr: String { process.stderrSoFar() }

    /// Waits until stdout has a line equal to `line`.
    func waitForLine(_ line: String, within limit: Duration = .seconds(10)) async -> Bool {
        await eventually(within: limit) { stdout.split(separator: "\n").contains { $0 == line } }
    }

    /// Waits for the exit status; kills the child if it outlives `limit`.
    /// - Returns: the exit code (the signal number if a signal ended it), or nil when it had to be killed.
    func waitForExit(within limit: Duration = .seconds(10)) async -> Int32? {
        guard let output = try? await process.wait(timeout: limit) else { return nil }
        switch output.status {
        case .exited(let code): return code
        case .signaled(let signal): return signal
        }
    }
}

/// Runs product `name` to completion.
/// - Returns: exit status (nil if killed after `limit`), stdout, stderr.
func runProduct(_ name: String, _ arguments: [String], within limit: Duration = .seconds(10)) async throws -> (status: Int32?, stdout: String, stderr: String) {
    let child = try ChildProcess(name, arguments)
    let status = await child.waitForExit(within: limit)
    return (status, child.stdout, child.stderr)
}

/// A thread-safe list of what handlers saw, for assertions.
final class Log<Entry: Sendable>: Sendable {
    private let entries = Locked<[Entry]>([])

    func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }
    var all: [Entry] { entries.withLock { $0 } }
    var count: Int { entries.withLock { $0.count } }
}

/// Collects notices from a bus in the background.
final class NoticeLog: Sendable {
    let log = Log<BusNotice>()
    private let task: Task<Void, Never>

    init(_ bus: EventBus) {
        let stream = bus.notices()
        let log = log
        task = Task { for await notice in stream { log.append(notice) } }
    }

    func contains(_ predicate: (BusNotice) -> Bool) -> Bool { log.all.contains(where: predicate) }

    deinit { task.cancel() }
}

/// Drains `stream` in a task of its own, calling `body` with each element,
/// in order, until the task is cancelled or the stream ends: a handler with
/// no observer (the stream registers at once; cancelling the task ends it).
func drain<Element: Sendable>(_ stream: EventStream<Element>, _ body: @escaping @Sendable (Element) -> Void) -> Task<Void, Never> {
    Task {
        do {
            for try await element in stream { body(element) }
        } catch {}
    }
}
