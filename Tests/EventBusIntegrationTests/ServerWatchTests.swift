// The watch of the serving patterns (issue 36; PROTOCOL-NOTES.md "Requests
// across machines (issue 36)", "Which machine takes a request") against the
// real broker: the `ok` lists the serving patterns that overlap the watched
// one (plain servers and serving groups, never fallback ones); a pattern that
// appears or goes sends one `servers` frame, and no second one until the
// watcher subscribes again; a second server of a pattern already served
// changes nothing. With `group`, the same watch of a group's members. That
// the bridge right is needed, and that a reload that takes it away ends the
// watch, are scenarios of EventBusScenarios/BridgeRightScenarios.swift (run
// with and without root).
//
// Before editing: absence is settled with a ping round trip (`settle`,
// `expectNoFrame`), never a sleep.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Watching the serving patterns (issue 36)")
struct ServerWatchTests {
    static func servers(_ ok: Frame) -> [String] { (ok.array("servers") as? [String]) ?? ["not a list: \(ok.raw)"] }

    @Test func theWatchListsTheOverlappingServersAndSaysOnceWhenTheyChange() throws {
        try withBroker { broker in
            let plain = try broker.connect()
            try plain.ok(#"{"op":"subscribe","type":"svc.echo","serve":true,"req":1}"#)
            try plain.ok(#"{"op":"subscribe","type":"other.x","serve":true,"req":2}"#)
            try plain.ok(#"{"op":"subscribe","type":"svc.events","req":3}"#)  // events: not a server
            let bridge = try broker.connect()
            try bridge.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"fallback":true,"req":1}"#)  // never listed
            let watch = try bridge.ok(#"{"op":"subscribe","type":"svc.>","servers":true,"req":2}"#)
            #expect(Self.servers(watch) == ["svc.echo"] && watch.type == "svc.>", "\(watch)")
            // A serving group of *.thumb appears: one notice, then nothing until asked again.
            let worker = try broker.connect()
            try worker.ok(#"{"op":"subscribe","type":"*.thumb","serve":true,"group":"w","req":1}"#)
            let notice = try bridge.readFrame()
            #expect(notice.op == "servers" && notice.type == "svc.>" && notice.has("req") == false, "\(notice)")
            let second = try broker.connect()
            try second.ok(#"{"op":"subscribe","type":"svc.more","serve":true,"req":1}"#)
            try bridge.expectNoFrame()
            let again = try bridge.ok(#"{"op":"subscribe","type":"svc.>","servers":true,"req":3}"#)
            #expect(Self.servers(again) == ["*.thumb", "svc.echo", "svc.more"], "\(again)")
            // A second server of a pattern already served, or one of two going: no change, no notice.
            try second.ok(#"{"op":"subscribe","type":"svc.echo","serve":true,"req":2}"#)
            try second.ok(#"{"op":"unsubscribe","type":"svc.echo","serve":true,"req":3}"#)
            try plain.ok(#"{"op":"subscribe","type":"other.y","serve":true,"req":4}"#)  // does not overlap svc.>
            try bridge.expectNoFrame()
            // The last server of svc.more closes its connection: a notice; the list without it.
            second.close()
            let gone = try bridge.readFrame()
            #expect(gone.op == "servers" && gone.type == "svc.>", "\(gone)")
            #expect(Self.servers(try bridge.ok(#"{"op":"subscribe","type":"svc.>","servers":true,"req":4}"#)) == ["*.thumb", "svc.echo"])
            // The watch ends: no more notices.
            let end = try bridge.ok(#"{"op":"unsubscribe","type":"svc.>","servers":true,"req":5}"#)
            #expect(end.bool("removed") == true && end.bool("servers") == true, "\(end)")
            try plain.ok(#"{"op":"unsubscribe","type":"svc.echo","serve":true,"req":5}"#)
            try bridge.expectNoFrame()
        }
    }

    /// (issue 36) With `group`: the patterns of that event group's members
    /// (any uid; never a fallback member, a serving group, another group
    /// or a plain subscription), told once with `"group"` when one appears
    /// or goes; the watch of the serving patterns is not told of members.
    @Test func theWatchOfAGroupListsItsMembersPatternsAndSaysOnceWhenTheyChange() throws {
        try withBroker { broker in
            let hello = try broker.connect().ok(#"{"op":"hello","client":"t","req":0}"#)
            #expect((hello.array("features") as? [String])?.contains("group-servers") == true, "\(hello)")
            let member = try broker.connect()
            try member.ok(#"{"op":"subscribe","type":"job.a","group":"work","req":1}"#)
            let others = try broker.connect()
            try others.ok(#"{"op":"subscribe","type":"job.x","group":"other","req":1}"#)   // another group
            try others.ok(#"{"op":"subscribe","type":"job.y","serve":true,"group":"work","req":2}"#)  // a serving group
            try others.ok(#"{"op":"subscribe","type":"job.z","req":3}"#)  // a plain subscription
            let bridge = try broker.connect()
            try bridge.ok(#"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"req":1}"#)  // never listed
            let requests = try bridge.ok(#"{"op":"subscribe","type":"job.>","servers":true,"req":2}"#)
            #expect(Self.servers(requests) == ["job.y"], "\(requests)")
            let watch = try bridge.ok(#"{"op":"subscribe","type":"job.>","servers":true,"group":"work","req":3}"#)
            #expect(Self.servers(watch) == ["job.a"] && watch.type == "job.>" && watch.string("group") == "work", "\(watch)")
            // A member of *.run joins: one notice, with the group; then nothing until asked again.
            let second = try broker.connect()
            try second.ok(#"{"op":"subscribe","type":"*.run","group":"work","req":1}"#)
            let notice = try bridge.readFrame()
            #expect(notice.op == "servers" && notice.type == "job.>" && notice.string("group") == "work" && notice.has("req") == false, "\(notice)")
            try second.ok(#"{"op":"subscribe","type":"job.b","group":"work","req":2}"#)
            try second.ok(#"{"op":"subscribe","type":"job.c","group":"other","req":3}"#)
            try bridge.expectNoFrame()
            let again = try bridge.ok(#"{"op":"subscribe","type":"job.>","servers":true,"group":"work","req":4}"#)
            #expect(Self.servers(again) == ["*.run", "job.a", "job.b"], "\(again)")
            // Another uid's group of the same name counts too (a group publish reaches it); a
            // second member of a pattern already there changes nothing.
            try others.ok(#"{"op":"subscribe","type":"job.a","group":"work","req":4}"#)
            try others.ok(#"{"op":"unsubscribe","type":"job.a","group":"work","req":5}"#)
            try bridge.expectNoFrame()
            // The last member of job.a leaves: a notice; the list without it.
            try member.ok(#"{"op":"unsubscribe","type":"job.a","group":"work","req":2}"#)
            let gone = try bridge.readFrame()
            #expect(gone.op == "servers" && gone.string("group") == "work", "\(gone)")
            #expect(Self.servers(try bridge.ok(#"{"op":"subscribe","type":"job.>","servers":true,"group":"work","req":5}"#)) == ["*.run", "job.b"])
            // The watch ends: no more notices.
            let end = try bridge.ok(#"{"op":"unsubscribe","type":"job.>","servers":true,"group":"work","req":6}"#)
            #expect(end.bool("removed") == true && end.string("group") == "work", "\(end)")
            second.close()
            try bridge.expectNoFrame()
        }
    }

    @Test func aWatchIsNotASubscriptionAndTakesNoServeOrGroup() throws {
        try withBroker { broker in
            let bridge = try broker.connect()
            try bridge.ok(#"{"op":"subscribe","type":"svc.>","servers":true,"req":1}"#)
            let publisher = try broker.connect()
            try publisher.ok(#"{"op":"publish","type":"svc.a","data":1,"req":1}"#)
            let asked = try publisher.error(#"{"op":"request","type":"svc.a","req":2}"#)
            #expect(asked.code == "no_responders", "\(asked)")  // a watch does not serve
            try bridge.expectNoFrame()  // and takes no events
            #expect(try bridge.error(#"{"op":"subscribe","type":"svc.>","servers":true,"serve":true,"req":2}"#).code == "bad_request")
            #expect(try bridge.ok(#"{"op":"unsubscribe","type":"nothing.>","servers":true,"req":3}"#).bool("removed") == false)
        }
    }
}
