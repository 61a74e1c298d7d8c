// Regression tests for findings of the eventbus-fuzz target (fuzz/corpus/finding-*):
// the frame splitter's verdicts must not depend on how reads cut the stream.
@_spi(Package) import EventBusProtocol
import Testing

@Suite struct FrameSplitterRegressionTests {
    static func split(_ reads: [String], maxFrameBytes: Int) -> [String] {
        var splitter = FrameSplitter(maxFrameBytes: maxFrameBytes)
        var out: [String] = []
        let collect: (SplitFrame) -> Bool = { piece in
            switch piece {
            case .frame(let bytes): out.append("frame:" + String(decodingUTF8: bytes))
            case .tooLarge(let n): out.append("tooLarge:\(n)")
            }
            return true
        }
        for read in reads {
            _ = splitter.feed(Array(read.utf8).span.bytes, collect)
        }
        splitter.finish(collect)
        return out
    }

    /// fuzz/corpus/finding-1-splitter-discarded-cr.bin: an oversized frame whose
    /// CR ended one read and whose LF began the next was reported one byte
    /// longer than the same frame read at once (PROTOCOL.md "Framing": the
    /// size counts the bytes before the LF/CRLF).
    @Test(arguments: [
        ["abcdefg\r\n"],
        ["abcdefg\r", "\n"],
        ["abcdef", "g\r", "\n", "ok\n"],
        ["abcdefg", "\r", "", "\n", "ok\n"],
    ])
    func oversizedFrameSizeExcludesCRWhicheverReadItCameIn(_ reads: [String]) {
        let got = Self.split(reads, maxFrameBytes: 4)
        #expect(got.first == "tooLarge:7")
        if reads.joined().hasSuffix("ok\n") { #expect(got.last == "frame:ok") }
    }

    @Test func oversizedFrameEndingInCRAtEOFCountsTheCR() {
        // No LF at all: the CR is part of the frame, as in one read.
        #expect(Self.split(["abcdefg\r"], maxFrameBytes: 4) == Self.split(["abcdefg", "\r"], maxFrameBytes: 4))
    }
}
