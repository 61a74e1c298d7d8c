// PROTOCOL.md, Requests: `req` correlation, missing `op`, and each op's reply
// (`hello`, `subscribe`, `unsubscribe`, `publish`, `ping`, `stats`).
//
// Before editing: `RawClient.request` already checks that a string or integer
// `req` comes back on the reply; tests about replies *without* `req` use
// `send` + `readFrame`.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Requests")
struct RequestsTests {
    static let echoedReqs = [
        #""abc""#, #""""#, #""ünï \"q\"""#, "0", "-1", "7", "9007199254740992", "-9007199254740992",
    ]

    @Test("A string or integer req within ±2^53 comes back on the reply", arguments: echoedReqs)
    func reqIsEchoed(req: String) throws {
        try withBroker { broker in
            let client = try broker.connect()
            try client.send(#"{"op":"ping","req":\#(req)}"#)
            let reply = try client.readFrame()
            #expect(reply.op == "ok")
            let sent = try JSONSerialization.jsonObject(with: Data(req.utf8), options: [.fragmentsAllowed])
            if let s = sent as? String {
                #expect(reply.req == .string(s), "\(reply)")
            } else {
                #expect(reply.req == .integer((sent as! NSNumber).intValue), "\(reply)")
            }
        }
    }

    static let badReqs = ["9007199254740993", "-9007199254740993", "1.5", "true", "null", "{}", "[1]", "1e300"]

    @Test("A req that is neither a string nor an integer within ±2^53 is bad_request, answered without req", arguments: badReqs)
    func badReqIsBadRequestWithoutReq(req: String) throws {
        try withBroker { broker in
            let client = try broker.connect()
            try client.send(#"{"op":"ping","req":\#(req)}"#)
            let error = try client.readFrame()
            #expect(error.op == "error" && error.code == "bad_request", "\(error)")
            #expect(!error.has("req"), "\(error)")
            try client.expectNoFrame()
        }
    }

    @Test("Without req, success is silent")
    func successWithoutReqIsSilent() throws {
        try withBroker { broker in
            let client = try broker.connect()
            try client.send(#"{"op":"ping"}"#)
            try client.send(#"{"op":"subscribe","type":"quiet.x"}"#)
            try client.send(#"{"op":"unsubscribe","type":"quiet.x"}"#)
            try client.send(#"{"op":"publish","type":"quiet.y"}"#)
            try client.expectNoFrame()
        }
    }

    @Test("Without req, a failure is still answered, without req")
    func failureWithoutReqIsAnsweredWithoutReq() throws {
        try withBroker { broker in
            let client = try broker.connect()
            try client.send(#"{"op":"nope"}"#)
            let error = try client.readFrame()
            #expect(error.op == "error" && error.code == "unknown_op" && !error.has("req"), "\(error)")
            try client.send(#"{"op":"publish","type":"bad..type"}"#)
            let second = try client.readFrame()
            #expect(second.op == "error" && second.code == "bad_type" && !second.has("req"), "\(second)")
        }
    }

    @Test("A frame without op is bad_request")
    func frameWithoutOpIsBadRequest() throws {
        try withBroker { broker in
            let client = try broker.connect()
            #expect(try client.error(#"{"req":3,"type":"a.b"}"#).code == "bad_request")
            #expect(try client.error(#"{"op":42,"req":4}"#).code == "bad_request")
        }
    }

    @Test("hello replies with server, version, protocol 1, instance, conn and features")
    func helloRepliesWithItsFields() throws {
        try withBroker { broker in
            let client = try broker.connect()
            let reply = try client.ok(#"{"op":"hello","client":"tester","req":1}"#)
            #expect(reply.string("server")?.isEmpty == false, "\(reply)")
            #expect(reply.string("version")?.isEmpty == false, "\(reply)")
            #expect(reply.int("protocol") == 1, "\(reply)")
            #expect(reply.string("instance")?.isEmpty == false, "\(reply)")
            #expect(reply.int("conn") != nil || reply.string("conn") != nil, "\(reply)")
            let features = try #require(reply.array("features"), "\(reply)")
            #expect(features.allSatisfy { $0 is String })
            let other = try broker.connect().ok(#"{"op":"hello","req":1}"#)
            #expect(other.string("instance") == reply.string("instance"), "one broker run has one instance")
            #expect("\(other["conn"] ?? "")" != "\(reply["conn"] ?? "")", "each connection has its own id")
        }
    }

    @Test("Each broker run has a different instance")
    func instanceDiffersBetweenRuns() throws {
        let first = try withBroker { try $0.connect().ok(#"{"op":"hello","req":1}"#).string("instance") }
        let second = try withBroker { try $0.connect().ok(#"{"op":"hello","req":1}"#).string("instance") }
        #expect(first != nil && first != second)
    }

    @Test("A second hello on a connection is bad_request")
    func secondHelloIsBadRequest() throws {
        try withBroker { broker in
            let client = try broker.connect()
            try client.ok(#"{"op":"hello","req":1}"#)
            #expect(try client.error(#"{"op":"hello","req":2}"#).code == "bad_request")
            try client.ok(#"{"op":"ping","req":3}"#)
        }
    }

    static let clientNames: [(String, Bool)] = [
        ("a", true), ("A-z_0.9:x", true), (String(repeating: "n", count: 64), true),
        ("", false), (String(repeating: "n", count: 65), false), ("has space", false), ("a/b", false), ("é", false),
    ]

    @Test("hello's client name is 1-64 bytes of A-Z a-z 0-9 _ . - :; others are bad_request", arguments: clientNames)
    func helloClientNameRule(name: String, valid: Bool) throws {
        try withBroker { broker in
            let client = try broker.connect()
            let reply = try client.request(#"{"op":"hello","client":"\#(name)","req":1}"#)
            if valid {
                #expect(reply.op == "ok", "\(reply)")
            } else {
                #expect(reply.op == "error" && reply.code == "bad_request", "\(reply)")
            }
        }
    }

    static let badHelloFields = [
        #""overflow":"drop-all""#, #""overflow":1"#, #""echo":"yes""#, #""echo":1"#, #""client":7"#,
    ]

    @Test("hello with an ill-typed or unknown option value is bad_request", arguments: badHelloFields)
    func helloBadOptionIsBadRequest(field: String) throws {
        try withBroker { broker in
            let client = try broker.connect()
            #expect(try client.error(#"{"op":"hello",\#(field),"req":1}"#).code == "bad_request")
        }
    }

    @Test("hello accepts each documented overflow mode", arguments: ["drop-new", "drop-old", "disconnect"])
    func helloAcceptsOverflowModes(mode: String) throws {
        try withBroker { broker in
            try broker.connect().ok(#"{"op":"hello","overflow":"\#(mode)","echo":false,"req":1}"#)
        }
    }

    @Test("subscribe replies with the type and is idempotent")
    func subscribeRepliesWithTypeAndIsIdempotent() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            #expect(try subscriber.ok(#"{"op":"subscribe","type":"idem.*","req":1}"#).type == "idem.*")
            #expect(try subscriber.ok(#"{"op":"subscribe","type":"idem.*","req":2}"#).type == "idem.*")
            let publisher = try broker.connect()
            #expect(try publisher.stats().int("subscriptions") == 1)
            #expect(try publisher.publish("idem.x").delivered == 1)
            #expect(try subscriber.readFrame().type == "idem.x")
            try subscriber.expectNoFrame()
        }
    }

    @Test("unsubscribe of a pattern not held answers ok with removed false; of a held one, removed true")
    func unsubscribeAnswersRemoved() throws {
        try withBroker { broker in
            let client = try broker.connect()
            let unknown = try client.ok(#"{"op":"unsubscribe","type":"never.held","req":1}"#)
            #expect(unknown.bool("removed") == false, "\(unknown)")
            try client.subscribe("held.x")
            let known = try client.ok(#"{"op":"unsubscribe","type":"held.x","req":2}"#)
            #expect(known.bool("removed") == true, "\(known)")
            let again = try client.ok(#"{"op":"unsubscribe","type":"held.x","req":3}"#)
            #expect(again.bool("removed") == false, "\(again)")
        }
    }

    static let badPatternRequests = ["subscribe", "unsubscribe"].flatMap { op in
        ["a.>.b", "a*", "a..b", "", "a b", "*x.y"].map { (op, $0) }
    }

    @Test("A bad pattern in subscribe or unsubscribe is bad_type", arguments: badPatternRequests)
    func badPatternIsBadType(op: String, pattern: String) throws {
        try withBroker { broker in
            let client = try broker.connect()
            #expect(try client.error(#"{"op":"\#(op)","type":"\#(pattern)","req":1}"#).code == "bad_type")
        }
    }

    static let missingOrIllTyped = [
        #"{"op":"subscribe","req":1}"#, #"{"op":"subscribe","type":5,"req":1}"#,
        #"{"op":"unsubscribe","req":1}"#, #"{"op":"publish","req":1}"#, #"{"op":"publish","type":["a"],"req":1}"#,
        #"{"op":"publish","type":"a.b","source":5,"req":1}"#, #"{"op":"publish","type":"a.b","id":{},"req":1}"#,
    ]

    @Test("A missing or ill-typed field is bad_request", arguments: missingOrIllTyped)
    func missingOrIllTypedFieldIsBadRequest(frame: String) throws {
        try withBroker { broker in
            let client = try broker.connect()
            #expect(try client.error(frame).code == "bad_request")
        }
    }

    @Test("publish replies with seq and the number of connections it was queued to")
    func publishRepliesWithSeqAndDelivered() throws {
        try withBroker { broker in
            let first = try broker.connect()
            try first.subscribe("pub.*")
            let second = try broker.connect()
            try second.subscribe("pub.x")
            let bystander = try broker.connect()
            try bystander.subscribe("other.x")
            let publisher = try broker.connect()
            let a = try publisher.publish("pub.x", req: 1)
            let b = try publisher.publish("pub.y", req: 2)
            let c = try publisher.publish("nobody.here", req: 3)
            #expect(a.delivered == 2 && b.delivered == 1 && c.delivered == 0)
            #expect(a.seq < b.seq && b.seq < c.seq)
            #expect(try first.readFrames(count: 2).map(\.seq) == [a.seq, b.seq])
            #expect(try second.readFrame().seq == a.seq)
            try bystander.expectNoFrame()
        }
    }

    @Test("publish without data delivers data null")
    func publishDataDefaultsToNull() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("nul.x")
            try broker.connect().ok(#"{"op":"publish","type":"nul.x","req":1}"#)
            let event = try subscriber.readFrame()
            #expect(event.has("data") && event["data"] is NSNull, "\(event)")
        }
    }

    @Test("ping answers ok")
    func pingAnswersOk() throws {
        try withBroker { broker in
            let reply = try broker.connect().request(#"{"op":"ping","req":"p"}"#)
            #expect(reply.op == "ok" && reply.req == .string("p"))
        }
    }

    @Test("stats carries connections, subscriptions, published, delivered, dropped, queued_bytes, uptime_s, instance")
    func statsCarriesItsCounters() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            let instance = try subscriber.ok(#"{"op":"hello","req":0}"#).string("instance")
            try subscriber.subscribe("st.a", "st.b")
            let publisher = try broker.connect()
            try waitUntil("stats to count exactly our two connections") {
                try publisher.stats().int("connections") == 2
            }
            let before = try publisher.stats()
            for key in ["connections", "subscriptions", "published", "delivered", "dropped", "queued_bytes"] {
                #expect(before.int(key) != nil, "stats lacks integer \(key): \(before)")
            }
            #expect(before.double("uptime_s") != nil, "\(before)")
            #expect(before.string("instance") == instance)
            #expect(before.int("subscriptions") == 2)
            try publisher.publish("st.a", req: 1)
            try publisher.publish("st.none", req: 2)
            let after = try publisher.stats()
            #expect(after.int("published") == (before.int("published") ?? -9) + 2)
            #expect(after.int("delivered") == (before.int("delivered") ?? -9) + 1)
            #expect(after.int("dropped") == 0)
        }
    }
}
