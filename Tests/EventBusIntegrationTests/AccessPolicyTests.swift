// PROTOCOL.md "Access policy (1.1)" and "Bridged events (1.1)" against the
// real broker, one test per rule, with clients of other real uids: each
// other-uid client is `setpriv --reuid N --regid G --clear-groups|--groups …
// socat UNIX-LISTEN:relay UNIX-CONNECT:broker`, so the broker's peer is a
// process of that uid (SO_PEERCRED, SO_PEERGROUPS) while the test talks to it
// through the relay socket with an ordinary `RawClient`.
//
// Before editing: needs root (setpriv) and socat; numeric ids only, no
// /etc/passwd changes. Absence is settled with a sentinel event the client
// may receive, or a ping, never a bare sleep. One broker per test.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// Runs only where other uids can be had.
private let canSwitchUsers = getuid() == 0 && findInPath("setpriv") != nil && findInPath("socat") != nil

@Suite("Access policy (PROTOCOL.md 1.1)", .enabled(if: canSwitchUsers, "needs root, setpriv and socat"))
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

    /// Starts a broker with `--policy` for each file (none: no policy file).
    private func withPolicyBroker(_ files: [PolicyFile], _ body: (BrokerProcess, OtherUsers) throws -> Void) throws {
        try withBroker(files.flatMap { ["--policy", $0.path] }) { broker in
            try body(broker, try OtherUsers(broker))
        }
    }

    /// Reads frames until an event of `type` and returns the events before it and it.
    private func events(until type: String, on client: RawClient) throws -> [Frame] {
        try client.readFrames(until: { $0.op == "event" && $0.type == type }).filter { $0.op == "event" }
    }

    @Test("A denied publish is forbidden, names the rule, takes no seq, and is logged once per uid and rule")
    func deniedPublishTakesNoSeq() throws {
        let policy = try PolicyFile("deny publish secret.>\n")
        try withPolicyBroker([policy]) { broker, users in
            let root = try broker.connect()
            let user = try users.connect(uid: 4321)
            let first = try root.publish("open.a")
            for _ in 0..<2 {
                let denied = try user.error(#"{"op":"publish","type":"secret.x","req":2}"#)
                #expect(denied.code == "forbidden" && denied.string("message") == "publish secret.x denied for uid 4321 by \(policy.path):1", "\(denied)")
            }
            #expect(try root.publish("open.b").seq == first.seq + 1)
            #expect(try root.stats().int("published") == 2)
            let log = broker.stderrText().components(separatedBy: "\n").filter { $0.contains("denied: publish secret.x denied for uid 4321 by \(policy.path):1 (pid ") }
            #expect(log.count == 1, "\(broker.stderrText())")
        }
    }

    @Test("subscribe > under a deny is filtered and never delivers a denied type")
    func filteredSubscriptionNeverDeliversADeniedType() throws {
        let policy = try PolicyFile("deny subscribe secret.>\n")
        try withPolicyBroker([policy]) { broker, users in
            let user = try users.connect(uid: 4321)
            let ok = try user.ok(#"{"op":"subscribe","type":">","req":1}"#)
            #expect(ok.fields["filtered"] as? Bool == true, "\(ok)")
            let exact = try user.ok(#"{"op":"subscribe","type":"open.x","req":2}"#)
            #expect(exact.has("filtered") == false, "an unfiltered subscription says nothing: \(exact)")
            let root = try broker.connect()
            #expect(try root.publish("secret.x").delivered == 0)
            try root.publish("secret.y.z")
            try root.publish("open.done")
            #expect(try events(until: "open.done", on: user).map(\.type) == ["open.done"])
            try user.expectNoFrame()
        }
    }

    @Test("Containment is exact: with only allow subscribe foo.*, foo.> is filtered (foo.a, never foo.a.b) and bar.> forbidden")
    func containmentIsExact() throws {
        let policy = try PolicyFile("default subscribe deny\nallow subscribe foo.*\n")
        try withPolicyBroker([policy]) { broker, users in
            let user = try users.connect(uid: 4321)
            #expect(try user.ok(#"{"op":"subscribe","type":"foo.>","req":1}"#).fields["filtered"] as? Bool == true)
            let refused = try user.error(#"{"op":"subscribe","type":"bar.>","req":2}"#)
            #expect(refused.code == "forbidden" && refused.string("message") == "subscribe bar.> denied for uid 4321 by \(policy.path):1 (default subscribe deny)", "\(refused)")
            let root = try broker.connect()
            try root.publish("foo.a.b")
            try root.publish("bar.a")
            try root.publish("foo.a")
            #expect(try events(until: "foo.a", on: user).map(\.type) == ["foo.a"])
            try user.expectNoFrame()
            #expect(try root.stats().int("subscriptions") == 1, "bar.> was not added")
        }
    }

    @Test("A group rule applies to a supplementary or primary group, and only when the connection has it")
    func groupRulesNeedTheGroup() throws {
        let policy = try PolicyFile("deny subscribe audit.>\nallow subscribe audit.> group=4390\n")
        try withPolicyBroker([policy]) { _, users in
            let member = try users.connect(uid: 4321, groups: [4390])
            #expect(try member.ok(#"{"op":"subscribe","type":"audit.>","req":1}"#).has("filtered") == false)
            let primary = try users.connect(uid: 4322, gid: 4390)
            try primary.ok(#"{"op":"subscribe","type":"audit.>","req":1}"#)
            let outsider = try users.connect(uid: 4321, groups: [4391])
            #expect(try outsider.error(#"{"op":"subscribe","type":"audit.>","req":1}"#).code == "forbidden")
        }
    }

    @Test("%u stands for the connection's own uid")
    func percentUIsTheConnectionsUID() throws {
        let policy = try PolicyFile("default subscribe deny\nallow subscribe box.%u.>\n")
        try withPolicyBroker([policy]) { broker, users in
            let user = try users.connect(uid: 4321)
            try user.ok(#"{"op":"subscribe","type":"box.4321.>","req":1}"#)
            #expect(try user.error(#"{"op":"subscribe","type":"box.4322.>","req":2}"#).code == "forbidden")
            let other = try users.connect(uid: 4322)
            try other.ok(#"{"op":"subscribe","type":"box.4322.x","req":1}"#)
            #expect(try broker.connect().error(#"{"op":"subscribe","type":"box.4321.>","req":1}"#).code == "forbidden", "root is bound too")
        }
    }

    @Test("connect denied: error forbidden, then the broker closes")
    func connectDeniedIsForbiddenThenClosed() throws {
        let policy = try PolicyFile("default connect deny\nallow connect - user=0\n")
        try withPolicyBroker([policy]) { broker, users in
            let user = try users.connect(uid: 4321)
            let frames = try user.readUntilEOF()
            #expect(frames.count == 1 && frames[0].code == "forbidden" && frames[0].req == nil, "\(frames)")
            #expect(frames.first?.string("message") == "connect denied for uid 4321 by \(policy.path):1 (default connect deny)")
            #expect(try broker.connect().stats().int("connections") == 1)
        }
    }

    @Test("Publishing eventbus.> is forbidden even when a file allows it")
    func reservedTypesStayForbidden() throws {
        let policy = try PolicyFile("allow publish eventbus.>\nallow publish eventbus.x user=4321\n")
        try withPolicyBroker([policy]) { broker, users in
            let user = try users.connect(uid: 4321)
            #expect(try user.error(#"{"op":"publish","type":"eventbus.x","req":1}"#).code == "forbidden")
            #expect(try broker.connect().error(#"{"op":"publish","type":"eventbus.y","req":1}"#).code == "forbidden")
        }
    }

    @Test("The shipped policy: system.> published by root only, user.<uid>.> private to its uid and root")
    func shippedPolicyRows() throws {
        let shipped = repositoryFile("config/policy.conf")
        try withBroker(["--policy", shipped]) { broker in
            let users = try OtherUsers(broker)
            let root = try broker.connect()
            let alice = try users.connect(uid: 4321)
            let bob = try users.connect(uid: 4322)
            #expect(try alice.error(#"{"op":"publish","type":"system.reboot","req":1}"#).string("message") == "publish system.reboot denied for uid 4321 by \(shipped):22")
            #expect(try alice.error(#"{"op":"publish","type":"user.4322.note","req":2}"#).code == "forbidden")
            #expect(try alice.error(#"{"op":"subscribe","type":"user.4322.>","req":3}"#).code == "forbidden")
            try alice.ok(#"{"op":"subscribe","type":"user.4321.>","req":4}"#)
            try alice.ok(#"{"op":"subscribe","type":"system.>","req":5}"#)
            #expect(try bob.ok(#"{"op":"subscribe","type":">","req":1}"#).fields["filtered"] as? Bool == true)
            try alice.ok(#"{"op":"publish","type":"user.4321.note","req":6}"#)
            try root.publish("system.reboot")
            try root.publish("user.4321.from-root")
            try root.publish("open.done")
            #expect(try events(until: "open.done", on: bob).map(\.type) == ["system.reboot", "open.done"])
            #expect(try events(until: "user.4321.from-root", on: alice).map(\.type) == ["system.reboot", "user.4321.from-root"])
            try root.subscribe("user.>")
        }
    }

    @Test("A reload revokes a subscription the new policy forbids: error with type, no req, connection open, no more events of it")
    func reloadRevokesForbiddenSubscriptions() throws {
        let policy = try PolicyFile("default subscribe allow\n")
        try withPolicyBroker([policy]) { broker, users in
            let user = try users.connect(uid: 4321)
            try user.subscribe("secret.>", "open.>")
            try policy.write("deny subscribe secret.>\n")
            let reload = try runCLI(["--socket", broker.socketPath, "reload", "--wait"], in: broker.directory)
            #expect(reload.status == .exited(0) && reload.stdout == "policy reloaded: generation 2\n", "\(reload.stdout)\(reload.stderr)")
            let revoked = try user.readFrames(until: { $0.op == "error" }).last!
            #expect(revoked.code == "forbidden" && revoked.type == "secret.>" && !revoked.has("req"), "\(revoked)")
            #expect(revoked.string("message")?.hasPrefix("subscribe secret.> denied for uid 4321 by \(policy.path):1") == true, "\(revoked)")
            let root = try broker.connect()
            try root.publish("secret.x")
            try root.publish("open.x")
            #expect(try events(until: "open.x", on: user).map(\.type) == ["open.x"])
            try user.expectNoFrame()
            let stats = try root.stats()
            #expect(stats.int("policy_generation") == 2 && stats.int("subscriptions") == 1, "\(stats)")
        }
    }

    @Test("A reload of an invalid file keeps the old policy, logs file:line, and eventbus reload --wait fails with the reason")
    func invalidReloadKeepsTheOldPolicy() throws {
        let policy = try PolicyFile("deny publish secret.>\n")
        try withPolicyBroker([policy]) { broker, users in
            let user = try users.connect(uid: 4321)
            try policy.write("allow publish >\nallow publsh x\n")
            let reload = try runCLI(["--socket", broker.socketPath, "reload", "--wait"], in: broker.directory)
            let reason = "\(policy.path):2: unknown action \"publsh\" (expected connect, publish, subscribe, bridge, hold or serve)"
            #expect(reload.status == .exited(65) && reload.stderr.contains("generation 1") && reload.stderr.contains(reason), "\(reload.stderr)")
            #expect(broker.stderrText().contains("failed to reload the access policy: \(reason)"))
            #expect(try user.error(#"{"op":"publish","type":"secret.x","req":1}"#).code == "forbidden")
            #expect(try broker.connect().stats().int("policy_generation") == 1)
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

    @Test("origin needs the bridge right; with it, the event is delivered with origin unchanged")
    func originNeedsTheBridgeRight() throws {
        let policy = try PolicyFile("allow bridge - user=4321\n")
        try withPolicyBroker([policy]) { broker, users in
            let subscriber = try broker.connect()
            try subscriber.subscribe("remote.>")
            let origin = #"{"node":"host-b","instance":"9f2c","seq":9123,"time":"2026-11-29T13:00:00.123Z","pid":811,"uid":1000,"gid":1000}"#
            let other = try users.connect(uid: 4322)
            let denied = try other.error(#"{"op":"publish","type":"remote.x","req":1,"origin":\#(origin)}"#)
            #expect(denied.code == "forbidden" && denied.string("message")?.hasPrefix("bridge denied for uid 4322") == true, "\(denied)")
            #expect(try broker.connect().error(#"{"op":"publish","type":"remote.x","req":1,"origin":\#(origin)}"#).code == "forbidden",
                    "a policy file without a bridge rule for root denies root")
            let bridge = try users.connect(uid: 4321)
            try bridge.ok(#"{"op":"publish","type":"remote.x","req":1,"origin":\#(origin)}"#)
            let event = try subscriber.readFrame()
            #expect(event.type == "remote.x" && event.raw.contains(#","origin":\#(origin),"#) && event.int("uid") == 4321, "\(event)")
        }
    }

    @Test("Without a policy file, bridge is for uid 0 and the broker's uid only; hello lists policy and origin")
    func withoutPolicyOnlyRootBridges() throws {
        try withPolicyBroker([]) { broker, users in
            let root = try broker.connect()
            let features = try root.ok(#"{"op":"hello","req":1}"#).fields["features"] as? [String] ?? []
            #expect(features.contains("policy") && features.contains("origin"), "\(features)")
            try root.ok(#"{"op":"publish","type":"remote.x","req":2,"origin":{"node":"b"}}"#)
            #expect(try users.connect(uid: 4321).error(#"{"op":"publish","type":"remote.x","req":1,"origin":{"node":"b"}}"#).code == "forbidden")
        }
    }

    @Test("Retained events after last, history replays after since, and clear obey the policy (issue 12)")
    func retentionObeysThePolicy() throws {
        let policy = try PolicyFile("deny subscribe secret.>\ndeny publish secret.> user=4321\n")
        try withPolicyBroker([policy]) { broker, users in
            let root = try broker.connect()
            try root.ok(#"{"op":"publish","type":"secret.x","retain":true,"req":1}"#)
            try root.ok(#"{"op":"publish","type":"open.x","retain":true,"req":2}"#)
            let user = try users.connect(uid: 4321)
            let ok = try user.ok(#"{"op":"subscribe","type":">","last":true,"since":0,"req":1}"#)
            #expect(ok.fields["filtered"] as? Bool == true && ok.int("retained") == 1, "\(ok)")
            let frames = try user.settle()
            // The replay left out open.x (sent as retained) and secret.x (denied).
            #expect(frames.map { "\($0.type!) \($0.bool("retained") == true ? "retained" : "replayed")" } == ["open.x retained"], "\(frames)")
            let exact = try user.error(#"{"op":"subscribe","type":"secret.x","last":true,"req":2}"#)
            #expect(exact.code == "forbidden")
            let clear = try user.error(#"{"op":"clear","type":"secret.x","req":3}"#)
            #expect(clear.code == "forbidden" && clear.string("message")?.contains("publish secret.x denied") == true, "\(clear)")
            #expect(try user.ok(#"{"op":"clear","type":"open.x","req":4}"#).bool("removed") == true)
            #expect(try root.stats().int("retained") == 1, "the denied clear removed nothing")
        }
    }

    /// Runs the `eventbus` CLI to completion.
    private func runCLI(_ arguments: [String], in directory: TemporaryDirectory) throws -> ProcessOutput {
        try SpawnedProcess(try builtProduct("eventbus"), arguments, in: directory, environment: ["EVENTBUS_SOCKET": nil]).waitBlocking(timeout: .seconds(30))
    }
}

/// A file of this repository, by its path from the root.
private func repositoryFile(_ path: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path + "/" + path
}
