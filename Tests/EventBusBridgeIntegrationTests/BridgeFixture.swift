// Fixtures of the bridge's end-to-end tests: a running `eventbus-bridge`
// (its status file read back as JSON), two buses A and B bridged through a
// NATS cluster on 127.0.0.1, a raw NATS subscriber, and the settling helpers.
//
// Before editing: interest takes a moment to cross NATS routes, so a path is
// "ready" only once a probe event published on one bus has arrived on the
// other (`warmUp`); absence is asserted only after a sentinel that travelled
// the same path. Every process is stopped on every path out of a test
// (`withBridgedBuses`), and a failure carries the bridges' logs.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// The two ways to run the link (docs/BRIDGE.md "Running it"): an
/// `eventbus-bridge` process beside the broker, or inside `eventbusd`
/// (`--bridge FILE`). Every scenario of this target runs both ways.
enum BridgeMode: String, CaseIterable, CustomStringConvertible, Sendable {
    case process
    case inBroker

    var description: String { rawValue }
}

/// One link to NATS: an `eventbus-bridge` child, logging to a file, or an
/// `eventbusd` running the link inside (`broker`), with its status file.
final class BridgeProcess {
    let node: String
    let statusPath: String
    let arguments: [String]
    private let child: SpawnedProcess?
    /// In `.inBroker` mode: the broker that runs the link.
    let broker: BrokerProcess?

    /// Starts `eventbus-bridge --socket SOCKET --nats NATS --node NODE --status-file ...`
    /// with fast reconnects and `extra` arguments (default: export and import `>`).
    /// - Parameter uid: run it as this uid and gid (`setpriv`; the status file
    ///   then goes to a world-writable directory inside `directory`).
    init(socket: String, nats: String, node: String, in directory: TemporaryDirectory,
         extra: [String] = ["--export", ">", "--import", ">"], uid: UInt32? = nil) throws {
        self.node = node
        var statusDirectory = directory.path
        if uid != nil {
            statusDirectory = directory.file("status-\(node)")
            guard mkdir(statusDirectory, 0o777) == 0, chmod(statusDirectory, 0o777) == 0, chmod(directory.path, 0o755) == 0 else {
                throw TestFailure("cannot make \(statusDirectory)")
            }
        }
        statusPath = statusDirectory + "/\(node)-\(UInt32.random(in: 0...UInt32.max)).json"
        arguments = ["--socket", socket, "--nats", nats, "--node", node, "--status-file", statusPath,
                     "--reconnect-initial", "20ms", "--reconnect-max", "200ms", "--log-level", "debug"] + extra
        let executable = try builtProduct("eventbus-bridge")
        if let uid {
            child = try SpawnedProcess("setpriv", ["--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups", executable] + arguments,
                                       in: directory, environment: withoutSystemdVariables(), mergeStderr: true)
        } else {
            child = try SpawnedProcess(executable, arguments, in: directory, environment: withoutSystemdVariables(), mergeStderr: true)
        }
        broker = nil
    }

    /// Starts `eventbusd --bridge FILE` (plus `brokerArguments`), FILE holding
    /// the settings the process form takes as flags (`extra` as `key = value`
    /// lines), the link's connection that of `bridgeUser` when given.
    init(inBrokerAt socketPath: String? = nil, brokerArguments: [String] = [], nats: String, node: String, in directory: TemporaryDirectory,
         extra: [String] = ["--export", ">", "--import", ">"], bridgeUser: UInt32? = nil) throws {
        self.node = node
        statusPath = directory.path + "/\(node)-\(UInt32.random(in: 0...UInt32.max)).json"
        arguments = ["--nats", nats, "--node", node, "--status-file", statusPath, "--reconnect-initial", "20ms", "--reconnect-max", "200ms"] + extra
        var lines: [String] = []
        var index = 0
        while index + 1 < arguments.count {
            lines.append("\(arguments[index].dropFirst(2)) = \(arguments[index + 1])")
            index += 2
        }
        let file = directory.file("bridge-\(node)-\(UInt32.random(in: 0...UInt32.max)).conf")
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        var brokerArguments = brokerArguments + ["--bridge", file, "--log-level", "debug"]
        if let bridgeUser { brokerArguments += ["--bridge-user", "\(bridgeUser)"] }
        broker = try BrokerProcess(arguments: brokerArguments, socketPath: socketPath)
        child = nil
    }

    /// Starts a link of `mode` on `broker` (`.process`), or a broker of its own
    /// running the link (`.inBroker`, `broker` then only gives the socket path
    /// and must not be running).
    static func start(_ mode: BridgeMode, socket: String?, brokerArguments: [String] = [], nats: String, node: String,
                      in directory: TemporaryDirectory, extra: [String] = ["--export", ">", "--import", ">"]) throws -> BridgeProcess {
        switch mode {
        case .process: try BridgeProcess(socket: socket!, nats: nats, node: node, in: directory, extra: extra)
        case .inBroker: try BridgeProcess(inBrokerAt: socket, brokerArguments: brokerArguments, nats: nats, node: node, in: directory, extra: extra)
        }
    }

    /// The process that runs the link (the bridge's, or the broker's).
    var pid: pid_t { child?.pid ?? broker!.pid }

    /// Whether that process still runs.
    var isRunning: Bool { child?.isRunning ?? (broker!.reapIfExited() == nil) }

    func send(signal: Int32) {
        if let child { child.send(signal: signal) } else { broker!.send(signal: signal) }
    }

    /// Kills it (SIGKILL) and, in `.inBroker` mode, cleans its broker up.
    func kill() {
        if let child { child.send(signal: SIGKILL) } else { broker!.cleanUp() }
    }

    /// Everything it logged so far.
    var log: String { child?.stdoutSoFar() ?? broker!.stderrText() }

    /// The status file's JSON, nil before the first write.
    func status() -> [String: Any]? {
        guard let data = FileManager.default.contents(atPath: statusPath), !data.isEmpty else { return nil }
        return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    }

    /// An integer of the status (`"exported"`), or of its `dropped` object (`"dropped.too_large"`).
    func counter(_ name: String) -> Int? {
        guard let status = status() else { return nil }
        if name.hasPrefix("dropped.") {
            return ((status["dropped"] as? [String: Any])?[String(name.dropFirst(8))] as? NSNumber)?.intValue
        }
        return (status[name] as? NSNumber)?.intValue
    }

    /// Waits (status file polls) until `condition` holds for the status.
    /// - Throws: `TestFailure` with the last status and the log.
    func waitForStatus(_ what: String, timeout: Duration = .seconds(20), _ condition: ([String: Any]) -> Bool) throws {
        do {
            try waitUntil("bridge \(node): \(what)", timeout: timeout) {
                guard isRunning else { throw TestFailure("bridge \(node) exited") }
                return status().map(condition) ?? false
            }
        } catch {
            throw TestFailure("\(error)\nlast status: \(String(describing: status()))\n--- bridge \(node) log ---\n\(log.suffix(3000))")
        }
    }

    /// The status once the bridge has rewritten its file after this call (it does every second).
    func freshStatus(timeout: Duration = .seconds(10)) throws -> [String: Any] {
        let before = status()?["updated"] as? String
        var fresh: [String: Any] = [:]
        try waitForStatus("a status written after now", timeout: timeout) { status in
            guard let updated = status["updated"] as? String, updated != before else { return false }
            fresh = status
            return true
        }
        return fresh
    }

    /// Waits until both links are up.
    func waitUntilConnected(timeout: Duration = .seconds(20)) throws {
        try waitForStatus("bus and NATS up", timeout: timeout) { $0["bus"] as? String == "up" && $0["link"] as? String == "up" }
    }

    /// SIGTERM; the bridge (or its broker) must exit 0 and remove its status file.
    func stop() throws {
        if let child {
            child.send(signal: SIGTERM)
            let output = try child.waitBlocking(timeout: .seconds(10))
            guard output.status == .exited(0) else { throw TestFailure("bridge \(node) ended with \(output.status)\n\(log.suffix(3000))") }
        } else {
            let status = broker!.terminate(timeout: .seconds(10))
            guard status == .exited(0) else { throw TestFailure("broker of bridge \(node) ended with \(status)\n\(log.suffix(3000))") }
        }
        guard !FileManager.default.fileExists(atPath: statusPath) else { throw TestFailure("bridge \(node) left its status file") }
    }
}

/// Two brokers, A and B, bridged by `bridgeA` (to node 1) and `bridgeB` (to
/// node 3): `eventbus-bridge` processes, or links inside the brokers (`mode`).
final class BridgedBuses {
    let mode: BridgeMode
    let directory: TemporaryDirectory
    let cluster: NATSCluster
    let a: BrokerProcess
    let b: BrokerProcess
    var bridges: [BridgeProcess] = []
    var bridgeA: BridgeProcess { bridges[0] }
    var bridgeB: BridgeProcess { bridges[1] }

    /// - Parameters:
    ///   - natsConfig: lines for every node's config (e.g. `max_payload: 65536`).
    ///   - natsA: bridge A's `--nats` (default node 1 only: failover comes from `connect_urls`).
    ///   - extraA, extraB: more arguments for each bridge.
    ///   - brokerB: more arguments for broker B (e.g. `--max-outbound 64K`).
    init(_ mode: BridgeMode, natsConfig: String = "", natsA: String? = nil, extraA: [String] = [], extraB: [String] = [], brokerB: [String] = []) throws {
        self.mode = mode
        directory = try TemporaryDirectory(prefix: "ebbr-")
        cluster = try NATSCluster(count: 3, extraConfig: natsConfig)
        let both = ["--export", ">", "--import", ">"]
        switch mode {
        case .process:
            a = try BrokerProcess()
            b = try BrokerProcess(arguments: brokerB)
            bridges.append(try BridgeProcess(socket: a.socketPath, nats: natsA ?? cluster.url(0), node: "a", in: directory, extra: both + extraA))
            bridges.append(try BridgeProcess(socket: b.socketPath, nats: cluster.url(2), node: "b", in: directory, extra: both + extraB))
        case .inBroker:
            bridges.append(try BridgeProcess(nats: natsA ?? cluster.url(0), node: "a", in: directory, extra: both + extraA))
            bridges.append(try BridgeProcess(brokerArguments: brokerB, nats: cluster.url(2), node: "b", in: directory, extra: both + extraB))
            a = bridges[0].broker!
            b = bridges[1].broker!
        }
        for bridge in bridges { try bridge.waitUntilConnected() }
        try warmUp(from: a, to: b)
        try warmUp(from: b, to: a)
    }

    /// Adds a bridge on `broker` (e.g. a second pair) and waits for its links.
    @discardableResult
    func addBridge(on broker: BrokerProcess, node: String, nats: String, extra: [String] = ["--export", ">", "--import", ">"]) throws -> BridgeProcess {
        let bridge = try BridgeProcess(socket: broker.socketPath, nats: nats, node: node, in: directory, extra: extra)
        bridges.append(bridge)
        try bridge.waitUntilConnected()
        return bridge
    }

    /// Publishes `probe.warmup` on `from` until a subscriber on `to` gets one:
    /// every subscription on the path is then in place.
    func warmUp(from: BrokerProcess, to: BrokerProcess, type: String = "probe.warmup") throws {
        let watcher = try to.connect()
        try watcher.subscribe(type)
        let publisher = try from.connect()
        try untilArrived("\(type) to cross the bridges") {
            try publisher.publish(type)
            return (try? watcher.readFrame(timeout: .milliseconds(200)))?.type == type
        }
        watcher.close()
        publisher.close()
    }

    /// Every bridge's log, for a failure message.
    var logs: String {
        bridges.map { "--- bridge \($0.node) (\($0.isRunning ? "running" : "exited"), \(mode)) ---\n\($0.log.suffix(2500))" }.joined(separator: "\n")
    }

    /// Stops the bridges (each must exit 0), then the brokers and the cluster.
    func finish() throws {
        defer {
            for bridge in bridges { bridge.kill() }
            a.cleanUp()
            b.cleanUp()
            try? cluster.killAll()
            directory.remove()
        }
        for bridge in bridges where bridge.isRunning { try bridge.stop() }
    }
}

/// Runs `body` with fresh bridged buses; always stops everything; a failure carries the bridges' logs.
func withBridgedBuses(_ mode: BridgeMode, natsConfig: String = "", natsA: String? = nil, extraA: [String] = [], extraB: [String] = [],
                      brokerB: [String] = [], _ body: (BridgedBuses) throws -> Void) throws {
    let buses = try BridgedBuses(mode, natsConfig: natsConfig, natsA: natsA, extraA: extraA, extraB: extraB, brokerB: brokerB)
    do {
        try body(buses)
    } catch {
        let logs = buses.logs
        try? buses.finish()
        throw TestFailure("\(error)\n\(logs)")
    }
    try buses.finish()
}

/// Repeats `attempt` (which publishes once and waits a little for the result)
/// until it returns true, for at most `timeout`.
func untilArrived(_ what: String, timeout: Duration = .seconds(20), _ attempt: () throws -> Bool) throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try attempt() { return }
    }
    throw TestFailure("timed out after \(timeout) waiting for \(what)")
}

/// A raw NATS subscriber (text protocol, headers on), for looking at what the bridges put on the wire.
final class NATSWatcher {
    let client: TCPLineClient

    /// One HMSG/MSG: subject, header block (raw text) and payload.
    struct Received {
        var subject: String
        var headers: String
        var payload: [UInt8]

        /// The first value of header `name` (as written on the wire: percent-encoded).
        func header(_ name: String) -> String? {
            for line in headers.split(separator: "\r\n") where line.lowercased().hasPrefix(name.lowercased() + ":") {
                return String(line.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces)
            }
            return nil
        }
    }

    /// Connects to 127.0.0.1:`port` and subscribes to `subject`.
    init(port: UInt16, subject: String) throws {
        client = try TCPLineClient(port: port)
        _ = try client.readLine()  // INFO
        try client.send("CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"protocol\":1,\"name\":\"test watcher\"}\r\nSUB \(subject) 1\r\nPING\r\n")
        _ = try client.readLine(until: { $0 == "PONG" })
    }

    /// Publishes a raw message (`PUB subject n`) from this connection.
    func publish(_ subject: String, _ payload: String) throws {
        try client.send("PUB \(subject) \(payload.utf8.count)\r\n\(payload)\r\n")
    }

    /// The next message (PINGs answered on the way).
    func next(timeout: Duration = .seconds(10)) throws -> Received {
        let (line, _) = try client.readLine(until: { $0.hasPrefix("HMSG ") || $0.hasPrefix("MSG ") }, timeout: timeout)
        let fields = line.split(separator: " ")
        let total = Int(fields.last!)!
        let headerBytes = line.hasPrefix("HMSG ") ? Int(fields[fields.count - 2])! : 0
        let body = try client.readBytes(total + 2, timeout: timeout)
        return Received(subject: String(fields[1]), headers: String(decoding: body[0..<headerBytes], as: UTF8.self),
                        payload: Array(body[headerBytes..<total]))
    }

    /// The next message whose subject satisfies `match`, skipping others.
    func next(where match: (String) -> Bool, timeout: Duration = .seconds(10)) throws -> Received {
        let deadline = ContinuousClock.now + timeout
        while true {
            let message = try next(timeout: max(deadline - ContinuousClock.now, .milliseconds(1)))
            if match(message.subject) { return message }
        }
    }
}

extension RawClient {
    /// Publishes `type` with `data` (JSON text) and optional `source`, requiring `ok`.
    @discardableResult
    func publish(_ type: String, data: String = "null", source: String? = nil, req: Int = 1) throws -> Frame {
        var frame = #"{"op":"publish","type":"\#(type)","req":\#(req),"data":\#(data)"#
        if let source { frame += #","source":"# + jsonString(source) }
        let reply = try request(frame + "}")
        guard reply.op == "ok" else { throw TestFailure("publish \(type) failed: \(reply.raw)") }
        return reply
    }

    /// Subscribes to each pattern, requiring `ok`s.
    func subscribe(_ patterns: String...) throws {
        for pattern in patterns {
            let reply = try request(#"{"op":"subscribe","type":"\#(pattern)","req":"sub"}"#)
            guard reply.op == "ok" else { throw TestFailure("subscribe \(pattern) failed: \(reply.raw)") }
        }
    }

    /// The broker's `published` counter.
    func published() throws -> Int { try stats().int("published") ?? -1 }
}

/// `text` as a JSON string literal.
func jsonString(_ text: String) -> String {
    String(decoding: try! JSONSerialization.data(withJSONObject: text, options: [.fragmentsAllowed]), as: UTF8.self)
}
