// Unit tests of the client's wire format: request frames byte for byte,
// reading broker frames, and preparing event data (PROTOCOL.md "Framing",
// "Requests", "Events", "Errors").
import EventBusProtocol
import Testing
@testable import EventBusClient

@Suite struct ClientFramesTests {
    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    private func parse(_ frame: String) throws -> ServerFrame {
        try Array(frame.utf8).withUnsafeBytes { raw throws(EventBusError) in try ServerFrame.parse(raw) }
    }

    @Test func helloCarriesClientNameNoEchoAndOverflow() {
        #expect(text(RequestFrame.hello(req: 1, client: "dash-1", overflow: .dropOld))
            == #"{"op":"hello","req":1,"client":"dash-1","echo":false,"overflow":"drop-old"}"# + "\n")
        #expect(text(RequestFrame.hello(req: 1, client: nil, overflow: .dropNew))
            == #"{"op":"hello","req":1,"echo":false,"overflow":"drop-new"}"# + "\n")
    }

    @Test func subscriptionRequestsNameThePattern() {
        #expect(text(RequestFrame.subscribe(req: 2, pattern: "order.>")) == #"{"op":"subscribe","req":2,"type":"order.>"}"# + "\n")
        #expect(text(RequestFrame.unsubscribe(req: 3, pattern: "order.>")) == #"{"op":"unsubscribe","req":3,"type":"order.>"}"# + "\n")
        #expect(text(RequestFrame.ping(req: 4)) == #"{"op":"ping","req":4}"# + "\n")
        #expect(text(RequestFrame.stats(req: 5)) == #"{"op":"stats","req":5}"# + "\n")
    }

    @Test func publishSplicesDataUnchangedAndEscapesSource() {
        let frame = RequestFrame.publish(req: 9, type: "currency.changed", data: Array(#"{"code":"EUR"}"#.utf8), source: "set\"tings", id: nil)
        #expect(text(frame) == #"{"op":"publish","req":9,"type":"currency.changed","data":{"code":"EUR"},"source":"set\"tings"}"# + "\n")
    }

    @Test func prettyPrintedDataIsPutOnOneLine() throws {
        let pretty = "{\n  \"code\" : \"E U R\",\n  \"n\" : [ 1, 2 ]\n}\n"
        #expect(text(try OutgoingData.prepare(Array(pretty.utf8))) == #"{"code":"E U R","n":[1,2]}"#)
        #expect(text(try OutgoingData.prepare(Array("42".utf8))) == "42")
    }

    @Test(arguments: ["", "{", "{\"a\":1}x", "[1,]", "\"\u{7}\""])
    func invalidDataIsRefusedBeforeSending(_ input: String) {
        #expect(throws: EventBusError.self) { try OutgoingData.prepare(Array(input.utf8)) }
    }

    @Test func okRepliesKeepTheirFields() throws {
        let frame = try parse(#"{"op":"ok","req":7,"seq":18446744073709551615,"delivered":2,"instance":"ab","features":["overflow","echo"],"removed":false}"#)
        guard case .ok(let req, let reply) = frame else { Issue.record("not ok: \(frame)"); return }
        #expect(req == 7)
        #expect(reply.uint("seq") == UInt64.max)
        #expect(reply.uint("delivered") == 2)
        #expect(reply.string("instance") == "ab")
        #expect(reply.strings("features") == ["overflow", "echo"])
        #expect(reply.bool("removed") == false)
    }

    @Test func errorFramesBecomeProtocolErrorsWithTheirCode() throws {
        #expect(try parse(#"{"op":"error","req":3,"code":"bad_type","message":"bad \"x\""}"#)
            == .error(req: 3, .protocolError(code: .badType, message: "bad \"x\"")))
        #expect(try parse(#"{"op":"error","code":"frame_too_large","message":"m"}"#)
            == .error(req: nil, .protocolError(code: .frameTooLarge, message: "m")))
        guard case .error(_, .malformedFrame) = try parse(#"{"op":"error","code":"new_code","message":"m"}"#) else {
            Issue.record("an unknown code should be reported as such")
            return
        }
    }

    @Test func eventFramesKeepDataByteForByte() throws {
        let line = #"{"op":"event","seq":42,"type":"order.created","time":"2026-11-29T13:00:00.123Z","source":"billing","id":"3f-42","pid":1234,"uid":1000,"gid":100,"data":{"b": 1.50, "a":[true,null]}}"#
        guard case .event(let event) = try parse(line) else { Issue.record("not an event"); return }
        #expect(event.metadata == EventMetadata(type: "order.created", seq: 42, time: "2026-11-29T13:00:00.123Z", source: "billing", id: "3f-42", pid: 1234, uid: 1000, gid: 100))
        #expect(event.dataString == #"{"b": 1.50, "a":[true,null]}"#)
        #expect(event.metadata.date != nil)
    }

    @Test func droppedAndUnknownFrames() throws {
        #expect(try parse(#"{"op":"dropped","count":3,"since_seq":17}"#) == .dropped(count: 3, sinceSeq: 17))
        #expect(try parse(#"{"op":"goodbye","x":1}"#) == .unknown(op: "goodbye"))
    }

    @Test(arguments: ["not json", "[1]", #"{"x":1}"#, #"{"op":"event","type":"a"}"#, #"{"op":"dropped","count":1}"#])
    func unreadableFramesAreMalformed(_ line: String) {
        #expect(throws: EventBusError.self) { try parse(line) }
    }

    struct Price: Codable, Equatable { var amount: Int }

    @Test func rawEventsDecodeOrNameTheirTypeInTheError() throws {
        let metadata = EventMetadata(type: "price.set", seq: 1, time: "", source: "", id: "", pid: 0, uid: 0, gid: 0)
        #expect(try RawEvent(metadata: metadata, data: Array(#"{"amount":5}"#.utf8)).decode(Price.self) == Price(amount: 5))
        #expect {
            try RawEvent(metadata: metadata, data: Array(#"{"amount":"five"}"#.utf8)).decode(Price.self)
        } throws: { error in
            guard case .decodingFailed(let type, let reason) = error as? EventBusError else { return false }
            return type == "price.set" && reason.contains("amount")
        }
    }
}
