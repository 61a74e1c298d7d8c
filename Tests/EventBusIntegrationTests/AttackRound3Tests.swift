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
}
