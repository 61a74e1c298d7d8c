// A frame read as its bytes arrive (RequestScan, issue 37) must get the
// answer `RequestDecoder.decode` gives the whole frame, byte for byte: the
// same request or the same error (code, message, offset, `req`). Each frame
// below (the JSON corpus's texts alone, as a ping's unknown member and as a
// publish's `data`, and envelopes of every kind) is handed over in every
// split into two pieces, a byte at a time, and with a CR last in a piece.
@_spi(Package) @testable import EventBusProtocol
import Testing

/// The answer to a frame, as text (the decoded request's fields and token
/// ranges, or the error), so two answers compare.
private func answer(_ decoded: DecodedFrame) -> String {
    "req: \(String(describing: decoded.req)), request: \(String(describing: decoded.request))"
}

private func decodedWhole(_ frame: [UInt8]) -> String {
    frame.withByteView { answer(RequestDecoder.decode($0)) }
}

/// The frame handed to a scan in pieces ending at `cuts` (growing offsets,
/// as the splitter's buffer grows), then finished.
private func scanned(_ frame: [UInt8], cuts: [Int], crAfter: Bool = false) -> String {
    let scan = RequestScan()
    for cut in cuts {
        var prefix = Array(frame[0..<cut])
        if crAfter { prefix.append(0x0D) }  // a CR that may precede the LF: left for later
        prefix.withByteView { scan.advance($0) }
    }
    return frame.withByteView { answer(scan.finish($0)) }
}

/// Frames built from the JSON corpus and envelopes of every kind.
private let frames: [(name: String, bytes: [UInt8])] = {
    var list: [(String, [UInt8])] = []
    for c in JSONCorpus.all where c.bytes.count <= 2048 {
        list.append(("\(c.name) alone", c.bytes))
        list.append(("\(c.name) in a ping", Array(#"{"op":"ping","x":"#.utf8) + c.bytes + Array(#","req":7}"#.utf8)))
        list.append(("\(c.name) as data", Array(#"{"req":"r","op":"publish","type":"a.b","data":"#.utf8) + c.bytes + [0x7D]))
    }
    let texts = [
        #"{"op":"ping","req":1}"#, #"{"op":"ping","req":1,"op":"stats"}"#, #"{"op":"ping","k":1,"k":2,"req":"a"}"#,
        #"{"\u006fp":"ping","req":2}"#, #"{"op":"ping","\u006b":1,"k":2}"#, #"{"op":"nope","req":3}"#, #"{"req":3}"#,
        #"{"op":1}"#, #"{"op":"ping","req":1.5}"#, #"{"op":"ping","req":[1]}"#, #"{"op":"publish","type":"a.b","data":{"x":[1,2,{"y":null}]},"source":"s","id":"i","req":4}"#,
        #"{"op":"publish","type":"a..b","req":5}"#, #"{"op":"subscribe","type":"a.*.>","last":true,"req":6}"#, #"{"op":"hello","client":"c","echo":true,"overflow":"drop-old"}"#,
        #"{"op":"types","limit":10,"req":8}"#, #"{"op":"request","type":"s.t","data":1,"timeout":500,"req":9}"#, #"{"op":"reply","to":"tok","data":2,"req":10}"#,
        "  {\"op\":\"ping\"}  ", "{\"op\":\"ping\"}\r", "{\"op\":\"ping\"\r}", "{\"op\":\"ping\",\"x\":\"a\rb\"}", "\r{}", "{} x", "{}}", "[{}]", "\"s\"", "12", "-", "1e", "tru", "nul",
        "{\"op\":\"ping\",\"x\":\"\u{2028}\"}", "{\"op\":\"ping\",\"x\":\"\u{85}\"}", #"{"op":"ping","x":"\ud83d\ude00"}"#, #"{"op":"ping","x":"\ud83d"}"#, #"{"op":"ping","x":"\ud83d\u0041"}"#,
        #"{"op":"ping","x":"\ude00"}"#, #"{"op":"ping","x":"\x"}"#, #"{"op":"ping","x":"\u12g4"}"#, #"{"op":"ping","x":"\u12"}"#, #"{"op":"ping","x":"\"#,
        #"{"op":"ping","x":01}"#, #"{"op":"ping","x":-01.5e+3}"#, #"{"op":"ping","x":1.}"#, #"{"op":"ping","x":1.5e}"#, #"{"op":"ping","x":1.5E-}"#, #"{"op":"ping","x":-}"#,
        #"{"op":"ping","x":tru}"#, #"{"op":"ping","x":trux}"#, #"{"op":"ping","x":fals"#, #"{"op":"ping" "x":1}"#, #"{"op":"ping",}"#, #"{"op":"ping",,}"#, #"{"op" "ping"}"#,
        #"{"op":"ping","x":[1,]}"#, #"{"op":"ping","x":[1 2]}"#, #"{"op":"ping","x":{"a" 1}}"#, #"{"op":"ping","x":{1:2}}"#, "{", "{\"op\"", "{\"op\":", "{\"op\":\"pi",
    ]
    for text in texts { list.append((text, Array(text.utf8))) }
    var bytes: [UInt8] = Array(#"{"op":"ping","x":""#.utf8) + [0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80] + Array(#""}"#.utf8)
    list.append(("multi-byte UTF-8 in a string", bytes))
    for bad in [[0xC0, 0xAF], [0xE2, 0x82], [0xF0, 0x9F, 0x98], [0xED, 0xA0, 0x80], [0xFF], [0x80]] as [[UInt8]] {
        bytes = Array(#"{"op":"ping","x":""#.utf8) + bad + Array(#""}"#.utf8)
        list.append(("bad UTF-8 \(bad)", bytes))
        list.append(("bad UTF-8 \(bad) at the end", Array(#"{"op":"ping","x":""#.utf8) + bad))
    }
    list.append(("control character in a string", Array(#"{"op":"ping","x":""#.utf8) + [0x01] + Array(#""}"#.utf8)))
    list.append(("513 deep", Array(("{\"op\":\"ping\",\"x\":" + String(repeating: "[", count: 512) + String(repeating: "]", count: 512) + "}").utf8)))
    list.append(("511 deep", Array(("{\"op\":\"ping\",\"x\":" + String(repeating: "[", count: 510) + String(repeating: "]", count: 510) + "}").utf8)))
    list.append(("many keys, one repeated", Array(("{" + (0..<40).map { "\"k\($0 % 37)\":\($0)," }.joined() + "\"op\":\"ping\"}").utf8)))
    return list
}()

@Suite struct RequestScanTests {
    @Test func everySplitIntoTwoPiecesGivesTheWholeFramesAnswer() {
        for (name, frame) in frames {
            let expected = decodedWhole(frame)
            let step = frame.count > 256 ? 37 : 1
            for cut in stride(from: 0, through: frame.count, by: step) {
                let got = scanned(frame, cuts: [cut])
                #expect(got == expected, "\(name), cut at \(cut)")
                if got != expected { break }
            }
        }
    }

    @Test func aByteAtATimeGivesTheWholeFramesAnswer() {
        for (name, frame) in frames {
            let cuts = frame.count <= 600 ? Array(0...frame.count) : Array(stride(from: 0, through: frame.count, by: 7))
            #expect(scanned(frame, cuts: cuts) == decodedWhole(frame), "\(name)")
        }
    }

    @Test func aCRLastInAPieceIsLeftForLater() {
        // The splitter drops a CR before the LF: a piece that ends in CR may
        // end the frame there, so the CR is not judged until more comes.
        for (name, frame) in frames where frame.count <= 256 {
            let expected = decodedWhole(frame)
            for cut in 0...frame.count {
                let got = scanned(frame, cuts: [cut], crAfter: true)
                #expect(got == expected, "\(name), cut at \(cut) with a CR after")
                if got != expected { break }
            }
        }
    }

    @Test func blankLinesAreToldApart() {
        let blank = RequestScan()
        Array("  \t\r  ".utf8).withByteView { blank.advance($0) }
        #expect(!blank.sawNonBlank)
        let notBlank = RequestScan()
        Array("  \r {".utf8).withByteView { notBlank.advance($0) }
        #expect(notBlank.sawNonBlank)
    }

    @Test func costlyShapesAreValidatedAsTheyCome() {
        // The attack rows' frames (issue 20's cost-*), 64 KiB at a time: each
        // piece is validated when it comes (`scanned` follows the input).
        let shapes: [[UInt8]] = [
            Array((#"{"op":"ping","x":["# + Array(repeating: String(repeating: "[", count: 507) + String(repeating: "]", count: 507), count: 200).joined(separator: ",") + "]}").utf8),
            Array((#"{"op":"ping","x":["# + Array(repeating: "1234567", count: 30_000).joined(separator: ",") + "]}").utf8),
            Array(("{" + (0..<20_000).map { "\"k\($0)\":1," }.joined() + #""op":"ping","req":1}"#).utf8),
            Array((#"{"op":"ping","x":""# + String(repeating: #"\u00e9"#, count: 40_000) + "\"}").utf8),
            Array((#"{"op":"ping","x":"# + String(repeating: "1", count: 200_000) + "}").utf8),
        ]
        for frame in shapes {
            let scan = RequestScan()
            var cut = 0
            while cut < frame.count - 1 {
                cut = min(frame.count - 1, cut + 65_536)
                Array(frame[0..<cut]).withByteView { scan.advance($0) }
                #expect(scan.scanned >= cut - 12, "validated up to \(scan.scanned) of \(cut)")
            }
            #expect(frame.withByteView { answer(scan.finish($0)) } == decodedWhole(frame))
        }
    }
}
