// Fallback group memberships and group publishes (issue 36; PROTOCOL-NOTES.md
// "Queue groups across machines (issue 36)") against the real broker, the
// bridge played by a raw client: a fallback member gets an event of its
// group only when no local member may receive it, marked `"group":"G"`; a
// group publish reaches one member of that group only; a bridge's ordinary
// import is not given to a group it exports; a closing last member's unread
// events cross. That the `bridge` right is needed for both, and a reload
// taking it away, are EventBusScenarios/BridgeRightScenarios.swift.
//
// Before editing: absence is settled with a ping round trip, never a sleep.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Fallback group memberships (issue 36)")
struct FallbackGroupTests {
    @Test func aFallbackMemberGetsAnEventOnlyWhenNoLocalMemberMayReceiveIt() throws {
        try withBroker { broker in
            let bridge = try broker.connect()
            let ok = try bridge.ok(#"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"req":1}"#)
            #expect(ok.bool("fallback") == true && ok.string("group") == "work" && ok.int("members") == 1, "\(ok)")
            let publisher = try broker.connect()
            // No local member: the bridge gets it, marked with the group, as its last member.
            try publisher.ok(#"{"op":"publish","type":"job.a","data":{"i":1},"key":"k1","req":1}"#)
            let crossed = try bridge.readFrame()
            #expect(crossed.op == "event" && crossed.type == "job.a" && crossed.string("group") == "work" && crossed.string("key") == "k1", "\(crossed)")
            #expect(crossed.raw.hasSuffix(#","group":"work"}"#), "\(crossed.raw)")
            // A local member goes first: the bridge gets nothing.
            let member = try broker.connect()
            try member.ok(#"{"op":"subscribe","type":"job.>","group":"work","req":1}"#)
            for i in 2..<6 { try publisher.ok(#"{"op":"publish","type":"job.a","data":{"i":\#(i)},"req":\#(i)}"#) }
            #expect(try member.readFrames(count: 4).compactMap { $0.object("data")?["i"] as? Int } == [2, 3, 4, 5])
            // Another group's member does not keep group work's events home.
            let other = try broker.connect()
            try other.ok(#"{"op":"subscribe","type":"job.>","group":"other","req":1}"#)
            try bridge.ok(#"{"op":"ping","req":2}"#)  // nothing was queued before the ping's answer
            // The member leaves (its ok after its events): the next event crosses again.
            try member.ok(#"{"op":"unsubscribe","type":"job.>","group":"work","req":2}"#)
            try publisher.ok(#"{"op":"publish","type":"job.b","data":{"i":6},"req":6}"#)
            let again = try bridge.readFrame()
            #expect(again.type == "job.b" && again.string("group") == "work", "\(again)")
            #expect(try other.readFrame().type == "job.b")  // its own copy, as any group
        }
    }

    /// (newuser2) `clients` marks a fallback membership: with a bridge that
    /// exports group work and no worker, `members` alone (1) read as one
    /// worker, so the README's `until ... grep '"members":N'` wait was off by one.
    @Test func clientsMarksAFallbackMembership() throws {
        try withBroker { broker in
            let bridge = try broker.connect()
            try bridge.ok(#"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"req":1}"#)
            let member = try broker.connect()
            try member.ok(#"{"op":"subscribe","type":"job.>","group":"work","req":1}"#)
            let listed = try broker.connect().ok(#"{"op":"clients","req":"c"}"#)
            #expect(listed.raw.contains(#"{"type":"job.>","group":"work","serve":false,"members":1,"fallback":true}"#), "\(listed.raw)")
            #expect(listed.raw.contains(#"{"type":"job.>","group":"work","serve":false,"members":1}"#), "the local member's entry has no mark: \(listed.raw)")
        }
    }

    @Test func aGroupPublishReachesOneMemberOfThatGroupOnly() throws {
        try withBroker { broker in
            let bridge = try broker.connect()
            try bridge.ok(#"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"req":1}"#)
            let plain = try broker.connect()
            try plain.ok(#"{"op":"subscribe","type":"job.>","req":1}"#)
            let members = try (0..<2).map { _ in try broker.connect() }
            for member in members { try member.ok(#"{"op":"subscribe","type":"job.>","group":"work","req":1}"#) }
            let other = try broker.connect()
            try other.ok(#"{"op":"subscribe","type":"job.>","group":"other","req":1}"#)
            let origin = #""origin":{"node":"b","seq":9}"#
            for i in 0..<4 {
                let ok = try bridge.ok(#"{"op":"publish","type":"job.x","group":"work",\#(origin),"data":{"i":\#(i)},"req":\#(i)}"#)
                #expect(ok.int("delivered") == 1, "\(ok)")
            }
            // A bridge's ordinary import is not given to group work (its group was served where it came from).
            let plainImport = try bridge.ok(#"{"op":"publish","type":"job.y",\#(origin),"data":{"i":9},"req":5}"#)
            #expect(plainImport.int("delivered") == 2, "the plain subscriber and group other: \(plainImport)")
            let got = try members.flatMap { try $0.settle() }.filter { $0.op == "event" }
            #expect(got.compactMap { $0.object("data")?["i"] as? Int }.sorted() == [0, 1, 2, 3], "\(got.map(\.raw))")
            #expect(got.allSatisfy { $0.object("origin")?["node"] as? String == "b" })
            // Neither the plain subscriber nor group other got a group publish.
            #expect(try plain.settle().filter { $0.op == "event" }.map(\.type) == ["job.y"])
            #expect(try other.settle().filter { $0.op == "event" }.map(\.type) == ["job.y"])
            // Never back to a fallback member, even with no member left; never with retain.
            for member in members { member.close() }
            try bridge.ok(#"{"op":"ping","req":7}"#)
            let none = try bridge.ok(#"{"op":"publish","type":"job.x","group":"work",\#(origin),"data":1,"req":8}"#)
            #expect(none.int("delivered") == 0, "\(none)")
            let retained = try bridge.error(#"{"op":"publish","type":"job.x","group":"work","retain":true,"data":1,"req":9}"#)
            #expect(retained.code == "bad_request", "\(retained)")
            try bridge.expectNoFrame()
        }
    }

    @Test func aClosingLastMembersUnwrittenEventsCrossToTheFallbackMember() throws {
        try withBroker(["--max-outbound", "8M"]) { broker in
            let closing = try broker.connect()  // reads nothing, then closes
            try closing.ok(#"{"op":"subscribe","type":"job.>","group":"work","req":1}"#)
            let bridge = try broker.connect()
            try bridge.ok(#"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"req":1}"#)
            let publisher = try broker.connect()
            // About 2.4 MB for the member: more than its socket holds, less than its queue may.
            let count = 6_000
            let flood = (0..<count).map { #"{"op":"publish","type":"job.run","data":{"i":\#($0),"p":"\#(QueueGroupFlowTests.pad)"}}"# + "\n" }.joined()
            try publisher.sendBytes(Array(flood.utf8), timeout: .seconds(120))
            try publisher.ok(#"{"op":"ping","req":"p"}"#, timeout: .seconds(60))
            try bridge.ok(#"{"op":"ping","req":2}"#)  // the bridge got none of them: a local member was there
            closing.close()
            try waitUntil("the broker to forget the closed member") { try publisher.stats().int("connections") == 2 }
            let crossed = try bridge.settle().filter { $0.op == "event" }
            let got = QueueGroupFlowTests.jobs(crossed)
            #expect(!got.isEmpty && got == got.sorted() && got.last == count - 1, "the tail of the member's queue, in order: \(rangeSummary(got))")
            #expect(crossed.allSatisfy { $0.bool("redelivered") == true && $0.string("group") == "work" && $0.raw.hasSuffix(#""redelivered":true,"group":"work"}"#) })
            // Only what the kernel held for the closed member is lost: a prefix.
            #expect(got.first.map { Set(got) == Set($0..<count) } == true, "contiguous from \(got.first ?? -1)")
        }
    }

    @Test func fallbackWithGroupTakesNoServeAndAPlainFallbackNeedsOne() throws {
        try withBroker { broker in
            let client = try broker.connect()
            let both = try client.error(#"{"op":"subscribe","type":"a.>","group":"g","serve":true,"fallback":true,"req":1}"#)
            #expect(both.code == "bad_request", "\(both)")
            let neither = try client.error(#"{"op":"subscribe","type":"a.>","fallback":true,"req":2}"#)
            #expect(neither.code == "bad_request", "\(neither)")
        }
    }
}
