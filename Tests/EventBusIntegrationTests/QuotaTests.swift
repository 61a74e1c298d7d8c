// PROTOCOL.md "Quotas (1.1)" and "Introspection (1.1)" against the real
// broker, one test per row of the quota table (retained events: the core's
// QuotaTests, until retention lands), with clients of other uids made through
// setpriv (`connectAs`) and small limits so the suite stays fast. Asserted:
// counts, limits, closes, `limit`/`timeout` errors and RSS ceilings with
// generous margins; never timings (scripts/attack measures those).
//
// Before editing: each test uses its own uids (4101...4199) so a failure
// names the row; the broker's directory is made 0755 so they can connect.
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

extension RawClient {
    /// The `clients` list this connection may see.
    func clientList() throws -> [Frame] {
        let reply = try ok(#"{"op":"clients","req":"clients"}"#)
        guard let list = reply.array("clients") as? [[String: Any]] else { throw TestFailure("clients reply without a list: \(reply.raw)") }
        return try list.map { object in
            try Frame(line: Array(JSONSerialization.data(withJSONObject: object)))
        }
    }

    /// `me` of a `stats` reply.
    func me() throws -> [String: Any] {
        guard let me = try stats().object("me") else { throw TestFailure("stats without me") }
        return me
    }
}

/// `{"op":"ping","req":N,"x":"aaa…` of about `bytes` bytes without its end (an incomplete frame).
func incompletePing(req: Int, bytes: Int) -> [UInt8] {
    Array(#"{"op":"ping","req":\#(req),"x":""#.utf8) + [UInt8](repeating: 0x61, count: bytes)
}

@Suite("Quotas (1.1)", .enabled(if: getuid() == 0 && findInPath("setpriv") != nil))
struct QuotaIntegrationTests {
    // MARK: connections

    @Test("Connections: a uid past its limit gets limit and is closed; another uid and root still connect")
    func connectionsPerUID() throws {
        try withSharedBroker(["--max-connections-per-uid", "4", "--max-connections", "40"]) { broker in
            let attacker = try connectAs(uid: 4101, path: broker.socketPath, count: 5)
            for client in attacker.prefix(4) { try client.ok(#"{"op":"ping","req":1}"#) }
            let refusal = try attacker[4].readFrame()
            #expect(refusal.code == "limit" && refusal.string("message")?.contains("4 connections for uid 4101") == true, "\(refusal)")
            _ = try attacker[4].readUntilEOF()
            let other = try connectAs(uid: 4102, path: broker.socketPath, count: 4)
            for client in other { try client.ok(#"{"op":"ping","req":1}"#) }
            let root = try broker.connect()
            #expect(try root.stats().int("connections") == 9)
        }
    }

    @Test("Connections: the last slots of --max-connections are kept for uid 0")
    func lastConnectionsForRoot() throws {
        // 16 in all, a quarter (4) kept for uid 0 (the last 64 of the default 4096).
        try withSharedBroker(["--max-connections", "16", "--max-connections-per-uid", "100"]) { broker in
            let many = try connectAs(uid: 4103, path: broker.socketPath, count: 13)
            for client in many.prefix(12) { try client.ok(#"{"op":"ping","req":1}"#) }
            let refusal = try many[12].readFrame()
            #expect(refusal.code == "limit" && refusal.string("message")?.contains("kept for uid 0") == true, "\(refusal)")
            let roots = try (0..<4).map { _ in try broker.connect() }
            for root in roots { try root.ok(#"{"op":"ping","req":1}"#) }
            let over = try broker.connect()
            #expect(try over.readFrame().code == "limit", "past --max-connections even root is refused")
        }
    }

    // MARK: subscriptions

    @Test("Subscriptions: limits per connection, per uid and in total; limit leaves the connection usable")
    func subscriptionLimits() throws {
        try withSharedBroker(["--max-subscriptions", "3", "--max-subscriptions-per-uid", "5", "--max-subscriptions-total", "8"]) { broker in
            let clients = try connectAs(uid: 4104, path: broker.socketPath, count: 2)
            for i in 0..<3 { try clients[0].ok(#"{"op":"subscribe","type":"a.\#(i)","req":1}"#) }
            let perConnection = try clients[0].error(#"{"op":"subscribe","type":"a.9","req":2}"#)
            #expect(perConnection.code == "limit" && perConnection.string("message")?.contains("on this connection") == true)
            for i in 0..<2 { try clients[1].ok(#"{"op":"subscribe","type":"b.\#(i).>","req":1}"#) }
            let perUID = try clients[1].error(#"{"op":"subscribe","type":"b.9","req":2}"#)
            #expect(perUID.code == "limit" && perUID.string("message")?.contains("5 subscriptions for uid 4104") == true, "\(perUID)")
            try clients[1].ok(#"{"op":"ping","req":3}"#)
            let root = try broker.connect(), root2 = try broker.connect()
            for i in 0..<2 { try root.ok(#"{"op":"subscribe","type":"r.\#(i)","req":1}"#) }
            try root2.ok(#"{"op":"subscribe","type":"r.2","req":1}"#)
            let total = try root2.error(#"{"op":"subscribe","type":"r.9","req":2}"#)
            #expect(total.code == "limit" && total.string("message")?.contains("in total") == true, "\(total)")
            #expect(try root.stats().int("subscriptions") == 8)
            #expect(try clients[0].me()["subscriptions"] as? Int == 5)
        }
    }

    // MARK: bytes of incomplete incoming frames

    @Test("Incomplete frames: over its budget a uid is read one connection at a time; nothing is dropped, other uids go on")
    func inboundPerUID() throws {
        try withSharedBroker(["--max-inbound-per-uid", "64K", "--max-frame", "48K"]) { broker in
            let attacker = try connectAs(uid: 4105, path: broker.socketPath, count: 8)
            for (i, client) in attacker.enumerated() { try client.sendBytes(incompletePing(req: i, bytes: 40_000)) }
            let victim = try connectAs(uid: 4106, path: broker.socketPath, count: 1)[0]
            try victim.ok(#"{"op":"ping","req":1}"#)
            let root = try broker.connect()
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
        }
    }

    @Test("Incomplete frames: over the total budget only the uids above their share are slowed")
    func inboundTotal() throws {
        try withSharedBroker(["--max-inbound-per-uid", "1M", "--max-inbound", "128K", "--max-frame", "64K"]) { broker in
            var heavy: [RawClient] = []
            for uid in UInt32(4107)...4109 {
                for (i, client) in try connectAs(uid: uid, path: broker.socketPath, count: 3).enumerated() {
                    try client.sendBytes(incompletePing(req: i, bytes: 60_000))
                    heavy.append(client)
                }
            }
            let light = try connectAs(uid: 4110, path: broker.socketPath, count: 1)[0]
            try light.sendBytes(incompletePing(req: 7, bytes: 100))
            try light.sendRaw("\"}\n")
            #expect(try light.readFrame().req == .integer(7), "a uid under its share is read")
            let root = try broker.connect()
            let total = try root.clientList().compactMap { $0.int("inbound_bytes") }.reduce(0, +)
            #expect(total <= (128 << 10) + 3 * (128 << 10), "inbound held in total: \(total)")
            for client in heavy { try client.sendRaw("\"}\n") }
            for client in heavy { #expect(try client.readFrame(timeout: .seconds(20)).op == "ok") }
        }
    }

    @Test("Incomplete frames: one that makes no progress for --frame-timeout closes its connection with timeout")
    func frameTimeout() throws {
        try withSharedBroker(["--frame-timeout", "1s"]) { broker in
            let clients = try connectAs(uid: 4111, path: broker.socketPath, count: 2)
            try clients[0].sendBytes(incompletePing(req: 1, bytes: 100))
            let frames = try clients[0].readUntilEOF(timeout: .seconds(20))
            #expect(frames.count == 1 && frames.first?.code == "timeout" && frames.first?.has("req") == false, "\(frames)")
            try clients[1].ok(#"{"op":"ping","req":2}"#)  // idle, no incomplete frame: still open
            #expect(try broker.connect().me()["connections"] as? Int == 1)
        }
    }

    // MARK: outbound queue

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

    @Test("Outbound: one uid's events cannot crowd other uids' events out of a subscriber's queue (fair share)")
    func fairShare() throws {
        try withSharedBroker(["--max-outbound", "128K"]) { broker in
            let subscriber = try connectAs(uid: 4113, path: broker.socketPath, count: 1)[0]
            try subscriber.ok(#"{"op":"subscribe","type":">","req":1}"#)
            let flooder = try connectAs(uid: 4114, path: broker.socketPath, count: 1)[0]
            let root = try broker.connect()
            var published = 0
            for round in 0..<20 {
                var batch: [UInt8] = []
                for _ in 0..<500 { batch += Array(#"{"op":"publish","type":"x.flood","data":"\#(padding(300))"}"#.utf8) + [0x0A] }
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
        }
    }

    // MARK: stats.me and clients

    @Test("stats carries me: the caller's uid, usage and limits")
    func statsMe() throws {
        try withSharedBroker(["--max-connections-per-uid", "7"]) { broker in
            let clients = try connectAs(uid: 4115, path: broker.socketPath, count: 2)
            try clients[1].ok(#"{"op":"subscribe","type":"a.>","req":1}"#)
            let me = try clients[0].me()
            #expect(me["uid"] as? Int == 4115 && me["connections"] as? Int == 2 && me["subscriptions"] as? Int == 1)
            for key in ["inbound_bytes", "queued_bytes", "retained_bytes"] { #expect(me[key] is Int, "\(key) in \(me)") }
            let limits = me["limits"] as? [String: Any]
            #expect(limits?["connections"] as? Int == 7 && limits?["subscriptions"] as? Int == 16384 && limits?["queued_bytes"] as? Int == 64 << 20)
            let rootLimits = try broker.connect().me()["limits"] as? [String: Any]
            #expect(rootLimits?["connections"] is NSNull, "uid 0 has no per-uid limit: \(String(describing: rootLimits))")
        }
    }

    @Test("clients: uid 0 sees every connection, another uid only its own; eventbus clients shows them")
    func clientsOp() throws {
        try withSharedBroker([]) { broker in
            let mine = try connectAs(uid: 4116, path: broker.socketPath, count: 2)
            try mine[0].ok(#"{"op":"hello","client":"attacker","req":1}"#)
            try mine[0].ok(#"{"op":"subscribe","type":"held.>","req":2}"#)
            let others = try connectAs(uid: 4117, path: broker.socketPath, count: 1)
            let own = try mine[1].clientList()
            #expect(own.count == 2 && own.allSatisfy { $0.int("uid") == 4116 })
            let root = try broker.connect()
            let all = try root.clientList()
            #expect(all.count == 4 && Set(all.compactMap { $0.int("uid") }) == [4116, 4117, 0])
            let entry = try #require(all.first { $0.string("client") == "attacker" })
            #expect(entry.array("patterns") as? [String] == ["held.>"] && entry.int("gid") == 4116 && entry.string("overflow") == "wait")
            for key in ["conn", "pid", "since", "queued_bytes", "published", "delivered", "dropped", "echo", "holding", "held", "behind"] { #expect(entry.has(key), "\(key)") }
            _ = others
            let run = try runProcess(productsDirectory() + "/eventbus", ["--socket", broker.socketPath, "clients"], timeout: .seconds(20))
            #expect(run.status == .exited(0), "\(run.stderr)")
            let lines = run.stdout.split(separator: "\n")
            #expect(lines.count == 5, "JSON Lines when piped (its own connection included): \(run.stdout)")
            #expect(lines.contains { $0.contains("\"client\":\"attacker\"") && $0.contains("\"held.>\"") })
            let table = try runProcess(productsDirectory() + "/eventbus", ["--socket", broker.socketPath, "clients", "--format", "table"], timeout: .seconds(20))
            #expect(table.stdout.drop { $0 == " " }.hasPrefix("CONN") && table.stdout.contains("attacker") && table.stdout.contains("4116"), "\(table.stdout)")
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
