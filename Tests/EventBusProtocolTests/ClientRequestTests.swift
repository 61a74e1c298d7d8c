// The clients' request encoder (PROTOCOL.md "Requests"): every op byte for
// byte, the 1.1 fields, escaping, spliced JSON, and the round trip through
// the broker's own decoder (both read their names from one table).
import Testing
@_spi(Package) @testable import EventBusProtocol

@Suite("Client requests")
struct ClientRequestTests {
    static let origin = try! JSONText(validating: utf8(#"{"node":"host-b","seq":9123}"#))
    static let data = try! JSONText(validating: utf8(#"{"code":"EUR"}"#))

    static let frames: [(ClientRequest, Int64?, String)] = [
        (.hello(), 0, #"{"op":"hello","req":0}"#),
        (.hello(client: "dash-1", echo: false, overflow: .dropOld), 1, #"{"op":"hello","req":1,"client":"dash-1","echo":false,"overflow":"drop-old"}"#),
        (.subscribe(pattern: "order.>"), 2, #"{"op":"subscribe","req":2,"type":"order.>"}"#),
        (.subscribe(pattern: "a.*", last: true, since: 41, instance: "4f0c"), 2,
         #"{"op":"subscribe","req":2,"type":"a.*","last":true,"since":41,"instance":"4f0c"}"#),
        (.subscribe(pattern: "a", since: UInt64.max), nil, #"{"op":"subscribe","type":"a","since":18446744073709551615}"#),
        (.unsubscribe(pattern: "order.>"), 3, #"{"op":"unsubscribe","req":3,"type":"order.>"}"#),
        (.publish(type: "currency.changed", data: data), 4, #"{"op":"publish","req":4,"type":"currency.changed","data":{"code":"EUR"}}"#),
        (.publish(type: "a", source: "s", id: "i", retain: true, origin: origin, data: .null), -9007199254740992,
         #"{"op":"publish","req":-9007199254740992,"type":"a","source":"s","id":"i","retain":true,"origin":{"node":"host-b","seq":9123},"data":null}"#),
        (.publish(type: "a"), nil, #"{"op":"publish","type":"a"}"#),
        (.clear(type: "currency.changed"), 5, #"{"op":"clear","req":5,"type":"currency.changed"}"#),
        (.clients, 6, #"{"op":"clients","req":6}"#),
        (.ping, 7, #"{"op":"ping","req":7}"#),
        (.stats, 8, #"{"op":"stats","req":8}"#),
        // 1.3: request/reply and queue groups.
        (.subscribe(pattern: "thumb.>", serve: true), 9, #"{"op":"subscribe","req":9,"type":"thumb.>","serve":true}"#),
        (.subscribe(pattern: "job.*", serve: true, group: "workers"), 9, #"{"op":"subscribe","req":9,"type":"job.*","serve":true,"group":"workers"}"#),
        (.subscribe(pattern: "job.*", group: "w:1"), 9, #"{"op":"subscribe","req":9,"type":"job.*","group":"w:1"}"#),
        (.unsubscribe(pattern: "job.*", serve: true, group: "workers"), 10, #"{"op":"unsubscribe","req":10,"type":"job.*","serve":true,"group":"workers"}"#),
        (.unsubscribe(pattern: "job.*", group: "workers"), 10, #"{"op":"unsubscribe","req":10,"type":"job.*","group":"workers"}"#),
        (.publish(type: "job.new", key: "customer-7", data: data), 11, #"{"op":"publish","req":11,"type":"job.new","key":"customer-7","data":{"code":"EUR"}}"#),
        (.request(type: "thumb.make"), 12, #"{"op":"request","req":12,"type":"thumb.make"}"#),
        (.request(type: "thumb.make", source: "s", id: "i", key: "k\"1", timeout: 5000, data: data), 12,
         #"{"op":"request","req":12,"type":"thumb.make","source":"s","id":"i","key":"k\"1","timeout":5000,"data":{"code":"EUR"}}"#),
        (.reply(to: "tok-1", data: data), 13, #"{"op":"reply","req":13,"to":"tok-1","data":{"code":"EUR"}}"#),
        (.reply(to: "tok-1", error: "disk full\n"), 13, #"{"op":"reply","req":13,"to":"tok-1","error":"disk full\n"}"#),
        (.reply(to: "tok-1"), nil, #"{"op":"reply","to":"tok-1"}"#),
        // issue 36: a bridge's watch of the serving patterns.
        (.subscribe(pattern: "svc.>", servers: true), 14, #"{"op":"subscribe","req":14,"type":"svc.>","servers":true}"#),
        (.unsubscribe(pattern: "svc.>", servers: true), 15, #"{"op":"unsubscribe","req":15,"type":"svc.>","servers":true}"#),
    ]

    @Test("each request is one frame, byte for byte", arguments: frames)
    func encodesEachRequest(_ request: ClientRequest, _ req: Int64?, _ expected: String) {
        #expect(String(decoding: request.encoded(req: req), as: UTF8.self) == expected + "\n")
    }

    @Test func framesAppendToWhatIsThere() {
        var out = utf8("x")
        ClientRequest.ping.encode(req: 1, to: &out)
        ClientRequest.stats.encode(req: 2, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "x" + #"{"op":"ping","req":1}"# + "\n" + #"{"op":"stats","req":2}"# + "\n")
    }

    @Test func stringsAreEscapedAndStayOnOneLine() {
        let frame = ClientRequest.publish(type: "a", source: "say \"hi\"\\\n\u{1}", id: "é", data: JSONText(quoting: "line\nbreak")).encoded(req: 1)
        #expect(String(decoding: frame, as: UTF8.self)
            == #"{"op":"publish","req":1,"type":"a","source":"say \"hi\"\\\n\u0001","id":"é","data":"line\nbreak"}"# + "\n")
        #expect(frame.firstIndex(of: 0x0A) == frame.count - 1)
    }

    @Test("the broker decodes every request it has as the one encoded", arguments: [
        ClientRequest.hello(client: "c.1", echo: true, overflow: .disconnect),
        .subscribe(pattern: "a.*.>"), .unsubscribe(pattern: ">"), .ping, .stats,
        .publish(type: "x.y", source: "src", id: "id-1", data: data),
        .publish(type: "x.y", retain: true, origin: try! JSONText(validating: Array(#"{"node":"b","seq":9}"#.utf8)), data: data),
        .subscribe(pattern: "a.>", last: true, since: 41, instance: "9f2c"),
        .clear(type: "currency.changed"), .clients,
    ])
    func roundTripsThroughTheBrokersDecoder(_ request: ClientRequest) {
        var frame = request.encoded(req: 77)
        frame.removeLast()
        let decoded = frame.withByteView { RequestDecoder.decode($0) }
        #expect(decoded.req.map { String(decoding: frame[$0.start..<$0.end], as: UTF8.self) } == "77")
        guard case .success(let got) = decoded.request else {
            Issue.record("refused: \(decoded.request)")
            return
        }
        switch (request, got) {
        case (.hello(let client, let echo, let overflow), .hello(let h)):
            #expect(client == h.client && (echo ?? false) == h.echo && (overflow ?? .dropNew) == h.overflow)
        case (.subscribe(let pattern, let last, let since, let instance, _, _, _, let servers, _), .subscribe(let s)):
            #expect(pattern == s.pattern.text && (last ?? false) == s.last && since == s.since && instance == s.instance)
            #expect((servers ?? false) == s.servers)
        case (.unsubscribe(let pattern, let serve, _, let servers, _), .unsubscribe(let p)):
            #expect(pattern == p.pattern.text && (serve ?? false) == p.serve && (servers ?? false) == p.servers)
        case (.clear(let type), .clear(let t)):
            #expect(type == t.name)
        case (.clients, .clients):
            break
        case (.ping, .ping), (.stats, .stats):
            break
        case (.publish(let type, let source, let id, _, let retain, let origin, let data), .publish(let p)):
            func text(_ token: JSONToken?) -> String? { token.map { String(decoding: frame[$0.start..<$0.end], as: UTF8.self) } }
            #expect(type == p.type.name && text(p.source) == source.map { "\"\($0)\"" } && text(p.id) == id.map { "\"\($0)\"" } && text(p.data) == data?.description)
            #expect((retain ?? false) == p.retain && text(p.origin) == origin?.description)
        default:
            Issue.record("encoded \(request), decoded \(got)")
        }
    }

    @Test func dataIsValidatedAndLaidOutAsAsked() throws {
        let pretty = utf8("{\n  \"a\" : [ 1, 2 ]\n}\n")
        #expect(try JSONText(validating: pretty).description == #"{"a":[1,2]}"#)
        #expect(try JSONText(validating: utf8(#"{"a": 1}"#)).description == #"{"a": 1}"#)
        #expect(try JSONText(validating: utf8(#"{"a": 1}"#), layout: .compact).description == #"{"a":1}"#)
        #expect(try JSONText(validating: utf8(" 7 ")).description == "7")
        #expect(throws: JSONSyntaxError.self) { try JSONText(validating: utf8("{\"a\":}")) }
        #expect(throws: JSONSyntaxError.self) { try JSONText(validating: nestedArrays(ProtocolConstants.maxDepth + 1)) }
    }

    @Test func anObjectWriterBuildsValidJSONWithEscapedStrings() throws {
        var object = JSONText.ObjectWriter()
        #expect(object.text.description == "{}")
        object.add("node", "host-b")
        object.add("note", "say \"hi\"\r\n\u{1}é")
        object.add("seq", UInt64.max)
        object.add("pid", Int64(-1))
        let text = object.text
        #expect(text.description == #"{"node":"host-b","note":"say \"hi\"\r\n\u0001é","seq":18446744073709551615,"pid":-1}"#)
        #expect(try JSONText(validating: text.bytes) == text, "valid as built")
    }
}
