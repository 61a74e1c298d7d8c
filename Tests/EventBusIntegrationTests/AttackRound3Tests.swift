// (issue 37) The third attack round's breaks, against the real broker with
// attackers of other uids (setpriv): never-readers of every overflow kind
// parked with exact counts, and per-type counters that another uid's
// publishing cannot erase.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Attack round 3 (issue 37)", .enabled(if: getuid() == 0 && findInPath("setpriv") != nil))
struct AttackRound3Tests {
    @Test("Never-reading wait subscribers of another uid: their later dropped counts are exact")
    func waitNeverReaders() throws {
        try withSharedBroker(["--max-outbound", "64K"]) { try ParkedSubscriberIntegrationTests.neverReaders($0, overflow: "wait") }
    }

    /// Stalled after 1 ms with their notice unread: parked almost at once.
    @Test("Never-reading drop-old subscribers of another uid: their later dropped counts are exact")
    func dropOldNeverReaders() throws {
        try withSharedBroker(["--max-outbound", "64K", "--stall-timeout", "1ms"]) { try ParkedSubscriberIntegrationTests.neverReaders($0, overflow: "drop-old") }
    }

    /// The `types` op's entries, by type.
    static func types(_ client: RawClient, limit: Int) throws -> [String: [String: Any]] {
        let list = try client.ok(#"{"op":"types","limit":\#(limit),"req":"t"}"#).array("types") as? [[String: Any]] ?? []
        var byType: [String: [String: Any]] = [:]
        for item in list { if let type = item["type"] as? String { byType[type] = item } }
        return byType
    }

    @Test("Another uid publishing 70,000 distinct types leaves root's types and counters as they were")
    func anotherUIDCannotEraseRootsTypeCounters() throws {
        try withSharedBroker([]) { broker in
            let root = try broker.connect()
            let listener = try broker.connect()
            try listener.ok(#"{"op":"subscribe","type":"root.>","req":"s"}"#)
            for _ in 0..<3 { try root.publish("root.plain") }
            try root.ok(#"{"op":"publish","type":"root.kept","retain":true,"req":"r"}"#)
            _ = try listener.readFrames(count: 4)
            let before = try Self.types(root, limit: 100_000)
            let names = ["root.plain", "root.kept"]
            for name in names { #expect(before[name] != nil, "\(name) listed before") }

            let attacker = try connectAs(uid: 4404, path: broker.socketPath)[0]
            var n = 0
            while n < 70_000 {
                var bytes: [UInt8] = []
                for i in n..<min(n + 500, 70_000) { bytes += Array(#"{"op":"publish","type":"flood.t\#(i)"}"#.utf8) + [0x0A] }
                try attacker.sendBytes(bytes)
                n += 500
            }
            try attacker.ok(#"{"op":"ping","req":"p"}"#)  // every publish handled

            let after = try Self.types(root, limit: 100_000)
            for name in names {
                guard let was = before[name], let now = after[name] else {
                    Issue.record("\(name) is gone from root's types")
                    continue
                }
                for field in ["published", "delivered", "dropped", "last_seq", "retained"] {
                    #expect("\(was[field] ?? "nil")" == "\(now[field] ?? "nil")", "\(name).\(field)")
                }
            }
            let flood = after.keys.filter { $0.hasPrefix("flood.") }.count
            #expect(flood < 65_536 && flood > 60_000, "the attacker kept its share (\(flood)), not root's")
            #expect(after["flood.t69999"] != nil && after["flood.t0"] == nil, "it forgot its own oldest")
        }
    }

    /// (issue 37 item 5) Without the window, root's 40,000 events at the
    /// holder's 40 KB/s would hold root for about two minutes (the stall
    /// timeout, 30 s here, never fires: the holder takes bytes all along).
    @Test("A trusted holder that keeps root's publisher held for a window is behind for it: root is answered, the holder's events and drops exact")
    func trustedHolderBoundedInTime() throws {
        let policy = try AccessPolicyTests.PolicyFile("allow hold - user=4501\n")
        let arguments = ["--max-outbound", "65536", "--stall-timeout", "30s", "--trusted-hold-window", "500ms", "--policy", policy.path]
        try withSharedBroker(arguments) { broker in
            let holder = try connectAs(uid: 4501, path: broker.socketPath)[0]
            try holder.subscribe("p.>")
            let publisher = try broker.connect()
            let group = DispatchGroup()
            let done = RobustShared(false)
            FlowControlTests.flood(publisher, "p.x", count: 40_000, group: group, done: done)
            var events = 0, dropped = 0
            func take(_ frame: Frame) {
                if frame.op == "event", frame.type?.hasPrefix("p.x") == true { events += 1 }
                if frame.op == "dropped" { dropped += frame.int("count") ?? 0 }
            }
            // About 40 frames (4 KB) every 100 ms until root is answered.
            while !done.withLock({ $0 }) {
                for _ in 0..<40 {
                    // (nothing may be left once root is done: a short wait, then the drain below)
                    guard let frame = try? holder.readFrame(timeout: .seconds(2)) else { break }
                    take(frame)
                }
                usleep(100_000)
            }
            group.wait()
            try holder.send(#"{"op":"ping","req":"drained"}"#)
            while true {
                let frame = try holder.readFrame(timeout: .seconds(60))
                if frame.op == "ok" && frame.string("req") == "drained" { break }
                take(frame)
            }
            try publisher.publish("p.sentinel")
            while true {
                let frame = try holder.readFrame(timeout: .seconds(60))
                if frame.op == "event" && frame.type == "p.sentinel" { break }
                take(frame)
            }
            #expect(events + dropped == 40_001, "\(events) events + \(dropped) dropped: every event of root's (and its end marker) read or counted")
            #expect(dropped > 0, "behind for root: root's events that did not fit were dropped for it")
            #expect((try publisher.stats().int("stalls") ?? 0) >= 1, "counted as stalled")
        }
    }
}
