// PROTOCOL.md "Per-type counters (1.2)" against another uid: a uid's flood of
// distinct types evicts its own oldest counters, never root's (issue 37, third
// attack round); a uid sees nothing of a type it may not receive. Written once (UIDBus.swift) and run in process
// (EventBusServerTests, no root) and against eventbusd with a setpriv'd
// attacker (EventBusIntegrationTests, root).
//
// Before editing: the attacker's 70,000 publishes are settled by a ping
// before the counters are read. Uids 4404 and 4321.
import EventBusTestSupport
import Foundation
import Testing

package let typeCounterScenarios: [BusScenario] = [
    BusScenario("Another uid publishing 70,000 distinct types leaves root's types and counters as they were") { bus in
        let root = try bus.connect(uid: 0)
        let listener = try bus.connect(uid: 0)
        try listener.ok(#"{"op":"subscribe","type":"root.>","req":"s"}"#)
        for _ in 0..<3 { try root.publish("root.plain") }
        try root.ok(#"{"op":"publish","type":"root.kept","retain":true,"req":"r"}"#)
        _ = try listener.readFrames(count: 4)
        let before = try root.typeEntries(limit: 100_000)
        let names = ["root.plain", "root.kept"]
        for name in names { #expect(before[name] != nil, "\(name) listed before") }

        let attacker = try bus.connect(uid: 4404)
        var n = 0
        while n < 70_000 {
            var bytes: [UInt8] = []
            for i in n..<min(n + 500, 70_000) { bytes += Array(#"{"op":"publish","type":"flood.t\#(i)"}"#.utf8) + [0x0A] }
            try attacker.sendBytes(bytes)
            n += 500
        }
        try attacker.ok(#"{"op":"ping","req":"p"}"#, timeout: .seconds(120))  // every publish handled

        let after = try root.typeEntries(limit: 100_000)
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
    },

    BusScenario("A uid that may not receive a type sees nothing of it in types: no name, no count",
                policy: "deny subscribe secret.> user=4321\n") { bus in
        func types(_ client: RawClient) throws -> [(type: String, fields: [String: Any])] {
            let reply = try client.ok(#"{"op":"types","req":"t"}"#)
            guard let list = reply.array("types") as? [[String: Any]] else { throw TestFailure("types reply has no list of objects: \(reply.raw)") }
            return list.map { ($0["type"] as? String ?? "?", $0) }
        }
        func int(_ fields: [String: Any], _ key: String) -> Int? { (fields[key] as? NSNumber)?.intValue }
        let user = try bus.connect(uid: 4321)
        try user.ok(#"{"op":"subscribe","type":">","req":1}"#)
        let root = try bus.connect(uid: 0)
        try root.publish("secret.x")
        try root.ok(#"{"op":"publish","type":"secret.kept","retain":true,"req":2}"#)
        try root.publish("open.y")
        _ = try user.readFrames(until: { $0.type == "open.y" })
        let seen = try types(user)
        #expect(!seen.contains { $0.type.hasPrefix("secret.") }, "\(seen.map(\.type))")
        let open = try #require(seen.first { $0.type == "open.y" }?.fields)
        #expect(int(open, "subscribers") == 1 && int(open, "delivered") == 1, "\(open)")
        let all = try types(root)
        #expect(all.filter { $0.type.hasPrefix("secret.") || $0.type == "open.y" }.map(\.type) == ["open.y", "secret.kept", "secret.x"])
        let secret = try #require(all.first { $0.type == "secret.x" }?.fields)
        #expect(int(secret, "subscribers") == 0 && int(secret, "delivered") == 0, "the filtered > does not count: \(secret)")
    },
]

extension RawClient {
    /// The `types` op's entries (at most `limit`), by type. A list of 65,536
    /// is about 10 MB: read and parsed within 2 minutes on a loaded machine.
    package func typeEntries(limit: Int) throws -> [String: [String: Any]] {
        let list = try ok(#"{"op":"types","limit":\#(limit),"req":"t"}"#, timeout: .seconds(120)).array("types") as? [[String: Any]] ?? []
        var byType: [String: [String: Any]] = [:]
        for item in list { if let type = item["type"] as? String { byType[type] = item } }
        return byType
    }
}
