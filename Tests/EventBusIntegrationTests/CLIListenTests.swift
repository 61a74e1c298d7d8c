// `eventbus listen` against a real broker: every `--format`, `--count`,
// `--timeout` (124), a closed stdout (`| head -n 1`, quiet 0), SIGINT, the
// broker going away (69) and `--reconnect` across a broker restart.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("eventbus listen")
struct CLIListenTests {
    /// Publishes one event with known fields through a raw client and returns its `ok`.
    @discardableResult
    private func publishRaw(_ broker: TestBroker, _ type: String, data: String, source: String = "billing", id: String = "inv-1") throws -> [String: Any] {
        try LineClient(broker.socket).request("{\"op\":\"publish\",\"req\":1,\"type\":\"\(type)\",\"source\":\"\(source)\",\"id\":\"\(id)\",\"data\":\(data)}")
    }

    @Test func jsonFormatPrintsTheCompactEventFrame() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "--format", "json", "--count", "1", "order.*"])
        try broker.waitForSubscriptions(1)
        try publishRaw(broker, "order.created", data: "{ \"id\" : 42 ,\t\"note\": \"a b\" }")
        let run = try listener.wait()
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr == "")
        #expect(run.stdoutLines.count == 1)
        let line = run.stdoutLines[0]
        #expect(line.hasPrefix("{\"op\":\"event\",\"seq\":"))
        #expect(line.hasSuffix(",\"data\":{\"id\":42,\"note\":\"a b\"}}"))
        let event = try jsonObject(line)
        #expect(event["type"] as? String == "order.created")
        #expect(event["source"] as? String == "billing")
        #expect(event["id"] as? String == "inv-1")
        #expect(event["pid"] as? Int == Int(getpid()))
    }

    @Test func jsonIsTheDefaultWhenStdoutIsNotATerminal() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "--count", "1"])
        try broker.waitForSubscriptions(1)
        try publishRaw(broker, "a.b", data: "1")
        let run = try listener.wait()
        #expect(try jsonObject(run.stdout)["op"] as? String == "event")
    }

    @Test func dataFormatPrintsOnlyData() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "-f", "data", "-n", "2"])
        try broker.waitForSubscriptions(1)
        try publishRaw(broker, "a.b", data: "[1, {\"x\": null}]")
        try publishRaw(broker, "a.c", data: "\"text\"")
        #expect(try listener.wait().stdoutLines == ["[1,{\"x\":null}]", "\"text\""])
    }

    @Test func prettyFormatPrintsLocalTimeTypeAndDataWithoutColourOffATerminal() throws {
        let broker = try TestBroker()
        // A fixed zone without tzdata: UTC+05:30 in POSIX TZ syntax.
        let pretty = try broker.start(["listen", "--format", "pretty", "--count", "1"], environment: ["TZ": "IST-5:30"])
        let json = try broker.start(["listen", "--format", "json", "--count", "1"])
        try broker.waitForSubscriptions(2)
        try publishRaw(broker, "sensor.temp", data: "{\"c\": 21.5}")
        let prettyRun = try pretty.wait()
        let event = try jsonObject(try json.wait().stdout)
        let utc = try #require(event["time"] as? String)  // 2026-11-29T13:00:00.123Z
        let hour = Int(utc.dropFirst(11).prefix(2))!, minute = Int(utc.dropFirst(14).prefix(2))!
        let total = (hour * 60 + minute + 330) % (24 * 60)
        let local = String(format: "%02d:%02d:%@", total / 60, total % 60, String(utc.dropFirst(17).prefix(6)))
        #expect(prettyRun.stdout == "\(local) sensor.temp {\"c\":21.5}\n", "\(prettyRun)")
        #expect(!prettyRun.stdout.contains("\u{1B}"))
    }

    @Test func cloudEventsFormatIsStrictCloudEvents() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "--format", "cloudevents", "--count", "2"])
        try broker.waitForSubscriptions(1)
        try publishRaw(broker, "order.created", data: "{\"id\": 42}")
        try publishRaw(broker, "order.shipped", data: "null", source: "my shop:1", id: "")
        let lines = try listener.wait().stdoutLines
        try #require(lines.count == 2)
        let first = try jsonObject(lines[0])
        #expect(first["specversion"] as? String == "1.0")
        #expect(first["type"] as? String == "order.created")
        #expect(first["source"] as? String == "billing")
        #expect(first["id"] as? String == "inv-1")
        #expect(first["datacontenttype"] as? String == "application/json")
        #expect((first["data"] as? [String: Any])?["id"] as? Int == 42)
        #expect(first["pid"] as? Int == Int(getpid()))
        let sequence = try #require(first["sequence"] as? String)
        #expect(sequence.count == 20 && sequence.allSatisfy(\.isNumber))
        let time = try #require(first["time"] as? String)
        #expect(time.count == 24 && time.hasSuffix("Z"))
        // Extension names: lower-case letters and digits only (CloudEvents 1.0 "Naming Conventions").
        for key in first.keys where !["specversion", "id", "source", "type", "time", "datacontenttype", "data"].contains(key) {
            #expect(key.allSatisfy { $0.isLowercase || $0.isNumber }, "extension \(key)")
        }
        let second = try jsonObject(lines[1])
        #expect(second["source"] as? String == "my%20shop%3A1")  // a valid URI-reference
        #expect((second["id"] as? String)?.isEmpty == false)    // id is REQUIRED non-empty
        #expect(second["data"] is NSNull)
        #expect((second["sequence"] as? String ?? "") > sequence)
    }

    @Test func countStopsAfterNEventsInPublishOrder() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "--format", "data", "--count", "3", "n"])
        try broker.waitForSubscriptions(1)
        for i in 1...5 { try publishRaw(broker, "n", data: "\(i)") }
        let run = try listener.wait()
        #expect(run.status == 0)
        #expect(run.stdoutLines == ["1", "2", "3"])
    }

    @Test func patternsSelectEvents() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "--format", "data", "--count", "2", "order.*", "audit.>"])
        try broker.waitForSubscriptions(2)
        try publishRaw(broker, "order", data: "0")
        try publishRaw(broker, "order.a.b", data: "1")
        try publishRaw(broker, "order.created", data: "2")
        try publishRaw(broker, "audit.x.y", data: "3")
        #expect(try listener.wait().stdoutLines == ["2", "3"])
    }

    @Test func timeoutExits124QuietlyWhenNothingArrives() throws {
        let broker = try TestBroker()
        let run = try broker.run(["listen", "--timeout", "300ms"])
        #expect(run.status == 124, "\(run)")
        #expect(run.stdout == "")
        #expect(run.stderr == "")
    }

    @Test func timeoutRestartsWithEveryEvent() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "--format", "data", "--timeout", "1s"])
        try broker.waitForSubscriptions(1)
        // Each event goes once the listener printed the one before (no bare
        // sleep), until it has outlived its 1 s timeout twice over.
        let started = ContinuousClock.now
        var published = 0
        while ContinuousClock.now - started < .seconds(2) {
            published += 1
            try publishRaw(broker, "tick", data: "\(published)")
            let deadline = ContinuousClock.now + .seconds(10)
            while listener.stdoutSoFar().split(separator: "\n").count < published {
                try #require(listener.isRunning, "the listener ended after \(published - 1) events: \(listener.stderrSoFar())")
                try #require(ContinuousClock.now < deadline)
                usleep(5_000)
            }
        }
        let run = try listener.wait()
        #expect(run.status == 124)
        #expect(run.stdoutLines == (1...published).map(String.init))
    }

    @Test func closedStdoutEndsListenQuietlyWithZero() throws {
        let broker = try TestBroker()
        let script = "set -o pipefail; '\(cliProduct("eventbus"))' --socket '\(broker.socket)' listen --format data | head -n 1"
        let pipeline = try RunningProcess("/bin/bash", ["-c", script], in: broker.scratch)
        try broker.waitForSubscriptions(1)
        try publishRaw(broker, "a", data: "1")
        // Only one event: listen must notice head has gone without writing again.
        let run = try pipeline.wait(timeout: .seconds(10))
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "1\n")
        #expect(run.stderr == "")
        #expect(try broker.stats()["subscriptions"] as? Int == 0)
    }

    @Test func aClosedStdoutDescriptorNeverBecomesTheBrokerConnection() throws {
        let broker = try TestBroker()
        // With fd 1 closed, the socket would get fd 1 and events would be written back to the broker.
        let listener = try RunningProcess(cliProduct("eventbus"), ["--socket", broker.socket, "listen", "--count", "1"], in: broker.scratch, closeStandardOutput: true)
        try broker.waitForSubscriptions(1)
        let stdoutTarget = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(listener.pid)/fd/1")
        #expect(stdoutTarget == "/dev/null")
        try publishRaw(broker, "a", data: "1")
        let run = try listener.wait()
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr == "")
    }

    @Test func sigintEndsListenQuietly() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen"])
        try broker.waitForSubscriptions(1)
        listener.send(signal: SIGINT)
        let run = try listener.wait()
        #expect(run.signal == SIGINT || run.status == 130, "\(run)")
        #expect(run.stderr == "")
    }

    @Test func brokerStoppingEndsListenWithUnavailable() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen"])
        try broker.waitForSubscriptions(1)
        try broker.stop()
        let run = try listener.wait()
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr == "eventbus: the broker at \(broker.socket) closed the connection\n")
    }

    @Test func reconnectKeepsListeningAcrossABrokerRestart() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "--reconnect", "--format", "data", "--count", "2", "job.*"])
        try broker.waitForSubscriptions(1)
        try publishRaw(broker, "job.one", data: "1")
        try broker.stop()
        try broker.start()
        try broker.waitForSubscriptions(1)  // resubscribed on the new broker
        try publishRaw(broker, "job.two", data: "2")
        let run = try listener.wait()
        #expect(run.status == 0, "\(run)")
        #expect(run.stdoutLines == ["1", "2"])
        let lines = run.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(run.stderr)")
        #expect(lines.first == "eventbus: lost the connection to the broker at \(broker.socket); reconnecting")
        #expect(lines.dropFirst().first == "eventbus: reconnected to the broker at \(broker.socket)")
        // (1.1) The new broker run replays its history; the possible loss before it is said.
        #expect(lines.last?.hasPrefix("eventbus: the broker restarted (run ") == true && lines.last?.contains("replaying this run's from seq 1") == true)
    }

    @Test func reconnectWaitsForABrokerThatIsNotRunningYet() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        let socket = scratch.path + "/bus.sock"
        let listener = try RunningProcess(cliProduct("eventbus"), ["--socket", socket, "listen", "-r", "-f", "data", "-n", "1"], in: scratch)
        // The sentinel: its first attempt failed, so the broker below is one it waited for.
        try listener.waitForStderr { $0.hasSuffix("; retrying\n") }
        let broker = try TestBroker(scratch: scratch)
        try broker.waitForSubscriptions(1)
        try publishRaw(broker, "late.event", data: "true")
        let run = try listener.wait()
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "true\n")
        let lines = run.stderr.split(separator: "\n")
        #expect(lines.count == 2, "\(run.stderr)")
        #expect(lines.first?.hasPrefix("eventbus: cannot connect to the broker at \(socket): ") == true)
        #expect(lines.first?.hasSuffix("; retrying") == true)
        #expect(lines.last == "eventbus: connected to the broker at \(socket)")
    }

    @Test func aConnectionOverTheBrokersLimitExitsTempfailWithItsMessage() throws {
        let broker = try TestBroker(options: ["--max-connections", "2"])
        // Fill both slots: a raw client (also used to watch the broker) and a listener.
        let watcher = try LineClient(broker.socket)
        let holder = try broker.start(["listen"])
        let deadline = ContinuousClock.now + .seconds(10)
        while try watcher.request("{\"op\":\"stats\",\"req\":1}")["subscriptions"] as? Int != 1 {
            try #require(ContinuousClock.now < deadline)
            usleep(5_000)
        }
        for command in [["listen"], ["wait", "a.b"], ["publish", "a.b", "1"], ["stats"]] {
            let run = try broker.run(command)
            #expect(run.status == 75, "\(command): \(run)")
            #expect(run.stderr.contains("too many connections"), "\(command): \(run)")
            #expect(run.stderr.hasSuffix("(limit)\n"), "\(command): \(run)")
            #expect(!run.stderr.contains("before answering"), "the broker did answer: \(run)")
        }
        holder.send(signal: SIGTERM)
        _ = try holder.wait()
    }

    @Test func badPatternIsAUsageError() throws {
        let broker = try TestBroker()
        let run = try broker.run(["listen", "order.>.x"])
        #expect(run.status == 64)
        #expect(run.stderr.hasPrefix("eventbus: invalid pattern 'order.>.x'"))
    }
}
