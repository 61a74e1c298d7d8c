// The watch of the serving patterns (issue 36; PROTOCOL-NOTES.md "Requests
// across machines (issue 36)", "Which machine takes a request") against the
// real broker: the `ok` lists the serving patterns that overlap the watched
// one (plain servers and serving groups, never fallback ones); a pattern that
// appears or goes sends one `servers` frame, and no second one until the
// watcher subscribes again; a second server of a pattern already served
// changes nothing. That the bridge right is needed, and that a reload that
// takes it away ends the watch, are scenarios of
// EventBusScenarios/BridgeRightScenarios.swift (run with and without root).
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
