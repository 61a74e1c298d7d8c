// The CLI's retained events and history (issue 12): `publish --retain`,
// `get` (exit 1 quietly when there is none), `clear`, `listen --last`,
// `listen --since`, and `listen --resume FILE` across a listener restart and
// across a broker restart (a gap said on stderr).
import EventBusTestSupport
import Foundation
import Testing

@Suite("eventbus retained events and history")
struct CLIRetentionTests {
    @Test func getPrintsTheRetainedValueAndClearRemovesIt() throws {
        let broker = try TestBroker()
        let none = try broker.run(["get", "currency.changed"])
        #expect(none.status == 1 && none.stdout.isEmpty && none.stderr.isEmpty, "\(none)")
        #expect(try broker.run(["publish", "--retain", "currency.changed", #"{"code": "EUR"}"#]).status == 0)
        #expect(try broker.run(["publish", "-r", "currency.rates", "[1.1]"]).status == 0)
        let value = try broker.run(["get", "--format", "data", "currency.changed"])
        #expect(value.status == 0 && value.stdout == #"{"code":"EUR"}"# + "\n", "\(value)")
        let both = try broker.run(["get", "-f", "json", "currency.*"])
        #expect(try both.stdoutLines.map { try jsonObject($0)["type"] as? String } == ["currency.changed", "currency.rates"])
        #expect(try both.stdoutLines.allSatisfy { try jsonObject($0)["retained"] as? Bool == true })

        #expect(try broker.run(["clear", "currency.changed"]).status == 0)
        let again = try broker.run(["clear", "currency.changed"])
        #expect(again.status == 1 && again.stderr.isEmpty, "nothing to clear: 1, quietly")
        #expect(try broker.run(["get", "currency.changed"]).status == 1)
        #expect(try broker.run(["clear", "currency.*"]).status == 64, "clear takes a TYPE, not a pattern")
    }

    @Test func listenLastPrintsTheCurrentValuesThenNewEvents() throws {
        let broker = try TestBroker()
        #expect(try broker.run(["publish", "--retain", "mode", #""dark""#]).status == 0)
        let listener = try broker.start(["listen", "--last", "--format", "data", "--count", "2", "mode"])
        try broker.waitForSubscriptions(1)
        #expect(try broker.run(["publish", "mode", #""light""#]).status == 0)
        #expect(try listener.wait().stdout == "\"dark\"\n\"light\"\n")
    }

    @Test func listenSinceReplaysTheHistoryAfterSeq() throws {
        let broker = try TestBroker()
        var seqs: [String] = []
        for n in 1...4 { seqs.append(try broker.run(["publish", "-p", "job.step", "\(n)"]).stdout.trimmingCharacters(in: .newlines)) }
        let run = try broker.run(["listen", "--since", seqs[1], "--format", "json", "--count", "2", "job.*"])
        let events = try run.stdoutLines.map(jsonObject)
        #expect(events.map { $0["data"] as? Int } == [3, 4] && events.allSatisfy { $0["replayed"] as? Bool == true }, "\(run)")
    }

    @Test func listenResumeContinuesWhereTheLastRunStoppedAcrossListenerAndBrokerRestarts() throws {
        let state = try TemporaryDirectory(prefix: "ebstate-")
        defer { state.remove() }
        let broker = try TestBroker(options: ["--state-dir", state.path])
        let position = broker.scratch.file("orders.pos")
        let listen = ["listen", "--resume", position, "--format", "data", "order.>"]
        // First run: nothing saved yet, so from now on.
        let first = try broker.start(listen + ["--count", "1"])
        try broker.waitForSubscriptions(1)
        for n in 1...5 { #expect(try broker.run(["publish", "order.created", "\(n)"]).status == 0) }
        #expect(try first.wait().stdout == "1\n")
        // The listener restarted (cron, systemd): it continues with 2, in two runs.
        #expect(try broker.run(listen + ["--count", "3"]).stdout == "2\n3\n4\n")
        let third = try broker.run(listen + ["--count", "1"])
        #expect(third.stdout == "5\n" && third.stderr.isEmpty, "\(third)")

        // The broker restarts; what was published before the listener came back is replayed.
        try broker.stop()
        try broker.start()
        #expect(try broker.run(["publish", "order.paid", "6"]).status == 0)
        let afterRestart = try broker.run(listen + ["--count", "1"])
        #expect(afterRestart.stdout == "6\n", "\(afterRestart)")
        #expect(afterRestart.stderr.contains("the broker restarted"), "the possible loss is said: \(afterRestart.stderr)")
        #expect(try String(contentsOfFile: position, encoding: .utf8).hasPrefix(#"{"instance":""#))
        try broker.stop()
    }
}
