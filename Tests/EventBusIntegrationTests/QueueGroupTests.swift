// PROTOCOL.md "Queue groups (1.3)" against the real broker, one test per
// rule, speaking raw NDJSON: the `group` and `key` fields, one member per
// event and group in turn, plain subscriptions and at-most-once beside it,
// groups per uid, the policy and the quota, the credit-aware choice and the
// hold of a full group, keys (rendezvous hashing), leaving, redelivery on
// close, and introspection.
//
// Before editing: absence is settled with a ping round trip (`settle`,
// `expectNoFrame`), never a bare sleep. A member that must fill up reads
// nothing; one that must keep up reads from its own thread
// (`robustThread`), and so does a flooding publisher that may be held.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Queue groups (1.3)")
struct QueueGroupTests {
    static let small = ["--max-outbound", "65536"]

    /// Joins `group` on `pattern` and returns the `ok`.
    @discardableResult
    static func join(_ client: RawClient, _ pattern: String, group: String, req: String = "join") throws -> Frame {
        try client.ok(#"{"op":"subscribe","type":"\#(pattern)","group":"\#(group)","req":"\#(req)"}"#)
    }

    /// The `data.i` of each event among `frames`.
    static func indices(_ frames: [Frame]) -> [Int] {
        frames.filter { $0.op == "event" }.compactMap { $0.object("data")?["i"] as? Int }
    }

    /// Publishes events `i` = `range` of `type` with `req`, each answered.
    @discardableResult
    static func publish(_ client: RawClient, _ type: String, _ range: Range<Int>, key: (Int) -> String? = { _ in nil }) throws -> [Frame] {
        try range.map { i in
            let keyField = key(i).map { #","key":"\#($0)""# } ?? ""
            return try client.ok(#"{"op":"publish","type":"\#(type)","req":\#(i),"data":{"i":\#(i)}\#(keyField)}"#)
        }
    }

    // MARK: The fields

    @Test("group is 1-64 bytes of A-Z a-z 0-9 _ . - : (else bad_request); key is a string of 1-255 bytes")
    func groupAndKeyAreValidated() throws {
        try withBroker { broker in
            let client = try broker.connect()
            for bad in [#""""#, "\"\(String(repeating: "g", count: 65))\"", #""a b""#, #""é""#, "7", "null", #"["w"]"#] {
                let error = try client.error(#"{"op":"subscribe","type":"a.>","group":\#(bad),"req":1}"#)
                #expect(error.code == "bad_request" && error.string("message")?.contains("group") == true, "\(bad): \(error)")
                let leave = try client.error(#"{"op":"unsubscribe","type":"a.>","group":\#(bad),"req":2}"#)
                #expect(leave.code == "bad_request", "\(bad): \(leave)")
            }
            let longest = String(repeating: "g", count: 64)
            let ok = try QueueGroupTests.join(client, "a.>", group: "\(longest)")
            #expect(ok.string("group") == longest && ok.int("members") == 1, "\(ok)")
            try QueueGroupTests.join(client, "a.>", group: "w_1.x-y:z")
            for bad in [#""""#, "\"\(String(repeating: "k", count: 256))\"", "5", "true", #"{"k":1}"#] {
                let error = try client.error(#"{"op":"publish","type":"a.b","key":\#(bad),"req":3}"#)
                #expect(error.code == "bad_request" && error.string("message")?.contains("key") == true, "\(bad): \(error)")
            }
            // 255 bytes once decoded: an escape counts as what it stands for.
            let k255 = String(repeating: "k", count: 254)
            try client.ok(#"{"op":"publish","type":"a.b","key":"\#(k255)\u0041","req":4}"#)
            let tooLong = try client.error(#"{"op":"publish","type":"a.b","key":"\#(k255)\u00e9","req":5}"#)
            #expect(tooLong.code == "bad_request", "254 bytes and an escaped é (2 bytes) are 256: \(tooLong)")
        }
    }

    @Test("last and since cannot be combined with group (bad_request): a group shares live events only")
    func lastAndSinceWithGroupAreBadRequests() throws {
        try withBroker { broker in
            let client = try broker.connect()
            for extra in [#""last":true"#, #""since":0"#] {
                let error = try client.error(#"{"op":"subscribe","type":"a.>","group":"w",\#(extra),"req":1}"#)
                #expect(error.code == "bad_request", "\(extra): \(error)")
            }
            try client.ok(#"{"op":"subscribe","type":"a.>","group":"w","last":false,"req":2}"#)
        }
    }

    @Test("An event published with key carries it; one without carries none")
    func eventsCarryTheirKey() throws {
        try withBroker { broker in
            let member = try broker.connect()
            try QueueGroupTests.join(member, "k.>", group: "w")
            let plain = try broker.connect()
            try plain.subscribe("k.>")
            let publisher = try broker.connect()
            try publisher.ok(#"{"op":"publish","type":"k.a","key":"order-17","data":1,"req":1}"#)
            try publisher.ok(#"{"op":"publish","type":"k.b","data":2,"req":2}"#)
            for client in [member, plain] {
                let events = try client.readFrames(count: 2)
                #expect(events[0].string("key") == "order-17" && events[0].raw.contains(#""gid":0,"key":"order-17","data":1}"#), "\(events[0])")
                #expect(events[1].has("key") == false, "\(events[1])")
            }
        }
    }

    // MARK: One member per event

    @Test("Each matching event goes to exactly one member, in turn in join order; plain subscriptions still get it")
    func eachEventGoesToOneMemberInTurn() throws {
        try withBroker { broker in
            let members = try (0..<3).map { _ in try broker.connect() }
            for (i, member) in members.enumerated() {
                #expect(try QueueGroupTests.join(member, "job.>", group: "workers").int("members") == i + 1)
            }
            let plain = try broker.connect()
            try plain.subscribe("job.>")
            let publisher = try broker.connect()
            let replies = try QueueGroupTests.publish(publisher, "job.run", 0..<9)
            #expect(replies.map { $0.int("delivered") } == Array(repeating: 2, count: 9), "one member and the plain subscriber each time")
            for (i, member) in members.enumerated() {
                #expect(QueueGroupTests.indices(try member.settle()) == [i, i + 3, i + 6], "member \(i)")
            }
            #expect(QueueGroupTests.indices(try plain.settle()) == Array(0..<9))
        }
    }

    @Test("A connection gets an event at most once, whatever plain and group subscriptions of it match")
    func aConnectionGetsAnEventOnceWhateverMatches() throws {
        try withBroker { broker in
            let both = try broker.connect()
            try both.subscribe("job.>")
            try QueueGroupTests.join(both, "job.>", group: "g")
            try QueueGroupTests.join(both, "job.*", group: "h")
            try QueueGroupTests.join(both, "job.*", group: "g")
            let publisher = try broker.connect()
            let replies = try QueueGroupTests.publish(publisher, "job.run", 0..<4)
            #expect(replies.map { $0.int("delivered") } == [1, 1, 1, 1])
            #expect(QueueGroupTests.indices(try both.settle()) == [0, 1, 2, 3])
        }
    }

    @Test("A group is per uid: another uid's group of the same name is another group and gets every event itself")
    func anotherUidsGroupOfTheSameNameIsAnotherGroup() throws {
        guard getuid() == 0, findInPath("setpriv") != nil else { return }
        try withBroker { broker in
            let rootMembers = try (0..<2).map { _ in try broker.connect() }
            for member in rootMembers { try QueueGroupTests.join(member, "job.>", group: "workers") }
            chmod(broker.directory.path, 0o755)  // other uids reach the socket
            let other = try connectAs(uid: 4321, path: broker.socketPath)[0]
            let ok = try QueueGroupTests.join(other, "job.>", group: "workers")
            #expect(ok.int("members") == 1, "the other uid's group is a group of its own: \(ok)")
            let publisher = try broker.connect()
            let replies = try QueueGroupTests.publish(publisher, "job.run", 0..<4)
            #expect(replies.map { $0.int("delivered") } == [2, 2, 2, 2])
            #expect(QueueGroupTests.indices(try other.settle()) == [0, 1, 2, 3])
            #expect(QueueGroupTests.indices(try rootMembers[0].settle()) == [0, 2])
            #expect(QueueGroupTests.indices(try rootMembers[1].settle()) == [1, 3])
        }
    }

    @Test("Joining a group needs the subscribe permission: forbidden when denied, filtered types never given to that member")
    func joiningNeedsTheSubscribePermission() throws {
        let directory = try TemporaryDirectory(prefix: "ebgrp-")
        let policy = directory.file("policy.conf")
        try "deny subscribe secret.>\n".write(toFile: policy, atomically: true, encoding: .utf8)
        try withBroker(["--policy", policy]) { broker in
            let member = try broker.connect()
            let denied = try member.error(#"{"op":"subscribe","type":"secret.x","group":"w","req":1}"#)
            #expect(denied.code == "forbidden", "\(denied)")
            let filtered = try QueueGroupTests.join(member, ">", group: "w")
            #expect(filtered.bool("filtered") == true && filtered.int("members") == 1, "\(filtered)")
            let publisher = try broker.connect()
            #expect(try publisher.publish("secret.y").delivered == 0)
            #expect(try publisher.publish("open.y").delivered == 1)
            #expect(try member.settle().map(\.type) == ["open.y"])
            #expect(try member.stats().object("me")?["subscriptions"] as? Int == 1)
            // Two members filtered through one view: a hidden type goes to
            // neither (one policy check for the group), the others in turn.
            let second = try broker.connect()
            #expect(try QueueGroupTests.join(second, ">", group: "w").int("members") == 2)
            #expect(try publisher.publish("secret.z").delivered == 0)
            #expect(try publisher.publish("open.z").delivered == 1)
            #expect(try publisher.publish("open.w").delivered == 1)
            let got = [try member.settle().compactMap(\.type), try second.settle().compactMap(\.type)]
            #expect(got.allSatisfy { $0.count == 1 } && got.joined().sorted() == ["open.w", "open.z"], "\(got)")
        }
    }

    @Test("A membership counts against the subscription quotas like a subscription")
    func membershipsCountAgainstTheSubscriptionQuota() throws {
        try withBroker(["--max-subscriptions", "2"]) { broker in
            let client = try broker.connect()
            try client.subscribe("a.>")
            try QueueGroupTests.join(client, "a.>", group: "w")
            let limit = try client.error(#"{"op":"subscribe","type":"b.>","group":"w","req":3}"#)
            #expect(limit.code == "limit", "\(limit)")
            #expect(try client.stats().int("subscriptions") == 2)
            let left = try client.ok(#"{"op":"unsubscribe","type":"a.>","group":"w","req":4}"#)
            #expect(left.bool("removed") == true && left.string("group") == "w", "\(left)")
            try QueueGroupTests.join(client, "b.>", group: "w")
            let stats = try client.stats()
            #expect(stats.int("subscriptions") == 2 && (stats.object("me")?["subscription_bytes"] as? Int ?? 0) > 0, "\(stats)")
        }
    }

    @Test("A membership is charged its group's share of the per-type group lists (8 bytes per type table entry) beyond a subscription's cost")
    func aMembershipIsChargedItsGroupListShare() throws {
        try withBroker { broker in
            let client = try broker.connect()
            func bytes() throws -> Int { try client.stats().object("me")?["subscription_bytes"] as? Int ?? -1 }
            let none = try bytes()
            try client.subscribe("a.>")
            let plain = try bytes() - none
            try QueueGroupTests.join(client, "a.>", group: "w")
            let member = try bytes() - none - plain
            #expect(plain > 0 && member >= plain + 8 * 1024, "plain \(plain) bytes, membership \(member) bytes")
            try client.ok(#"{"op":"unsubscribe","type":"a.>","group":"w","req":"u"}"#)
            #expect(try bytes() - none == plain, "leaving gives it back")
        }
    }

    @Test("A uid's group memberships are at most its connection limit (each group an event matches costs its publisher a choice); uid 0 has none")
    func aUidsMembershipsAreAtMostItsConnectionLimit() throws {
        guard getuid() == 0, findInPath("setpriv") != nil else { return }
        try withBroker(["--max-connections-per-uid", "3"]) { broker in
            chmod(broker.directory.path, 0o755)  // other uids reach the socket
            let other = try connectAs(uid: 4322, path: broker.socketPath)[0]
            for n in 0..<3 { try QueueGroupTests.join(other, ">", group: "g\(n)", req: "j\(n)") }
            let limit = try other.error(#"{"op":"subscribe","type":">","group":"g3","req":"j3"}"#)
            #expect(limit.code == "limit" && (limit.string("message") ?? "").contains("queue-group memberships"), "\(limit)")
            // Leaving one makes room again; a plain subscription is not bounded by it.
            try other.ok(#"{"op":"unsubscribe","type":">","group":"g0","req":"l0"}"#)
            try QueueGroupTests.join(other, ">", group: "g3", req: "j4")
            try other.subscribe("plain.>")
            // uid 0 (the test) is not bounded per uid.
            let root = try broker.connect()
            for n in 0..<5 { try QueueGroupTests.join(root, ">", group: "r\(n)", req: "r\(n)") }
        }
    }

    @Test("A group has at most --max-group-members members: one more is limit naming the option and is no member; per group and per uid, room again when one leaves; uid 0 has none")
    func aGroupHasAtMostMaxGroupMembers() throws {
        guard getuid() == 0, findInPath("setpriv") != nil else { return }
        try withBroker(["--max-group-members", "2"]) { broker in
            chmod(broker.directory.path, 0o755)  // other uids reach the socket
            let members = try connectAs(uid: 4323, path: broker.socketPath, count: 3)
            let (a, b, c) = (members[0], members[1], members[2])
            try QueueGroupTests.join(a, "job.>", group: "w", req: "a")
            #expect(try QueueGroupTests.join(b, "job.>", group: "w", req: "b").int("members") == 2)
            let limit = try c.error(#"{"op":"subscribe","type":"job.>","group":"w","req":"c"}"#)
            let message = limit.string("message") ?? ""
            #expect(limit.code == "limit" && message.contains("--max-group-members 2") && message.contains(#""w""#) && message.contains("job.>") && message.contains("join again when one leaves"), "\(limit)")
            #expect((try c.stats().object("me")?["limits"] as? [String: Any])?["group_members"] as? Int == 2)
            // The refused connection is no member: the two share every event.
            let publisher = try broker.connect()
            try QueueGroupTests.publish(publisher, "job.run", 0..<4)
            #expect(QueueGroupTests.indices(try a.settle()) == [0, 2])
            #expect(QueueGroupTests.indices(try b.settle()) == [1, 3])
            try c.expectNoFrame()
            // Another uid's group of the same name is its own.
            let other = try connectAs(uid: 4324, path: broker.socketPath)[0]
            #expect(try QueueGroupTests.join(other, "job.>", group: "w", req: "o").int("members") == 1)
            // Leaving makes room again.
            try b.ok(#"{"op":"unsubscribe","type":"job.>","group":"w","req":"leave"}"#)
            #expect(try QueueGroupTests.join(c, "job.>", group: "w", req: "c2").int("members") == 2)
            // uid 0 is not bounded per group.
            let roots = try (0..<3).map { _ in try broker.connect() }
            for (n, root) in roots.enumerated() { try QueueGroupTests.join(root, "job.>", group: "w", req: "r\(n)") }
            #expect((try publisher.stats().object("me")?["limits"] as? [String: Any])?["group_members"] is NSNull)
        }
    }

    // MARK: Leaving

    @Test("unsubscribe with group takes the member out; its ok comes after every event already queued to it")
    func unsubscribeWithGroupLeavesAfterEveryQueuedEvent() throws {
        try withBroker { broker in
            let leaving = try broker.connect()
            let staying = try broker.connect()
            for member in [leaving, staying] { try QueueGroupTests.join(member, "job.>", group: "workers") }
            let publisher = try broker.connect()
            try QueueGroupTests.publish(publisher, "job.run", 0..<4)
            try leaving.send(#"{"op":"unsubscribe","type":"job.>","group":"workers","req":"leave"}"#)
            let frames = try leaving.readFrames(until: { $0.req == .string("leave") })
            #expect(QueueGroupTests.indices(frames) == [0, 2], "its share came before the ok")
            #expect(frames.last?.bool("removed") == true && frames.last?.string("group") == "workers", "\(frames.last!)")
            let again = try leaving.ok(#"{"op":"unsubscribe","type":"job.>","group":"workers","req":"again"}"#)
            #expect(again.bool("removed") == false)
            try QueueGroupTests.publish(publisher, "job.run", 4..<8)
            try leaving.expectNoFrame()
            #expect(QueueGroupTests.indices(try staying.settle()) == [1, 3, 4, 5, 6, 7])
        }
    }

    // MARK: Serving groups, introspection

    @Test("Serving subscriptions in a group: each request goes to one server of the group, in turn")
    func eachRequestGoesToOneServerOfTheGroup() throws {
        try withBroker { broker in
            let servers = try (0..<2).map { _ in try broker.connect() }
            for (i, server) in servers.enumerated() {
                let ok = try server.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"group":"pool","req":"s"}"#)
                #expect(ok.bool("serve") == true && ok.string("group") == "pool" && ok.int("members") == i + 1, "\(ok)")
            }
            let requester = try broker.connect()
            for n in 0..<4 {
                try requester.send(#"{"op":"request","type":"svc.echo","key":null,"data":\#(n),"timeout":10000,"req":\#(n)}"#.replacingOccurrences(of: #""key":null,"#, with: ""))
                let server = servers[n % 2]
                let request = try server.readFrame()
                #expect(request.op == "request" && request.int("data") == n, "request \(n) at server \(n % 2): \(request)")
                try server.ok(#"{"op":"reply","to":"\#(request.string("reply") ?? "")","data":"s\#(n % 2)","req":"r"}"#)
                let answer = try requester.readFrame()
                #expect(answer.op == "ok" && answer.req == .integer(n) && answer.object("reply")?["data"] as? String == "s\(n % 2)", "\(answer)")
            }
            for server in servers { try server.expectNoFrame() }
        }
    }

    @Test("clients shows each subscription's group (and serve, and members); hello lists the feature groups")
    func clientsShowsEachSubscriptionsGroup() throws {
        try withBroker { broker in
            let member = try broker.connect()
            let hello = try member.ok(#"{"op":"hello","client":"worker","req":0}"#)
            #expect((hello.array("features") as? [String])?.contains("groups") == true, "\(hello)")
            try QueueGroupTests.join(member, "job.>", group: "workers")
            try member.ok(#"{"op":"subscribe","type":"svc.x","serve":true,"group":"pool","req":"s"}"#)
            try QueueGroupTests.join(try broker.connect(), "job.>", group: "workers")
            let clients = try member.ok(#"{"op":"clients","req":1}"#).array("clients") as? [[String: Any]] ?? []
            let worker = try #require(clients.first { $0["client"] as? String == "worker" })
            let groups = worker["groups"] as? [[String: Any]] ?? []
            #expect(groups.count == 2, "\(worker)")
            #expect(groups.first?["group"] as? String == "pool" && groups.first?["type"] as? String == "svc.x" && groups.first?["serve"] as? Bool == true
                && groups.first?["members"] as? Int == 1, "\(groups)")
            #expect(groups.last?["group"] as? String == "workers" && groups.last?["type"] as? String == "job.>" && groups.last?["serve"] as? Bool == false
                && groups.last?["members"] as? Int == 2, "\(groups)")
        }
    }
}
