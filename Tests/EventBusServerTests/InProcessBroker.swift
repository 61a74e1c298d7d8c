// A `BrokerServer` run in this test process, on a thread of its own, whose
// clients are socketpairs handed to it with made-up credentials
// (`ConnectionHandoff`, BrokerServer+Handoff.swift): the per-uid rules
// (policy, quotas, the fair-share scheduler) run as they do in eventbusd,
// without root, setpriv or another process. The test drives each client end
// with an ordinary `RawClient`.
//
// Before editing: the server's signalfd blocks SIGTERM/SIGINT/SIGHUP for the
// server's thread only (SignalDescriptor.swift), so `stop` sends SIGTERM to
// that thread (pthread_kill), never to the process. The broker is made to
// believe it runs as uid 0 (`ownCredentials`), as the system bus does, so
// fake uid 0 is root for the rules whoever runs the tests. No listening
// socket and no files: nothing here needs a writable directory.
import EventBusCore
import EventBusLog
import EventBusPolicy
import EventBusScenarios
import EventBusServer
import EventBusSystem
import EventBusTestSupport
import Foundation
import Glibc
import Synchronization

/// The server's log lines, kept for assertions and for a failing test's message.
final class LogLines: LogSink {
    private let lines = Mutex<[String]>([])

    func write(level: LogLevel, message: String, fields: [(String, String)]) {
        lines.withLock { $0.append("\(level.name): \(message)") }
    }

    var all: [String] { lines.withLock { $0 } }
}

/// What the server thread and the test share.
private final class ServerThreadState: Sendable {
    /// Whether the server was made: its handoff and thread, or why not.
    let made = Mutex<Result<(ConnectionHandoff, pthread_t), any Error>?>(nil)
    let madeSignal = DispatchSemaphore(value: 0)
    /// Lets the loop run.
    let go = DispatchSemaphore(value: 0)
    /// How `run` ended.
    let exit = Mutex<String?>(nil)
    let finished = DispatchSemaphore(value: 0)
}

/// A broker server on a thread of this process.
final class InProcessBroker: Sendable {
    let log = LogLines()
    let handoff: ConnectionHandoff
    private let thread: pthread_t
    private let state = ServerThreadState()
    private let clients = Mutex(0)

    /// The path a policy given as text is said to come from, in messages.
    static let policyPath = "/test/policy.conf"

    /// Makes the server (its thread waits until `start`).
    /// - Parameters:
    ///   - policy: the text of a policy file (`policyPath`); nil: no policy file.
    ///   - policyFile: a policy file read at start and again on `reload`.
    ///   - configure: changes to the defaults of `ServerConfiguration`.
    ///   - prepare: called with the server on its thread before it runs (e.g. `attach`).
    init(policy: String? = nil, policyFile: String? = nil, configure: (inout ServerConfiguration) throws -> Void = { _ in },
         prepare: @escaping @Sendable (BrokerServer) -> Void = { _ in }) throws {
        var configuration = ServerConfiguration()
        configuration.broker.ownCredentials = Credentials(pid: getpid(), uid: 0, gid: 0)
        configuration.shutdownFlushNanoseconds = 500_000_000
        if let policy {
            configuration.broker.policy = try AccessPolicy.load(
                [PolicySource(path: InProcessBroker.policyPath, text: policy)], resolver: SystemNameResolver(), brokerUID: 0)
        }
        if let policyFile {
            configuration.policyFiles = .explicit([policyFile])
            configuration.broker.policy = try configuration.policyFiles.load(brokerUID: 0).get()
        }
        try configure(&configuration)
        let (state, sink) = (self.state, log)
        let thread = Thread { [configuration] in
            defer { state.finished.signal() }
            let server: BrokerServer
            do {
                server = try BrokerServer(configuration: configuration, listeners: [], instance: "in-process",
                                          logger: Logger(level: .debug, sink: sink))
            } catch {
                state.made.withLock { $0 = .failure(error) }
                state.madeSignal.signal()
                return
            }
            prepare(server)
            state.made.withLock { $0 = .success((server.handoff, pthread_self())) }
            state.madeSignal.signal()
            state.go.wait()
            do {
                let reason = try server.run()
                state.exit.withLock { $0 = "\(reason)" }
            } catch {
                state.exit.withLock { $0 = "run failed: \(error)" }
            }
        }
        thread.start()
        state.madeSignal.wait()
        switch state.made.withLock({ $0 })! {
        case .failure(let error):
            throw TestFailure("the server could not be made: \(error)")
        case .success(let (handoff, thread)):
            self.handoff = handoff
            self.thread = thread
        }
    }

    /// Lets the server's loop run (connections handed before wait in its queue).
    func start() { state.go.signal() }

    /// A client whose connection the broker sees as `uid`'s, with primary
    /// group `gid` (default `uid`) and `groups` as supplementary groups.
    /// Handed before `start`, it is admitted when the loop begins.
    func connect(uid: UInt32, gid: UInt32? = nil, groups: [UInt32] = []) throws -> RawClient {
        let n = clients.withLock { $0 += 1; return $0 }
        let fd = try handoff.connect(pid: getpid(), uid: uid, gid: gid ?? uid, groups: groups)
        return RawClient(adopting: fd.rawValue, path: "handed connection \(n) (uid \(uid))")
    }

    /// `count` clients of `uid`.
    func connect(uid: UInt32, count: Int) throws -> [RawClient] {
        try (0..<count).map { _ in try connect(uid: uid) }
    }

    /// Reads the policy files again (SIGHUP to the loop's thread).
    func reload() { pthread_kill(thread, SIGHUP) }

    /// Stops the loop (SIGTERM to its thread: a graceful stop) and waits for it.
    /// - Returns: how `run` ended (`idle` after a graceful stop by signal is `signal(15)`).
    @discardableResult
    func stop() throws -> String {
        state.go.signal()
        pthread_kill(thread, SIGTERM)
        guard state.finished.wait(timeout: .now() + 60) == .success else { throw TestFailure("the server did not stop within 60 s") }
        return state.exit.withLock { $0 } ?? "no exit"
    }
}

/// Runs `body` with an in-process broker (started, unless `started` is false:
/// then `body` starts it), stops it after; a failure carries the server's log.
func withServer<T>(
    policy: String? = nil, policyFile: String? = nil, started: Bool = true, configure: (inout ServerConfiguration) throws -> Void = { _ in },
    prepare: @escaping @Sendable (BrokerServer) -> Void = { _ in }, _ body: (InProcessBroker) throws -> T
) throws -> T {
    let broker = try InProcessBroker(policy: policy, policyFile: policyFile, configure: configure, prepare: prepare)
    if started { broker.start() }
    let value: T
    do {
        value = try body(broker)
    } catch {
        _ = try? broker.stop()
        throw TestFailure("\(error)\n--- server log ---\n\(broker.log.all.joined(separator: "\n"))")
    }
    let exit = try broker.stop()
    guard exit == "signal(15)" else { throw TestFailure("the server ended with \(exit), not the SIGTERM it was sent") }
    return value
}
