// The fourth attack round's breaks (a hostile local user of another uid,
// dbus-broker's threat model), against the real broker with attackers of
// other uids (setpriv): log lines counted per uid.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Attack round 4", .enabled(if: getuid() == 0 && findInPath("setpriv") != nil))
struct AttackRound4Tests {
    /// Before: the rate limit in front of the log was keyed by the message
    /// text alone, so another uid's 30 limit hits used the 10 lines per 10 s
    /// of "connection # (pid #) reached a limit: ..." and root's own limit hit
    /// went unlogged (suppressed). Now each uid has its own burst.
    @Test("Another uid's repeated limit hits do not hide root's limit hit from the log")
    func anotherUIDCannotHideRootsLogLines() throws {
        try withSharedBroker(["--max-subscriptions", "1"]) { broker in
            let attacker = try connectAs(uid: 4321, path: broker.socketPath)[0]
            try attacker.ok(#"{"op":"subscribe","type":"a.0","req":"s"}"#)
            for i in 1...30 { try attacker.error(#"{"op":"subscribe","type":"a.\#(i)","req":"s\#(i)"}"#) }
            let root = try broker.connect()
            try root.ok(#"{"op":"subscribe","type":"r.0","req":"s"}"#)
            try root.error(#"{"op":"subscribe","type":"r.1","req":"s1"}"#)
            let rootLine = "(pid \(getpid()), uid 0) reached a limit"
            try waitUntil("root's limit line in the broker's log", timeout: .seconds(10)) { broker.stderrText().contains(rootLine) }
            let attackerLines = broker.stderrText().split(separator: "\n").filter { $0.contains("uid 4321) reached a limit") }
            #expect(attackerLines.count <= 10, "the attacker's own lines stay rate-limited: \(attackerLines.count)")
        }
    }

    /// Before: only the requester uid's quota was checked before an answer
    /// was queued, and uid 0 has none, so another uid's server could put
    /// 1024 answers of up to --max-frame into one root connection's queue
    /// (seen: 125 MB at 600 pending, the limit 8 MiB). Now --max-outbound
    /// (and --max-queued) bound it as they bound events: the rest are `limit`.
    @Test("Another uid's server cannot fill a root requester's queue past --max-outbound with answers")
    func answersToRootStayWithinTheConnectionLimit() throws {
        try withSharedBroker(["--max-outbound", "1M"]) { broker in
            let server = try connectAs(uid: 4321, path: broker.socketPath)[0]
            try server.ok(#"{"op":"subscribe","type":"status.x","serve":true,"req":"s"}"#)
            let root = try broker.connect()
            var text = ""
            for i in 0..<20 { text += #"{"op":"request","type":"status.x","timeout":60000,"req":\#(i)}"# + "\n" }
            try root.sendBytes(Array(text.utf8))
            let requests = try server.readFrames(count: 20, timeout: .seconds(60))
            let pad = String(repeating: "z", count: 200_000)
            var accepted = 0
            for request in requests where request.op == "request" {
                let ok = try server.ok(#"{"op":"reply","to":"\#(request.string("reply") ?? "")","data":"\#(pad)","req":"r"}"#, timeout: .seconds(60))
                if ok.bool("accepted") == true { accepted += 1 }
            }
            let monitor = try broker.connect()
            let clients = try monitor.ok(#"{"op":"clients","req":"c"}"#).array("clients") as? [[String: Any]] ?? []
            let queued = clients.filter { ($0["uid"] as? NSNumber)?.intValue == 0 }.compactMap { ($0["queued_bytes"] as? NSNumber)?.intValue }
            #expect(accepted < 20, "accepted \(accepted) of 20 answers of 200 KB for a 1 MiB queue")
            #expect(queued.allSatisfy { $0 <= 1 << 20 }, "root's requester queue: \(queued)")
            let answers = try root.readFrames(count: 20, timeout: .seconds(60))
            #expect(answers.filter { $0.code == "limit" }.count == 20 - accepted, "\(answers.map { $0.raw.prefix(160) })")
            #expect(answers.filter { $0.op == "ok" }.count == accepted)
        }
    }

    /// Before: a request that timed out gave its requester's share of the
    /// server's reply tokens back at once though its frame stayed queued to
    /// the server, so three rounds of 2,000 requests with 200 ms deadlines
    /// each reached a root server that was not reading: 6,000 queued, all
    /// dead, within a "2,048" share. Now the share is kept until the frame
    /// is written: the three rounds reach about 2,048 in all (plus what the
    /// kernel's socket buffer took), and once the server reads, the share
    /// comes back.
    @Test("Another uid's expired requests still queued to root's server count in its fair share until written")
    func expiredQueuedRequestsStayInTheFairShare() throws {
        try withSharedBroker([]) { broker in
            let server = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.dead","serve":true,"req":"s"}"#)
            let attacker = try connectAs(uid: 4321, path: broker.socketPath)[0]
            let pad = String(repeating: "p", count: 1000)
            /// Requests that reached the server (they time out), of `n` asked.
            func round(_ n: Int) throws -> Int {
                var text = ""
                for i in 0..<n { text += #"{"op":"request","type":"svc.dead","timeout":200,"req":\#(i),"data":"\#(pad)"}"# + "\n" }
                try attacker.sendBytes(Array(text.utf8), timeout: .seconds(120))
                let answers = try attacker.readFrames(count: n, timeout: .seconds(120))
                // (limit: over the connection's 1024 pending requests while a round's first ones are live)
                let expected: Set<String?> = ["timeout", "no_responders", "limit"]
                #expect(answers.allSatisfy { expected.contains($0.code) }, "\(answers.first { !expected.contains($0.code) }?.raw ?? "")")
                return answers.filter { $0.code == "timeout" }.count
            }
            let reached = try (0..<3).map { _ in try round(2000) }
            #expect(reached[0] >= 1000 && reached.reduce(0, +) < 4000, "reached per round: \(reached)")
            // The server reads what was queued to it (its ping's ok comes after it all).
            var skipped: [Frame] = []
            try server.request(#"{"op":"ping","req":"p"}"#, skippingEventsInto: &skipped, timeout: .seconds(120))
            #expect(skipped.count == reached.reduce(0, +), "every request that reached it, read")
            let after = try round(1000)
            #expect(after >= 900, "the share came back once the frames were written: \(after) of 1000")
        }
    }
}
