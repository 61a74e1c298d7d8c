// Regression tests for what the attack round broke (docs/RELIABILITY.md
// "Attack round"), against the real broker with clients of other uids
// (`connectAs`, uids 4201...4299). Asserted: counts, closes, what reaches
// whom; the timing side of each break (another uid's ping while it happens)
// is measured by scripts/attack, never asserted here.
//
// Before editing: each test settles with a sentinel or a `stats` before it
// asserts an absence.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Attack round")
struct AttackRoundTests {
    /// A peer that fills its socket with frames while its reading is paused
    /// (a full outbound queue it never reads) and then closes used to have
    /// all of them handled at once, outside the fair turns (500 ms for 200
    /// such peers); they are now read in turn. Either way every frame it
    /// wrote must be handled, and its connection must go even though it has
    /// a subscription (nobody is left to read its events).
    @Test func aPeerThatClosesWithAFullSocketWhilePausedHasEveryFrameHandledAndGoes() throws {
        try withSharedBroker(["--max-outbound", "64K"]) { broker in
            let root = try RawClient(path: broker.socketPath)
            let attacker = try #require(try connectAs(uid: 4201, path: broker.socketPath).first)
            try attacker.ok(#"{"op":"subscribe","type":">","req":"s"}"#)
            let frame = Array(#"{"op":"publish","type":"hup.x","req":1}"#.utf8) + [0x0A]
            let flood = [UInt8]((0..<20_000).map { _ in frame }.joined())
            let written = try attacker.sendWithoutReading(flood)
            let complete = written / frame.count
            #expect(complete > 2_000, "the broker paused reading after \(complete) frames: the test needs its socket full")
            #expect(try root.stats().int("published")! < complete, "its reading is paused")
            attacker.close()

            try waitUntil("the departed peer's connection is closed", timeout: .seconds(60)) {
                try root.stats().int("connections") == 1
            }
            let stats = try root.stats()
            #expect(stats.int("published") == complete, "every frame it wrote completely was handled, and only those")
            #expect(stats.int("queued_bytes") == 0 && stats.int("subscriptions") == 0)
        }
    }
}
