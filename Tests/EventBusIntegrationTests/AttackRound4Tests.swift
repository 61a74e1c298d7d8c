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

}
