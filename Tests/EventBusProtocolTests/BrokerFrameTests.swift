// The clients' reader of broker frames (PROTOCOL.md "Requests", "Events",
// "Errors", "Semantics", and the 1.1 `gap` frame and revocation error):
// every op, replies read by key, event fields in place, unknown ops ignored,
// and what a frame that cannot be read is told apart by.
import Testing
@_spi(Package) @testable import EventBusProtocol

/// Reads `text` as one broker frame.
private func read(_ text: String) throws(BrokerFrameError) -> BrokerFrame {
    try BrokerFrame.read(utf8(text).span.bytes)
}

/// The text of `token` in `text`.
private func slice(_ text: String, _ token: JSONToken?) -> String? {
    token.map { String(decoding: utf8(text)[$0.start..<$0.end], as: UTF8.self) }
}

@Suite("Broker frames")
struct BrokerFrameTests {
    @Test func okRepliesAreReadByKey() throws {
        let frame = #"{"op":"ok","req":7,"seq":18446744073709551615,"delivered":2,"n":-3,"uptime_s":12.5,"instance":"a\"b","features":["overflow","echo"],"mixed":["a",1],"removed":false,"filtered":true,"me":{"uid":1000, "limits":{}},"nothing":null}"#
        guard case .ok(let reply) = try read(frame) else { Issue.record("not ok"); return }
        #expect(reply.isOK && reply.req == 7)
        #expect(reply.members.map(\.key) == ["seq", "delivered", "n", "uptime_s", "instance", "features", "mixed", "removed", "filtered", "me", "nothing"])
        #expect(reply.unsigned("seq") == UInt64.max && reply.signed("seq") == nil)
        #expect(reply.unsigned("delivered") == 2 && reply.unsigned("n") == nil && reply.signed("n") == -3)
        #expect(reply.double("uptime_s") == 12.5 && reply.unsigned("uptime_s") == nil)
        #expect(reply.string("instance") == "a\"b" && reply.string("delivered") == nil)
        #expect(reply.strings("features") == ["overflow", "echo"] && reply.strings("mixed") == nil)
        #expect(reply.bool("removed") == false && reply.bool("filtered") == true && reply.bool("seq") == nil)
        #expect(reply.raw("me").map { String(decoding: $0, as: UTF8.self) } == #"{"uid":1000, "limits":{}}"#)
        #expect(reply.raw("nothing") == utf8("null") && reply.raw("absent") == nil)
        #expect(reply.string("absent") == nil && reply.strings("absent") == nil)
    }

    @Test func aReqThatIsNotAnIntegerIsNil() throws {
        #expect(try read(#"{"op":"ok","req":"abc"}"#).reply?.req == nil)
        #expect(try read(#"{"op":"ok"}"#).reply?.req == nil)
        #expect(try read(#"{"op":"ok","req":-5}"#).reply?.req == -5)
    }

    @Test func errorRepliesCarryCodeMessageAndReq() throws {
        guard case .error(let reply) = try read(#"{"op":"error","req":3,"code":"bad_type","message":"bad \"x\""}"#) else {
            Issue.record("not an error")
            return
        }
        #expect(!reply.isOK && reply.req == 3 && reply.errorCode == .badType)
        #expect(reply.string("code") == "bad_type" && reply.string("message") == "bad \"x\"")
        #expect(reply.revokedPattern == nil)
        let unknown = try read(#"{"op":"error","code":"new_code","message":"m"}"#).reply
        #expect(unknown?.errorCode == nil && unknown?.string("code") == "new_code" && unknown?.req == nil)
    }

    @Test func aRevocationIsAnErrorWithoutReqNamingThePattern() throws {
        let reply = try read(#"{"op":"error","code":"forbidden","type":"secret.>","message":"policy.conf:3 denies it"}"#).reply
        #expect(reply?.revokedPattern == "secret.>" && reply?.errorCode == .forbidden)
        #expect(try read(#"{"op":"error","req":1,"code":"forbidden","type":"a","message":"m"}"#).reply?.revokedPattern == nil)
    }

    @Test func eventFieldsAreTokensOfTheFrame() throws {
        let frame = #"{"op":"event","seq":42,"type":"order.created","time":"2026-11-29T13:00:00.123Z","source":"billing","id":"3f-42","pid":1234,"uid":1000,"gid":100,"retained":true,"replayed":true,"origin":{"node":"b","seq":9},"data":{"b": 1.50, "a":[true,null]}}"#
        guard case .event(let e) = try read(frame) else { Issue.record("not an event"); return }
        #expect(e.seq == 42 && slice(frame, e.type) == #""order.created""#)
        #expect(slice(frame, e.time) == #""2026-11-29T13:00:00.123Z""# && slice(frame, e.source) == #""billing""# && slice(frame, e.id) == #""3f-42""#)
        #expect(e.pid == 1234 && e.uid == 1000 && e.gid == 100)
        #expect(e.retained && e.replayed && slice(frame, e.origin) == #"{"node":"b","seq":9}"#)
        #expect(slice(frame, e.data) == #"{"b": 1.50, "a":[true,null]}"#)
    }

    @Test func aMinimalEventHasDefaults() throws {
        let frame = #"{"type":"a","seq":1,"op":"event","source":7,"pid":1.5,"origin":[1],"retained":1}"#
        guard case .event(let e) = try read(frame) else { Issue.record("not an event"); return }
        #expect(e.time == nil && e.source == nil && e.id == nil && e.data == nil)
        #expect(e.pid == nil && e.uid == nil && e.gid == nil)
        #expect(!e.retained && !e.replayed && e.origin == nil)
    }

    @Test func theFirstOfARepeatedKeyCounts() throws {
        guard case .event(let e) = try read(#"{"op":"event","seq":1,"seq":2,"type":"a","\u0074ype":"b"}"#) else {
            Issue.record("not an event")
            return
        }
        #expect(e.seq == 1 && slice(#"{"op":"event","seq":1,"seq":2,"type":"a","\u0074ype":"b"}"#, e.type) == #""a""#)
    }

    // MARK: 1.3

    @Test func eventsCarryTheirKeyAndRedelivery() throws {
        let frame = #"{"op":"event","seq":5,"type":"job.new","key":"customer-7","redelivered":true,"data":1}"#
        guard case .event(let e) = try read(frame) else { Issue.record("not an event"); return }
        #expect(slice(frame, e.key) == #""customer-7""# && e.redelivered)
        guard case .event(let plain) = try read(#"{"op":"event","seq":5,"type":"a","key":3,"redelivered":"yes"}"#) else { Issue.record("not an event"); return }
        #expect(plain.key == nil && !plain.redelivered)
    }

    @Test func aRequestFrameIsItsEventFieldsATokenAndTheTimeLeft() throws {
        let frame = #"{"op":"request","seq":43,"type":"thumb.make","time":"2026-12-05T12:00:00.000Z","source":"cli","id":"i-43","pid":9,"uid":1000,"gid":100,"key":"k","data":{"path":"/a.png"},"reply":"r-9f3c","timeout":4987}"#
        guard case .request(let r) = try read(frame) else { Issue.record("not a request"); return }
        #expect(r.event.seq == 43 && slice(frame, r.event.type) == #""thumb.make""# && slice(frame, r.event.id) == #""i-43""#)
        #expect(r.event.pid == 9 && r.event.uid == 1000 && r.event.gid == 100 && slice(frame, r.event.key) == #""k""#)
        #expect(slice(frame, r.event.data) == #"{"path":"/a.png"}"# && slice(frame, r.token) == #""r-9f3c""# && r.timeout == 4987)
        #expect(try read(frame).reply == nil)
        guard case .request(let bare) = try read(#"{"op":"request","seq":1,"type":"a","reply":"t"}"#) else { Issue.record("not a request"); return }
        #expect(bare.timeout == nil && bare.event.data == nil)
    }

    @Test func theAnswerToARequestIsTheServersReply() throws {
        let ok = try read(#"{"op":"ok","req":7,"seq":43,"reply":{"time":"2026-12-05T12:00:00.001Z","pid":811,"uid":0,"gid":0,"data":{"w":64}}}"#).reply!
        let expected = ServerReply(seq: 43, time: "2026-12-05T12:00:00.001Z", pid: 811, uid: 0, gid: 0, data: utf8(#"{"w":64}"#))
        #expect(ServerReply(ok) == expected && RequestAnswer(ok) == .answered(expected))
        let noData = try read(#"{"op":"ok","req":7,"seq":43,"reply":{"pid":1}}"#).reply!
        #expect(ServerReply(noData)?.data == utf8("null") && ServerReply(noData)?.time == nil)
        let failed = try read(#"{"op":"error","req":7,"code":"service_error","message":"no such file","reply":{"pid":811,"uid":0,"gid":0,"data":null}}"#).reply!
        #expect(failed.errorCode == .serviceError)
        #expect(RequestAnswer(failed) == .serviceError(message: "no such file", ServerReply(seq: nil, time: nil, pid: 811, uid: 0, gid: 0, data: utf8("null"))))
        #expect(ServerReply(try read(#"{"op":"ok","req":1}"#).reply!) == nil)
    }

    @Test("a request's errors are told apart by code", arguments: [
        ("no_responders", RequestAnswer.noResponders(message: "m")),
        ("no_reply", .noReply(message: "m")),
        ("timeout", .timedOut(message: "m")),
        ("forbidden", .refused(code: "forbidden", message: "m")),
        ("limit", .refused(code: "limit", message: "m")),
        ("brand_new", .refused(code: "brand_new", message: "m")),
    ])
    func requestErrors(_ code: String, _ answer: RequestAnswer) throws {
        let reply = try read(#"{"op":"error","req":7,"code":"\#(code)","message":"m"}"#).reply!
        #expect(RequestAnswer(reply) == answer)
    }

    @Test func okMembersOfTheNewAnswers() throws {
        #expect(try read(#"{"op":"ok","req":3,"accepted":false}"#).reply?.bool("accepted") == false)
        #expect(try read(#"{"op":"ok","req":3,"type":"job.*","members":3}"#).reply?.unsigned("members") == 3)
    }

    @Test func noticesAndUnknownOps() throws {
        #expect(try read(#"{"op":"dropped","count":3,"since_seq":17}"#) == .dropped(count: 3, sinceSeq: 17))
        #expect(try read(#"{"op":"gap","type":"a.>","since_seq":0,"first_seq":50}"#) == .gap(pattern: "a.>", sinceSeq: 0, firstSeq: 50))
        #expect(try read(#"{"op":"servers","type":"svc.>"}"#) == .servers(pattern: "svc.>", group: nil))  // issue 36
        #expect(try read(#"{"op":"servers","type":"job.>","group":"work"}"#) == .servers(pattern: "job.>", group: "work"))
        #expect(try read(#"{"op":"goodbye","x":1}"#) == .unknown(op: "goodbye"))
        #expect(try read(#" {"op":"ev\u0065nt","seq":1,"type":"a"} "#).reply == nil)
        #expect(try read(#"{"op":"dropped","count":3,"since_seq":17}"#).reply == nil)
    }

    @Test("frames that cannot be read say why", arguments: [
        ("not json", "invalid JSON: unexpected character at byte 1"),
        ("[1]", "not a JSON object"),
        (#"{"x":1}"#, #"no "op" in {"x":1}"#),
        (#"{"op":1}"#, #"no "op" in {"op":1}"#),
        (#"{"op":"event","type":"a"}"#, #"event without seq/type: {"op":"event","type":"a"}"#),
        (#"{"op":"event","seq":-1,"type":"a"}"#, #"event without seq/type: {"op":"event","seq":-1,"type":"a"}"#),
        (#"{"op":"dropped","count":1}"#, #"dropped without count/since_seq: {"op":"dropped","count":1}"#),
        (#"{"op":"gap","type":"a","since_seq":1}"#, #"gap without type/since_seq/first_seq: {"op":"gap","type":"a","since_seq":1}"#),
        (#"{"op":"request","seq":4,"type":"a"}"#, #"request without seq/type/reply: {"op":"request","seq":4,"type":"a"}"#),
        (#"{"op":"request","seq":4,"type":"a","reply":7}"#, #"request without seq/type/reply: {"op":"request","seq":4,"type":"a","reply":7}"#),
    ])
    func unreadableFramesSayWhy(_ frame: String, _ message: String) {
        #expect(throws: BrokerFrameError.self) { try read(frame) }
        do {
            _ = try read(frame)
        } catch {
            #expect(error.description == message)
        }
    }
}

@Suite("JSON integers")
struct JSONIntegerTests {
    @Test("integer tokens read as UInt64 and Int64, overflow-checked", arguments: [
        ("0", UInt64?.some(0), Int64?.some(0)),
        ("-0", nil, 0),
        ("42", 42, 42),
        ("-42", nil, -42),
        ("9223372036854775807", 9_223_372_036_854_775_807, Int64.max),
        ("9223372036854775808", 9_223_372_036_854_775_808, nil),
        ("-9223372036854775808", nil, Int64.min),
        ("-9223372036854775809", nil, nil),
        ("18446744073709551615", UInt64.max, nil),
        ("18446744073709551616", nil, nil),
        ("99999999999999999999999", nil, nil),
        ("1.0", nil, nil),
        ("1e3", nil, nil),
        (#""7""#, nil, nil),
        ("true", nil, nil),
    ])
    func readsIntegers(_ text: String, _ unsigned: UInt64?, _ signed: Int64?) throws {
        let bytes = utf8(text)
        try bytes.withByteView { raw in
            let token = try JSONScanner.validate(raw)
            #expect(JSONInteger.unsigned(raw, token) == unsigned)
            #expect(JSONInteger.signed(raw, token) == signed)
        }
    }
}
