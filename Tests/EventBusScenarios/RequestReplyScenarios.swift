// PROTOCOL.md "Request/reply (1.3)" rules that need other uids: the answer
// charged to the requester's uid, a requester that never reads, flow control
// for requests (a same-uid server holds the requester, another uid's is
// passed over), the per-uid pending bound and the fair share of a server's
// reply tokens. Written once (UIDBus.swift) and run in process
// (EventBusServerTests, no root) and against eventbusd with setpriv'd clients
// (EventBusIntegrationTests, root). The `serve` policy action is in
// AccessPolicyScenarios.swift.
//
// Before editing: absence is settled with a ping round trip, never a bare
// sleep. Uids 4321 and 4322.
import EventBusTestSupport
import Foundation
import Testing

package let requestReplyScenarios: [BusScenario] = [
    BusScenario("A reply that would take the requester's uid past its outbound quota is not queued: limit for the requester, accepted false for the server",
                options: ["--max-outbound-per-uid", "4096"]) { bus in
        let server = try bus.connect(uid: 0)
        try server.ok(#"{"op":"subscribe","type":"svc.big","serve":true,"req":1}"#)
        let user = try bus.connect(uid: 4321)
        try user.send(#"{"op":"request","type":"svc.big","req":1}"#)
        let request = try server.readFrame()
        let big = String(repeating: "x", count: 8000)
        let refused = try server.ok(#"{"op":"reply","to":"\#(request.string("reply") ?? "")","data":"\#(big)","req":2}"#)
        #expect(refused.bool("accepted") == false)
        let answer = try user.readFrame()
        #expect(answer.op == "error" && answer.code == "limit" && answer.req == .integer(1), "\(answer.raw)")
        // A small one still gets through.
        try user.send(#"{"op":"request","type":"svc.big","req":2}"#)
        let second = try server.readFrame()
        #expect(try server.ok(#"{"op":"reply","to":"\#(second.string("reply") ?? "")","data":"small","req":3}"#).bool("accepted") == true)
        #expect(try user.readFrame().req == .integer(2))
    },

    BusScenario("A requester that never reads its answers is bounded by its uid's quota: answers turn into limit, and its reading stops",
                options: ["--max-outbound-per-uid", "65536"]) { bus in
        let server = try bus.connect(uid: 0)
        try server.ok(#"{"op":"subscribe","type":"svc.flood","serve":true,"req":1}"#)
        let user = try bus.connect(uid: 4321)
        func ask(_ range: Range<Int>) throws {
            var text = ""
            for i in range { text += #"{"op":"request","type":"svc.flood","req":\#(i)}"# + "\n" }
            try user.sendBytes(Array(text.utf8))
        }
        try ask(0..<40)
        try user.ok(#"{"op":"ping","req":"p"}"#)  // the 40 are routed (no answer yet)
        let requests = try server.settle().filter { $0.op == "request" }
        #expect(requests.count == 40)
        let pad = String(repeating: "y", count: 60_000)  // past the socket buffers
        var accepted = 0
        for request in requests {
            let answer = try server.ok(#"{"op":"reply","to":"\#(request.string("reply") ?? "")","data":"\#(pad)","req":"r"}"#)
            if answer.bool("accepted") == true { accepted += 1 }
        }
        #expect(accepted > 0 && accepted < 40, "accepted \(accepted) of 40")
        let clients = try server.ok(#"{"op":"clients","req":"c"}"#).array("clients") as? [[String: Any]] ?? []
        let queued = clients.first { ($0["uid"] as? NSNumber)?.intValue == 4321 }?["queued_bytes"] as? NSNumber
        #expect((queued?.intValue ?? .max) <= 65536 + 40 * 400, "\(clients)")
        // Asking on, it gets limit (or, over its quota, is not read): its queue stays bounded.
        try ask(40..<440)
        // The requester's input is read as its quota allows, so requests may
        // reach the server between a reply and its `ok`: they are kept and answered too.
        var reached = 0
        var pending: [Frame] = []
        while true {
            pending += try server.settle().filter { $0.op == "request" }
            if pending.isEmpty { break }
            let batch = pending
            pending = []
            reached += batch.count
            for request in batch {
                var early: [Frame] = []
                try server.request(#"{"op":"reply","to":"\#(request.string("reply") ?? "")","data":"\#(pad)","req":"r"}"#, skippingEventsInto: &early)
                pending += early.filter { $0.op == "request" }
            }
        }
        let after = try server.ok(#"{"op":"clients","req":"c2"}"#).array("clients") as? [[String: Any]] ?? []
        let queuedAfter = after.first { ($0["uid"] as? NSNumber)?.intValue == 4321 }?["queued_bytes"] as? NSNumber
        let bound = 65536 + 60_200 + 440 * 400
        #expect((queuedAfter?.intValue ?? .max) <= bound, "reached \(reached): \(after)")
    },

    BusScenario("Flow control: a same-uid server under wait whose queue is full holds the requester; another uid's is passed over",
                options: ["--max-outbound", "65536", "--stall-timeout", "60s"]) { bus in
        let server = try bus.connect(uid: 0)
        try server.ok(#"{"op":"subscribe","type":"svc.full","serve":true,"req":1}"#)
        try server.ok(#"{"op":"subscribe","type":"fill.>","req":2}"#)
        let observer = try bus.connect(uid: 0)
        func heldCount() throws -> Int {
            let clients = try observer.ok(#"{"op":"clients","req":"c"}"#).array("clients") as? [[String: Any]] ?? []
            return clients.filter { ($0["held"] as? Bool) == true }.count
        }
        // A same-uid publisher fills the server's queue until it is held.
        let filler = try bus.connect(uid: 0)
        let pad = String(repeating: "z", count: 4000)
        var text = ""
        for i in 0..<400 { text += #"{"op":"publish","type":"fill.a","data":"\#(pad)","req":\#(i)}"# + "\n" }  // past the socket buffers
        _ = try filler.sendWithoutReading(Array(text.utf8), stall: .seconds(2))
        try waitUntil("the filler is held") { try heldCount() == 1 }
        // Another uid's request that does not fit is passed over: nobody reached.
        let other = try bus.connect(uid: 4321)
        let passed = try other.error(#"{"op":"request","type":"svc.full","data":"\#(pad)","req":1}"#)
        #expect(passed.code == "no_responders", "\(passed.raw)")
        // A same-uid requester is held: no answer yet.
        let asker = try bus.connect(uid: 0)
        try asker.send(#"{"op":"request","type":"svc.full","data":"\#(pad)","req":2}"#)
        try waitUntil("the requester is held") { try heldCount() == 2 }
        // The server reads its queue: the request is routed, the requester read on.
        let frames = try server.readFrames(until: { $0.op == "request" }, timeout: .seconds(30))
        try server.send(#"{"op":"reply","to":"\#(frames.last?.string("reply") ?? "")","data":1}"#)
        let answer = try asker.readFrame(timeout: .seconds(30))
        #expect(answer.op == "ok" && answer.req == .integer(2), "\(answer.raw)")
        withExtendedLifetime(filler) {}
    },

    BusScenario("Pending requests are bounded per uid (uid 0 has no per-uid bound); a server holding 4096 unanswered requests is passed over",
                options: ["--max-pending-requests", "100000"]) { bus in
        // A server of the requesters' own uid: another uid's would give them only their fair share.
        let server = try bus.connect(uid: 4321)
        try server.ok(#"{"op":"subscribe","type":"svc.many","serve":true,"req":1}"#)
        let a = try bus.connect(uid: 4321), b = try bus.connect(uid: 4321)
        var text = ""
        for i in 0..<4096 { text += #"{"op":"request","type":"svc.many","req":\#(i)}"# + "\n" }
        try a.sendBytes(Array(text.utf8), timeout: .seconds(120))
        try a.ok(#"{"op":"ping","req":"p"}"#, timeout: .seconds(60))
        let over = try b.error(#"{"op":"request","type":"svc.many","req":1}"#)
        #expect(over.code == "limit" && (over.string("message") ?? "").contains("uid 4321"), "\(over.raw)")
        let me = try b.stats().object("me")
        #expect((me?["pending_requests"] as? NSNumber)?.intValue == 4096)
        #expect(((me?["limits"] as? [String: Any])?["pending_requests"] as? NSNumber)?.intValue == 4096)
        // Another uid is not affected (another server: this one holds 4096 now).
        let other = try bus.connect(uid: 0)
        try other.ok(#"{"op":"subscribe","type":"svc.other","serve":true,"req":1}"#)
        let c = try bus.connect(uid: 4322)
        try c.send(#"{"op":"request","type":"svc.other","req":1}"#)
        try c.expectNoFrame()
        // The server holds 4096 unanswered requests (the broker keeps a token for each): passed over.
        let full = try c.error(#"{"op":"request","type":"svc.many","req":2}"#)
        #expect(full.code == "no_responders", "\(full.raw)")
        let rootMe = try bus.connect(uid: 0).stats().object("me")
        #expect((rootMe?["limits"] as? [String: Any])?["pending_requests"] is NSNull)
        withExtendedLifetime((a, other)) {}
    },

    BusScenario("A server's reply tokens are shared fairly: another uid flooding root's server with requests it never answers gets about half of them, root's own request still reaches it and is answered",
                options: ["--max-pending-requests", "100000"]) { bus in
        let server = try bus.connect(uid: 0)
        try server.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"req":1}"#)
        let flooder = try bus.connect(uid: 4321)
        var text = ""
        for i in 0..<4096 { text += #"{"op":"request","type":"svc.flood","timeout":300000,"req":\#(i)}"# + "\n" }
        try flooder.sendBytes(Array(text.utf8), timeout: .seconds(120))
        // Each request is routed (no answer yet) or refused at once.
        let refused = try flooder.settle(timeout: .seconds(60)).filter { $0.code == "no_responders" }.count
        let reached = 4096 - refused
        #expect(reached > 1000 && reached <= 2048, "uid 4321 reached the server with \(reached) of 4096")
        #expect((try flooder.stats().object("me")?["pending_requests"] as? NSNumber)?.intValue == reached)
        // Root asks the same server while uid 4321 holds its share: it gets there and is answered.
        let root = try bus.connect(uid: 0)
        try root.send(#"{"op":"request","type":"svc.mine","req":"r"}"#)
        let frames = try server.readFrames(until: { $0.op == "request" && $0.type == "svc.mine" }, timeout: .seconds(60))
        #expect(frames.filter { $0.type == "svc.flood" }.count == reached)
        try server.send(#"{"op":"reply","to":"\#(frames.last?.string("reply") ?? "")","data":"yours"}"#)
        let answer = try root.readFrame(timeout: .seconds(30))
        #expect(answer.op == "ok" && answer.req == .string("r") && answer.raw.contains(#""data":"yours""#), "\(answer.raw)")
        // Another uid still finds room beside it.
        let second = try bus.connect(uid: 4322)
        try second.send(#"{"op":"request","type":"svc.other","timeout":300000,"req":1}"#)
        try second.expectNoFrame()
        withExtendedLifetime(flooder) {}
    },
]
