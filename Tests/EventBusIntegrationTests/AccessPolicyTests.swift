// PROTOCOL.md "Access policy (1.1)": what only the eventbusd process shows
// (`--check-policy`, a policy invalid at start), and the helpers the suites
// that need real other uids share (`PolicyFile`, `OtherUsers`). The rules
// themselves (denials, filtering, groups, %u, connect, reloads, eventbus.>,
// the shipped policy, origin, retained events, serve) are scenarios written
// once in EventBusScenarios/AccessPolicyScenarios.swift, run here against
// eventbusd with setpriv'd clients (ProcessBus.swift, root) and in process by
// EventBusServerTests (no root).
//
// Before editing: the two tests here need no root. `OtherUsers` needs root
// (setpriv) and socat: each other-uid client is `setpriv --reuid N --regid G
// --clear-groups|--groups … socat UNIX-LISTEN:relay UNIX-CONNECT:broker`, so
// the broker's peer is a process of that uid (SO_PEERCRED, SO_PEERGROUPS)
// while the test talks to it through the relay socket with an ordinary
// `RawClient`; numeric ids only, no /etc/passwd changes.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Access policy (PROTOCOL.md 1.1): eventbusd's own checks")
struct AccessPolicyTests {
    /// A policy file in a directory of its own (the broker reads it as root).
    final class PolicyFile {
        let directory: TemporaryDirectory
        let path: String

        init(_ text: String) throws {
            directory = try TemporaryDirectory(prefix: "ebpol-")
            path = directory.file("policy.conf")
            try write(text)
        }

        func write(_ text: String) throws {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
    }

    /// Clients of other uids through socat relays, kept alive for the test.
    final class OtherUsers {
        let broker: BrokerProcess
        let relayDirectory: String
        private var relays: [SpawnedProcess] = []

        init(_ broker: BrokerProcess) throws {
            self.broker = broker
            // Let the other uids reach the 0666 socket, and let them bind relays.
            chmod(broker.directory.path, 0o755)
            relayDirectory = broker.directory.file("relay")
            guard mkdir(relayDirectory, 0o777) == 0, chmod(relayDirectory, 0o777) == 0 else { throw TestFailure("cannot make \(relayDirectory)") }
        }

        /// A client whose broker connection belongs to `uid` with primary
        /// group `gid` (default `uid`) and exactly `groups` as supplementary groups.
        func connect(uid: UInt32, gid: UInt32? = nil, groups: [UInt32] = []) throws -> RawClient {
            let relay = relayDirectory + "/\(relays.count)"
            var arguments = ["--reuid", "\(uid)", "--regid", "\(gid ?? uid)"]
            arguments += groups.isEmpty ? ["--clear-groups"] : ["--groups", groups.map(String.init).joined(separator: ",")]
            arguments += [findInPath("socat")!, "UNIX-LISTEN:\(relay)", "UNIX-CONNECT:\(broker.socketPath)"]
            let process = try SpawnedProcess("setpriv", arguments, in: broker.directory)
            relays.append(process)
            try waitUntil("socat as uid \(uid) listening on \(relay)") {
                guard process.isRunning else { throw TestFailure("setpriv socat exited: \(process.stderrSoFar())") }
                return isListeningUnixSocket(relay)
            }
            return try RawClient(path: relay)
        }
    }

    @Test("eventbusd --check-policy prints the effective rules with numbers, or names file:line and exits 78")
    func checkPolicy() throws {
        let good = try PolicyFile("allow publish backup.> user=root\ndeny publish backup.>\n")
        let run = try runProcess(try builtProduct("eventbusd"), ["--check-policy", good.path], timeout: .seconds(10))
        #expect(run.status == .exited(0), "\(run.stderr)")
        #expect(run.stdout.contains("allow publish backup.> user=0") && run.stdout.contains("# \(good.path):1, user=root"), "\(run.stdout)")
        let bad = try PolicyFile("allow publish a..b\ndeny subscribe x user=no-such-user-here\n")
        let failed = try runProcess(try builtProduct("eventbusd"), ["--check-policy", good.path, bad.path], timeout: .seconds(10))
        #expect(failed.status == .exited(78) && failed.stdout.isEmpty, "\(failed.stdout)")
        let lines = failed.stderr.split(separator: "\n")
        #expect(lines.count == 2 && lines[0].hasPrefix("\(bad.path):1: ") && lines[1].hasPrefix("\(bad.path):2: "), "\(failed.stderr)")
    }

    @Test("A broker whose policy is invalid at start refuses to start (78), naming file:line, and leaves no socket")
    func invalidPolicyAtStartRefusesToStart() throws {
        let bad = try PolicyFile("deny publish system.>\nallow publish x user=no-such-user-here\n")
        let broker = try BrokerProcess(arguments: ["--policy", bad.path], waitUntilReady: false)
        defer { broker.cleanUp() }
        #expect(broker.waitForExit() == .exited(78))
        #expect(broker.stderrText().contains("\(bad.path):2: "), "\(broker.stderrText())")
        #expect(access(broker.socketPath, F_OK) != 0, "a socket was bound")
    }

    @Test("--check-policy accepts and reports serve rules and the serve default; a serve rule without a pattern is an error with file:line")
    func checkPolicyReportsServeRules() throws {
        let good = try PolicyFile("deny serve system.>\nallow serve system.> user=0\ndefault serve deny\n")
        let run = try runProcess(try builtProduct("eventbusd"), ["--check-policy", good.path], timeout: .seconds(10))
        #expect(run.status == .exited(0), "\(run.stderr)")
        #expect(run.stdout.contains("deny serve system.>") && run.stdout.contains("allow serve system.> user=0"), "\(run.stdout)")
        #expect(run.stdout.contains("default serve deny"), "\(run.stdout)")
        let bad = try PolicyFile("allow serve -\n")
        let failed = try runProcess(try builtProduct("eventbusd"), ["--check-policy", bad.path], timeout: .seconds(10))
        #expect(failed.status == .exited(78) && failed.stderr.contains("\(bad.path):1") && failed.stderr.contains("serve rules take a pattern"), "\(failed.stderr)")
    }
}
