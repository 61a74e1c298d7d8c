// (attacker6) A group across machines is one local user's group
// (`NAME:PATTERN@USER`; docs/BRIDGE.md "Queue groups across machines",
// PROTOCOL-NOTES.md "Queue groups across machines (issue 36)"): with `"uid":N`
// on the fallback membership, the group publish and the watch of members,
// only uid N's group of the name takes part. Against the real broker, the
// bridge played by a root raw client, the other user uid 4321 through setpriv.
// (The same end to end through NATS: EventBusBridgeIntegrationTests'
// BridgeGroupTests.)
//
// Before editing: absence is settled with a ping round trip
// (`expectNoFrame`), never a sleep.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("A group across machines is one uid's (attacker6)", .enabled(if: getuid() == 0 && findInPath("setpriv") != nil, "needs root and setpriv"))
struct CrossGroupUIDTests {
    /// Before: the fallback member got an event only when no group named
    /// `work` of *any* uid had a member, so uid 4321 joining `work` (never
    /// reading) took root's events that should have crossed.
    @Test func anotherUIDsGroupOfTheNameDoesNotHoldBackTheEventsThatCross() throws {
        try withSharedBroker([]) { broker in
            let bridge = try broker.connect()
            let ok = try bridge.ok(#"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"uid":0,"req":1}"#)
            #expect(ok.bool("fallback") == true && ok.int("uid") == 0, "\(ok)")
            let attacker = try connectAs(uid: 4321, path: broker.socketPath)[0]
            try attacker.ok(#"{"op":"subscribe","type":"job.>","group":"work","req":1}"#)
            let publisher = try broker.connect()
            for i in 0..<3 { try publisher.ok(#"{"op":"publish","type":"job.run","data":{"i":\#(i)},"req":\#(i)}"#) }
            let crossed = try bridge.readFrames(count: 3)
            #expect(crossed.map { $0.string("group") } == ["work", "work", "work"], "\(crossed.map(\.raw))")
            #expect(crossed.compactMap { $0.object("data")?["i"] as? Int } == [0, 1, 2])
            // uid 4321's group is its own: it has its copies as any group.
            #expect(try attacker.readFrames(count: 3).allSatisfy { $0.type == "job.run" && !$0.has("group") })
            // Root's own member goes first: nothing crosses.
            let member = try broker.connect()
            try member.ok(#"{"op":"subscribe","type":"job.>","group":"work","req":1}"#)
            try publisher.ok(#"{"op":"publish","type":"job.run","data":{"i":3},"req":3}"#)
            #expect(try member.readFrame().object("data")?["i"] as? Int == 3)
            try bridge.expectNoFrame()
            // Without "uid" (the older form) any uid's group still keeps them home.
            let old = try broker.connect()
            try old.ok(#"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"req":1}"#)
            try member.ok(#"{"op":"unsubscribe","type":"job.>","group":"work","req":2}"#)
            try publisher.ok(#"{"op":"publish","type":"job.run","data":{"i":4},"req":4}"#)
            #expect(try bridge.readFrame().object("data")?["i"] as? Int == 4)
            try old.expectNoFrame()
        }
    }

    /// Before: a group publish went to one member of every local group
    /// named `work`, whatever its uid.
    @Test func aGroupPublishWithAUIDReachesOnlyThatUIDsGroup() throws {
        try withSharedBroker([]) { broker in
            let attacker = try connectAs(uid: 4321, path: broker.socketPath)[0]
            try attacker.ok(#"{"op":"subscribe","type":"job.>","group":"work","req":1}"#)
            let member = try broker.connect()
            try member.ok(#"{"op":"subscribe","type":"job.>","group":"work","req":1}"#)
            let bridge = try broker.connect()
            let ok = try bridge.ok(#"{"op":"publish","type":"job.run","group":"work","uid":0,"data":{"i":1},"req":1}"#)
            #expect(ok.int("delivered") == 1, "\(ok)")
            #expect(try member.readFrame().object("data")?["i"] as? Int == 1)
            try attacker.expectNoFrame()
            // For uid 4321's group by name: it alone.
            #expect(try bridge.ok(#"{"op":"publish","type":"job.run","group":"work","uid":4321,"data":{"i":2},"req":2}"#).int("delivered") == 1)
            #expect(try attacker.readFrame().object("data")?["i"] as? Int == 2)
            try member.expectNoFrame()
            // Without "uid": every uid's group of the name, as before.
            #expect(try bridge.ok(#"{"op":"publish","type":"job.run","group":"work","data":{"i":3},"req":3}"#).int("delivered") == 2)
        }
    }

    /// The watch of a group's members with `"uid"`: uid 4321's members are
    /// neither listed nor told of, so an importing link does not take a
    /// group's events from NATS for a machine where only another user's
    /// group of the name has members.
    @Test func theWatchOfOneUIDsGroupCountsOnlyItsMembers() throws {
        try withSharedBroker([]) { broker in
            let attacker = try connectAs(uid: 4321, path: broker.socketPath)[0]
            try attacker.ok(#"{"op":"subscribe","type":"job.a","group":"work","req":1}"#)
            let bridge = try broker.connect()
            let watch = try bridge.ok(#"{"op":"subscribe","type":"job.>","servers":true,"group":"work","uid":0,"req":1}"#)
            #expect(ServerWatchTests.servers(watch) == [] && watch.int("uid") == 0, "\(watch)")
            let any = try broker.connect()
            #expect(ServerWatchTests.servers(try any.ok(#"{"op":"subscribe","type":"job.>","servers":true,"group":"work","req":1}"#)) == ["job.a"])
            try attacker.ok(#"{"op":"subscribe","type":"job.b","group":"work","req":2}"#)
            #expect(try any.readFrame().op == "servers")
            try bridge.expectNoFrame()  // uid 4321's members change nothing for uid 0's watch
            let member = try broker.connect()
            try member.ok(#"{"op":"subscribe","type":"job.c","group":"work","req":1}"#)
            let notice = try bridge.readFrame()
            #expect(notice.op == "servers" && notice.string("group") == "work" && notice.int("uid") == 0, "\(notice)")
            #expect(ServerWatchTests.servers(try bridge.ok(#"{"op":"subscribe","type":"job.>","servers":true,"group":"work","uid":0,"req":2}"#)) == ["job.c"])
            let end = try bridge.ok(#"{"op":"unsubscribe","type":"job.>","servers":true,"group":"work","uid":0,"req":3}"#)
            #expect(end.bool("removed") == true && end.int("uid") == 0, "\(end)")
        }
    }

    @Test func uidGoesOnlyWithAGroupAcrossMachines() throws {
        try withSharedBroker([]) { broker in
            let client = try broker.connect()
            for frame in [#"{"op":"subscribe","type":"job.>","group":"work","uid":0,"req":1}"#,  // a plain membership
                          #"{"op":"subscribe","type":"job.>","uid":0,"servers":true,"req":2}"#,  // a watch of servers
                          #"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"uid":-1,"req":3}"#,
                          #"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"uid":4294967295,"req":4}"#,
                          #"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"uid":"0","req":5}"#,
                          #"{"op":"unsubscribe","type":"job.>","group":"work","uid":0,"req":7}"#] {
                #expect(try client.error(frame).code == "bad_request", "\(frame)")
            }
        }
    }
}
