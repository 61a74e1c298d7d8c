// `eventbus request`, `serve` and `listen --group` against a real broker
// (PROTOCOL.md "Request/reply (1.3)", "Queue groups (1.3)"): every exit
// status of `request`, a served COMMAND's stdin/stdout framing, its failure,
// its death past the deadline, `--string`, `--concurrency`, `serve --json`
// through a pipe, a stream shared by a group, and the README's worker pool.
//
// Before editing: a server is ready once it said so on stderr
// (`readyServer`); a COMMAND tells the test it has started by writing its
// pid into a file, so nothing here waits a fixed time.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// Starts `eventbus serve ARGS...` and waits (bounded) until it says it serves.
private func readyServer(_ broker: TestBroker, _ arguments: [String]) throws -> RunningProcess {
    let server = try broker.start(["serve"] + arguments)
    try eventually("serve never said it was ready") { server.process.stderrSoFar().contains("eventbus: serving ") || !server.isRunning }
    guard server.isRunning else { throw TestFailure("serve exited: \(try server.wait())") }
    return server
}

/// Polls `condition` every 5 ms for up to 20 s.
private func eventually(_ what: @autoclosure () -> String, _ condition: () throws -> Bool) throws {
    let deadline = ContinuousClock.now + .seconds(20)
    while ContinuousClock.now < deadline {
        if try condition() { return }
        usleep(5_000)
    }
    throw TestFailure(what())
}

/// The pid a COMMAND wrote to `path` (`echo $$ > path`), once it has.
private func pidWritten(to path: String) throws -> pid_t {
    var pid: pid_t? = nil
    try eventually("no pid in \(path)") {
        pid = (try? String(contentsOfFile: path, encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        return pid != nil
    }
    return pid!
}

private func isAlive(_ pid: pid_t) -> Bool { kill(pid, 0) == 0 }

@Suite("eventbus request and serve")
struct CLIRequestServeTests {
    @Test func aServedCommandGetsTheDataOnStdinAndItsStdoutIsTheReply() throws {
        let broker = try TestBroker()
        // One line on stdin (the data and a LF), pretty JSON on stdout: compacted into the reply.
        let server = try readyServer(broker, ["math.add", "--", "/bin/sh", "-c", #"read -r line; printf '{\n  "got": %s,\n  "lines": %s\n}\n' "$line" "$(cat | wc -l)""#])
        let run = try broker.run(["request", "math.add", #"{"a": 2, "b": [3]}"#])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == #"{"got":{"a":2,"b":[3]},"lines":0}"# + "\n")
        #expect(run.stderr == "")
        let json = try broker.run(["request", "--format", "json", "--timeout", "10s", "math.add", "7"])
        #expect(json.status == 0, "\(json)")
        let answer = try jsonObject(json.stdoutLines.first ?? "")
        #expect(answer["pid"] as? Int == Int(server.pid) && answer["uid"] as? Int == Int(getuid()), "the server's credentials: \(answer)")
        #expect((answer["seq"] as? Int ?? 0) > 0 && answer["time"] is String)
        #expect((answer["data"] as? [String: Any])?["got"] as? Int == 7)
        server.send(signal: SIGTERM)
    }

    @Test func nobodyServingExits67AtOnce() throws {
        let broker = try TestBroker()
        // A plain subscriber is no responder.
        let listener = try broker.start(["listen", "math.add"])
        try broker.waitForSubscriptions(1)
        let run = try broker.run(["request", "--timeout", "5min", "math.add", "1"])
        #expect(run.status == 67, "\(run)")
        #expect(run.stdout == "")
        #expect(run.stderr.contains("no one serves 'math.add'"), "\(run)")
        listener.send(signal: SIGTERM)
    }

    @Test func noRespondersFromAcrossABridgeSaysWhereAndGivesNoLocalHint() throws {
        let broker = try TestBroker()
        // A bridge's fallback server (PROTOCOL-NOTES.md "Requests across
        // machines") relays the other machine's no_responders.
        let bridge = try RawClient(path: broker.socket)
        try bridge.ok(#"{"op":"subscribe","type":"thumb.>","serve":true,"fallback":true,"req":1}"#)
        let asker = try broker.start(["request", "thumb.make", "1"])
        let token = try #require(try bridge.readFrame().string("reply"))
        try bridge.ok(#"{"op":"reply","to":"\#(token)","error":"on node host-b: no connection serves thumb.make","code":"no_responders","req":2}"#)
        let run = try asker.wait()
        #expect(run.status == 67, "\(run)")
        #expect(run.stderr.contains("no one serves 'thumb.make': on node host-b: no connection serves thumb.make"), "\(run)")
        #expect(!run.stderr.contains("start a server"), "a local server is not what is missing: \(run)")
    }

    @Test func aFailingCommandIsAServiceErrorWithTheFirstLineOfItsStderr() throws {
        let broker = try TestBroker()
        let server = try readyServer(broker, ["disk.usage", "--", "/bin/sh", "-c", "echo 'no such disk: sdz' >&2; echo 'second line' >&2; exit 3"])
        let run = try broker.run(["request", "disk.usage", #""sdz""#])
        #expect(run.status == 2, "\(run)")
        #expect(run.stdout == "")
        #expect(run.stderr.contains(": no such disk: sdz\n") && !run.stderr.contains("second line"), "\(run)")
        // The command's whole stderr goes to serve's.
        try eventually("serve did not pass stderr through") { server.process.stderrSoFar().contains("second line") }
        // Output that is no JSON is a service error too (--string is for text).
        let text = try readyServer(broker, ["host.name", "--", "/bin/echo", "not json"])
        let notJSON = try broker.run(["request", "host.name"])
        #expect(notJSON.status == 2 && notJSON.stderr.contains("wrote no JSON value"), "\(notJSON)")
        for process in [server, text] { process.send(signal: SIGTERM) }
    }

    @Test func aCommandNotFoundIsAnsweredAndEndsServeWith127() throws {
        let broker = try TestBroker()
        let server = try readyServer(broker, ["a.b", "--", "/nonexistent/command"])
        let run = try broker.run(["request", "a.b"])
        #expect(run.status == 2 && run.stderr.contains("cannot run '/nonexistent/command'"), "\(run)")
        let served = try server.wait()
        #expect(served.status == 127 && served.stderr.contains("cannot run '/nonexistent/command'"), "\(served)")
    }

    @Test func stringRepliesWithTheOutputAsText() throws {
        let broker = try TestBroker()
        let server = try readyServer(broker, ["--string", "host.greeting", "--", "/bin/sh", "-c", #"printf 'hello "%s"\n' "$(cat)""#])
        let run = try broker.run(["request", "--string", "ada", "host.greeting"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == #""hello \"\"ada\"\"""# + "\n")
        server.send(signal: SIGTERM)
    }

    @Test func aKilledServerIsNoReplyAtOnce() throws {
        let broker = try TestBroker()
        let pidFile = broker.scratch.path + "/started"
        let server = try readyServer(broker, ["slow.job", "--", "/bin/sh", "-c", "echo $$ > '\(pidFile)'; exec sleep 60"])
        let requester = try broker.start(["request", "--timeout", "5min", "slow.job"])
        let command = try pidWritten(to: pidFile)
        server.send(signal: SIGKILL)
        let run = try requester.wait(timeout: .seconds(20))
        #expect(run.status == 3, "\(run)")
        #expect(run.stderr.contains("no reply to the request for 'slow.job': the one server of slow.job the request reached went away without replying: it closed its connection"), "\(run)")
        kill(command, SIGKILL)  // orphaned with its server: ours to end
    }

    @Test func aCommandPastTheDeadlineIsKilledAndTheRequesterTimesOut() throws {
        let broker = try TestBroker()
        let pidFile = broker.scratch.path + "/started"
        let server = try readyServer(broker, ["slow.job", "--", "/bin/sh", "-c", "echo $$ > '\(pidFile)'; sleep 60; echo 1"])
        let run = try broker.run(["request", "--timeout", "2s", "slow.job"], timeout: .seconds(30))
        #expect(run.status == 124, "\(run)")
        #expect(run.stderr.contains("timed out after 2s"), "\(run)")
        let command = try pidWritten(to: pidFile)
        try eventually("the command outlived its deadline") { !isAlive(command) }
        try eventually("serve did not say it killed the command") { server.process.stderrSoFar().contains("outlived the deadline") }
        // The server goes on serving.
        #expect(server.isRunning)
        server.send(signal: SIGTERM)
    }

    /// (attacker) Another uid queues requests with 100 ms timeouts behind a
    /// busy `serve --concurrency 1`; they expire in the broker while queued.
    /// Before, serve read each one's `timeout` (the time left when the
    /// broker queued it) as time left now and ran COMMAND for all 20, for
    /// nobody, while the next live request waited behind them.
    @Test(.enabled(if: getuid() == 0 && findInPath("setpriv") != nil))
    func requestsThatExpiredWhileQueuedRunNoCommand() throws {
        let broker = try TestBroker()
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: broker.scratch.path)
        let runs = broker.scratch.path + "/runs", release = broker.scratch.path + "/release"
        let script = "echo x >> '\(runs)'; until [ -e '\(release)' ]; do sleep 0.01; done; echo 1"
        let server = try readyServer(broker, ["--concurrency", "1", "svc.q", "--", "/bin/sh", "-c", script])
        let first = try broker.start(["request", "--timeout", "1min", "svc.q", "1"])
        try eventually("the first COMMAND runs") { (try? String(contentsOfFile: runs, encoding: .utf8)) == "x\n" }
        let attacker = try connectAs(uid: 4321, path: broker.socket)[0]
        var batch: [UInt8] = []
        for i in 0..<20 { batch += Array(#"{"op":"request","type":"svc.q","timeout":100,"req":\#(i),"data":\#(i)}"#.utf8) + [0x0A] }
        try attacker.sendBytes(batch)
        let answers = try attacker.readFrames(count: 20, timeout: .seconds(60))
        #expect(answers.allSatisfy { $0.string("code") == "timeout" }, "\(answers.map(\.raw))")
        _ = FileManager.default.createFile(atPath: release, contents: nil)
        #expect(try first.wait(timeout: .seconds(70)).status == 0)
        let last = try broker.run(["request", "--timeout", "1min", "svc.q", "2"], timeout: .seconds(70))
        #expect(last.status == 0, "\(last)")
        let lines = (try? String(contentsOfFile: runs, encoding: .utf8))?.split(separator: "\n").count
        #expect(lines == 2, "COMMAND ran for the two live requests only: \(lines ?? -1) runs")
        #expect(server.process.stderrSoFar().contains("reached its deadline before"), "\(server.process.stderrSoFar())")
        server.send(signal: SIGTERM)
    }

    /// (newuser2) Requests skipped because they expired while queued are
    /// not answers for `--count`: before, `serve --count 2` counted the
    /// first live answer and one skipped request, exited, and the live
    /// request behind them got `no_reply` (another user could end a
    /// `--count 1` serve with requests sent to expire).
    @Test(.enabled(if: getuid() == 0 && findInPath("setpriv") != nil))
    func requestsThatExpiredWhileQueuedDoNotCountForCount() throws {
        let broker = try TestBroker()
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: broker.scratch.path)
        let runs = broker.scratch.path + "/runs", release = broker.scratch.path + "/release"
        let script = "echo x >> '\(runs)'; until [ -e '\(release)' ]; do sleep 0.01; done; cat"
        let server = try readyServer(broker, ["--count", "2", "svc.q", "--", "/bin/sh", "-c", script])
        let first = try broker.start(["request", "--timeout", "1min", "svc.q", "1"])
        try eventually("the first COMMAND runs") { (try? String(contentsOfFile: runs, encoding: .utf8)) == "x\n" }
        let attacker = try connectAs(uid: 4321, path: broker.socket)[0]
        var batch: [UInt8] = []
        for i in 0..<3 { batch += Array(#"{"op":"request","type":"svc.q","timeout":100,"req":\#(i),"data":\#(i)}"#.utf8) + [0x0A] }
        try attacker.sendBytes(batch)
        let answers = try attacker.readFrames(count: 3, timeout: .seconds(60))
        #expect(answers.allSatisfy { $0.string("code") == "timeout" }, "\(answers.map(\.raw))")
        let second = try broker.start(["request", "--timeout", "1min", "svc.q", "2"])
        try eventually("the broker has the live request") { try broker.stats()["requests"] as? Int == 5 }
        _ = FileManager.default.createFile(atPath: release, contents: nil)
        let one = try first.wait(timeout: .seconds(70)), two = try second.wait(timeout: .seconds(70))
        #expect(one.status == 0 && one.stdout == "1\n", "\(one)")
        #expect(two.status == 0 && two.stdout == "2\n", "the live request behind the skipped ones is answered: \(two)")
        #expect(try server.wait(timeout: .seconds(30)).status == 0, "serve exits 0 after its two answers")
        #expect(server.process.stderrSoFar().contains("reached its deadline before"), "\(server.process.stderrSoFar())")
    }

    @Test func concurrencyRunsThatManyCommandsAtOnce() throws {
        let broker = try TestBroker()
        let dir = broker.scratch.path + "/running"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // Each command waits until three are running: only --concurrency 3 can answer all three.
        let script = "touch '\(dir)'/$$; until [ $(ls '\(dir)' | wc -l) -ge 3 ]; do sleep 0.01; done; echo $$"
        let server = try readyServer(broker, ["--concurrency", "3", "work.item", "--", "/bin/sh", "-c", script])
        let requesters = try (1...3).map { i in try broker.start(["request", "--timeout", "1min", "work.item", "\(i)"]) }
        let runs = try requesters.map { try $0.wait(timeout: .seconds(70)) }
        #expect(runs.allSatisfy { $0.status == 0 }, "\(runs)")
        #expect(Set(runs.map(\.stdout)).count == 3, "three different commands answered: \(runs)")
        server.send(signal: SIGTERM)
    }

    @Test func serveJsonServesThroughAPipe() throws {
        let broker = try TestBroker()
        let fifo = broker.scratch.path + "/replies"
        #expect(mkfifo(fifo, 0o600) == 0)
        // Any language: this one doubles the number, and refuses negatives with an error.
        let program = """
        import json, sys
        for line in sys.stdin:
            request = json.loads(line)
            if request["data"] < 0:
                print(json.dumps({"to": request["reply"], "error": "negative: %d" % request["data"]}), flush=True)
            else:
                print(json.dumps({"to": request["reply"], "data": request["data"] * 2}), flush=True)
        """
        let pipeline = "'\(cliProduct("eventbus"))' --socket '\(broker.socket)' serve --json --count 2 math.double < '\(fifo)' | python3 -c '\(program)' > '\(fifo)'"
        let server = try RunningProcess("/bin/sh", ["-c", pipeline], in: broker.scratch)
        try eventually("serve --json never served") {
            let run = try broker.run(["request", "math.double", "21"])
            if run.status == 67 { return false }
            #expect(run.status == 0 && run.stdout == "42\n", "\(run)")
            return true
        }
        let failed = try broker.run(["request", "math.double", "-1"])
        #expect(failed.status == 2 && failed.stderr.contains("negative: -1"), "\(failed)")
        let done = try server.wait(timeout: .seconds(20))
        #expect(done.status == 0, "serve --json --count 2 exits 0 after two answers: \(done)")
    }

    @Test func serversInAGroupShareTheRequestsOneEach() throws {
        let broker = try TestBroker()
        // Each server's COMMAND answers with its server's pid ($PPID: serve ran it).
        let servers = try (1...2).map { _ in try readyServer(broker, ["--group", "thumbs", "thumb.make", "--", "/bin/sh", "-c", "cat >/dev/null; echo $PPID"]) }
        var answers: [String] = []
        for i in 1...6 {
            let run = try broker.run(["request", "thumb.make", "\(i)"])
            #expect(run.status == 0, "\(run)")
            answers.append(run.stdout)
        }
        let pids = Set(servers.map { "\($0.pid)\n" })
        #expect(Set(answers).isSubset(of: pids) && Set(answers).count == 2, "both servers answered, each request once: \(answers)")
        // One key, one server.
        let keyed = try (1...4).map { i in try broker.run(["request", "--key", "photo-7", "thumb.make", "\(i)"]).stdout }
        #expect(Set(keyed).count == 1 && pids.contains(keyed[0]), "\(keyed)")
        for server in servers { server.send(signal: SIGTERM) }
    }

    @Test("a broker before 1.3 is told, not taken for one that serves or shares", .enabled(if: findInPath("socat") != nil, "needs socat"))
    func anOlderBrokerIsRefused() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        let socket = scratch.path + "/old.sock"
        // A 1.2 broker as far as these commands can tell: its hello has no 'request' and no 'groups'.
        let hello = #"{"op":"ok","req":0,"server":"eventbusd","version":"1.2","protocol":1,"instance":"old","conn":1,"features":["flow","types"]}"#
        let answer = scratch.path + "/hello.json"
        try (hello + "\n").write(toFile: answer, atomically: true, encoding: .utf8)
        let fake = try RunningProcess("socat", ["UNIX-LISTEN:\(socket),fork", "SYSTEM:read line; cat \(answer); sleep 30"], in: scratch)
        defer { fake.send(signal: SIGTERM) }
        try eventually("socat never listened") { FileManager.default.fileExists(atPath: socket) }
        for (arguments, message) in [
            (["listen", "--group", "w", "a.b"], "has no queue groups"),
            (["serve", "a.b", "--", "true"], "does not serve requests"),
            (["serve", "--json", "a.b"], "does not serve requests"),
        ] {
            // Standard input that never ends (serve --json ends at its end): a FIFO opened read-write.
            let fifo = scratch.path + "/stdin-\(arguments.count)-\(arguments[0])"
            let command = "mkfifo '\(fifo)' && exec '\(cliProduct("eventbus"))' --socket '\(socket)' " + arguments.map { "'\($0)'" }.joined(separator: " ") + " <> '\(fifo)'"
            let run = try RunningProcess("/bin/sh", ["-c", command], in: scratch).wait(timeout: .seconds(20))
            #expect(run.status == 76 && run.stderr.contains(message), "\(arguments): \(run)")
        }
    }

    @Test func usageErrors() throws {
        let broker = try TestBroker()
        for (arguments, message) in [
            (["serve", "a.b"], "missing '-- COMMAND'"),
            (["serve", "--json", "a.b", "--", "true"], "give --json or '-- COMMAND', not both"),
            (["serve", "--group", "bad group", "a.b", "--", "true"], "invalid group name"),
            (["request", "a.*"], "is a pattern"),
            (["request", "--key", "", "a.b"], "invalid --key"),
            (["listen", "--group", "w", "--last", "a.b"], "--group and --last cannot be combined"),
        ] {
            let run = try broker.run(arguments)
            #expect(run.status == 64 && run.stderr.contains(message), "\(arguments): \(run)")
        }
    }

    @Test func aTimeoutOverTheBrokersMaximumIsAUsageErrorNamingIt() throws {
        let broker = try TestBroker()  // --max-request-timeout: the default, 300 s
        let run = try broker.run(["request", "--timeout", "10min", "math.add", "1"])
        #expect(run.status == 64, "\(run)")
        #expect(run.stderr.contains("--timeout 10min is over the broker's maximum of 5min (eventbusd --max-request-timeout)"), "\(run)")
        #expect(try broker.run(["request", "--timeout", "5min", "math.add", "1"]).status == 67, "the maximum itself is allowed")
    }
}

@Suite("eventbus listen --group")
struct CLIGroupTests {
    @Test func aGroupSharesAStreamEachEventOnce() throws {
        let broker = try TestBroker()
        let workers = try (1...3).map { _ in try broker.start(["listen", "--group", "workers", "--format", "data", "job.todo"]) }
        try broker.waitForSubscriptions(3)
        let lines = (1...30).map { "job \($0)" }
        let publish = try broker.run(["publish", "--lines", "job.todo"], stdin: lines.joined(separator: "\n") + "\n")
        #expect(publish.status == 0, "\(publish)")
        var seen: [[String]] = []
        try eventually("the workers never got all 30 jobs") {
            seen = workers.map { $0.stdoutSoFar().split(separator: "\n").map(String.init) }
            return Set(seen.joined()).count == 30
        }
        #expect(seen.joined().count == 30, "each job once: \(seen)")
        #expect(Set(seen.joined()) == Set(lines.map { "\"\($0)\"" }))
        #expect(seen.filter { !$0.isEmpty }.count == 3, "all three took a share: \(seen.map(\.count))")
        for worker in workers { worker.send(signal: SIGTERM) }
    }

    /// A full group (`--max-group-members`, uid 0 has none: another uid
    /// here): `listen --group` exits 75; with `--reconnect` it waits for
    /// room as it waits for a broker, says so once, and joins when a member
    /// leaves.
    @Test(.enabled(if: getuid() == 0 && findInPath("setpriv") != nil))
    func aFullGroupIsWaitedOutWithReconnectAnd75Without() throws {
        let broker = try TestBroker(options: ["--max-group-members", "1"])
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: broker.scratch.path)
        func listen(_ extra: [String]) throws -> RunningProcess {
            try RunningProcess("/usr/bin/env", ["setpriv", "--reuid", "4329", "--regid", "4329", "--clear-groups", cliProduct("eventbus"),
                                                "--socket", broker.socket, "listen", "--group", "w", "--format", "data"] + extra + ["job.x"], in: broker.scratch)
        }
        let first = try listen([])
        try broker.waitForSubscriptions(1)
        let refused = try listen([]).wait()
        #expect(refused.status == 75 && refused.stderr.contains("--max-group-members 1"), "\(refused)")
        let waiting = try listen(["--reconnect"])
        try waiting.waitForStderr { $0.contains("retrying until there is room") }
        first.send(signal: SIGTERM)
        try waiting.waitForStderr { $0.contains("subscribed: there was room") }
        #expect(try broker.run(["publish", "job.x", "7"]).status == 0)
        try eventually("the waiting listener got the event") { waiting.stdoutSoFar() == "7\n" }
        let said = waiting.stderrSoFar().components(separatedBy: "retrying until there is room").count - 1
        #expect(said == 1, "said once: \(waiting.stderrSoFar())")
        waiting.send(signal: SIGTERM)
    }

    @Test func eventsWithOneKeyGoToOneMember() throws {
        let broker = try TestBroker()
        let workers = try (1...3).map { _ in try broker.start(["listen", "--group", "workers", "--format", "data", "job.todo"]) }
        try broker.waitForSubscriptions(3)
        let publish = try broker.run(["publish", "--lines", "--key", "customer-7", "job.todo"], stdin: (1...12).map { "\($0)\n" }.joined())
        #expect(publish.status == 0, "\(publish)")
        var seen: [[String]] = []
        try eventually("the 12 keyed jobs never arrived") {
            seen = workers.map { $0.stdoutSoFar().split(separator: "\n").map(String.init) }
            return seen.joined().count >= 12
        }
        #expect(seen.filter { !$0.isEmpty }.count == 1, "one member took every event of the key: \(seen.map(\.count))")
        #expect(seen.first { !$0.isEmpty } == (1...12).map { "\"\($0)\"" }, "in order: \(seen)")
        for worker in workers { worker.send(signal: SIGTERM) }
    }

    @Test func theReadmeWorkerPoolDoesEachLineOnce() throws {
        let broker = try TestBroker()
        let readme = try String(contentsOf: DocumentedDurationTests.root.appendingPathComponent("README.md"), encoding: .utf8)
        func block(_ marker: String) throws -> String {
            guard let start = readme.range(of: "<!-- \(marker) -->\n```sh\n"),
                  let end = readme.range(of: "```", range: start.upperBound..<readme.endIndex) else {
                throw TestFailure("README.md has no \(marker) block")
            }
            return String(readme[start.upperBound..<end.lowerBound])
        }
        let bin = URL(fileURLWithPath: cliProduct("eventbus")).deletingLastPathComponent().path
        let environment = ["EVENTBUS_SOCKET": broker.socket, "PATH": bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
        // The workers' block as written, then `wait` so that the shell stays while they run.
        let workers = try RunningProcess("/bin/sh", ["-c", try block("worker-pool workers") + "wait\n"], in: broker.scratch, environment: environment)
        try broker.waitForSubscriptions(3)
        let producer = try RunningProcess("/bin/sh", ["-c", try block("worker-pool producer")], in: broker.scratch, environment: environment).wait()
        #expect(producer.status == 0, "\(producer)")
        var done: [String] = []
        try eventually("the workers never did all nine jobs") {
            done = workers.stdoutSoFar().split(separator: "\n").map(String.init)
            return Set(done).count >= 9
        }
        // Stop the workers as the README says, by their pids here (`eventbus clients` names them).
        let clients = try broker.run(["clients", "--json"])
        for line in clients.stdoutLines {
            let client = try jsonObject(line)
            if client["client"] as? String == "eventbus-listen", let pid = client["pid"] as? Int { kill(pid_t(pid), SIGTERM) }
        }
        #expect(try workers.wait().status == 0)
        done = workers.stdoutSoFar().split(separator: "\n").map(String.init)
        let jobs = done.compactMap { $0.split(separator: " ").last.map(String.init) }
        #expect(jobs.sorted() == (1...9).map(String.init).sorted(), "each job once: \(done)")
        #expect(Set(done.compactMap { $0.split(separator: " ").dropFirst().first }).count == 3, "three workers took a share: \(done)")
    }
}
