// The CLI under flow control (PROTOCOL.md "Flow control (1.2)"): a log piped
// through `publish --lines` reaches `listen | wc -l` whole, also when the
// listener's reader is slower (the broker holds the publisher, which reads
// its replies while it writes, so it never holds itself); `--overflow`; the
// new `stats` and `clients` fields in text and JSON.
//
// Before editing: the pipelines are real shell pipelines (`/bin/sh -c`), as
// a user would type them. 200,000 lines, not the 1,000,000: in a
// debug build the million took 16.4 s on a quiet machine and 20-24 s with
// other builds running (the debug `publish --lines` and broker are the
// bottleneck, not flow control: a release build does it in 1.9-2.3 s, with
// 0 dropped and the publisher held about 20 times), too much for one test
// in a suite that runs its tests side by side on 2 cores.
import EventBusTestSupport
import Foundation
import Testing

@Suite("eventbus flow control")
struct CLIFlowControlTests {
    /// Starts `/bin/sh -c SCRIPT` with `$EB` the CLI and `$SOCK` the broker's socket.
    private func shell(_ broker: TestBroker, _ script: String, stdin: String? = nil) throws -> RunningProcess {
        try RunningProcess("/bin/sh", ["-c", script], in: broker.scratch, stdin: stdin,
                           environment: ["EB": cliProduct("eventbus"), "SOCK": broker.socket])
    }

    private func subscriptions(_ broker: TestBroker) throws -> Int { (try broker.stats()["subscriptions"] as? Int) ?? 0 }

    @Test func seqPipedIntoPublishLinesReachesListenPipedIntoWcWhole() throws {
        let lines = 200_000
        let broker = try TestBroker()
        let counter = try shell(broker, "\"$EB\" --socket \"$SOCK\" listen --count \(lines) t | wc -l")
        try broker.waitForSubscriptions(1)
        let publisher = try shell(broker, "seq 1 \(lines) | \"$EB\" --socket \"$SOCK\" publish --lines t")
        let published = try publisher.wait(timeout: .seconds(120))
        #expect(published.status == 0, "\(published)")
        let counted = try counter.wait(timeout: .seconds(60))
        #expect(counted.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "\(lines)", "\(counted)")
        let stats = try broker.stats()
        #expect(stats["published"] as? Int == lines && stats["dropped"] as? Int == 0, "\(stats)")
    }

    /// A listener whose reader pauses (`sleep` before `wc`) with a small
    /// broker queue: the broker must hold `publish --lines`, and nothing is lost.
    @Test func aListenerThatReadsSlowerHoldsPublishLinesAndLosesNothing() throws {
        let lines = 30_000
        let broker = try TestBroker(options: ["--max-outbound", "64K"])
        let counter = try shell(broker, "\"$EB\" --socket \"$SOCK\" listen --count \(lines) t | { sleep 0.3; wc -l; }")
        try broker.waitForSubscriptions(1)
        let publisher = try shell(broker, "seq 1 \(lines) | \"$EB\" --socket \"$SOCK\" publish --lines t")
        #expect(try publisher.wait(timeout: .seconds(60)).status == 0)
        let counted = try counter.wait(timeout: .seconds(60))
        #expect(counted.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "\(lines)", "\(counted)")
        let stats = try broker.stats()
        #expect(stats["dropped"] as? Int == 0, "\(stats)")
        #expect((stats["holds"] as? Int ?? 0) > 0, "the publisher was held: \(stats)")
    }

    /// With a 4 KiB queue, replies not read for a moment would put the
    /// publisher over its limit and the broker would stop reading it: a
    /// writer that never read would block for good. It reads while it writes.
    @Test func publishLinesReadsItsRepliesWhileItWritesSoItNeverHoldsItself() throws {
        let lines = 50_000
        let broker = try TestBroker(options: ["--max-outbound", "4K"])
        let publisher = try shell(broker, "seq 1 \(lines) | \"$EB\" --socket \"$SOCK\" publish --lines t")
        let run = try publisher.wait(timeout: .seconds(60))
        #expect(run.status == 0, "\(run)")
        #expect(try broker.stats()["published"] as? Int == lines)
    }

    @Test func listenAndWaitSendOverflowOnlyWhenAskedAndRejectUnknownRules() throws {
        let broker = try TestBroker()
        let plain = try broker.start(["listen", "--count", "1", "a"])
        let dropOld = try broker.start(["listen", "--count", "1", "--overflow", "drop-old", "b"])
        let waiting = try broker.start(["wait", "--overflow", "drop-new", "c"])
        try broker.waitForSubscriptions(3)
        let clients = try broker.run(["clients", "--format", "json"])
        #expect(clients.status == 0, "\(clients)")
        var overflowOf: [String: String] = [:]
        for line in clients.stdoutLines {
            let object = try jsonObject(line)
            if let patterns = object["patterns"] as? [String], let first = patterns.first { overflowOf[first] = object["overflow"] as? String }
        }
        #expect(overflowOf == ["a": "wait", "b": "drop-old", "c": "drop-new"], "\(clients.stdout)")
        for type in ["a", "b", "c"] { #expect(try broker.run(["publish", type]).status == 0) }
        for listener in [plain, dropOld, waiting] { #expect(try listener.wait().status == 0) }

        for command in [["listen", "--overflow", "sometimes", "a"], ["wait", "--overflow", "sometimes", "a"]] {
            let bad = try broker.run(command)
            #expect(bad.status == 64, "\(bad)")
            #expect(bad.stderr.contains("unknown overflow rule 'sometimes'") && bad.stderr.contains("wait, drop-new, drop-old, disconnect"), "\(bad)")
        }
        let help = try broker.run(["listen", "--help"])
        #expect(help.stdout.contains("--overflow RULE") && help.stdout.contains("drop-old"))
    }

    @Test func statsAndClientsShowTheFlowFieldsInTextAndJSON() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "--count", "1", "t"])
        try broker.waitForSubscriptions(1)

        let text = try broker.run(["stats"])
        #expect(text.status == 0, "\(text)")
        for field in ["held", "holds", "stalls"] {
            #expect(text.stdoutLines.contains { $0.hasPrefix(field + " ") && $0.hasSuffix(" 0") }, "\(field) in \(text.stdout)")
        }
        let json = try jsonObject(try broker.run(["stats", "--json"]).stdout.trimmingCharacters(in: .newlines))
        #expect(json["held"] as? Int == 0 && json["holds"] as? Int == 0 && json["stalls"] as? Int == 0, "\(json)")

        let table = try broker.run(["clients", "--format", "table"])
        #expect(table.status == 0, "\(table)")
        let header = table.stdoutLines.first?.split(separator: " ").map(String.init) ?? []
        // (1.3) PENDING, SERVING, SERVES and GROUPS follow, `-` for none.
        #expect(header.suffix(8) == ["HOLDING", "HELD", "BEHIND", "PENDING", "SERVING", "PATTERNS", "SERVES", "GROUPS"], "\(table.stdout)")
        let row = table.stdoutLines.first { $0.split(separator: " ").contains("t") }?.split(separator: " ").map(String.init) ?? []
        #expect(row.suffix(8) == ["0", "false", "false", "0", "0", "t", "-", "-"], "\(table.stdout)")
        let objects = try broker.run(["clients", "--format", "json"]).stdoutLines.map(jsonObject)
        let mine = objects.first { ($0["patterns"] as? [String]) == ["t"] }
        #expect(mine?["holding"] as? Int == 0 && mine?["held"] as? Bool == false && mine?["behind"] as? Bool == false, "\(objects)")

        #expect(try broker.run(["publish", "t"]).status == 0)
        #expect(try listener.wait().status == 0)
    }
}
