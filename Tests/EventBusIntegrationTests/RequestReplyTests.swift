// PROTOCOL.md "Request/reply (1.3)" against the real broker, one test per
// rule, speaking raw NDJSON: serving subscriptions, routing, reply tokens,
// the answer, no_responders, no_reply (close, unsubscribe, SIGKILL), the
// deadline, the bounds, flow control, and the `stats`/`clients`/`types`/
// `hello` fields. The `serve` policy rules are in
// EventBusScenarios/AccessPolicyScenarios.swift.
//
// Before editing: absence is settled with a ping round trip, never a bare
// sleep; a deadline is checked by its error only, never timed against a
// figure (the machine is loaded). One broker per test.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// An integer member of a decoded JSON object (JSONSerialization gives NSNumber).
private func int(_ value: Any?) -> Int? { (value as? NSNumber)?.intValue }

@Suite("Request/reply (1.3)")
struct RequestReplyTests {
    /// Reads the next frame, which must be a request; returns it.
    static func nextRequest(_ server: RawClient) throws -> Frame {
        let frame = try server.readFrame()
        guard frame.op == "request" else { throw TestFailure("expected a request frame, got \(frame.raw.prefix(300))") }
        return frame
    }

    /// Sends `json` (a `request`) and returns nothing: its answer comes later.
    static func ask(_ client: RawClient, type: String, req: Int, extra: String = "") throws {
        try client.send(#"{"op":"request","type":"\#(type)","req":\#(req)\#(extra)}"#)
    }

    @Test("Serving subscriptions are separate from plain ones: requests reach only serving ones, events only plain ones")
    func servingSubscriptionsAreSeparateFromPlainOnes() throws {
        try withBroker { broker in
            let both = try broker.connect()
            let asker = try broker.connect()
            let ok = try both.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"req":1}"#)
            #expect(ok.bool("serve") == true)
            try both.ok(#"{"op":"subscribe","type":"svc.>","req":2}"#)
            // An event reaches the plain subscription once, never as a request.
            let receipt = try asker.publish("svc.ev")
            #expect(receipt.delivered == 1)
            let event = try both.readFrame()
            #expect(event.op == "event" && event.seq == receipt.seq)
            // A request reaches the serving one, as a request, once.
            try Self.ask(asker, type: "svc.rq", req: 3)
            let request = try Self.nextRequest(both)
            #expect(request.type == "svc.rq")
            try both.expectNoFrame()
            // Removing the serving subscription leaves the plain one, and the other way round.
            let removed = try both.ok(#"{"op":"unsubscribe","type":"svc.>","serve":true,"req":4}"#)
            #expect(removed.bool("removed") == true)
            let answer = try asker.readFrame()
            #expect(answer.code == "no_reply", "\(answer.raw)")
            let noOne = try asker.error(#"{"op":"request","type":"svc.rq","req":5}"#)
            #expect(noOne.code == "no_responders")
            #expect(try asker.publish("svc.ev2").delivered == 1)
            #expect(try both.readFrame().type == "svc.ev2")
            let plain = try both.ok(#"{"op":"unsubscribe","type":"svc.>","req":6}"#)
            #expect(plain.bool("removed") == true)
            #expect(try asker.publish("svc.ev3").delivered == 0)
            let again = try both.ok(#"{"op":"unsubscribe","type":"svc.>","serve":true,"req":7}"#)
            #expect(again.bool("removed") == false)
        }
    }

    @Test("A request needs req (of at most 1024 bytes), and a timeout over --max-request-timeout is bad_request")
    func requestNeedsReqAndABoundedTimeout() throws {
        try withBroker(["--max-request-timeout", "2s"]) { broker in
            let server = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.a","serve":true,"req":1}"#)
            let asker = try broker.connect()
            try asker.send(#"{"op":"request","type":"svc.a"}"#)
            let noReq = try asker.readFrame()
            #expect(noReq.op == "error" && noReq.code == "bad_request" && noReq.req == nil, "\(noReq.raw)")
            let tooLong = try asker.error(#"{"op":"request","type":"svc.a","timeout":2001,"req":2}"#)
            #expect(tooLong.code == "bad_request")
            let pattern = try asker.error(#"{"op":"request","type":"svc.*","req":3}"#)
            #expect(pattern.code == "bad_type")
            let longReq = String(repeating: "r", count: 1100)
            let long = try asker.error(#"{"op":"request","type":"svc.a","req":"\#(longReq)"}"#)
            #expect(long.code == "bad_request" && (long.string("message") ?? "").contains("1024 bytes"), "\(long.raw.prefix(200))")
            try server.expectNoFrame()
        }
    }

    @Test("A request is queued like an event, with op request, its reply token and the time left, to every server but the requester")
    func requestFrameIsTheEventShapeWithTokenAndTimeout() throws {
        try withBroker { broker in
            let one = try broker.connect()
            let two = try broker.connect()
            let asker = try broker.connect()
            try one.ok(#"{"op":"subscribe","type":"svc.*","serve":true,"req":1}"#)
            try two.ok(#"{"op":"subscribe","type":"svc.b","serve":true,"req":1}"#)
            try asker.ok(#"{"op":"subscribe","type":"svc.b","serve":true,"req":1}"#)  // no echo: never its own
            try Self.ask(asker, type: "svc.b", req: 9, extra: #","data":{"n":[1,2]},"source":"me","id":"q-1","timeout":5000"#)
            let a = try Self.nextRequest(one), b = try Self.nextRequest(two)
            for frame in [a, b] {
                #expect(frame.string("source") == "me" && frame.string("id") == "q-1")
                #expect(frame.int("pid") == Int(getpid()) && frame.int("uid") == Int(getuid()))
                #expect((frame.object("data")?["n"] as? [Int]) == [1, 2])
                #expect(frame.has("time"))
                #expect((frame.int("timeout") ?? 0) > 0 && (frame.int("timeout") ?? 0) <= 5000)
                #expect(frame.string("reply")?.utf8.count == 32)
            }
            #expect(a.seq == b.seq && a.seq != nil)
            #expect(a.string("reply") != b.string("reply"), "each server gets a token of its own")
            try asker.expectNoFrame()
        }
    }

    @Test("Requests are never retained, never in the history ring, never replayed")
    func requestsAreNeverRetainedOrReplayed() throws {
        try withBroker { broker in
            let server = try broker.connect()
            let asker = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.c","serve":true,"req":1}"#)
            let before = try asker.stats()
            try Self.ask(asker, type: "svc.c", req: 2)
            _ = try Self.nextRequest(server)
            let after = try asker.stats()
            #expect(after.int("history_events") == before.int("history_events"))
            #expect(after.int("retained") == 0)
            let late = try broker.connect()
            let ok = try late.ok(#"{"op":"subscribe","type":"svc.>","last":true,"since":0,"req":3}"#)
            #expect(ok.int("retained") == 0)
            try late.expectNoFrame()
            let serveLate = try late.error(#"{"op":"subscribe","type":"svc.>","serve":true,"since":0,"req":4}"#)
            #expect(serveLate.code == "bad_request")
        }
    }

    @Test("A request that reaches nobody is no_responders at once and takes no seq")
    func noRespondersAtOnceWithoutASeq() throws {
        try withBroker { broker in
            let asker = try broker.connect()
            let first = try asker.publish("svc.tick")
            let none = try asker.error(#"{"op":"request","type":"svc.nobody","req":2}"#)
            #expect(none.code == "no_responders" && none.req == .integer(2))
            let second = try asker.publish("svc.tick", req: 3)
            #expect(second.seq == first.seq + 1)
            // Its own serving subscription does not count without echo.
            try asker.ok(#"{"op":"subscribe","type":"svc.nobody","serve":true,"req":4}"#)
            #expect(try asker.error(#"{"op":"request","type":"svc.nobody","req":5}"#).code == "no_responders")
            let echo = try broker.connect()
            try echo.ok(#"{"op":"hello","echo":true,"req":1}"#)
            try echo.ok(#"{"op":"subscribe","type":"svc.self","serve":true,"req":2}"#)
            try Self.ask(echo, type: "svc.self", req: 3)
            let own = try Self.nextRequest(echo)
            try echo.send(#"{"op":"reply","to":"\#(own.string("reply")!)","data":1}"#)
            let answer = try echo.readFrame()
            #expect(answer.op == "ok" && answer.req == .integer(3) && (answer.object("reply")?["data"] as? Int) == 1, "\(answer.raw)")
        }
    }

    @Test("Reply tokens are single use and good only on their connection; every bad one gets accepted false")
    func replyTokensAreSingleUseAndBoundToTheirConnection() throws {
        try withBroker { broker in
            let server = try broker.connect()
            let thief = try broker.connect()
            let asker = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.d","serve":true,"req":1}"#)
            try Self.ask(asker, type: "svc.d", req: 1)
            let token = try Self.nextRequest(server).string("reply")!
            for forged in [token, String(repeating: "0", count: 32), "x", token.uppercased()] {
                let answer = try thief.ok(#"{"op":"reply","to":"\#(forged)","data":"stolen","req":1}"#)
                #expect(answer.bool("accepted") == false, "\(forged)")
            }
            let accepted = try server.ok(#"{"op":"reply","to":"\#(token)","data":"mine","req":2}"#)
            #expect(accepted.bool("accepted") == true)
            let answer = try asker.readFrame()
            #expect(answer.op == "ok" && answer.req == .integer(1))
            let reply = answer.object("reply")
            #expect(reply?["data"] as? String == "mine")
            #expect(int(reply?["uid"]) == Int(getuid()) && int(reply?["pid"]) == Int(getpid()) && reply?["time"] is String)
            #expect(try server.ok(#"{"op":"reply","to":"\#(token)","data":"again","req":3}"#).bool("accepted") == false)
            let bad = try server.error(#"{"op":"reply","req":4}"#)
            #expect(bad.code == "bad_request")
            try asker.expectNoFrame()
        }
    }

    @Test("The first reply wins; a reply with error gives the requester service_error with the text and the reply")
    func firstReplyWinsAndServiceErrorCarriesTheText() throws {
        try withBroker { broker in
            let one = try broker.connect()
            let two = try broker.connect()
            let asker = try broker.connect()
            for server in [one, two] { try server.ok(#"{"op":"subscribe","type":"svc.e","serve":true,"req":1}"#) }
            try Self.ask(asker, type: "svc.e", req: 1)
            let t1 = try Self.nextRequest(one).string("reply")!, t2 = try Self.nextRequest(two).string("reply")!
            #expect(try two.ok(#"{"op":"reply","to":"\#(t2)","error":"disk full","data":{"free":0},"req":1}"#).bool("accepted") == true)
            #expect(try one.ok(#"{"op":"reply","to":"\#(t1)","data":"late","req":1}"#).bool("accepted") == false)
            let answer = try asker.readFrame()
            #expect(answer.op == "error" && answer.code == "service_error" && answer.req == .integer(1))
            #expect(answer.string("message") == "disk full")
            #expect((answer.object("reply")?["data"] as? [String: Any])?["free"] as? Int == 0)
            try asker.expectNoFrame()
        }
    }

    @Test("Answers may come out of order; every other request is still answered in order")
    func answersMayComeOutOfOrder() throws {
        try withBroker { broker in
            let server = try broker.connect()
            let asker = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.f","serve":true,"req":1}"#)
            try Self.ask(asker, type: "svc.f", req: 1)
            try Self.ask(asker, type: "svc.f", req: 2)
            try asker.send(#"{"op":"ping","req":3}"#)
            #expect(try asker.readFrame().req == .integer(3), "the ping is answered at once")
            let first = try Self.nextRequest(server), second = try Self.nextRequest(server)
            try server.ok(#"{"op":"reply","to":"\#(second.string("reply")!)","data":2,"req":1}"#)
            try server.ok(#"{"op":"reply","to":"\#(first.string("reply")!)","data":1,"req":2}"#)
            let answers = try asker.readFrames(count: 2)
            #expect(answers.map(\.req) == [.integer(2), .integer(1)])
            #expect(answers[0].seq == second.seq && answers[1].seq == first.seq)
        }
    }

    @Test("no_reply at once when every server the request reached closed or unsubscribed, saying which")
    func noReplyWhenEveryServerWent() throws {
        try withBroker { broker in
            let closer = try broker.connect()
            let leaver = try broker.connect()
            let asker = try broker.connect()
            try closer.ok(#"{"op":"subscribe","type":"svc.g","serve":true,"req":1}"#)
            try leaver.ok(#"{"op":"subscribe","type":"svc.*","serve":true,"req":1}"#)
            try leaver.ok(#"{"op":"subscribe","type":"svc.g","serve":true,"req":2}"#)
            try Self.ask(asker, type: "svc.g", req: 1, extra: #","timeout":300000"#)
            _ = try Self.nextRequest(closer)
            _ = try Self.nextRequest(leaver)
            closer.close()
            try asker.expectNoFrame()  // one server is left
            try leaver.ok(#"{"op":"unsubscribe","type":"svc.*","serve":true,"req":3}"#)
            try asker.expectNoFrame()  // its other serving subscription still matches
            try leaver.ok(#"{"op":"unsubscribe","type":"svc.g","serve":true,"req":4}"#)
            let answer = try asker.readFrame()
            #expect(answer.op == "error" && answer.code == "no_reply" && answer.req == .integer(1), "\(answer.raw)")
            let message = answer.string("message") ?? ""
            #expect(message.contains("closed") && message.contains("removed its serving subscription"), "\(message)")
        }
    }

    @Test("no_reply when the only server the request reached falls behind (took nothing of its queue for the stall timeout while it held a publisher)")
    func noReplyWhenTheServerFallsBehind() throws {
        try withBroker(["--max-outbound", "65536", "--stall-timeout", "300ms"]) { broker in
            let server = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.slow","serve":true,"req":1}"#)
            try server.ok(#"{"op":"subscribe","type":"fill.>","req":2}"#)
            let asker = try broker.connect()
            try Self.ask(asker, type: "svc.slow", req: 1, extra: #","timeout":300000"#)
            try asker.expectNoFrame()  // queued to the server, pending
            // A same-uid publisher fills the server's queue and is held; the
            // server reads nothing for the stall timeout: it is behind.
            let filler = try broker.connect()
            let pad = String(repeating: "z", count: 4000)
            var text = ""
            for i in 0..<400 { text += #"{"op":"publish","type":"fill.a","data":"\#(pad)","req":\#(i)}"# + "\n" }  // past the socket buffers
            _ = try filler.sendWithoutReading(Array(text.utf8), stall: .seconds(5))
            let answer = try asker.readFrame(timeout: .seconds(60))
            #expect(answer.op == "error" && answer.code == "no_reply" && answer.req == .integer(1), "\(answer.raw)")
            let message = answer.string("message") ?? ""
            #expect(message.contains("the one server of svc.slow") && message.contains("fell behind"), "\(message)")
            // The server reads again: the request is in its queue, its token no longer good.
            let frames = try server.readFrames(until: { $0.op == "request" }, timeout: .seconds(30))
            try server.send(#"{"op":"reply","to":"\#(frames.last!.string("reply")!)","data":1,"req":"late"}"#)
            let late = try server.readFrames(until: { $0.req == .string("late") }, timeout: .seconds(30)).last!
            #expect(late.op == "ok" && late.bool("accepted") == false, "\(late.raw)")
        }
    }

    @Test("Flow control: a full serving queue-group member of the requester's own uid holds the request; it is routed when the member reads")
    func fullGroupMemberHoldsItsOwnUID() throws {
        try withBroker(["--max-outbound", "65536", "--stall-timeout", "60s"]) { broker in
            let member = try broker.connect()
            try member.ok(#"{"op":"subscribe","type":"svc.full","serve":true,"group":"workers","req":1}"#)
            try member.ok(#"{"op":"subscribe","type":"fill.>","req":2}"#)
            let observer = try broker.connect()
            func heldCount() throws -> Int {
                let clients = try observer.ok(#"{"op":"clients","req":"c"}"#).array("clients") as? [[String: Any]] ?? []
                return clients.filter { ($0["held"] as? Bool) == true }.count
            }
            let filler = try broker.connect()
            let pad = String(repeating: "z", count: 4000)
            var text = ""
            for i in 0..<400 { text += #"{"op":"publish","type":"fill.a","data":"\#(pad)","req":\#(i)}"# + "\n" }  // past the socket buffers
            _ = try filler.sendWithoutReading(Array(text.utf8), stall: .seconds(2))
            try waitUntil("the filler is held") { try heldCount() == 1 }
            let asker = try broker.connect()
            try asker.send(#"{"op":"request","type":"svc.full","data":"\#(pad)","req":2}"#)
            try waitUntil("the requester is held") { try heldCount() == 2 }
            let stats = try observer.stats()
            #expect(stats.int("requests") == 0 && stats.int("no_responders") == 0, "held: not routed yet, not refused: \(stats.raw)")
            // The member reads its queue: the request is routed to it, the requester read on.
            let frames = try member.readFrames(until: { $0.op == "request" }, timeout: .seconds(30))
            try member.send(#"{"op":"reply","to":"\#(frames.last!.string("reply")!)","data":1}"#)
            let answer = try asker.readFrame(timeout: .seconds(30))
            #expect(answer.op == "ok" && answer.req == .integer(2), "\(answer.raw)")
        }
    }

    @Test("A server killed with SIGKILL mid-request gives the requester no_reply, not the deadline")
    func serverKilledMidRequestGivesNoReply() throws {
        try withBroker { broker in
            let asker = try broker.connect()
            let socat = try SpawnedProcess(
                "socat", ["-t", "1000", "-", "UNIX-CONNECT:\(broker.socketPath)"], in: broker.directory,
                stdin: #"{"op":"subscribe","type":"svc.kill","serve":true,"req":1}"# + "\n")
            defer { _ = socat.terminate(SIGKILL, timeout: .seconds(5)) }
            try waitUntil("the server subscribed") { socat.stdoutSoFar().contains(#""serve":true"#) }
            try Self.ask(asker, type: "svc.kill", req: 1, extra: #","timeout":25000"#)
            try waitUntil("the server got the request") { socat.stdoutSoFar().contains(#""op":"request""#) }
            socat.send(signal: SIGKILL)
            let answer = try asker.readFrame(timeout: .seconds(20))
            #expect(answer.op == "error" && answer.code == "no_reply" && answer.req == .integer(1), "\(answer.raw)")
        }
    }

    @Test("The deadline: timeout with the req, the connection stays open, a late reply is not accepted")
    func deadlineGivesTimeoutAndForgetsTheRequest() throws {
        try withBroker { broker in
            let server = try broker.connect()
            let asker = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.h","serve":true,"req":1}"#)
            try Self.ask(asker, type: "svc.h", req: 7, extra: #","timeout":50"#)
            let token = try Self.nextRequest(server).string("reply")!
            let answer = try asker.readFrame(timeout: .seconds(20))
            #expect(answer.op == "error" && answer.code == "timeout" && answer.req == .integer(7), "\(answer.raw)")
            #expect(try server.ok(#"{"op":"reply","to":"\#(token)","req":2}"#).bool("accepted") == false)
            try asker.ok(#"{"op":"ping","req":8}"#)
            let stats = try asker.stats()
            #expect(stats.int("timeouts") == 1 && stats.int("requests") == 1 && stats.int("replies") == 0)
            try asker.expectNoFrame()
        }
    }

    @Test("Pending requests are bounded per connection (limit), and shown in stats.me and clients")
    func pendingRequestsAreBoundedAndShown() throws {
        try withBroker(["--max-pending-requests", "2"]) { broker in
            let server = try broker.connect()
            let asker = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.i","serve":true,"req":1}"#)
            try Self.ask(asker, type: "svc.i", req: 1)
            try Self.ask(asker, type: "svc.i", req: 2)
            let third = try asker.error(#"{"op":"request","type":"svc.i","req":3}"#)
            #expect(third.code == "limit" && (third.string("message") ?? "").contains("--max-pending-requests"))
            let me = try asker.stats().object("me")
            #expect(int(me?["pending_requests"]) == 2)
            let clients = try asker.ok(#"{"op":"clients","req":4}"#).array("clients") as? [[String: Any]] ?? []
            let mine = clients.first { int($0["pending"]) == 2 }
            let serving = clients.first { int($0["serving"]) == 2 }
            #expect(mine != nil && serving != nil, "\(clients)")
            let first = try Self.nextRequest(server)
            _ = try Self.nextRequest(server)
            try server.ok(#"{"op":"reply","to":"\#(first.string("reply")!)","req":2}"#)
            #expect(try asker.readFrame().req == .integer(1))
            try Self.ask(asker, type: "svc.i", req: 5)  // room again
            _ = try Self.nextRequest(server)
            try asker.expectNoFrame()
        }
    }

    @Test("stats counts requests, replies, no_responders and timeouts; types counts requests per type; hello lists request")
    func statsTypesAndHelloShowRequests() throws {
        try withBroker { broker in
            let server = try broker.connect()
            let asker = try broker.connect()
            let hello = try asker.ok(#"{"op":"hello","req":0}"#)
            #expect((hello.array("features") as? [String])?.contains("request") == true)
            try server.ok(#"{"op":"subscribe","type":"svc.j","serve":true,"req":1}"#)
            for req in 1...3 {
                try Self.ask(asker, type: "svc.j", req: req)
                let request = try Self.nextRequest(server)
                try server.ok(#"{"op":"reply","to":"\#(request.string("reply")!)","req":1}"#)
                #expect(try asker.readFrame().req == .integer(req))
            }
            _ = try asker.error(#"{"op":"request","type":"svc.none","req":4}"#)
            let stats = try asker.stats()
            #expect(stats.int("requests") == 3 && stats.int("replies") == 3 && stats.int("no_responders") == 1 && stats.int("timeouts") == 0, "\(stats.raw)")
            let types = try asker.ok(#"{"op":"types","req":5}"#).array("types") as? [[String: Any]] ?? []
            let entry = types.first { $0["type"] as? String == "svc.j" }
            #expect(int(entry?["requests"]) == 3 && int(entry?["published"]) == 0, "\(types)")
        }
    }

    @Test("A half-closed requester stays until its answer is written")
    func halfClosedRequesterGetsItsAnswer() throws {
        try withBroker { broker in
            let server = try broker.connect()
            try server.ok(#"{"op":"subscribe","type":"svc.k","serve":true,"req":1}"#)
            let asker = try broker.connect()
            try Self.ask(asker, type: "svc.k", req: 1)
            try asker.shutdownWrite()
            let request = try Self.nextRequest(server)
            try server.ok(#"{"op":"reply","to":"\#(request.string("reply")!)","data":"done","req":2}"#)
            let frames = try asker.readUntilEOF()
            #expect(frames.count == 1 && frames.first?.req == .integer(1) && (frames.first?.object("reply")?["data"] as? String) == "done")
        }
    }
}
