// PROTOCOL.md "Per-type counters (1.2)" against another uid (issue 37, third
// attack round) in an in-process server with handed connections of made-up
// uids, so it runs without root: a uid's flood of distinct types evicts its
// own oldest counters, never root's.
import EventBusScenarios
import EventBusTestSupport
import Foundation
import Testing

@Suite("Per-type counters against another uid, in process (no root)")
struct ServerTypeCounterTests {
    /// The `types` op's entries, by type.
    static func types(_ client: RawClient, limit: Int) throws -> [String: [String: Any]] {
        let list = try client.ok(#"{"op":"types","limit":\#(limit),"req":"t"}"#).array("types") as? [[String: Any]] ?? []
        var byType: [String: [String: Any]] = [:]
        for item in list { if let type = item["type"] as? String { byType[type] = item } }
        return byType
    }

    @Test("Another uid publishing 70,000 distinct types leaves root's types and counters as they were")
    func anotherUIDCannotEraseRootsTypeCounters() throws {
        try withServer { broker in
            let root = try broker.connect(uid: 0)
            let listener = try broker.connect(uid: 0)
            try listener.ok(#"{"op":"subscribe","type":"root.>","req":"s"}"#)
            for _ in 0..<3 { try root.publish("root.plain") }
            try root.ok(#"{"op":"publish","type":"root.kept","retain":true,"req":"r"}"#)
            _ = try listener.readFrames(count: 4)
            let before = try Self.types(root, limit: 100_000)
            let names = ["root.plain", "root.kept"]
            for name in names { #expect(before[name] != nil, "\(name) listed before") }

            let attacker = try broker.connect(uid: 4404)
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
