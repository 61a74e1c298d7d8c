// PROTOCOL.md "Queue groups (1.3)" rules that need other uids: groups are per
// uid, a uid's memberships are bounded by its connection limit, and a group's
// members by --max-group-members (per group and uid; uid 0 has neither
// bound). Written once (UIDBus.swift) and run in process (EventBusServerTests,
// no root) and against eventbusd with setpriv'd clients
// (EventBusIntegrationTests, root). The other queue-group rules are
// QueueGroupTests.swift (one uid, the real broker).
//
// Before editing: absence is settled with a ping round trip (`settle`,
// `expectNoFrame`). Uids 4321-4325.
import EventBusTestSupport
import Foundation
import Testing

package let queueGroupScenarios: [BusScenario] = [
    BusScenario("A group is per uid: another uid's group of the same name is another group and gets every event itself") { bus in
        let rootMembers = try bus.connect(uid: 0, count: 2)
        for member in rootMembers { try QueueGroupSteps.join(member, "job.>", group: "workers") }
        let other = try bus.connect(uid: 4321)
        let ok = try QueueGroupSteps.join(other, "job.>", group: "workers")
        #expect(ok.int("members") == 1, "the other uid's group is a group of its own: \(ok)")
        let publisher = try bus.connect(uid: 0)
        let replies = try QueueGroupSteps.publish(publisher, "job.run", 0..<4)
        #expect(replies.map { $0.int("delivered") } == [2, 2, 2, 2])
        #expect(QueueGroupSteps.indices(try other.settle()) == [0, 1, 2, 3])
        #expect(QueueGroupSteps.indices(try rootMembers[0].settle()) == [0, 2])
        #expect(QueueGroupSteps.indices(try rootMembers[1].settle()) == [1, 3])
    },

    BusScenario("A uid's group memberships are at most its connection limit (each group an event matches costs its publisher a choice); uid 0 has none",
                options: ["--max-connections-per-uid", "3"]) { bus in
        let other = try bus.connect(uid: 4322)
        for n in 0..<3 { try QueueGroupSteps.join(other, ">", group: "g\(n)", req: "j\(n)") }
        let limit = try other.error(#"{"op":"subscribe","type":">","group":"g3","req":"j3"}"#)
        #expect(limit.code == "limit" && (limit.string("message") ?? "").contains("queue-group memberships"), "\(limit)")
        // Leaving one makes room again; a plain subscription is not bounded by it.
        try other.ok(#"{"op":"unsubscribe","type":">","group":"g0","req":"l0"}"#)
        try QueueGroupSteps.join(other, ">", group: "g3", req: "j4")
        try other.subscribe("plain.>")
        // uid 0 is not bounded per uid.
        let root = try bus.connect(uid: 0)
        for n in 0..<5 { try QueueGroupSteps.join(root, ">", group: "r\(n)", req: "r\(n)") }
    },

    BusScenario("A group has at most --max-group-members members: one more is limit naming the option and is no member; per group and per uid, room again when one leaves; uid 0 has none",
                options: ["--max-group-members", "2"]) { bus in
        let members = try bus.connect(uid: 4323, count: 3)
        let (a, b, c) = (members[0], members[1], members[2])
        try QueueGroupSteps.join(a, "job.>", group: "w", req: "a")
        #expect(try QueueGroupSteps.join(b, "job.>", group: "w", req: "b").int("members") == 2)
        let limit = try c.error(#"{"op":"subscribe","type":"job.>","group":"w","req":"c"}"#)
        let message = limit.string("message") ?? ""
        #expect(limit.code == "limit" && message.contains("--max-group-members 2") && message.contains(#""w""#) && message.contains("job.>") && message.contains("join again when one leaves"), "\(limit)")
        #expect((try c.stats().object("me")?["limits"] as? [String: Any])?["group_members"] as? Int == 2)
        // The refused connection is no member: the two share every event.
        let publisher = try bus.connect(uid: 0)
        try QueueGroupSteps.publish(publisher, "job.run", 0..<4)
        #expect(QueueGroupSteps.indices(try a.settle()) == [0, 2])
        #expect(QueueGroupSteps.indices(try b.settle()) == [1, 3])
        try c.expectNoFrame()
        // Another uid's group of the same name is its own.
        let other = try bus.connect(uid: 4324)
        #expect(try QueueGroupSteps.join(other, "job.>", group: "w", req: "o").int("members") == 1)
        // Leaving makes room again.
        try b.ok(#"{"op":"unsubscribe","type":"job.>","group":"w","req":"leave"}"#)
        #expect(try QueueGroupSteps.join(c, "job.>", group: "w", req: "c2").int("members") == 2)
        // uid 0 is not bounded per group.
        let roots = try bus.connect(uid: 0, count: 3)
        for (n, root) in roots.enumerated() { try QueueGroupSteps.join(root, "job.>", group: "w", req: "r\(n)") }
        #expect((try publisher.stats().object("me")?["limits"] as? [String: Any])?["group_members"] is NSNull)
    },
    BusScenario("A publisher that may not be held (another uid) is not held by a full group: the next member in turn drops the event under its own rule, counted and told",
                options: ["--max-outbound", "65536"]) { bus in
        // Small queues fill at once; the members read nothing until every
        // publish was answered (routed: queued or dropped), then all that
        // is queued for them, to a ping round trip that brings nothing more.
        let members = try bus.connect(uid: 0, count: 2)
        for member in members { try QueueGroupSteps.join(member, "job.>", group: "workers") }
        let publisher = try bus.connect(uid: 4325)
        let count = 4_000
        let receipts = try publisher.publishMany("job.run", count: count, padding: 400)
        let notQueued = receipts.filter { $0.delivered == 0 }.count
        #expect(notQueued > 0, "the group filled up")
        var received: [Int] = []
        var dropped = 0
        for member in members {
            var frames: [Frame] = []
            while case let more = try member.settle(timeout: .seconds(60)), !more.isEmpty { frames += more }
            received += frames.filter { $0.op == "event" && $0.type == "job.run" }.compactMap(\.seq)
            dropped += frames.filter { $0.op == "dropped" }.reduce(0) { $0 + ($1.int("count") ?? 0) }
        }
        #expect(Set(received).count == received.count, "no event went to two members")
        #expect(received.count + dropped == count && dropped == notQueued, "each event reached a member or was dropped for one and told: \(received.count) + \(dropped)")
        let stats = try members[0].stats()
        #expect(stats.int("holds") == 0 && stats.int("dropped") == notQueued, "\(stats.raw)")
    },
]
