// Test fixtures for the client's integration tests: a real `eventbusd` on a
// short temporary socket path, child processes built from this package
// (the Examples), and bounded polling.
//
// Before editing: every wait here is bounded, every child is killed and
// reaped by the test that started it (or by deinit), and each broker gets its
// own directory so tests can run in parallel.
@testable import EventBusClient
import Foundation
import Synchronization
import Testing

/// Built products of this build (`.build/<triple>/debug`): the folder of the
/// running test executable.
enum Products {
    static let directory: URL = {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent()
    }()

    static func url(_ name: String) -> URL { directory.appendingPathComponent(name) }
}

/// Polls `condition` every 10 ms until it holds or `limit` passes.
/// - Returns: whether it held.
func eventually(within limit: Duration = .seconds(10), isolation: isolated (any Actor)? = #isolation, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    while clock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}

/// A running `eventbusd --socket <dir>/bus.sock`, stopped and reaped on `stop()` or deinit.
final class BrokerProcess {
    let directory: URL
    let socketPath: String
    private var process: Process?

    /// Starts a broker on a new temporary path and waits until it answers `ping`.
    /// - Parameter arguments: extra options, e.g. `["--max-outbound", "64K"]`.
    init(arguments: [String] = []) async throws {
        let name = "ebc-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        directory = URL(fileURLWithPath: "/tmp").appendingPathComponent(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        socketPath = directory.appendingPathComponent("bus.sock").path
        self.arguments = arguments
        try await start()
    }

    private let arguments: [String]

    /// Starts (or restarts) the broker on the same path; returns once it answers `ping`.
    func start() async throws {
        precondition(process == nil, "broker already running")
        let process = Process()
        process.executableURL = Products.url("eventbusd")
        process.arguments = ["--socket", socketPath, "--log-level", "warning"] + arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        self.process = process
        let ready = await eventually {
            guard let bus = try? await EventBus.connect(EventBus.Configuration(bus: .path(socketPath), clientName: "fixture", reconnect: .never)) else { return false }
            defer { bus.close() }
            return (try? await bus.ping()) != nil
        }
        guard ready else { throw FixtureError("eventbusd did not answer ping on \(socketPath)") }
    }

    /// SIGTERM (a clean stop: the broker unlinks its socket), then reap; SIGKILL after 5 s.
    func stop() async {
        guard let process else { return }
        self.process = nil
        process.terminate()
        if !(await eventually(within: .seconds(5)) { !process.isRunning }) {
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
    }

    deinit {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// A child process built from this package, its stdout collected line by line.
final class ChildProcess: Sendable {
    let name: String
    private let process: Process
    private let output = Locked<String>("")
    private let errors = Locked<String>("")

    /// Starts product `name` with `arguments`.
    init(_ name: String, _ arguments: [String]) throws {
        self.name = name
        let process = Process()
        process.executableURL = Products.url(name)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        self.process = process
        try process.run()
        for (pipe, isOutput) in [(out, true), (err, false)] {
            let handle = pipe.fileHandleForReading
            let thread = Thread { [self] in
                while true {
                    let data = handle.availableData
                    if data.isEmpty { break }
                    let text = String(decoding: data, as: UTF8.self)
                    if isOutput { self.output.withLock { $0 += text } } else { self.errors.withLock { $0 += text } }
                }
                self.readersDone.add(1, ordering: .releasing)
            }
            thread.start()
        }
    }

    /// Pipe readers that saw EOF (2 when all output is in).
    private let readersDone = Atomic<Int>(0)

    var stdout: String { output.withLock { $0 } }
    var stderr: String { errors.withLock { $0 } }

    /// Waits until stdout has a line equal to `line`.
    func waitForLine(_ line: String, within limit: Duration = .seconds(10)) async -> Bool {
        await eventually(within: limit) { stdout.split(separator: "\n").contains { $0 == line } }
    }

    /// Waits for the exit status; kills the child if it outlives `limit`.
    /// - Returns: the status, or nil when it had to be killed.
    func waitForExit(within limit: Duration = .seconds(10)) async -> Int32? {
        let exited = await eventually(within: limit) { !process.isRunning }
        if !exited { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        _ = await eventually(within: .seconds(5)) { readersDone.load(ordering: .acquiring) == 2 }
        return exited ? process.terminationStatus : nil
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
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

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
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
