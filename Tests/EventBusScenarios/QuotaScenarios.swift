// PROTOCOL.md "Quotas (1.1)" and "Introspection (1.1)": every row of the
// quota table that needs only a connection's uid, and the policy file's
// `limit` lines (docs/POLICY.md "Format"), written once (UIDBus.swift) and run
// in process (EventBusServerTests, no root) and against eventbusd with
// setpriv'd clients (EventBusIntegrationTests, root). Small limits keep them
// fast. Asserted: counts, limits, closes and `limit`/`timeout` errors; never
// timings (scripts/attack measures those).
//
// Before editing: what only the process shows stays in QuotaTests.swift (the
// outbound-replies row bounds the broker's RSS, which in process is the
// test's). Each scenario uses its own uids (4101...4199) so a failure names
// the row. Uid 0 is root: no per-uid limits.
import EventBusTestSupport
import Foundation
import Testing

package let quotaScenarios: [BusScenario] = [
    BusScenario("Connections: a uid past its limit gets limit and is closed; another uid and root still connect",
                options: ["--max-connections-per-uid", "4", "--max-connections", "40"]) { bus in
        let attacker = try bus.connect(uid: 4101, count: 5)
        for client in attacker.prefix(4) { try client.ok(#"{"op":"ping","req":1}"#) }
        let refused = try attacker[4].readUntilEOF()
        #expect(refused.count == 1 && refused[0].code == "limit" && refused[0].string("message")?.contains("4 connections for uid 4101") == true, "\(refused)")
        let other = try bus.connect(uid: 4102, count: 4)
        for client in other { try client.ok(#"{"op":"ping","req":1}"#) }
        #expect(try bus.connect(uid: 0).stats().int("connections") == 9)
        withExtendedLifetime((attacker, other)) {}
    },

    BusScenario("Connections: the last slots of --max-connections are kept for uid 0",
                options: ["--max-connections", "16", "--max-connections-per-uid", "100"]) { bus in
        // 16 in all, a quarter (4) kept for uid 0 (the last 64 of the default 4096).
        let many = try bus.connect(uid: 4103, count: 13)
        for client in many.prefix(12) { try client.ok(#"{"op":"ping","req":1}"#) }
        let refusal = try many[12].readFrame()
        #expect(refusal.code == "limit" && refusal.string("message")?.contains("kept for uid 0") == true, "\(refusal)")
        let roots = try bus.connect(uid: 0, count: 4)
        for root in roots { try root.ok(#"{"op":"ping","req":1}"#) }
        #expect(try bus.connect(uid: 0).readFrame().code == "limit", "past --max-connections even root is refused")
        withExtendedLifetime((many, roots)) {}
    },

    BusScenario("Subscriptions: limits per connection, per uid and in total; limit leaves the connection usable",
                options: ["--max-subscriptions", "3", "--max-subscriptions-per-uid", "5", "--max-subscriptions-total", "8"]) { bus in
        let clients = try bus.connect(uid: 4104, count: 2)
        for i in 0..<3 { try clients[0].ok(#"{"op":"subscribe","type":"a.\#(i)","req":1}"#) }
        let perConnection = try clients[0].error(#"{"op":"subscribe","type":"a.9","req":2}"#)
        #expect(perConnection.code == "limit" && perConnection.string("message")?.contains("on this connection") == true, "\(perConnection)")
        for i in 0..<2 { try clients[1].ok(#"{"op":"subscribe","type":"b.\#(i).>","req":1}"#) }
        let perUID = try clients[1].error(#"{"op":"subscribe","type":"b.9","req":2}"#)
        #expect(perUID.code == "limit" && perUID.string("message")?.contains("5 subscriptions for uid 4104") == true, "\(perUID)")
        try clients[1].ok(#"{"op":"ping","req":3}"#)
        let root = try bus.connect(uid: 0), root2 = try bus.connect(uid: 0)
        for i in 0..<2 { try root.ok(#"{"op":"subscribe","type":"r.\#(i)","req":1}"#) }
        try root2.ok(#"{"op":"subscribe","type":"r.2","req":1}"#)
        let total = try root2.error(#"{"op":"subscribe","type":"r.9","req":2}"#)
        #expect(total.code == "limit" && total.string("message")?.contains("in total") == true, "\(total)")
        #expect(try root.stats().int("subscriptions") == 8)
        #expect(try clients[0].me()["subscriptions"] as? Int == 5)
    },

    BusScenario("limit lines: a user= line beats a group= line beats a plain one; uid 0 has none unless named",
                policy: """
                    limit subscriptions 3
                    limit subscriptions 2 group=4390
                    limit subscriptions 4 user=4121
                    limit connections 2 user=4122

                    """) { bus in
        func subscribeUntilLimit(_ client: RawClient) throws -> (taken: Int, refusal: Frame) {
            for i in 0..<10 {
                let reply = try client.request(#"{"op":"subscribe","type":"q.\#(i)","req":\#(i)}"#)
                if reply.op == "error" { return (i, reply) }
            }
            throw TestFailure("10 subscriptions and no limit")
        }
        let plain = try subscribeUntilLimit(try bus.connect(uid: 4120))
        #expect(plain.taken == 3 && plain.refusal.code == "limit" && plain.refusal.string("message")?.contains("3 subscriptions for uid 4120") == true, "\(plain.refusal)")
        #expect(try subscribeUntilLimit(try bus.connect(uid: 4123, groups: [4390])).taken == 2, "the group= line")
        #expect(try subscribeUntilLimit(try bus.connect(uid: 4121, groups: [4390])).taken == 4, "the user= line")
        let two = try bus.connect(uid: 4122, count: 3)
        for client in two.prefix(2) { try client.ok(#"{"op":"ping","req":1}"#) }
        #expect(try two[2].readFrame().code == "limit")
        let root = try bus.connect(uid: 0)
        for i in 0..<6 { try root.ok(#"{"op":"subscribe","type":"r.\#(i)","req":1}"#) }
        #expect(try bus.connect(uid: 4123).me()["limits"].flatMap { ($0 as? [String: Any])?["subscriptions"] as? Int } == 3)
    },

    BusScenario("Incomplete frames: over its budget a uid is read one connection at a time; nothing is dropped, other uids go on",
                options: ["--max-inbound-per-uid", "64K", "--max-frame", "48K"]) { bus in
        let attacker = try bus.connect(uid: 4105, count: 8)
        for (i, client) in attacker.enumerated() { try client.sendBytes(incompletePing(req: i, bytes: 40_000)) }
        let victim = try bus.connect(uid: 4106)
        try victim.ok(#"{"op":"ping","req":1}"#)
        let root = try bus.connect(uid: 0)
        try waitUntil("the broker holds what its budget lets it") {
            (try root.clientList().filter { $0.int("uid") == 4105 }.compactMap { $0.int("inbound_bytes") }.reduce(0, +)) > 64 << 10
        }
        let held = try root.clientList().filter { $0.int("uid") == 4105 }.compactMap { $0.int("inbound_bytes") }
        #expect(held.reduce(0, +) <= (64 << 10) + 2 * (64 << 10), "inbound held \(held)")
        #expect(held.filter { $0 == 0 }.count >= 4, "connections not read while the uid is over its budget: \(held)")
        try victim.ok(#"{"op":"ping","req":2}"#)
        // Complete every frame: each is answered, one after the other.
        for client in attacker { try client.sendRaw("\"}\n") }
        for (i, client) in attacker.enumerated() {
            let reply = try client.readFrame(timeout: .seconds(20))
            #expect(reply.op == "ok" && reply.req == .integer(i), "\(reply)")
        }
        #expect(try root.me()["inbound_bytes"] as? Int == 0)
    },

    BusScenario("Incomplete frames: over the total budget only the uids above their share are slowed",
                options: ["--max-inbound-per-uid", "1M", "--max-inbound", "128K", "--max-frame", "64K"]) { bus in
        var heavy: [RawClient] = []
        for uid in UInt32(4107)...4109 {
            for (i, client) in try bus.connect(uid: uid, count: 3).enumerated() {
                try client.sendBytes(incompletePing(req: i, bytes: 60_000))
                heavy.append(client)
            }
        }
        let light = try bus.connect(uid: 4110)
        try light.sendBytes(incompletePing(req: 7, bytes: 100))
        try light.sendRaw("\"}\n")
        #expect(try light.readFrame().req == .integer(7), "a uid under its share is read")
        let total = try bus.connect(uid: 0).clientList().compactMap { $0.int("inbound_bytes") }.reduce(0, +)
        #expect(total <= (128 << 10) + 3 * (128 << 10), "inbound held in total: \(total)")
        for client in heavy { try client.sendRaw("\"}\n") }
        for client in heavy { #expect(try client.readFrame(timeout: .seconds(20)).op == "ok") }
    },

    BusScenario("Incomplete frames: one that makes no progress for --frame-timeout closes its connection with timeout",
                options: ["--frame-timeout", "1s"]) { bus in
        let clients = try bus.connect(uid: 4111, count: 2)
        try clients[0].sendBytes(incompletePing(req: 1, bytes: 100))
        let frames = try clients[0].readUntilEOF(timeout: .seconds(20))
        #expect(frames.count == 1 && frames.first?.code == "timeout" && frames.first?.has("req") == false, "\(frames)")
        try clients[1].ok(#"{"op":"ping","req":2}"#)  // idle, no incomplete frame: still open
        #expect(try clients[1].me()["connections"] as? Int == 1)
    },

    BusScenario("Outbound: one uid's events cannot crowd other uids' events out of a subscriber's queue (fair share)",
                options: ["--max-outbound", "128K"]) { bus in
        let subscriber = try bus.connect(uid: 4113)
        try subscriber.ok(#"{"op":"subscribe","type":">","req":1}"#)
        let flooder = try bus.connect(uid: 4114)
        let root = try bus.connect(uid: 0)
        let padding = String(repeating: "x", count: 300)
        var published = 0
        for round in 0..<20 {
            var batch: [UInt8] = []
            for _ in 0..<500 { batch += Array(#"{"op":"publish","type":"x.flood","data":"\#(padding)"}"#.utf8) + [0x0A] }
            try flooder.sendBytes(batch)
            published += 500
            try root.ok(#"{"op":"publish","type":"system.tick","req":\#(round)}"#)
        }
        try flooder.ok(#"{"op":"ping","req":"done"}"#)
        // The last `dropped` notice may follow the settling ping's ok: settle twice.
        let frames = try subscriber.settle(timeout: .seconds(30)) + subscriber.settle()
        #expect(frames.filter { $0.type == "system.tick" }.count == 20, "every event of root got in")
        let floods = frames.filter { $0.type == "x.flood" }.count
        var dropped = 0
        for frame in frames where frame.op == "dropped" { dropped += frame.int("count") ?? 0 }
        #expect(dropped > 0 && floods + dropped == published, "flood: \(floods) delivered, \(dropped) dropped of \(published); ops \(Set(frames.compactMap(\.op)))")
        #expect(try subscriber.clientList().first?.int("dropped") == dropped)
    },

    BusScenario("stats carries me: the caller's uid, usage and limits; uid 0 has no per-uid limit",
                options: ["--max-connections-per-uid", "7"]) { bus in
        let clients = try bus.connect(uid: 4115, count: 2)
        try clients[1].ok(#"{"op":"subscribe","type":"a.>","req":1}"#)
        let me = try clients[0].me()
        #expect(me["uid"] as? Int == 4115 && me["connections"] as? Int == 2 && me["subscriptions"] as? Int == 1, "\(me)")
        for key in ["inbound_bytes", "queued_bytes", "retained_bytes"] { #expect(me[key] is Int, "\(key) in \(me)") }
        let limits = me["limits"] as? [String: Any]
        #expect(limits?["connections"] as? Int == 7 && limits?["subscriptions"] as? Int == 16384 && limits?["queued_bytes"] as? Int == 64 << 20)
        let rootLimits = try bus.connect(uid: 0).me()["limits"] as? [String: Any]
        #expect(rootLimits?["connections"] is NSNull, "uid 0 has no per-uid limit: \(String(describing: rootLimits))")
    },

    BusScenario("clients: uid 0 sees every connection, another uid only its own") { bus in
        let mine = try bus.connect(uid: 4116, count: 2)
        try mine[0].ok(#"{"op":"hello","client":"attacker","req":1}"#)
        try mine[0].ok(#"{"op":"subscribe","type":"held.>","req":2}"#)
        let others = try bus.connect(uid: 4117)
        try others.ok(#"{"op":"ping","req":1}"#)
        let own = try mine[1].clientList()
        #expect(own.count == 2 && own.allSatisfy { $0.int("uid") == 4116 }, "\(own)")
        let all = try bus.connect(uid: 0).clientList()
        #expect(all.count == 4 && Set(all.compactMap { $0.int("uid") }) == [4116, 4117, 0], "\(all)")
        let entry = try #require(all.first { $0.string("client") == "attacker" })
        #expect(entry.array("patterns") as? [String] == ["held.>"] && entry.int("gid") == 4116 && entry.string("overflow") == "wait")
        for key in ["conn", "pid", "since", "queued_bytes", "published", "delivered", "dropped", "echo", "holding", "held", "behind"] { #expect(entry.has(key), "\(key)") }
        withExtendedLifetime((mine, others)) {}
    },
]
