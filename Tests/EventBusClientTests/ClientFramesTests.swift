// Unit tests of what the library makes of the wire codec: the frames it
// sends, broker events as `RawEvent`, error replies as `EventBusError`, and
// preparing event data (PROTOCOL.md "Framing", "Requests", "Events",
// "Errors"). The codec itself is tested in EventBusProtocolTests.
@_spi(Package) import EventBusProtocol
import Testing
@testable import EventBus

@Suite struct ClientFramesTests {
    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    private func read(_ frame: String) throws -> (BrokerFrame, [UInt8]) {
        let bytes = Array(frame.utf8)
        return (try BrokerFrame.read(bytes.span.bytes), bytes)
    }

    @Test func helloCarriesClientNameNoEchoAndOverflow() {
        #expect(text(ClientRequest.hello(client: "dash-1", echo: false, overflow: .dropOld).encoded(req: 1))
            == #"{"op":"hello","req":1,"client":"dash-1","echo":false,"overflow":"drop-old"}"# + "\n")
        #expect(text(ClientRequest.hello(client: nil, echo: false, overflow: .dropNew).encoded(req: 1))
            == #"{"op":"hello","req":1,"echo":false,"overflow":"drop-new"}"# + "\n")
    }

    @Test func publishSplicesDataUnchangedAndEscapesSource() throws {
        let publish = OutgoingPublish(type: "currency.changed", data: try OutgoingData.prepare(Array(#"{"code":"EUR"}"#.utf8)), source: "set\"tings", id: nil, exclude: nil, completion: { _ in })
        #expect(text(publish.request.encoded(req: 9)) == #"{"op":"publish","req":9,"type":"currency.changed","source":"set\"tings","data":{"code":"EUR"}}"# + "\n")
    }

    @Test func prettyPrintedDataIsPutOnOneLine() throws {
        let pretty = "{\n  \"code\" : \"E U R\",\n  \"n\" : [ 1, 2 ]\n}\n"
        #expect(try OutgoingData.prepare(Array(pretty.utf8)).description == #"{"code":"E U R","n":[1,2]}"#)
        #expect(try OutgoingData.prepare(Array("42".utf8)).description == "42")
        #expect(try OutgoingData.prepare(Array(#"{"a": 1}"#.utf8)).description == #"{"a": 1}"#, "one line is kept as given")
    }

    @Test(arguments: ["", "{", "{\"a\":1}x", "[1,]", "\"\u{7}\""])
    func invalidDataIsRefusedBeforeSending(_ input: String) {
        #expect(throws: EventBusError.self) { try OutgoingData.prepare(Array(input.utf8)) }
    }

    @Test func errorRepliesBecomeProtocolErrorsWithTheirCode() throws {
        guard case (.error(let reply), _) = try read(#"{"op":"error","req":3,"code":"bad_type","message":"bad \"x\""}"#) else {
            Issue.record("not an error")
            return
        }
        #expect(EventBusError(errorReply: reply) == .protocolError(code: .badType, message: "bad \"x\""))
        guard case (.error(let unknown), _) = try read(#"{"op":"error","code":"new_code","message":"m"}"#),
              case .malformedFrame = EventBusError(errorReply: unknown) else {
            Issue.record("an unknown code should be reported as such")
            return
        }
    }

    @Test func eventFramesKeepDataByteForByte() throws {
        let line = #"{"op":"event","seq":42,"type":"order.created","time":"2026-11-29T13:00:00.123Z","source":"billing","id":"3f-42","pid":1234,"uid":1000,"gid":100,"data":{"b": 1.50, "a":[true,null]}}"#
        let (frame, bytes) = try read(line)
        guard case .event(let fields) = frame else { Issue.record("not an event"); return }
        let event = RawEvent(fields, in: bytes.span.bytes)
        #expect(event.metadata == EventMetadata(type: "order.created", seq: 42, time: "2026-11-29T13:00:00.123Z", source: "billing", id: "3f-42", pid: 1234, uid: 1000, gid: 100))
        #expect(event.dataString == #"{"b": 1.50, "a":[true,null]}"#)
        #expect(event.metadata.date != nil)
    }

    @Test func eventFieldsOutOfRangeAreZeroAndMissingDataIsNull() throws {
        let (frame, bytes) = try read(#"{"op":"event","seq":1,"type":"a","pid":-1,"uid":-1,"gid":4294967296}"#)
        guard case .event(let fields) = frame else { Issue.record("not an event"); return }
        let event = RawEvent(fields, in: bytes.span.bytes)
        #expect(event.metadata == EventMetadata(type: "a", seq: 1, time: "", source: "", id: "", pid: -1, uid: 0, gid: 0))
        #expect(event.dataString == "null")
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
