// PROTOCOL.md "Request/reply (1.3)" rules that need other uids, against the
// real broker: the `serve` policy action (and `--check-policy`), the
// answer charged to the requester's uid, flow control for requests (a
// same-uid server holds the requester, another uid's is passed over), and
// the per-uid pending bound. Other-uid clients are socat relays run under
// setpriv, as in AccessPolicyTests.swift.
//
// Before editing: needs root, setpriv and socat. Absence is settled with a
// ping round trip, never a bare sleep. One broker per test.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

private let canSwitchUsers = getuid() == 0 && findInPath("setpriv") != nil && findInPath("socat") != nil

@Suite("Request/reply with other uids (1.3)", .enabled(if: canSwitchUsers, "needs root, setpriv and socat"))
struct RequestReplyPolicyTests {
    typealias PolicyFile = AccessPolicyTests.PolicyFile
    typealias OtherUsers = AccessPolicyTests.OtherUsers

    private func withUsers(_ arguments: [String] = [], _ body: (BrokerProcess, OtherUsers) throws -> Void) throws {
        try withBroker(arguments) { broker in try body(broker, try OtherUsers(broker)) }
    }

    @Test("Serving needs serve as well as subscribe: forbidden names the rule, filtered when partial, requests of denied types never reach it")
    func servingNeedsServeAndSubscribe() throws {
        let policy = try PolicyFile("deny serve system.>\nallow serve system.> user=0\ndeny subscribe secret.>\n")
        try withUsers(["--policy", policy.path]) { broker, users in
            let root = try broker.connect()
            let user = try users.connect(uid: 4321)
            let denied = try user.error(#"{"op":"subscribe","type":"system.>","serve":true,"req":1}"#)
            #expect(denied.code == "forbidden" && (denied.string("message") ?? "").contains("serve system.> denied for uid 4321 by \(policy.path):1"), "\(denied.raw)")
            let hidden = try user.error(#"{"op":"subscribe","type":"secret.x","serve":true,"req":2}"#)
            #expect(hidden.code == "forbidden" && (hidden.string("message") ?? "").contains("subscribe secret.x"), "\(hidden.raw)")
            // Listening to system.> stays allowed: serve is about answering.
            #expect(try user.ok(#"{"op":"subscribe","type":"system.>","req":3}"#).bool("filtered") == nil)
            let wide = try user.ok(#"{"op":"subscribe","type":">","serve":true,"req":4}"#)
            #expect(wide.bool("filtered") == true && wide.bool("serve") == true)
            // Root's request of system.x reaches nobody: the user may not answer it.
            #expect(try root.error(#"{"op":"request","type":"system.reboot","req":5}"#).code == "no_responders")
            #expect(try root.error(#"{"op":"request","type":"secret.x","req":6}"#).code == "no_responders")
            try root.send(#"{"op":"request","type":"thumb.make","req":7}"#)
            let request = try user.readFrame()
            #expect(request.op == "request" && request.type == "thumb.make", "\(request.raw)")
            try user.ok(#"{"op":"reply","to":"\#(request.string("reply")!)","data":"ok","req":8}"#)
            let answer = try root.readFrame()
            #expect(answer.req == .integer(7) && (answer.object("reply")?["uid"] as? NSNumber)?.intValue == 4321, "\(answer.raw)")
            // Root serves system.>.
            try root.ok(#"{"op":"subscribe","type":"system.>","serve":true,"req":9}"#)
            try user.send(#"{"op":"request","type":"system.status","req":10}"#)
            #expect(try root.readFrame().op == "request")
        }
    }

    @Test("--check-policy accepts and reports serve rules and the serve default; a serve rule without a pattern is an error with file:line")
    func checkPolicyReportsServeRules() throws {
        let good = try PolicyFile("deny serve system.>\nallow serve system.> user=0\ndefault serve deny\n")
        let run = try runProcess(try builtProduct("eventbusd"), ["--check-policy", good.path], timeout: .seconds(10))
        #expect(run.status == .exited(0), "\(run.stderr)")
        #expect(run.stdout.contains("deny serve system.>") && run.stdout.contains("allow serve system.> user=0"), "\(run.stdout)")
        #expect(run.stdout.contains("default serve deny"), "\(run.stdout)")
        let bad = try PolicyFile("allow serve -\n")
        let failed = try runProcess(try builtProduct("eventbusd"), ["--check-policy", bad.path], timeout: .seconds(10))
        #expect(failed.status == .exited(78) && failed.stderr.contains("\(bad.path):1") && failed.stderr.contains("serve rules take a pattern"), "\(failed.stderr)")
    }

    @Test("A reply that would take the requester's uid past its outbound quota is not queued: limit for the requester, accepted false for the server")
    func replyOverTheRequesterQuotaIsLimit() throws {
        try withUsers(["--max-outbound-per-uid", "4096"]) { broker, users in
            let server = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.big","serve":true,"req":1}"#)
            let user = try users.connect(uid: 4321)
            try user.send(#"{"op":"request","type":"svc.big","req":1}"#)
            let request = try server.readFrame()
            let big = String(repeating: "x", count: 8000)
            let refused = try server.ok(#"{"op":"reply","to":"\#(request.string("reply")!)","data":"\#(big)","req":2}"#)
            #expect(refused.bool("accepted") == false)
            let answer = try user.readFrame()
            #expect(answer.op == "error" && answer.code == "limit" && answer.req == .integer(1), "\(answer.raw)")
            // A small one still gets through.
            try user.send(#"{"op":"request","type":"svc.big","req":2}"#)
            let second = try server.readFrame()
            #expect(try server.ok(#"{"op":"reply","to":"\#(second.string("reply")!)","data":"small","req":3}"#).bool("accepted") == true)
            #expect(try user.readFrame().req == .integer(2))
        }
    }

    @Test("A requester that never reads its answers is bounded by its uid's quota: answers turn into limit, and its reading stops")
    func unreadAnswersAreBounded() throws {
        try withUsers(["--max-outbound-per-uid", "65536"]) { broker, users in
            let server = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.flood","serve":true,"req":1}"#)
            let user = try users.connect(uid: 4321)
            func ask(_ range: Range<Int>) throws {
                var text = ""
                for i in range { text += #"{"op":"request","type":"svc.flood","req":\#(i)}"# + "\n" }
                try user.sendBytes(Array(text.utf8))
            }
            try ask(0..<40)
            try user.ok(#"{"op":"ping","req":"p"}"#)  // the 40 are routed (no answer yet)
            let requests = try server.settle().filter { $0.op == "request" }
            #expect(requests.count == 40)
            let pad = String(repeating: "y", count: 60_000)  // past the socket buffers of the relay too
            var accepted = 0
            for request in requests {
                let answer = try server.ok(#"{"op":"reply","to":"\#(request.string("reply")!)","data":"\#(pad)","req":"r"}"#)
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
                    try server.request(#"{"op":"reply","to":"\#(request.string("reply")!)","data":"\#(pad)","req":"r"}"#, skippingEventsInto: &early)
                    pending += early.filter { $0.op == "request" }
                }
            }
            let after = try server.ok(#"{"op":"clients","req":"c2"}"#).array("clients") as? [[String: Any]] ?? []
            let queuedAfter = after.first { ($0["uid"] as? NSNumber)?.intValue == 4321 }?["queued_bytes"] as? NSNumber
            let bound = 65536 + 60_200 + 440 * 400
            #expect((queuedAfter?.intValue ?? .max) <= bound, "reached \(reached): \(after)")
        }
    }

    @Test("Flow control: a same-uid server under wait whose queue is full holds the requester; another uid's is passed over")
    func fullServersHoldTheirOwnUIDAndPassOverOthers() throws {
        try withUsers(["--max-outbound", "65536", "--stall-timeout", "60s"]) { broker, users in
            let server = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.full","serve":true,"req":1}"#)
            try server.ok(#"{"op":"subscribe","type":"fill.>","req":2}"#)
            let observer = try broker.connect()
            func heldCount() throws -> Int {
                let clients = try observer.ok(#"{"op":"clients","req":"c"}"#).array("clients") as? [[String: Any]] ?? []
                return clients.filter { ($0["held"] as? Bool) == true }.count
            }
            // A same-uid publisher fills the server's queue until it is held.
            let filler = try broker.connect()
            let pad = String(repeating: "z", count: 4000)
            var text = ""
            for i in 0..<400 { text += #"{"op":"publish","type":"fill.a","data":"\#(pad)","req":\#(i)}"# + "\n" }  // past the socket buffers
            _ = try filler.sendWithoutReading(Array(text.utf8), stall: .seconds(2))
            try waitUntil("the filler is held") { try heldCount() == 1 }
            // Another uid's request that does not fit is passed over: nobody reached.
            let other = try users.connect(uid: 4321)
            let passed = try other.error(#"{"op":"request","type":"svc.full","data":"\#(pad)","req":1}"#)
            #expect(passed.code == "no_responders", "\(passed.raw)")
            // A same-uid requester is held: no answer yet.
            let asker = try broker.connect()
            try asker.send(#"{"op":"request","type":"svc.full","data":"\#(pad)","req":2}"#)
            try waitUntil("the requester is held") { try heldCount() == 2 }
            // The server reads its queue: the request is routed, the requester read on.
            let frames = try server.readFrames(until: { $0.op == "request" }, timeout: .seconds(30))
            try server.send(#"{"op":"reply","to":"\#(frames.last!.string("reply")!)","data":1}"#)
            let answer = try asker.readFrame(timeout: .seconds(30))
            #expect(answer.op == "ok" && answer.req == .integer(2), "\(answer.raw)")
        }
    }

    @Test("Pending requests are bounded per uid (uid 0 has no per-uid bound); a server holding 4096 unanswered requests is passed over")
    func pendingRequestsAreBoundedPerUID() throws {
        try withUsers(["--max-pending-requests", "100000"]) { broker, users in
            // A server of the requesters' own uid: another uid's would give them only their fair share.
            let server = try users.connect(uid: 4321)
            try server.ok(#"{"op":"subscribe","type":"svc.many","serve":true,"req":1}"#)
            let a = try users.connect(uid: 4321), b = try users.connect(uid: 4321)
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
            let other = try broker.connect()
            try other.ok(#"{"op":"subscribe","type":"svc.other","serve":true,"req":1}"#)
            let c = try users.connect(uid: 4322)
            try c.send(#"{"op":"request","type":"svc.other","req":1}"#)
            try c.expectNoFrame()
            // The server holds 4096 unanswered requests (the broker keeps a token for each): passed over.
            let full = try c.error(#"{"op":"request","type":"svc.many","req":2}"#)
            #expect(full.code == "no_responders", "\(full.raw)")
            let rootMe = try broker.connect().stats().object("me")
            #expect((rootMe?["limits"] as? [String: Any])?["pending_requests"] is NSNull)
        }
    }

    @Test("A server's reply tokens are shared fairly: another uid flooding root's server with requests it never answers gets about half of them, root's own request still reaches it and is answered")
    func anotherUIDCannotFillRootsServer() throws {
        try withUsers(["--max-pending-requests", "100000"]) { broker, users in
            let server = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"req":1}"#)
            let flooder = try users.connect(uid: 4321)
            var text = ""
            for i in 0..<4096 { text += #"{"op":"request","type":"svc.flood","timeout":300000,"req":\#(i)}"# + "\n" }
            try flooder.sendBytes(Array(text.utf8), timeout: .seconds(120))
            // Each request is routed (no answer yet) or refused at once.
            let refused = try flooder.settle(timeout: .seconds(60)).filter { $0.code == "no_responders" }.count
            let reached = 4096 - refused
            #expect(reached > 1000 && reached <= 2048, "uid 4321 reached the server with \(reached) of 4096")
            #expect((try flooder.stats().object("me")?["pending_requests"] as? NSNumber)?.intValue == reached)
            // Root asks the same server while uid 4321 holds its share: it gets there and is answered.
            let root = try broker.connect()
            try root.send(#"{"op":"request","type":"svc.mine","req":"r"}"#)
            let frames = try server.readFrames(until: { $0.op == "request" && $0.type == "svc.mine" }, timeout: .seconds(60))
            #expect(frames.filter { $0.type == "svc.flood" }.count == reached)
            try server.send(#"{"op":"reply","to":"\#(frames.last!.string("reply")!)","data":"yours"}"#)
            let answer = try root.readFrame(timeout: .seconds(30))
            #expect(answer.op == "ok" && answer.req == .string("r") && answer.raw.contains(#""data":"yours""#), "\(answer.raw)")
            // Another uid still finds room beside it.
            let second = try users.connect(uid: 4322)
            try second.send(#"{"op":"request","type":"svc.other","timeout":300000,"req":1}"#)
            try second.expectNoFrame()
        }
    }
}
