// PROTOCOL.md "Quotas (1.1)" and "Introspection (1.1)" where only the
// eventbusd process shows them. The quota table's rows that need only a
// connection's uid (connections, subscriptions, incomplete frames, the
// outbound fair share, `stats.me`, `clients`, the policy's `limit` lines) are
// scenarios written once in EventBusScenarios/QuotaScenarios.swift, run
// against eventbusd with setpriv'd clients (ProcessBus.swift, root) and in
// process by EventBusServerTests (no root). Retained events: the core's
// QuotaTests. Asserted: counts, limits, closes and RSS ceilings with generous
// margins; never timings (scripts/attack measures those).
//
// Before editing: `QuotaIntegrationTests` needs root: its row bounds the
// broker process's RSS while another uid (4112, setpriv'd) floods it, and in
// process the RSS would be the test's own. `QuotaOwnUIDTests` needs no root.
import EventBusScenarios
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// A broker whose socket other uids can reach.
@discardableResult
func withSharedBroker<T>(_ arguments: [String], _ body: (BrokerProcess) throws -> T) throws -> T {
    try withBroker(arguments) { broker in
        chmod(broker.directory.path, 0o755)
        return try body(broker)
    }
}

@Suite("Quotas (1.1): the broker's RSS under another uid's flood", .enabled(if: getuid() == 0 && findInPath("setpriv") != nil, "needs root and setpriv"))
struct QuotaIntegrationTests {
    @Test("Outbound: replies count against the queues; a connection over its limit, or its uid over its own, is not read; nothing is dropped")
    func outboundReplies() throws {
        try withSharedBroker(["--max-outbound", "64K", "--max-outbound-per-uid", "128K"]) { broker in
            let before = try broker.rssKiB()
            let flooders = try connectAs(uid: 4112, path: broker.socketPath, count: 4)
            let pings = Array(String(repeating: #"{"op":"ping","req":123456}"# + "\n", count: 40_000).utf8)  // 1 MB each
            var sent: [Int] = []
            for client in flooders { sent.append(try client.sendWithoutReading(pings)) }
            let root = try broker.connect()
            let queued = try root.clientList().filter { $0.int("uid") == 4112 }.compactMap { $0.int("queued_bytes") }
            #expect(queued.allSatisfy { $0 <= (64 << 10) + 4096 }, "per connection: \(queued)")
            #expect(queued.reduce(0, +) <= (128 << 10) + 4 * 4096, "per uid: \(queued)")
            #expect(try broker.rssKiB() - before < 64 << 10, "RSS follows the count")
            // Read everything: every ping sent gets its reply, in order. All four
            // are read by turns: while the uid is over its limit none of its
            // connections is read, so one reader alone could wait for ever on
            // its siblings' queues (the uid's own doing, as the rule means).
            var replies = Array(repeating: [Frame](), count: flooders.count)
            let deadline = ContinuousClock.now + .seconds(60)
            while zip(replies, sent).contains(where: { $0.count < $1 / 27 }), ContinuousClock.now < deadline {
                for (i, client) in flooders.enumerated() where replies[i].count < sent[i] / 27 {
                    do {
                        while replies[i].count < sent[i] / 27 { replies[i].append(try client.readFrame(timeout: .milliseconds(20))) }
                    } catch RawClientError.timedOut {}
                }
            }
            for (i, frames) in replies.enumerated() {
                #expect(frames.count == sent[i] / 27, "connection \(i): \(frames.count) of \(sent[i] / 27) replies")
                #expect(frames.allSatisfy { $0.op == "ok" && $0.req == .integer(123456) })
            }
        }
    }
}

@Suite("Quotas (1.1): what eventbus and hello show (no root)")
struct QuotaOwnUIDTests {
    @Test("eventbus clients shows each connection with its name and patterns: JSON Lines when piped, a table on request")
    func clientsCommand() throws {
        try withBroker { broker in
            let mine = try (0..<2).map { _ in try broker.connect() }
            try mine[0].ok(#"{"op":"hello","client":"attacker","req":1}"#)
            try mine[0].ok(#"{"op":"subscribe","type":"held.>","req":2}"#)
            let run = try runProcess(productsDirectory() + "/eventbus", ["--socket", broker.socketPath, "clients"], timeout: .seconds(20))
            #expect(run.status == .exited(0), "\(run.stderr)")
            let lines = run.stdout.split(separator: "\n")
            #expect(lines.count == 3, "JSON Lines when piped (its own connection included): \(run.stdout)")
            #expect(lines.contains { $0.contains("\"client\":\"attacker\"") && $0.contains("\"held.>\"") })
            let table = try runProcess(productsDirectory() + "/eventbus", ["--socket", broker.socketPath, "clients", "--format", "table"], timeout: .seconds(20))
            let row = table.stdout.split(separator: "\n").first { $0.contains("attacker") }
            #expect(table.stdout.drop { $0 == " " }.hasPrefix("CONN") && row?.split(separator: " ").contains(Substring("\(getuid())")) == true, "\(table.stdout)")
            withExtendedLifetime(mine) {}
        }
    }

    @Test("hello lists quotas and clients among its features")
    func helloFeatures() throws {
        try withBroker { broker in
            let reply = try broker.connect().ok(#"{"op":"hello","req":1}"#)
            let features = reply.array("features") as? [String] ?? []
            #expect(features.contains("quotas") && features.contains("clients"), "\(features)")
        }
    }
}
