// PROTOCOL.md "Request/reply (1.3)": the per-uid rules of
// RequestReplyPolicyTests in an in-process server (InProcessBroker.swift)
// with handed connections of made-up uids, so they run without root: answers
// charged to the requester's uid, pending requests bounded per uid, and flow
// control holding a same-uid requester while another uid's is passed over.
// Fake uid 0 is root (no per-uid bounds).
//
// Before editing: waits are for frames or `waitUntil` with its deadline,
// never a sleep.
import EventBusTestSupport
import Foundation
import Testing

@Suite("Request/reply with other uids, in process (no root)")
struct ServerRequestReplyTests {
    @Test("A reply that would take the requester's uid past its outbound quota is not queued: limit for the requester, accepted false for the server")
    func replyOverTheRequesterQuotaIsLimit() throws {
        try withServer(configure: { $0.broker.quotas.maxOutboundBytesPerUID = 4096 }) { broker in
            let server = try broker.connect(uid: 0)
            try server.ok(#"{"op":"subscribe","type":"svc.big","serve":true,"req":1}"#)
            let user = try broker.connect(uid: 4321)
            try user.send(#"{"op":"request","type":"svc.big","req":1}"#)
            let request = try server.readFrame()
            let big = String(repeating: "x", count: 8000)
            let refused = try server.ok(#"{"op":"reply","to":"\#(request.string("reply") ?? "")","data":"\#(big)","req":2}"#)
            #expect(refused.bool("accepted") == false)
            let answer = try user.readFrame()
            #expect(answer.op == "error" && answer.code == "limit" && answer.req == .integer(1), "\(answer.raw)")
            try user.send(#"{"op":"request","type":"svc.big","req":2}"#)
            let second = try server.readFrame()
            #expect(try server.ok(#"{"op":"reply","to":"\#(second.string("reply") ?? "")","data":"small","req":3}"#).bool("accepted") == true, "a small one still gets through")
            #expect(try user.readFrame().req == .integer(2))
        }
    }

    @Test("Pending requests are bounded per uid (uid 0 has no per-uid bound); a server holding 4096 unanswered requests is passed over")
    func pendingRequestsAreBoundedPerUID() throws {
        try withServer(configure: { $0.broker.maxPendingRequestsPerConnection = 100_000 }) { broker in
            // A server of the requesters' own uid: another uid's would give them only their fair share.
            let server = try broker.connect(uid: 4321)
            try server.ok(#"{"op":"subscribe","type":"svc.many","serve":true,"req":1}"#)
            let a = try broker.connect(uid: 4321), b = try broker.connect(uid: 4321)
            var text = ""
            for i in 0..<4096 { text += #"{"op":"request","type":"svc.many","req":\#(i)}"# + "\n" }
            try a.sendBytes(Array(text.utf8), timeout: .seconds(120))
            try a.send(#"{"op":"ping","req":"p"}"#)
            _ = try a.readFrames(until: { $0.op == "ok" && $0.req == .string("p") }, timeout: .seconds(60))
            let over = try b.error(#"{"op":"request","type":"svc.many","req":1}"#)
            #expect(over.code == "limit" && (over.string("message") ?? "").contains("uid 4321"), "\(over.raw)")
            let me = try b.stats().object("me")
            #expect((me?["pending_requests"] as? NSNumber)?.intValue == 4096)
            #expect(((me?["limits"] as? [String: Any])?["pending_requests"] as? NSNumber)?.intValue == 4096)
            // Another uid is not affected (another server: this one holds 4096 now).
            let other = try broker.connect(uid: 0)
            try other.ok(#"{"op":"subscribe","type":"svc.other","serve":true,"req":1}"#)
            let c = try broker.connect(uid: 4322)
            try c.send(#"{"op":"request","type":"svc.other","req":1}"#)
            try c.expectNoFrame()
            let full = try c.error(#"{"op":"request","type":"svc.many","req":2}"#)
            #expect(full.code == "no_responders", "the server holds 4096 unanswered requests: \(full.raw)")
            let rootMe = try broker.connect(uid: 0).stats().object("me")
            #expect((rootMe?["limits"] as? [String: Any])?["pending_requests"] is NSNull)
            withExtendedLifetime((a, other)) {}
        }
    }

    @Test("Flow control: a same-uid server under wait whose queue is full holds the requester; another uid's is passed over")
    func fullServersHoldTheirOwnUIDAndPassOverOthers() throws {
        try withServer(configure: { $0.broker.maxOutboundBytes = 65536; $0.broker.stallTimeoutNanoseconds = 60_000_000_000 }) { broker in
            let server = try broker.connect(uid: 0)
            try server.ok(#"{"op":"subscribe","type":"svc.full","serve":true,"req":1}"#)
            try server.ok(#"{"op":"subscribe","type":"fill.>","req":2}"#)
            let observer = try broker.connect(uid: 0)
            func heldCount() throws -> Int {
                let clients = try observer.ok(#"{"op":"clients","req":"c"}"#).array("clients") as? [[String: Any]] ?? []
                return clients.filter { ($0["held"] as? Bool) == true }.count
            }
            let filler = try broker.connect(uid: 0)
            let pad = String(repeating: "z", count: 4000)
            var text = ""
            for i in 0..<400 { text += #"{"op":"publish","type":"fill.a","data":"\#(pad)","req":\#(i)}"# + "\n" }  // past the socket buffers
            _ = try filler.sendWithoutReading(Array(text.utf8), stall: .seconds(2))
            try waitUntil("the filler is held") { try heldCount() == 1 }
            let other = try broker.connect(uid: 4321)
            let passed = try other.error(#"{"op":"request","type":"svc.full","data":"\#(pad)","req":1}"#)
            #expect(passed.code == "no_responders", "another uid's request that does not fit is passed over: \(passed.raw)")
            let asker = try broker.connect(uid: 0)
            try asker.send(#"{"op":"request","type":"svc.full","data":"\#(pad)","req":2}"#)
            try waitUntil("the requester is held") { try heldCount() == 2 }
            let frames = try server.readFrames(until: { $0.op == "request" }, timeout: .seconds(30))
            try server.send(#"{"op":"reply","to":"\#(frames.last?.string("reply") ?? "")","data":1}"#)
            let answer = try asker.readFrame(timeout: .seconds(30))
            #expect(answer.op == "ok" && answer.req == .integer(2), "\(answer.raw)")
            withExtendedLifetime(filler) {}
        }
    }
}
