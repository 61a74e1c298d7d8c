// The `bridge` right beyond `origin` (PROTOCOL-NOTES.md "Requests across
// machines (issue 36)", "Queue groups across machines"): a fallback serving
// subscription, a fallback group membership, a group publish and a watch of
// the serving patterns each need it, and a reload that takes it away ends
// what needed it. Written once (UIDBus.swift) and run in process
// (EventBusServerTests, no root) and against eventbusd with setpriv'd
// clients (EventBusIntegrationTests, root). What the bridge right is without
// a policy file, and `origin`, are in AccessPolicyScenarios.swift.
//
// Before editing: without a policy file only uid 0 and the broker's uid have
// the right, so another uid is refused. Uids 4346-4349.
import EventBusTestSupport
import Foundation
import Testing

package let bridgeRightScenarios: [BusScenario] = [
    BusScenario("A fallback serving subscription needs the bridge right; a plain serving one does not") { bus in
        let user = try bus.connect(uid: 4346)
        let reply = try user.error(#"{"op":"subscribe","type":"svc.>","serve":true,"fallback":true,"req":1}"#)
        #expect(reply.code == "forbidden" && reply.string("message")?.contains("bridge right") == true, "\(reply.raw)")
        #expect(try user.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"req":2}"#).bool("serve") == true)
    },

    BusScenario("A fallback group membership and a group publish need the bridge right; a plain membership does not") { bus in
        let user = try bus.connect(uid: 4347)
        let reply = try user.error(#"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"req":1}"#)
        #expect(reply.code == "forbidden" && reply.string("message")?.contains("bridge right") == true, "\(reply.raw)")
        let publish = try user.error(#"{"op":"publish","type":"job.a","group":"work","data":1,"req":2}"#)
        #expect(publish.code == "forbidden" && publish.string("message")?.contains("bridge right") == true, "\(publish.raw)")
        #expect(try user.ok(#"{"op":"subscribe","type":"job.>","group":"work","req":3}"#).int("members") == 1)
    },

    BusScenario("A reload that takes the bridge right away ends the fallback membership: forbidden with the group, and its events stay home",
                policy: "allow bridge - user=4348\n") { bus in
        let bridge = try bus.connect(uid: 4348)
        try bridge.ok(#"{"op":"subscribe","type":"job.>","group":"work","fallback":true,"req":1}"#)
        try bus.writePolicy("# no bridge right\n")
        #expect(try bus.reload() == .reloaded(generation: 2))
        let revoked = try bridge.readFrames(until: { $0.op == "error" }).last!
        #expect(revoked.code == "forbidden" && revoked.string("group") == "work" && revoked.string("message")?.hasPrefix("bridge job.> denied for uid 4348") == true, "\(revoked)")
        // No fallback member left: an event of group work stays home (nobody takes it).
        try bus.connect(uid: 0).ok(#"{"op":"publish","type":"job.a","data":1,"req":1}"#)
        try bridge.expectNoFrame()
    },

    BusScenario("A watch of the serving patterns needs the bridge right") { bus in
        let reply = try bus.connect(uid: 4347).error(#"{"op":"subscribe","type":"svc.>","servers":true,"req":1}"#)
        #expect(reply.code == "forbidden" && reply.string("message")?.contains("bridge right") == true, "\(reply.raw)")
    },

    BusScenario("A reload that takes the bridge right away ends the watch after one last servers frame; asked again, the watcher may not",
                policy: "allow bridge - user=4348\n") { bus in
        let watcher = try bus.connect(uid: 4348)
        let watching = try watcher.ok(#"{"op":"subscribe","type":"svc.>","servers":true,"req":1}"#)
        #expect(watching.array("servers") as? [String] == [], "\(watching.raw)")
        try bus.writePolicy("allow bridge - user=4349\n")
        #expect(try bus.reload() == .reloaded(generation: 2))
        let told = try watcher.readFrame(timeout: .seconds(30))
        #expect(told.op == "servers" && told.type == "svc.>", "\(told)")
        let again = try watcher.error(#"{"op":"subscribe","type":"svc.>","servers":true,"req":2}"#)
        #expect(again.code == "forbidden", "\(again)")
        let server = try bus.connect(uid: 0)
        try server.ok(#"{"op":"subscribe","type":"svc.x","serve":true,"req":1}"#)
        try watcher.expectNoFrame()
    },
]
