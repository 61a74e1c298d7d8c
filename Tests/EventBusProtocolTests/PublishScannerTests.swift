// The specialised publish path (PublishScanner.swift) against the general
// decoder: the shapes it takes, each decoded exactly as `RequestDecoder.decode`
// decodes it, and the shapes it leaves to the general decoder, which decides
// every error. Then its quick value scan against the full one, and the key
// words it matches against their spellings.
@_spi(Package) @testable import EventBusProtocol
import Testing

@Suite("Publish scanner")
struct PublishScannerTests {
    /// Frames of the common shape: `decodeCommonPublish` takes them.
    static let taken: [String] = [
        #"{"op":"publish","type":"bench.t","data":{"ts":"0000000000000000000","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxx"}}"#,
        #"{"op":"publish","type":"a"}"#,
        #"{"op":"publish","req":4,"type":"currency.changed","source":"settings","id":"x-1","data":{"code":"EUR"}}"#,
        #"{"op":"publish","req":"r\"1","type":"a.b","retain":true,"origin":{"node":"n","seq":1},"data":2}"#,
        #"{"data":null,"retain":false,"id":"i","source":"s","type":"t","req":-9007199254740992,"op":"publish"}"#,
        " { \"op\" : \"publish\" ,\t\"type\" : \"a.b-c:d_e\" ,\n\"data\" : { } } ",
        #"{"op":"publish","type":"a","source":"s\u00e9","id":"\"q\"","data":"ü中😀"}"#,
        #"{"op":"publish","type":"a","data":[1,-0.5e-3,true,false,null,"x",{"a":[[]]},[]]}"#,
        #"{"op":"publish","type":"a","data":123456789012345678901234567890}"#,
        #"{"op":"publish","type":"a","id":""}"#,
        #"{"op":"publish", "type":"a"}"#,
        "{\"op\":\"publish\",\t\"data\":1,\"type\":\"a\"}",
        #"{"op":"publish","type":"eventbu.x"}"#,
        #"{"op":"publish","type":"a","data":"\u0000\ud83d\ude00"}"#,
        // Deeper than the quick scan's 64 levels: the full scan decides, the path still takes it.
        #"{"op":"publish","type":"a","data":"# + String(repeating: #"[{"a":"#, count: 50) + "1" + String(repeating: "}]", count: 50) + "}",
        // The deepest data allowed: 511 levels inside the envelope.
        #"{"op":"publish","type":"a","data":"# + String(repeating: "[", count: 511) + String(repeating: "]", count: 511) + "}",
    ]

    /// Frames the specialised path leaves to the general decoder, and what
    /// the general decoder answers (nil: a successful publish all the same).
    static let leftToGeneral: [(String, ErrorCode?)] = [
        (#"{"op":"publish","type":"a","extra":1}"#, nil),  // unknown key
        ("{\"op\":\"publish\",\r\"type\":\"a\"}", .badFrame),  // a raw CR (issue 20): not whitespace in a request
        ("{\"op\":\"publish\",\"type\":\"a\",\"data\":[1,\r2]}", .badFrame),
        ("{\"op\":\"publish\",\"type\":\"a\",\"data\":\"\u{2028}\"}", .badFrame),  // raw U+2028, U+2029, U+0085 in a string
        ("{\"op\":\"publish\",\"type\":\"a\",\"source\":\"x\u{2029}\"}", .badFrame),
        ("{\"op\":\"publish\",\"type\":\"a\",\"data\":{\"k\":\"é\u{85}\"}}", .badFrame),
        (#"{"op":"publish","op":"x","type":"a"}"#, .badRequest),  // the opening, then op again
        (#"{"op":"publish",}"#, .badFrame),
        (#"{"\u006fp":"publish","type":"a"}"#, nil),  // escaped key
        (#"{"op":"publ\u0069sh","type":"a"}"#, nil),  // escaped op
        (#"{"op":"publish","type":"\u0061"}"#, nil),  // escaped type
        (#"{"op":"publish","type":"a","type":"b"}"#, .badRequest),  // duplicate
        (#"{"op":"publish","op":"publish","type":"a"}"#, .badRequest),
        (#"{"op":"publish","type":"a","req":9007199254740993}"#, .badRequest),
        (#"{"op":"publish","type":"a","req":1.0}"#, .badRequest),
        (#"{"op":"publish","type":"a","req":null}"#, .badRequest),
        (#"{"op":"publish","type":"a.*"}"#, .badType),
        (#"{"op":"publish","type":""}"#, .badType),
        (#"{"op":"publish","type":"é"}"#, .badType),
        (#"{"op":"publish","type":"a..b"}"#, .badType),
        (#"{"op":"publish","type":"eventbus.x"}"#, .forbidden),
        (#"{"op":"publish","type":1}"#, .badRequest),
        (#"{"op":"publish"}"#, .badRequest),
        (#"{"type":"a"}"#, .badRequest),
        (#"{"op":"subscribe","type":"a"}"#, nil),
        (#"{"op":"publish","type":"a","source":1}"#, .badRequest),
        (#"{"op":"publish","type":"a","id":null}"#, .badRequest),
        (#"{"op":"publish","type":"a","retain":"yes"}"#, .badRequest),
        (#"{"op":"publish","type":"a","retain":tru}"#, .badFrame),
        (#"{"op":"publish","type":"a","origin":[1]}"#, .badRequest),
        (#"{"op":"publish","type":"a","data":{"a":1,}}"#, .badFrame),
        (#"{"op":"publish","type":"a","data":[1,]}"#, .badFrame),
        (#"{"op":"publish","type":"a","data":01}"#, .badFrame),
        ("{\"op\":\"publish\",\"type\":\"a\",\"data\":\"\u{01}\"}", .badFrame),
        (#"{"op":"publish","type":"a"} x"#, .badFrame),
        (#"{"op":"publish","type":"a",}"#, .badFrame),
        (#"{"op":"publish","type":"a""#, .badFrame),
        (#"["op","publish"]"#, .badFrame),
        (#"{"op":"publish","type":"a","data":"# + String(repeating: "[", count: 512) + String(repeating: "]", count: 512) + "}", .badFrame),
    ]

    @Test("takes the common shape and reads it as the general decoder does", arguments: taken)
    func takesTheCommonShape(_ text: String) {
        let frame = utf8(text)
        frame.withByteView { bytes in
            guard let special = RequestDecoder.decodeCommonPublish(bytes) else {
                Issue.record("left to the general decoder: \(text)")
                return
            }
            let general = RequestDecoder.decode(bytes)
            guard case .success(.publish(let expected)) = general.request, case .success(.publish(let got)) = special.request else {
                Issue.record("general \(general.request), specialised \(special.request)")
                return
            }
            #expect(got == expected)
            #expect(special.req == general.req)
        }
    }

    @Test("leaves every other frame to the general decoder", arguments: leftToGeneral)
    func leavesOtherShapes(_ text: String, _ code: ErrorCode?) {
        let frame = utf8(text)
        frame.withByteView { bytes in
            #expect(RequestDecoder.decodeCommonPublish(bytes) == nil)
            switch RequestDecoder.decode(bytes).request {
            case .success: #expect(code == nil)
            case .failure(let error): #expect(error.code == code)
            }
        }
    }

    @Test func aReservedTypeIsScannedButNotPublishable() {
        utf8(#"{"op":"publish","type":"eventbus.x"}"#).withByteView { bytes in
            guard let tokens = PublishScanner.scan(bytes) else { Issue.record("not scanned"); return }
            #expect(EventType.publishable(tokens.typeBytes(in: bytes)) == nil)
        }
        utf8("eventbus").withByteView { #expect(EventType.publishable($0)?.name == "eventbus") }
    }

    @Test func aPrefixOfATakenFrameIsTakenOnlyWhenItIsAPublishItself() {
        for text in Self.taken {
            let frame = utf8(text)
            for length in 0..<frame.count {
                Array(frame[..<length]).withByteView { bytes in
                    guard RequestDecoder.decodeCommonPublish(bytes) != nil else { return }
                    guard case .success(.publish) = RequestDecoder.decode(bytes).request else {
                        Issue.record("took \(length) bytes of \(text)")
                        return
                    }
                }
            }
        }
    }

    @Test("the key words are the keys' spellings", arguments: ["op", "id", "req", "type", "data", "source", "retain", "origin"])
    func keyWords(_ name: String) {
        let expected: [String: PublishScanner.Key] = ["op": .op, "id": .id, "req": .req, "type": .type, "data": .data,
                                                      "source": .source, "retain": .retain, "origin": .origin]
        guard let (key, length) = Self.match("\"\(name)\":") else { Issue.record("\(name) not matched"); return }
        #expect(key == expected[name] && length == name.utf8.count + 2)
    }

    @Test("other keys are not matched", arguments: ["\"opx\"", "\"o\"", "\"types\"", "\"dat\"", "\"sourcex\"", "\"Op\"", "'op'", "\"ids\""])
    func otherKeys(_ text: String) {
        #expect(Self.match(text + ":") == nil)
    }

    @Test func thePublishWordsAreTheirSpellings() {
        #expect(utf8("\"publish\"").withByteView { $0.word(at: 0) } == PublishScanner.Key.publishWord)
        let opening = utf8("{\"op\":\"publish\",").withByteView { ($0.word(at: 0), $0.word(at: 8)) }
        #expect(opening == PublishScanner.Key.openingWords)
    }

    /// `Key.match` on the first 8 bytes of `text` (padded with colons).
    static func match(_ text: String) -> (PublishScanner.Key, Int)? {
        var bytes = utf8(text)
        bytes += [UInt8](repeating: 0x3A, count: max(0, 8 - bytes.count))
        return bytes.withByteView { PublishScanner.Key.match($0.word(at: 0)) }
    }

    @Test("the quick scan agrees with the full one", arguments: [
        "{}", "[]", " 1 ", "-0", "1e5", "1.5E-3", "\"a\\u00e9\\n\"", "true", "false", "null", "tru", "nul", "[1,2", "{\"a\":}",
        "{\"a\":1,\"b\":[true,{\"c\":null}]}", "[[[[[[]]]]]]", "[1,]", "{,}", "{\"a\"1}", "\"\\ud800\"", "\"\u{7F}\u{80}\"", "01", "[-]",
    ])
    func quickScanAgrees(_ text: String) {
        for maxDepth in [512, 3] {
            let bytes = utf8(text)
            let quick = bytes.withByteView { JSONScanner.validateQuickly($0, maxDepth: maxDepth) }
            let full = try? validateJSON(bytes, maxDepth: maxDepth).get()
            #expect(quick == full, "\(text) at depth \(maxDepth)")
        }
    }
}
