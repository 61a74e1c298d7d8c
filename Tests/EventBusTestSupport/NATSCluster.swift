// A real nats-server cluster on 127.0.0.1 for tests (DESIGN-NOTES-1.1 A.4):
// N nodes (3 by default), each with its own client and route port, config
// file and log in one temporary directory; every node lists every route.
// Nodes can be killed, stopped and started again one by one. Also a raw
// line-level TCP client for looking at the wire (its reads: LineBuffer.swift).
//
// Before editing: a node never outlives its test: each is a `SpawnedProcess`,
// killed and reaped on deinit at the latest. Ports are drawn at random from
// 20000-31999, below Linux's ephemeral range (32768-60999), so that an
// outgoing connection of a parallel test cannot be holding the port a
// restarted node needs; each is checked free by binding it first. "Ready"
// means every running node answers on its client port and lists every
// running node in INFO's `connect_urls` (which it learns over the routes).
import Foundation
import Glibc

/// Why the cluster fixture failed; node logs attached.
package struct NATSClusterError: Error, CustomStringConvertible {
    package let description: String
}

/// A nats-server cluster of child processes.
package final class NATSCluster: @unchecked Sendable {
    /// Whether `nats-server` is installed (`scripts/deps` installs Debian's package).
    package static var isAvailable: Bool { findInPath("nats-server") != nil }

    /// The node count.
    package let count: Int
    /// Client ports, node 0 first.
    package let clientPorts: [UInt16]
    /// Route (cluster) ports.
    package let routePorts: [UInt16]
    /// The directory with `nK.conf` and the logs.
    package let directory: TemporaryDirectory
    private var processes: [SpawnedProcess?]
    private let lock = NSLock()

    /// Writes the configs and starts every node, then waits until the cluster is formed.
    /// - Parameters:
    ///   - count: nodes (1...9).
    ///   - jetStream: give each node a `jetstream { store_dir }` block.
    ///   - extraConfig: lines appended to every node's config (e.g. `max_payload: 4096`).
    ///   - readyTimeout: bound on forming the cluster.
    /// - Throws: `NATSClusterError` (with the logs) or `ChildProcessError`.
    package init(count: Int = 3, jetStream: Bool = false, extraConfig: String = "", readyTimeout: Duration = .seconds(20)) throws {
        precondition((1...9).contains(count))
        self.count = count
        directory = try TemporaryDirectory(prefix: "eb-nats-")
        var ports: [UInt16] = []
        while ports.count < 2 * count {
            let port = UInt16.random(in: 20000..<32000)
            if !ports.contains(port) && NATSCluster.isFree(port) { ports.append(port) }
        }
        clientPorts = Array(ports[0..<count])
        routePorts = Array(ports[count...])
        processes = Array(repeating: nil, count: count)
        let routes = routePorts.map { "nats-route://127.0.0.1:\($0)" }.joined(separator: ", ")
        for node in 0..<count {
            var config = """
            server_name: n\(node + 1)
            listen: 127.0.0.1:\(clientPorts[node])
            cluster {
              name: eb-test
              listen: 127.0.0.1:\(routePorts[node])
              routes: [ \(routes) ]
            }

            """
            if jetStream { config += "jetstream { store_dir: \"\(directory.file("js\(node + 1)"))\" }\n" }
            config += extraConfig + "\n"
            guard FileManager.default.createFile(atPath: configPath(node), contents: Data(config.utf8)) else {
                throw NATSClusterError(description: "cannot write \(configPath(node))")
            }
        }
        for node in 0..<count { try start(node, waitUntilReady: false) }
        try waitUntilReady(timeout: readyTimeout)
    }

    deinit {
        for process in processes { process?.send(signal: SIGKILL) }
    }

    /// `nats://127.0.0.1:<client port>` of `node`.
    package func url(_ node: Int) -> String { "nats://127.0.0.1:\(clientPorts[node])" }

    /// Every node's URL, comma-separated (`--nats` syntax).
    package var urls: String { (0..<count).map(url).joined(separator: ",") }

    private func configPath(_ node: Int) -> String { directory.file("n\(node + 1).conf") }
    private func logPath(_ node: Int) -> String { directory.file("n\(node + 1).log") }

    /// Whether `node` is running.
    package func isRunning(_ node: Int) -> Bool {
        lock.withLock { processes[node]?.isRunning ?? false }
    }

    /// Starts `node` (again) from its config; by default waits until the cluster has re-formed.
    /// - Throws: `NATSClusterError` when it is already running or does not become ready.
    package func start(_ node: Int, waitUntilReady wait: Bool = true, timeout: Duration = .seconds(20)) throws {
        try lock.withLock {
            if let process = processes[node], process.isRunning {
                throw NATSClusterError(description: "node \(node + 1) is already running")
            }
            processes[node] = try SpawnedProcess(
                "nats-server", ["-c", configPath(node)], in: directory,
                environment: withoutSystemdVariables(), stderrPath: logPath(node), mergeStderr: false
            )
        }
        if wait { try waitUntilReady(timeout: timeout) }
    }

    /// SIGKILLs `node` and reaps it (the kernel resets its connections at once).
    package func kill(_ node: Int) throws {
        let process = lock.withLock { processes[node] }
        process?.send(signal: SIGKILL)
        _ = try process?.waitBlocking(timeout: .seconds(10))
    }

    /// SIGTERMs `node` and waits for it to exit.
    package func stop(_ node: Int) throws {
        let process = lock.withLock { processes[node] }
        process?.send(signal: SIGTERM)
        _ = try process?.waitBlocking(timeout: .seconds(10))
    }

    /// Sends `signal` to `node` (e.g. SIGUSR2: lame duck mode).
    package func signal(_ node: Int, _ signal: Int32) {
        lock.withLock { processes[node] }?.send(signal: signal)
    }

    /// Kills every node.
    package func killAll() throws {
        for node in 0..<count { try kill(node) }
    }

    /// Starts every stopped node and waits for the cluster.
    package func startAll(timeout: Duration = .seconds(20)) throws {
        for node in 0..<count where !isRunning(node) { try start(node, waitUntilReady: false) }
        try waitUntilReady(timeout: timeout)
    }

    /// What `node` logged so far.
    package func log(_ node: Int) -> String { readTextFile(logPath(node)) }

    /// Waits until every running node answers and lists every running node's
    /// client URL in `connect_urls`.
    /// - Throws: `NATSClusterError` with what each node said and its log tail.
    package func waitUntilReady(timeout: Duration = .seconds(20)) throws {
        let deadline = ContinuousClock.now + timeout
        var last: [String] = []
        while true {
            let running = (0..<count).filter(isRunning)
            let expected = running.map { "\"127.0.0.1:\(clientPorts[$0])\"" }
            last = running.map { node in (try? NATSCluster.info(port: clientPorts[node])) ?? "(no answer)" }
            let formed = last.allSatisfy { info in
                guard let range = info.range(of: "\"connect_urls\":[") else { return running.count == 1 && info.hasPrefix("INFO") }
                let list = info[range.upperBound...].prefix { $0 != "]" }
                return expected.allSatisfy { list.contains($0) } && list.split(separator: ",").count == expected.count
            }
            if formed { return }
            if ContinuousClock.now > deadline {
                let report = running.enumerated().map { i, node in
                    "n\(node + 1): \(last[i].prefix(600))\n--- log ---\n\(log(node).suffix(1500))"
                }.joined(separator: "\n")
                throw NATSClusterError(description: "NATS cluster not formed within \(timeout)\n\(report)")
            }
            usleep(20_000)
        }
    }

    /// The INFO line a server on 127.0.0.1:`port` greets with.
    /// - Throws: `TestFailure` when it does not answer within 2 s.
    package static func info(port: UInt16) throws -> String {
        let client = try TCPLineClient(port: port)
        return try client.readLine(timeout: .seconds(2))
    }

    /// Whether 127.0.0.1:`port` can be bound now.
    static func isFree(_ port: UInt16) -> Bool {
        let stream = Int32(SOCK_STREAM.rawValue)
        guard let fd = try? openSocket(AF_INET, stream, loopback(port), "bind", "127.0.0.1:\(port)", bind) else { return false }
        Glibc.close(fd)
        return true
    }
}

/// `sockaddr_in` for 127.0.0.1:`port`.
func loopback(_ port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return address
}

/// A TCP client to 127.0.0.1 for raw protocol checks: sends bytes, reads
/// CRLF-terminated lines and exact byte counts, every read with a deadline.
/// Closed on deinit.
package final class TCPLineClient {
    /// The connected socket (close-on-exec, blocking).
    package let fd: Int32
    private var input: LineBuffer

    /// Connects to 127.0.0.1:`port`.
    /// - Throws: `TestFailure` when socket(2) or connect(2) fails.
    package init(port: UInt16) throws {
        fd = try openSocket(AF_INET, Int32(SOCK_STREAM.rawValue), loopback(port), "connect", "127.0.0.1:\(port)", connect)
        input = LineBuffer(fd: fd)
    }

    deinit { Glibc.close(fd) }

    /// Sends `text` as UTF-8.
    package func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Sends `bytes` in full (`MSG_NOSIGNAL`).
    /// - Throws: `TestFailure` on a failed send.
    package func send(_ bytes: [UInt8]) throws { try input.send(bytes) }

    /// The next line without its CRLF.
    /// - Throws: `TestFailure` on EOF or after `timeout`.
    package func readLine(timeout: Duration = .seconds(5)) throws -> String {
        try input.line(until: ContinuousClock.now + timeout, droppingCR: true)
    }

    /// Exactly `count` bytes.
    package func readBytes(_ count: Int, timeout: Duration = .seconds(5)) throws -> [UInt8] {
        try input.take(count, until: ContinuousClock.now + timeout)
    }

    /// Lines until one satisfies `match`, answering `PING` with `PONG` on the way.
    /// - Returns: the matching line and the lines skipped before it.
    package func readLine(until match: (String) -> Bool, timeout: Duration = .seconds(5)) throws -> (line: String, skipped: [String]) {
        let deadline = ContinuousClock.now + timeout
        var skipped: [String] = []
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw TestFailure("no matching line in time; skipped \(skipped)") }
            let line = try readLine(timeout: left)
            if match(line) { return (line, skipped) }
            if line == "PING" { try send("PONG\r\n") }
            skipped.append(line)
        }
    }
}
