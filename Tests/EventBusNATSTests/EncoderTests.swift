// What the client writes: exact bytes of every operation, subject validation
// (nothing that could break a control line gets through), and header blocks:
// percent-encoding of every value so CR/LF injection is impossible, and the
// parse of what we encode giving back the same values.
@testable import EventBusNATS
import Testing

@Suite struct EncoderTests {
    @Test func connectSpellsOutEveryOptionWhoseServerDefaultIsWrongForUs() {
        let line = String(decoding: Encoder.connect(ConnectOptions(name: "eventbus-bridge \"a\"")), as: UTF8.self)
        #expect(line.hasPrefix("CONNECT {") && line.hasSuffix("}\r\n"))
        for field in [#""verbose":false"#, #""pedantic":false"#, #""headers":true"#, #""echo":false"#, #""protocol":1"#, #""name":"eventbus-bridge \"a\"""#] {
            #expect(line.contains(field), "\(field) in \(line)")
        }
        #expect(!line.contains("\"user\"") && !line.contains("\"pass\"") && !line.contains("auth_token"))
        let withAuth = String(decoding: Encoder.connect(ConnectOptions(name: "n", user: "u", password: "p\"w")), as: UTF8.self)
        #expect(withAuth.contains(#""user":"u""#) && withAuth.contains(#""pass":"p\"w""#))
    }

    @Test func publishAndSubscribeLinesAreExact() {
        let foo = Subject("FOO")!
        #expect(Encoder.pub(foo, payload: bytes("Hello NATS!")) == bytes("PUB FOO 11\r\nHello NATS!\r\n"))
        #expect(Encoder.pub(Subject("FRONT.DOOR")!, replyTo: Subject("INBOX.22"), payload: bytes("Knock Knock")) == bytes("PUB FRONT.DOOR INBOX.22 11\r\nKnock Knock\r\n"))
        #expect(Encoder.pub(Subject("NOTIFY")!, payload: []) == bytes("PUB NOTIFY 0\r\n\r\n"))
        var headers = Headers()
        headers.append("Bar", "Baz")
        // The protocol page's example, byte for byte.
        #expect(Encoder.hpub(foo, headerBlock: headers.encoded(), payload: bytes("Hello NATS!")) == bytes("HPUB FOO 22 33\r\nNATS/1.0\r\nBar: Baz\r\n\r\nHello NATS!\r\n"))
        #expect(Encoder.hpub(Subject("NOTIFY")!, headerBlock: headers.encoded(), payload: []) == bytes("HPUB NOTIFY 22 22\r\nNATS/1.0\r\nBar: Baz\r\n\r\n\r\n"))
        #expect(Encoder.sub(Subject(pattern: "eventbus.evt.*.>")!, sid: SubscriptionID(7)) == bytes("SUB eventbus.evt.*.> 7\r\n"))
        #expect(Encoder.sub(Subject("BAR")!, queue: Subject("G1"), sid: SubscriptionID(44)) == bytes("SUB BAR G1 44\r\n"))
        #expect(Encoder.unsub(SubscriptionID(1)) == bytes("UNSUB 1\r\n"))
        #expect(Encoder.ping == bytes("PING\r\n") && Encoder.pong == bytes("PONG\r\n"))
    }

    @Test(arguments: [
        ("a", true, true), ("foo.bar", true, true), ("eventbus.evt.host-a.order:created", true, true),
        ("$JS.API.INFO", true, true), ("caf\u{E9}.x", true, true),
        ("foo.*", false, true), ("foo.>", false, true), (">", false, true), ("*.*.x", false, true),
        ("", false, false), ("foo.", false, false), (".foo", false, false), ("foo..bar", false, false),
        ("foo bar", false, false), ("foo\tbar", false, false), ("foo\r\nPUB x 1", false, false), ("a\u{0}b", false, false),
        ("foo.>.bar", false, false), ("foo*", false, false), ("f*o", false, false), ("foo.>x", false, false), ("**", false, false),
        ("a\u{7F}", false, false),
    ])
    func subjectsAreCheckedSoNoneCanBreakAControlLine(text: String, literal: Bool, pattern: Bool) {
        #expect((Subject(text) != nil) == literal, "literal \(text.debugDescription)")
        #expect((Subject(pattern: text) != nil) == pattern, "pattern \(text.debugDescription)")
    }

    @Test func aSubjectOverTheLengthLimitIsRefused() {
        #expect(Subject(String(repeating: "a", count: Subject.maxBytes)) != nil)
        #expect(Subject(String(repeating: "a", count: Subject.maxBytes + 1)) == nil)
    }
}

@Suite struct HeaderTests {
    /// Values a publisher might send to break out of its header line.
    static let hostile = [
        "plain", "a b", "line\r\nInjected: yes", "\r\n\r\nPUB evil 1\r\nx", "lf\nonly", "cr\ronly",
        "50% off", "%0D%0A", "quote\"d", "tab\there", "nul\u{0}byte", "caf\u{E9} \u{1F600}", "", " lead", "trail ",
    ]

    @Test(arguments: hostile)
    func everyValueIsPercentEncodedSoNoLineCanBeInjected(value: String) throws {
        var headers = Headers()
        headers.append("ce-source", value)
        headers.append("Nats-Msg-Id", "host-a:abc:42")
        let block = headers.encoded()
        // Exactly three CRLFs inside the block besides the final empty line:
        // after the version line and after each field.
        let text = String(decoding: block, as: UTF8.self)
        #expect(text.hasPrefix("NATS/1.0\r\nce-source: "))
        #expect(text.hasSuffix("\r\nNats-Msg-Id: host-a:abc:42\r\n\r\n"))
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        #expect(lines.count == 5, "version, two fields, empty line, end: \(lines)")
        #expect(block.filter { $0 == 0x0A }.count == 4 && block.filter { $0 == 0x0D }.count == 4)
        #expect(block.allSatisfy { $0 == 0x0D || $0 == 0x0A || ($0 >= 0x20 && $0 <= 0x7E) }, "only printable ASCII on the wire")
        let parsed = try Headers.parse(block.span.bytes)
        #expect(parsed.first("ce-source") == value, "round trip")
        #expect(parsed.first("NATS-MSG-ID") == "host-a:abc:42", "names match case-insensitively")
        #expect(parsed.fields.map(\.name) == ["ce-source", "Nats-Msg-Id"], "names keep their case")
    }

    @Test func theEncodingIsCloudEventsRule() {
        #expect(Headers.percentEncoded("a b\"c%d\r\n\u{E9}~!") == "a%20b%22c%25d%0D%0A%C3%A9~!")
    }

    @Test func decodingIsLenientAboutStrayPercentSigns() throws {
        let block = bytes("NATS/1.0\r\nA: 100%\r\nB: %zz%4\r\nC: %41%62\r\nD:   spaced out  \r\nA: again\r\n\r\n")
        let headers = try Headers.parse(block.span.bytes)
        #expect(headers.fields.map(\.value) == ["100%", "%zz%4", "Ab", "spaced out", "again"])
        #expect(headers.first("a") == "100%", "the first of repeated names")
    }

    @Test(arguments: [
        ("NATS/1.0 503\r\n\r\n", 503, nil),
        ("NATS/1.0 408 Request Timeout\r\n\r\n", 408, "Request Timeout"),
        ("NATS/1.0\r\n\r\n", nil, nil),
    ] as [(String, Int?, String?)])
    func statusLinesAreRead(text: String, status: Int?, description: String?) throws {
        let headers = try Headers.parse(bytes(text).span.bytes)
        #expect(headers.status == status && headers.statusDescription == description)
    }

    @Test(arguments: [
        ("HTTP/1.1\r\n\r\n", HeaderError.badVersionLine("HTTP/1.1")),
        ("NATS/1.0 5x3\r\n\r\n", .badVersionLine("NATS/1.0 5x3")),
        ("NATS/1.0\r\nA: b\r\n", .notTerminated),
        ("NATS/1.0\r\nno colon\r\n\r\n", .malformedField("no colon")),
        ("NATS/1.0\r\nbad name: v\r\n\r\n", .malformedField("bad name: v")),
        ("NATS/1.0\r\n: v\r\n\r\n", .malformedField(": v")),
    ])
    func malformedBlocksAreErrors(text: String, error: HeaderError) {
        #expect(throws: error) { try Headers.parse(bytes(text).span.bytes) }
    }
}
