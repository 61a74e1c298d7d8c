// The server-operation parser: every operation, fed whole, a byte at a time
// and in random chunkings (all must agree); the line and payload bounds; the
// malformed lines that must stop the connection; header blocks in HMSG.
@testable import EventBusNATS
@_spi(Package) import EventBusProtocol
import Testing

/// Cuts `bytes` into chunks: whole, fixed sizes, or seeded random sizes (0 allowed).
func chunks(_ bytes: [UInt8], _ chunking: Int) -> [[UInt8]] {
    var out: [[UInt8]] = []
    var offset = 0
    var random = SplitMix64(seed: UInt64(bitPattern: Int64(chunking)))
    while offset < bytes.count {
        let size: Int
        switch chunking {
        case 0: size = bytes.count
        case let n where n > 0: size = n
        default: size = Int(random.next() % 9)  // negative: random 0...8
        }
        let end = min(bytes.count, offset + size)
        out.append(Array(bytes[offset..<end]))
        offset = end
    }
    out.append([])
    return out
}

/// Every chunking the tables use: whole, 1, 2, 3, 5, 64 bytes, and three random ones.
let chunkings = [0, 1, 2, 3, 5, 64, -1, -2, -3]

/// Feeds `bytes` in `chunking`; returns the operations and the violation, if any.
func parse(_ bytes: [UInt8], chunking: Int, parser: Parser = Parser()) -> ([ServerOperation], ProtocolViolation?) {
    var parser = parser
    var operations: [ServerOperation] = []
    for chunk in chunks(bytes, chunking) {
        do {
            try parser.feed(Array(chunk).span.bytes, into: &operations)
        } catch {
            return (operations, error)
        }
    }
    return (operations, nil)
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite struct ParserTests {
    static let info2910 = #"INFO {"server_id":"NDMY","server_name":"n1","version":"2.9.10","proto":1,"go":"go1.19.8","host":"127.0.0.1","port":15221,"headers":true,"max_payload":1048576,"client_id":8,"client_ip":"127.0.0.1","cluster":"c1","connect_urls":["127.0.0.1:15221","127.0.0.1:15222"]} "# + "\r\n"

    static let stream: [UInt8] = bytes(
        info2910
            + "PING\r\nPONG\r\n+OK\r\n"
            + "MSG foo.bar 9 11\r\nHello World\r\n"
            + "msg foo.bar 9 INBOX.34 11\r\nHello World\r\n"
            + "HMSG FOO.BAR 9 34 45\r\nNATS/1.0\r\nFoodGroup: vegetable\r\n\r\nHello World\r\n"
            + "HMSG FOO.BAR 9 INBOX.69 34 45\r\nNATS/1.0\r\nFoodGroup: vegetable\r\n\r\nHello World\r\n"
            + "HMSG _INBOX.x 9 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
            + "MSG empty 3 0\r\n\r\n"
            + "MSG\ttabs\t\t4   2\r\n\r\n\r\n"
            + "-ERR 'Invalid Subject'\r\n"
            + "-ERR 'maximum control line exceeded'\r\n"
    )

    static func expected() -> [ServerOperation] {
        var info = ServerInfo()
        info.serverID = "NDMY"; info.serverName = "n1"; info.version = "2.9.10"; info.proto = 1
        info.headers = true; info.maxPayload = 1_048_576; info.clientID = 8; info.clientIP = "127.0.0.1"
        info.cluster = "c1"; info.connectURLs = ["127.0.0.1:15221", "127.0.0.1:15222"]
        var food = Headers()
        food.append("FoodGroup", "vegetable")
        var status = Headers()
        status.status = 503
        return [
            .info(info), .ping, .pong, .ok,
            .message(Message(subject: "foo.bar", sid: SubscriptionID(9), payload: bytes("Hello World"))),
            .message(Message(subject: "foo.bar", sid: SubscriptionID(9), replyTo: "INBOX.34", payload: bytes("Hello World"))),
            .message(Message(subject: "FOO.BAR", sid: SubscriptionID(9), headers: food, payload: bytes("Hello World"))),
            .message(Message(subject: "FOO.BAR", sid: SubscriptionID(9), replyTo: "INBOX.69", headers: food, payload: bytes("Hello World"))),
            .message(Message(subject: "_INBOX.x", sid: SubscriptionID(9), headers: status, payload: [])),
            .message(Message(subject: "empty", sid: SubscriptionID(3), payload: [])),
            .message(Message(subject: "tabs", sid: SubscriptionID(4), payload: bytes("\r\n"))),
            .error("Invalid Subject"),
            .error("maximum control line exceeded"),
        ]
    }

    @Test(arguments: chunkings)
    func everyOperationParsesTheSameInEveryChunking(chunking: Int) {
        let (operations, violation) = parse(Self.stream, chunking: chunking)
        #expect(violation == nil)
        #expect(operations == Self.expected())
    }

    /// (linkimp2) The split steps over words without a blank: subjects of
    /// every length from 1 to 40 (and 199-1000) after blanks and tabs, so each
    /// field boundary falls at every place in a word, read as before.
    @Test func fieldsAreSplitAtEveryPlaceInAWord() {
        for length in Array(1...40) + [199, 200, 201, 255, 256, 1000] {
            for gap in [" ", "\t", "  ", " \t ", "         "] {
                let subject = String((0..<length).map { Character(UnicodeScalar(UInt8(0x61 + $0 % 26))) })
                let line = "MSG\(gap)\(subject)\(gap)7\(gap)R.\(subject)\(gap)2\r\nok\r\nHMSG\(gap)\(subject)\(gap)12\(gap)12\(gap)12\r\nNATS/1.0\r\n\r\n\r\n"
                let (operations, violation) = parse(bytes(line), chunking: 0)
                #expect(violation == nil)
                #expect(operations == [.message(Message(subject: subject, sid: SubscriptionID(7), replyTo: "R.\(subject)", payload: bytes("ok"))),
                                       .message(Message(subject: subject, sid: SubscriptionID(12), headerBlock: bytes("NATS/1.0\r\n\r\n"), payload: []))],
                        "\(line.debugDescription)")
            }
        }
    }

    @Test func aWordsBlanksAreExactlyItsSpacesAndTabs() {
        for place in 0..<8 {
            for byte in 0...255 {
                for fill: UInt64 in [0, 0x4141_4141_4141_4141, 0xFFFF_FFFF_FFFF_FFFF, 0x2121_2121_2121_2121, 0x0808_0808_0808_0808, 0x1F1F_1F1F_1F1F_1F1F] {
                    let word = fill & ~(0xFF << UInt64(place * 8)) | UInt64(byte) << UInt64(place * 8)
                    var want: UInt64 = 0
                    for k in 0..<8 where (word >> UInt64(k * 8)) & 0xFF == 0x20 || (word >> UInt64(k * 8)) & 0xFF == 0x09 { want |= 0x80 << UInt64(k * 8) }
                    #expect(Parser.blanks(word) == want)
                }
            }
        }
    }

    @Test func aPayloadThatContainsProtocolTextIsOnlyPayload() {
        let payload = "PING\r\nMSG x 1 2\r\n"
        let (operations, violation) = parse(bytes("MSG a 1 \(payload.utf8.count)\r\n\(payload)\r\nPONG\r\n"), chunking: 1)
        #expect(violation == nil)
        #expect(operations == [.message(Message(subject: "a", sid: SubscriptionID(1), payload: bytes(payload))), .pong])
    }

    @Test(arguments: chunkings)
    func aPayloadOverTheBoundIsSkippedUnbufferedAndTheStreamStaysInStep(chunking: Int) {
        let big = String(repeating: "x", count: 100)
        let stream = bytes("MSG a 1 100\r\n\(big)\r\nHMSG b 2 12 101\r\nNATS/1.0\r\n\r\n\(String(big.dropLast(11)))\r\nMSG c 3 2\r\nok\r\n")
        let (operations, violation) = parse(stream, chunking: chunking, parser: Parser(maxPayloadBytes: 99))
        #expect(violation == nil)
        #expect(operations == [
            .oversized(subject: "a", sid: SubscriptionID(1), bytes: 100),
            .oversized(subject: "b", sid: SubscriptionID(2), bytes: 101),
            .message(Message(subject: "c", sid: SubscriptionID(3), payload: bytes("ok"))),
        ])
    }

    @Test func whatItBuffersStaysWithinTheBoundsWhileSkipping() throws {
        var parser = Parser(maxPayloadBytes: 10)
        var operations: [ServerOperation] = []
        try parser.feed(bytes("MSG a 1 1000000\r\n").span.bytes, into: &operations)
        for _ in 0..<100 {
            try parser.feed([UInt8](repeating: 0x78, count: 10_000).span.bytes, into: &operations)
            #expect(parser.bufferedBytes == 0)
        }
        try parser.feed(bytes("\r\nPING\r\n").span.bytes, into: &operations)
        #expect(operations == [.oversized(subject: "a", sid: SubscriptionID(1), bytes: 1_000_000), .ping])
    }

    @Test(arguments: [1, 0])
    func aControlLineOverTheLimitIsAViolationEvenBeforeItsLineFeed(chunking: Int) {
        let long = "-ERR '" + String(repeating: "e", count: 5000)
        let (_, unterminated) = parse(bytes(long), chunking: chunking)
        #expect(unterminated?.description.contains("longer than 4096") == true)
        let (_, terminated) = parse(bytes(long + "'\r\n"), chunking: chunking)
        #expect(terminated != nil)
        let (operations, exact) = parse(bytes("-ERR '" + String(repeating: "e", count: 4096 - 7) + "'\r\n"), chunking: chunking)
        #expect(exact == nil && operations.count == 1, "4096 bytes before the CRLF are allowed")
    }

    @Test func anInfoLineMayBeLongerThanAControlLineUpToItsOwnLimit() {
        let urls = (0..<300).map { "\"10.0.0.\($0 % 250):4222\"" }.joined(separator: ",")
        let line = "INFO {\"headers\":true,\"connect_urls\":[\(urls)]}\r\n"
        #expect(line.utf8.count > 4096)
        let (operations, violation) = parse(bytes(line), chunking: 7)
        #expect(violation == nil)
        guard case .info(let info) = operations.first else { Issue.record("no INFO"); return }
        #expect(info.connectURLs.count == 300)
        let (_, tooLong) = parse(bytes(line), chunking: 7, parser: Parser(maxInfoLineBytes: 5000))
        #expect(tooLong != nil)
    }

    @Test(arguments: [
        "FOO bar\r\n",                       // unknown operation
        "MSG a\r\n",                         // too few arguments
        "MSG a 1 2 3 4\r\n",                 // too many
        "MSG a 1 -2\r\n",                    // not a size
        "MSG a 1 99999999999\r\n",           // absurd size
        "MSG a x 2\r\nhi\r\n",               // a sid this client never issues
        "HMSG a 1 10 5\r\n",                 // header bytes over total
        "HMSG a 1 2 3 4 5\r\n",              // too many
        "MSG a 1 2\r\nhiXX",                 // payload not followed by CRLF
        "INFO {\"headers\":\r\n",            // INFO that is not JSON
        "INFO [1]\r\n",                      // INFO that is not an object
    ])
    func malformedInputIsAProtocolViolation(text: String) {
        for chunking in [0, 1] {
            let (_, violation) = parse(bytes(text), chunking: chunking)
            #expect(violation != nil, "\(text.debugDescription) in \(chunking)-byte chunks")
        }
    }

    @Test func aMalformedHeaderBlockStillDeliversTheMessageWithTheError() {
        let stream = "HMSG a 1 6 8\r\nXXXX\r\nhi\r\nHMSG b 1 21 21\r\nNATS/1.0\r\nnocolon\r\n\r\n\r\n"
        let (operations, violation) = parse(bytes(stream), chunking: 1)
        #expect(violation == nil)
        guard operations.count == 2, case .message(let first) = operations[0], case .message(let second) = operations[1] else {
            Issue.record("expected two messages, got \(operations)")
            return
        }
        #expect(first.headers == nil && first.headerError == .notTerminated)
        #expect(first.payload == bytes("hi"))
        #expect(second.headers == nil && second.headerError == .malformedField("nocolon"))
    }

    @Test func aBareLineFeedEndsALineToo() {
        let (operations, violation) = parse(bytes("PING\nMSG a 1 2\nhi\r\n"), chunking: 1)
        #expect(violation == nil)
        #expect(operations == [.ping, .message(Message(subject: "a", sid: SubscriptionID(1), payload: bytes("hi")))])
    }
}
