// PROTOCOL.md, Transport: socket path choice, the path rules of a broker
// started by hand, socket modes, clean exit; plus the broker's command line.
//
// Before editing: each test owns its temporary directory; none touches
// /run/eventbus or the real user bus.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Transport")
struct TransportTests {
    @Test("Started by hand, the broker creates the socket's parent directory with mode 0755")
    func brokerCreatesTheParentDirectoryWithMode0755() throws {
        let tmp = try TemporaryDirectory()
        let parent = tmp.path + "/run"
        let broker = try BrokerProcess(socketPath: parent + "/s")
        defer { broker.cleanUp() }
        let mode = try #require(fileMode(parent))
        #expect(mode.isDirectory)
        #expect(mode.permissions == 0o755, "parent mode is \(String(mode.permissions, radix: 8))")
        #expect(broker.terminate() == .exited(0))
    }

    @Test("The socket is bound with mode 0666 by default")
    func socketIsBoundWithMode0666ByDefault() throws {
        try withBroker { broker in
            let mode = try #require(fileMode(broker.socketPath))
            #expect(mode.isSocket)
            #expect(mode.permissions == 0o666, "socket mode is \(String(mode.permissions, radix: 8))")
        }
    }

    @Test("--mode sets the socket's mode")
    func modeFlagSetsTheSocketMode() throws {
        try withBroker(["--mode", "0600"]) { broker in
            let mode = try #require(fileMode(broker.socketPath))
            #expect(mode.isSocket)
            #expect(mode.permissions == 0o600, "socket mode is \(String(mode.permissions, radix: 8))")
        }
    }

    @Test("Directory 0755 and socket 0666 hold even under umask 077")
    func modesDoNotDependOnTheUmask() throws {
        let tmp = try TemporaryDirectory()
        let parent = tmp.path + "/run"
        let broker = try BrokerProcess(socketPath: parent + "/s", shellPrefix: "umask 077")
        defer { broker.cleanUp() }
        let dir = try #require(fileMode(parent))
        let socket = try #require(fileMode(parent + "/s"))
        #expect(dir.permissions == 0o755, "parent mode is \(String(dir.permissions, radix: 8))")
        #expect(socket.permissions == 0o666, "socket mode is \(String(socket.permissions, radix: 8))")
        #expect(broker.terminate() == .exited(0))
    }

    @Test("The broker refuses to start when a live broker answers on the path, and leaves it alone")
    func brokerRefusesToStartWhenALiveBrokerAnswers() throws {
        try withBroker { live in
            let second = try BrokerProcess(socketPath: live.socketPath, waitUntilReady: false)
            defer { second.cleanUp() }
            let status = try #require(second.waitForExit(timeout: .seconds(10)), "second broker still running after 10 s")
            #expect(status != .exited(0), "second broker: \(status)")
            #expect(!second.stderrText().isEmpty, "a refusing broker should say why on stderr")
            // The live broker's socket is still there and still answers.
            #expect(fileMode(live.socketPath)?.isSocket == true)
            let client = try live.connect()
            try client.ok(#"{"op":"ping","req":"still-here"}"#)
        }
    }

    @Test("A stale socket file (connect gives ECONNREFUSED) is replaced")
    func brokerReplacesAStaleSocketFile() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.path + "/s"
        try makeStaleSocket(path)
        do {
            _ = try RawClient(path: path, timeout: .seconds(1))
            Issue.record("connect to the stale socket succeeded")
        } catch let error as RawClientError {
            #expect(error.errno == ECONNREFUSED, "\(error)")
        }
        let broker = try BrokerProcess(socketPath: path)
        defer { broker.cleanUp() }
        try broker.connect().ok(#"{"op":"ping","req":1}"#)
        #expect(broker.terminate() == .exited(0))
    }

    @Test("The broker never removes something at the path that is not a socket", arguments: ["file", "directory"])
    func brokerNeverRemovesANonSocket(kind: String) throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.path + "/s"
        if kind == "file" {
            #expect(FileManager.default.createFile(atPath: path, contents: Data("keep me\n".utf8)))
        } else {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            #expect(FileManager.default.createFile(atPath: path + "/inside", contents: Data("keep me\n".utf8)))
        }
        let broker = try BrokerProcess(socketPath: path, waitUntilReady: false)
        defer { broker.cleanUp() }
        let status = try #require(broker.waitForExit(timeout: .seconds(10)), "broker still running after 10 s")
        #expect(status != .exited(0), "broker over a \(kind): \(status)")
        let kept = kind == "file" ? path : path + "/inside"
        #expect(FileManager.default.contents(atPath: kept) == Data("keep me\n".utf8))
    }

    @Test("A clean exit on SIGTERM or SIGINT has status 0 and unlinks the socket", arguments: [SIGTERM, SIGINT])
    func cleanExitUnlinksTheSocket(signal: Int32) throws {
        try withBroker(expectCleanExit: false) { broker in
            let client = try broker.connect()
            try client.ok(#"{"op":"subscribe","type":"a.b","req":1}"#)
            #expect(broker.terminate(signal: signal) == .exited(0))
            #expect(!broker.neededSIGKILL)
            #expect(!pathExists(broker.socketPath), "socket file still at \(broker.socketPath)")
        }
    }

    @Test("SIGTERM flushes what is queued for subscribers before the broker exits")
    func sigtermFlushesQueuedEvents() throws {
        try withBroker(expectCleanExit: false) { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("flush.>")
            let publisher = try broker.connect()
            // 2 MiB: well past the kernel's socket buffers, under the 8 MiB outbound limit.
            let receipts = try publisher.publishMany("flush.x", count: 256, padding: 8 * 1024)
            #expect(receipts.allSatisfy { $0.delivered == 1 })
            broker.send(signal: SIGTERM)
            let frames = try subscriber.readUntilEOF(timeout: .seconds(15))
            #expect(frames.allSatisfy { $0.op == "event" })
            #expect(frames.compactMap(\.seq) == receipts.map(\.seq), "received \(frames.count) of \(receipts.count)")
            #expect(broker.terminate() == .exited(0))
        }
    }

    @Test("$EVENTBUS_SOCKET names the path when no flag is given")
    func eventbusSocketVariableNamesThePath() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.path + "/env.sock"
        let broker = try BrokerProcess(socketPath: path, passSocketFlag: false, environment: ["EVENTBUS_SOCKET": path])
        defer { broker.cleanUp() }
        #expect(fileMode(path)?.isSocket == true)
        #expect(broker.terminate() == .exited(0))
    }

    @Test("--socket wins over $EVENTBUS_SOCKET")
    func socketFlagWinsOverTheVariable() throws {
        let tmp = try TemporaryDirectory()
        let other = tmp.path + "/other.sock"
        try withBroker(environment: ["EVENTBUS_SOCKET": other]) { broker in
            #expect(fileMode(broker.socketPath)?.isSocket == true)
            #expect(!pathExists(other))
        }
    }

    @Test("--user listens on $XDG_RUNTIME_DIR/eventbus/bus.sock")
    func userFlagUsesTheRuntimeDirectory() throws {
        let runtime = try TemporaryDirectory()
        let path = runtime.path + "/eventbus/bus.sock"
        let broker = try BrokerProcess(
            arguments: ["--user"], socketPath: path, passSocketFlag: false,
            environment: ["XDG_RUNTIME_DIR": runtime.path, "EVENTBUS_SOCKET": nil]
        )
        defer { broker.cleanUp() }
        #expect(fileMode(path)?.isSocket == true)
        #expect(broker.terminate() == .exited(0))
    }

    @Test("--help and --version print to stdout and exit 0; an unknown flag exits non-zero")
    func commandLineHelpVersionAndUnknownFlag() throws {
        let eventbusd = try builtProduct("eventbusd")
        let help = try runProcess(eventbusd, ["--help"], timeout: .seconds(10))
        #expect(help.status == .exited(0))
        #expect(help.stdout.contains("--socket"), "help: \(help.stdout)")
        let version = try runProcess(eventbusd, ["--version"], timeout: .seconds(10))
        #expect(version.status == .exited(0))
        #expect(!version.stdout.isEmpty)
        let bad = try runProcess(eventbusd, ["--no-such-flag"], timeout: .seconds(10))
        #expect(bad.status != .exited(0))
        #expect(!bad.stderr.isEmpty)
    }
}

/// Leaves a socket file at `path` with nobody listening (a broker that died):
/// bind(2) then close(2) without unlink.
func makeStaleSocket(_ path: String) throws {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
    defer { close(fd) }
    var address = try unixAddress(path)
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else { throw TestFailure("bind \(path): errno \(errno)") }
}
