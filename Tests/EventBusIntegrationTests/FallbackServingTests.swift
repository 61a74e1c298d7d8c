// Fallback serving subscriptions and relayed reply codes (issue 36;
// PROTOCOL-NOTES.md "Requests across machines (issue 36)") against the real
// broker: a fallback server is asked only when no other server takes the
// request; a requester that is a fallback server itself is never routed to
// one; a fallback server relays `no_responders` & co with `code`; another
// connection may not. That the `bridge` right is needed is
// EventBusScenarios/BridgeRightScenarios.swift; here, that a reload that takes
// it away ends the fallback subscription (not the plain serving ones).
//
// Before editing: absence is settled with a ping round trip, never a sleep.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Fallback serving subscriptions (issue 36)")
struct FallbackServingTests {
    @Test func aFallbackServerIsAskedOnlyWhenNoOtherServerTakesTheRequest() throws {
        try withBroker { broker in
            let bridge = try broker.connect()
            let ok = try bridge.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"fallback":true,"req":1}"#)
            #expect(ok.bool("fallback") == true && ok.bool("serve") == true, "\(ok)")
            let asker = try broker.connect()
            // Nobody else serves svc.a: the fallback server gets it and answers.
            try asker.send(#"{"op":"request","type":"svc.a","data":1,"req":"r1"}"#)
            let request = try bridge.readFrame()
            #expect(request.op == "request" && request.type == "svc.a", "\(request)")
            let token = try #require(request.string("reply"))
            #expect(try bridge.ok(#"{"op":"reply","to":"\#(token)","data":{"from":"far"},"req":2}"#).bool("accepted") == true)
            let answer = try asker.readFrame()
            #expect(answer.op == "ok" && answer.string("req") == "r1", "\(answer)")
            // A local server goes first: the fallback server is not asked.
            let local = try broker.connect()
            try local.ok(#"{"op":"subscribe","type":"svc.a","serve":true,"req":1}"#)
            try asker.send(#"{"op":"request","type":"svc.a","data":2,"req":"r2"}"#)
            let mine = try local.readFrame()
            #expect(mine.op == "request", "\(mine)")
            try local.ok(#"{"op":"reply","to":"\#(try #require(mine.string("reply")))","data":"near","req":2}"#)
            #expect(try asker.readFrame().string("req") == "r2")
            try bridge.ok(#"{"op":"ping","req":3}"#)  // nothing was queued before the ping's answer
        }
    }

    @Test func aRelayedCodeReachesTheRequesterAndOnlyAFallbackServerMayRelayOne() throws {
        try withBroker { broker in
            let bridge = try broker.connect()
            try bridge.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"fallback":true,"req":1}"#)
            let asker = try broker.connect()
            try asker.send(#"{"op":"request","type":"svc.b","req":"r1"}"#)
            let token = try #require(try bridge.readFrame().string("reply"))
            #expect(try bridge.ok(#"{"op":"reply","to":"\#(token)","error":"on node b: no connection serves svc.b","code":"no_responders","req":2}"#).bool("accepted") == true)
            let answer = try asker.readFrame()
            #expect(answer.op == "error" && answer.code == "no_responders" && answer.string("message") == "on node b: no connection serves svc.b", "\(answer)")
            // A plain server may not relay a code; a code must be one of the four, with error.
            let plain = try broker.connect()
            try plain.ok(#"{"op":"subscribe","type":"svc.c","serve":true,"req":1}"#)
            try asker.send(#"{"op":"request","type":"svc.c","req":"r2"}"#)
            let other = try #require(try plain.readFrame().string("reply"))
            let refused = try plain.request(#"{"op":"reply","to":"\#(other)","error":"x","code":"no_responders","req":2}"#)
            #expect(refused.op == "error" && refused.code == "bad_request", "\(refused)")
            let bad = try bridge.request(#"{"op":"reply","to":"\#(other)","error":"x","code":"forbidden","req":3}"#)
            #expect(bad.code == "bad_request", "\(bad)")
            let noError = try bridge.request(#"{"op":"reply","to":"\#(other)","code":"timeout","req":4}"#)
            #expect(noError.code == "bad_request", "\(noError)")
            // The request is still open: the plain server answers it as a service.
            try plain.ok(#"{"op":"reply","to":"\#(other)","data":1,"req":3}"#)
            #expect(try asker.readFrame().string("req") == "r2")
        }
    }

    @Test func aFallbackServerAsRequesterIsNeverRoutedToAnotherAndFallbackNeedsServe() throws {
        try withBroker { broker in
            let first = try broker.connect()
            try first.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"fallback":true,"req":1}"#)
            let second = try broker.connect()
            try second.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"fallback":true,"req":1}"#)
            // A bridge asking for another machine: no local server, and no other bridge.
            let answer = try second.request(#"{"op":"request","type":"svc.d","req":"loop"}"#)
            #expect(answer.op == "error" && answer.code == "no_responders", "\(answer)")
            try first.ok(#"{"op":"ping","req":2}"#)
            let refused = try first.request(#"{"op":"subscribe","type":"x.>","fallback":true,"req":3}"#)
            #expect(refused.code == "bad_request", "\(refused)")
        }
    }

    /// A reload that takes the bridge right away ends the fallback serving
    /// subscription as it ends a fallback membership or a watch (it was
    /// judged again for `serve` only): revoked with the bridge rule's text;
    /// the connection's plain serving subscription stays.
    @Test(.enabled(if: getuid() == 0 && findInPath("setpriv") != nil && findInPath("socat") != nil, "needs root, setpriv and socat"))
    func aReloadThatTakesTheBridgeRightAwayEndsTheFallbackSubscription() throws {
        let policy = try AccessPolicyTests.PolicyFile("default serve allow\nallow bridge - user=4350\n")
        try withBroker(["--policy", policy.path]) { broker in
            let users = try AccessPolicyTests.OtherUsers(broker)
            let bridge = try users.connect(uid: 4350)
            try bridge.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"fallback":true,"req":1}"#)
            try bridge.ok(#"{"op":"subscribe","type":"own.>","serve":true,"req":2}"#)
            try policy.write("default serve allow\n# no bridge right\n")
            broker.send(signal: SIGHUP)  // a reload; its revocations come before anything after it
            let revoked = try bridge.readFrames(until: { $0.op == "error" }).last!
            #expect(revoked.code == "forbidden" && revoked.bool("serve") == true && revoked.type == "svc.>"
                    && revoked.string("message")?.hasPrefix("bridge svc.> denied for uid 4350") == true, "\(revoked)")
            // No fallback server left: a request nobody else serves gets no_responders at once.
            let asker = try broker.connect()
            let none = try asker.error(#"{"op":"request","type":"svc.a","data":1,"req":"r1"}"#)
            #expect(none.code == "no_responders", "\(none)")
            // The plain serving subscription stays: it is asked.
            try asker.send(#"{"op":"request","type":"own.x","data":1,"timeout":5000,"req":"r2"}"#)
            let request = try bridge.readFrame()
            #expect(request.op == "request" && request.type == "own.x", "\(request)")
        }
    }
}
