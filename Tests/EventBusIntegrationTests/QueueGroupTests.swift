// PROTOCOL.md "Queue groups (1.3)" against the real broker, one test per
// rule, speaking raw NDJSON: the `group` and `key` fields, one member per
// event and group in turn, plain subscriptions and at-most-once beside it,
// the policy and the quota (groups per uid and the per-uid bounds are
// EventBusScenarios/QueueGroupScenarios.swift, run with and without root), the credit-aware choice and the
// hold of a full group, keys (rendezvous hashing), leaving, redelivery on
// close, and introspection.
//
// Before editing: absence is settled with a ping round trip (`settle`,
// `expectNoFrame`), never a bare sleep. A member that must fill up reads
// nothing; one that must keep up reads from its own thread
// (`robustThread`), and so does a flooding publisher that may be held.
import EventBusScenarios
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Queue groups (1.3)")
struct QueueGroupTests {
    static let small = ["--max-outbound", "65536"]

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
            let ok = try QueueGroupSteps.join(client, "a.>", group: "\(longest)")
            #expect(ok.string("group") == longest && ok.int("members") == 1, "\(ok)")
            try QueueGroupSteps.join(client, "a.>", group: "w_1.x-y:z")
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
            try QueueGroupSteps.join(member, "k.>", group: "w")
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
                #expect(try QueueGroupSteps.join(member, "job.>", group: "workers").int("members") == i + 1)
            }
            let plain = try broker.connect()
            try plain.subscribe("job.>")
            let publisher = try broker.connect()
            let replies = try QueueGroupSteps.publish(publisher, "job.run", 0..<9)
            #expect(replies.map { $0.int("delivered") } == Array(repeating: 2, count: 9), "one member and the plain subscriber each time")
            for (i, member) in members.enumerated() {
                #expect(QueueGroupSteps.indices(try member.settle()) == [i, i + 3, i + 6], "member \(i)")
            }
            #expect(QueueGroupSteps.indices(try plain.settle()) == Array(0..<9))
        }
    }

    @Test("A connection gets an event at most once, whatever plain and group subscriptions of it match")
    func aConnectionGetsAnEventOnceWhateverMatches() throws {
        try withBroker { broker in
            let both = try broker.connect()
            try both.subscribe("job.>")
            try QueueGroupSteps.join(both, "job.>", group: "g")
            try QueueGroupSteps.join(both, "job.*", group: "h")
            try QueueGroupSteps.join(both, "job.*", group: "g")
            let publisher = try broker.connect()
            let replies = try QueueGroupSteps.publish(publisher, "job.run", 0..<4)
            #expect(replies.map { $0.int("delivered") } == [1, 1, 1, 1])
            #expect(QueueGroupSteps.indices(try both.settle()) == [0, 1, 2, 3])
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
            let filtered = try QueueGroupSteps.join(member, ">", group: "w")
            #expect(filtered.bool("filtered") == true && filtered.int("members") == 1, "\(filtered)")
            let publisher = try broker.connect()
            #expect(try publisher.publish("secret.y").delivered == 0)
            #expect(try publisher.publish("open.y").delivered == 1)
            #expect(try member.settle().map(\.type) == ["open.y"])
            #expect(try member.stats().object("me")?["subscriptions"] as? Int == 1)
            // Two members filtered through one view: a hidden type goes to
            // neither (one policy check for the group), the others in turn.
            let second = try broker.connect()
            #expect(try QueueGroupSteps.join(second, ">", group: "w").int("members") == 2)
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
            try QueueGroupSteps.join(client, "a.>", group: "w")
            let limit = try client.error(#"{"op":"subscribe","type":"b.>","group":"w","req":3}"#)
            #expect(limit.code == "limit", "\(limit)")
            #expect(try client.stats().int("subscriptions") == 2)
            let left = try client.ok(#"{"op":"unsubscribe","type":"a.>","group":"w","req":4}"#)
            #expect(left.bool("removed") == true && left.string("group") == "w", "\(left)")
            try QueueGroupSteps.join(client, "b.>", group: "w")
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
            try QueueGroupSteps.join(client, "a.>", group: "w")
            let member = try bytes() - none - plain
            #expect(plain > 0 && member >= plain + 8 * 1024, "plain \(plain) bytes, membership \(member) bytes")
            try client.ok(#"{"op":"unsubscribe","type":"a.>","group":"w","req":"u"}"#)
            #expect(try bytes() - none == plain, "leaving gives it back")
        }
    }

    @Test("unsubscribe with group takes the member out; its ok comes after every event already queued to it")
    func unsubscribeWithGroupLeavesAfterEveryQueuedEvent() throws {
        try withBroker { broker in
            let leaving = try broker.connect()
            let staying = try broker.connect()
            for member in [leaving, staying] { try QueueGroupSteps.join(member, "job.>", group: "workers") }
            let publisher = try broker.connect()
            try QueueGroupSteps.publish(publisher, "job.run", 0..<4)
            try leaving.send(#"{"op":"unsubscribe","type":"job.>","group":"workers","req":"leave"}"#)
            let frames = try leaving.readFrames(until: { $0.req == .string("leave") })
            #expect(QueueGroupSteps.indices(frames) == [0, 2], "its share came before the ok")
            #expect(frames.last?.bool("removed") == true && frames.last?.string("group") == "workers", "\(frames.last!)")
            let again = try leaving.ok(#"{"op":"unsubscribe","type":"job.>","group":"workers","req":"again"}"#)
            #expect(again.bool("removed") == false)
            try QueueGroupSteps.publish(publisher, "job.run", 4..<8)
            try leaving.expectNoFrame()
            #expect(QueueGroupSteps.indices(try staying.settle()) == [1, 3, 4, 5, 6, 7])
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
            try QueueGroupSteps.join(member, "job.>", group: "workers")
            try member.ok(#"{"op":"subscribe","type":"svc.x","serve":true,"group":"pool","req":"s"}"#)
            try QueueGroupSteps.join(try broker.connect(), "job.>", group: "workers")
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
