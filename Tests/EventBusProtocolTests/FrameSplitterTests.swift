// The frame splitter (PROTOCOL.md "Framing") fed the same streams in many
// chunkings, including empty and 1-byte chunks: LF, CRLF, blank lines, the
// size limit exactly and one over, discard-to-LF then a good frame, EOF
// without LF. Every chunking must give the same frames.
@_spi(Package) import EventBusProtocol
import Testing

/// What the splitter handed out, copied so it outlives the callback.
enum Piece: Equatable, CustomStringConvertible {
    case frame(String)
    case tooLarge(Int)

    var description: String {
        switch self {
        case .frame(let text): "frame(\(text.debugDescription))"
        case .tooLarge(let n): "tooLarge(\(n))"
        }
    }
}

/// How to cut a stream into chunks.
enum Chunking: CustomTestStringConvertible, Sendable {
    case whole
    case fixed(Int)
    /// Sizes repeated in turn; 0 feeds an empty chunk.
    case pattern([Int])
    /// Random sizes 0...max from a seed.
    case random(seed: UInt64, max: Int)

    var testDescription: String {
        switch self {
        case .whole: "whole"
        case .fixed(let n): "\(n)-byte chunks"
        case .pattern(let p): "chunks \(p)"
        case .random(let seed, let max): "random chunks ≤\(max) seed \(seed)"
        }
    }

    func split(_ bytes: [UInt8]) -> [[UInt8]] {
        var chunks: [[UInt8]] = []
        var offset = 0
        var n = 0
        var rng = SeededGenerator(seed: { if case .random(let s, _) = self { return s } else { return 0 } }())
        while offset < bytes.count {
            let size: Int
            switch self {
            case .whole: size = bytes.count
            case .fixed(let k): size = k
            case .pattern(let p): size = p[n % p.count]
            case .random(_, let max): size = Int.random(in: 0...max, using: &rng)
            }
            let end = min(bytes.count, offset + size)
            chunks.append(Array(bytes[offset..<end]))
            offset = end
            n += 1
        }
        chunks.append([])  // always end with an empty chunk too
        return chunks
    }

    static let all: [Chunking] = [
        .whole, .fixed(1), .fixed(2), .fixed(3), .fixed(7), .pattern([0, 1]), .pattern([1, 0, 0, 2]),
        .pattern([5, 0, 1, 13]), .random(seed: 1, max: 4), .random(seed: 2, max: 40), .random(seed: 3, max: 200),
    ]
}

/// Feeds `stream` in `chunking`, then finishes when `eof`; returns what came out.
func split(_ stream: [UInt8], maxFrameBytes: Int = 16, chunking: Chunking, eof: Bool = true,
           checkMemory: Bool = true) -> [Piece] {
    var splitter = FrameSplitter(maxFrameBytes: maxFrameBytes)
    var pieces: [Piece] = []
    let collect: (SplitFrame) -> Bool = { piece in
        switch piece {
        case .frame(let bytes): pieces.append(.frame(String(decodingUTF8: bytes)))
        case .tooLarge(let n): pieces.append(.tooLarge(n))
        }
        return true
    }
    for chunk in chunking.split(stream) {
        let completed = splitter.feed(chunk.span.bytes, collect)
        #expect(completed)
        if checkMemory { #expect(splitter.pending.count <= maxFrameBytes + 1) }
    }
    if eof {
        splitter.finish(collect)
        #expect(!splitter.hasPartialFrame)
    }
    return pieces
}

@Suite("Frame splitter")
struct FrameSplitterTests {
    /// (name, stream, expected pieces with a 16-byte limit and EOF at the end)
    static let streams: [(String, String, [Piece])] = [
        ("LF-terminated frames", "a\nbb\nccc\n", [.frame("a"), .frame("bb"), .frame("ccc")]),
        ("CRLF-terminated frames", "a\r\nbb\r\n", [.frame("a"), .frame("bb")]),
        ("mixed LF and CRLF", "a\nb\r\nc\n", [.frame("a"), .frame("b"), .frame("c")]),
        ("blank lines are skipped", "\n\n\r\na\n\r\n\n", [.frame("a")]),
        ("whitespace-only lines are skipped", "  \n\t\r\n a \n", [.frame(" a ")]),
        ("a CR not before LF is kept", "a\rb\n", [.frame("a\rb")]),
        ("only one CR is stripped", "a\r\r\n", [.frame("a\r")]),
        ("other whitespace inside is kept", " {\"a\": 1}\t\n", [.frame(" {\"a\": 1}\t")]),
        ("exactly the limit", "0123456789abcdef\n", [.frame("0123456789abcdef")]),
        ("exactly the limit with CRLF", "0123456789abcdef\r\n", [.frame("0123456789abcdef")]),
        ("one over the limit", "0123456789abcdefg\nok\n", [.tooLarge(17), .frame("ok")]),
        ("one over the limit with CRLF", "0123456789abcdefg\r\nok\n", [.tooLarge(17), .frame("ok")]),
        ("far over the limit then a good frame",
         String(repeating: "x", count: 100) + "\n{\"op\":\"ping\"}\n", [.tooLarge(100), .frame("{\"op\":\"ping\"}")]),
        ("far over with CRLF then a good frame",
         String(repeating: "x", count: 100) + "\r\nok\r\n", [.tooLarge(100), .frame("ok")]),
        ("two oversized frames in a row",
         String(repeating: "x", count: 40) + "\n" + String(repeating: "y", count: 17) + "\nz\n",
         [.tooLarge(40), .tooLarge(17), .frame("z")]),
        ("EOF without LF", "a\nlast", [.frame("a"), .frame("last")]),
        ("EOF without LF after CR", "a\nlast\r", [.frame("a"), .frame("last")]),
        ("EOF in an oversized frame", "a\n" + String(repeating: "x", count: 30), [.frame("a"), .tooLarge(30)]),
        ("EOF in an oversized frame ending in CR", String(repeating: "x", count: 30) + "\r", [.tooLarge(30)]),
        ("EOF after an exactly-limit frame without LF", "0123456789abcdef", [.frame("0123456789abcdef")]),
        ("EOF after one-over frame without LF", "0123456789abcdefg", [.tooLarge(17)]),
        ("nothing at all", "", []),
        ("only blank lines", "\n\r\n\n", []),
        ("UTF-8 split across chunks", "é€😀\n", [.frame("é€😀")]),
    ]

    @Test("splits the same way in every chunking", arguments: streams, Chunking.all)
    func splitsTheSameWayInEveryChunking(_ stream: (String, String, [Piece]), _ chunking: Chunking) {
        let pieces = split(utf8(stream.1), chunking: chunking)
        #expect(pieces == stream.2, "\(stream.0)")
    }

    @Test func withoutEOFALastFrameWithoutLFStaysPending() {
        var splitter = FrameSplitter(maxFrameBytes: 16)
        var seen: [String] = []
        let bytes = utf8("a\npart")
        _ = splitter.feed(bytes.span.bytes) { piece in
            if case .frame(let b) = piece { seen.append(String(decodingUTF8: b)) }
            return true
        }
        #expect(seen == ["a"])
        #expect(splitter.hasPartialFrame)
        #expect(splitter.pending == utf8("part"))
    }

    @Test func anOversizedFrameIsNeverBufferedBeyondTheLimit() {
        var splitter = FrameSplitter(maxFrameBytes: 1024)
        var reported: [Int] = []
        let chunk = [UInt8](repeating: 0x78, count: 4096)
        for _ in 0..<256 {  // 1 MiB without a LF
            _ = splitter.feed(chunk.span.bytes) { piece in
                if case .tooLarge(let n) = piece { reported.append(n) }
                return true
            }
            #expect(splitter.pending.count <= 1025)
        }
        #expect(splitter.discarding)
        #expect(reported.isEmpty)  // reported once, at its LF
        _ = splitter.feed(utf8("\n").span.bytes) { piece in
            if case .tooLarge(let n) = piece { reported.append(n) }
            return true
        }
        #expect(reported == [4096 * 256])
        #expect(!splitter.hasPartialFrame)
    }

    @Test func stoppingEarlyKeepsTheRestForTheNextFeed() {
        var splitter = FrameSplitter(maxFrameBytes: 16)
        var seen: [String] = []
        var stopAfter = 2
        func collect(_ piece: SplitFrame) -> Bool {
            if case .frame(let b) = piece { seen.append(String(decodingUTF8: b)) }
            return seen.count < stopAfter
        }
        let completed = splitter.feed(utf8("a\nb\nc\nd\npar").span.bytes, collect)
        #expect(!completed)
        #expect(seen == ["a", "b"])
        #expect(splitter.hasBacklog && splitter.heldBytes >= 7)  // "c\nd\npar"; the allocator may round up (not under ASan)
        // An empty feed goes on from the backlog; another stop keeps the rest again.
        stopAfter = 3
        let afterEmpty = splitter.feed(utf8("").span.bytes, collect)
        #expect(!afterEmpty)
        #expect(seen == ["a", "b", "c"])
        // New input goes after the backlog, and the incomplete tail joins it.
        stopAfter = .max
        let afterMore = splitter.feed(utf8("t\ne\nf").span.bytes, collect)
        #expect(afterMore)
        #expect(seen == ["a", "b", "c", "d", "part", "e"])
        #expect(!splitter.hasBacklog && splitter.pending == utf8("f"))
        splitter.finish(collect)
        #expect(seen.last == "f" && !splitter.hasPartialFrame && splitter.heldBytes == 0)
    }

    @Test func aStopOnTheLastFrameOfAChunkLeavesNoBacklog() {
        var splitter = FrameSplitter(maxFrameBytes: 16)
        let completed = splitter.feed(utf8("a\nb\n").span.bytes) { piece in
            if case .frame(let b) = piece { return [UInt8](copying: b).first != UInt8(ascii: "b") }
            return true
        }
        #expect(!completed && !splitter.hasBacklog && !splitter.hasPartialFrame)
    }

    @Test func finishHandsOutTheBacklogThenTheLastFrame() {
        var splitter = FrameSplitter(maxFrameBytes: 16)
        var seen: [String] = []
        _ = splitter.feed(utf8("a\nb\nlast").span.bytes) { piece in
            if case .frame(let b) = piece { seen.append(String(decodingUTF8: b)) }
            return false
        }
        #expect(seen == ["a"])
        splitter.finish { piece in
            if case .frame(let b) = piece { seen.append(String(decodingUTF8: b)) }
            return true
        }
        #expect(seen == ["a", "b", "last"])
        #expect(!splitter.hasPartialFrame)
    }

    @Test func finishTwiceHandsOutTheLastFrameOnce() {
        var splitter = FrameSplitter(maxFrameBytes: 16)
        var count = 0
        _ = splitter.feed(utf8("tail").span.bytes) { _ in true }
        splitter.finish { _ in count += 1; return true }
        splitter.finish { _ in count += 1; return true }
        #expect(count == 1)
    }

    @Test func defaultLimitIsOneMebibyte() {
        #expect(FrameSplitter().maxFrameBytes == 1 << 20)
        let exact = [UInt8](repeating: 0x20, count: (1 << 20) - 2)
        let frame = utf8("\"") + exact + utf8("\"\n")
        #expect(split(frame, maxFrameBytes: 1 << 20, chunking: .fixed(65536)).count == 1)
        let over = utf8("\"") + exact + utf8("x\"\n")
        #expect(split(over, maxFrameBytes: 1 << 20, chunking: .fixed(65536)) == [.tooLarge((1 << 20) + 1)])
    }

    /// (issue 20) `stopAfter`: a bounded piece of work per call; the rest is
    /// kept as the backlog, in order, and a bound that is not reached changes nothing.
    @Test func stopAfterBoundsTheFramesPerCallAndKeepsTheRest() {
        var splitter = FrameSplitter(maxFrameBytes: 64)
        var got: [String] = []
        let stream = utf8((0..<10).map { "frame-\($0)xx" }.joined(separator: "\n") + "\n")  // 10 frames of 10 bytes + LF
        var calls = 0
        var finished = splitter.feed(stream.span.bytes, stopAfter: 25) { piece in
            if case .frame(let f) = piece { got.append(String(decodingUTF8: f)) }
            return true
        }
        calls += 1
        #expect(!finished && got.count == 3 && splitter.hasBacklog, "stopped once 25 bytes were split: \(got)")
        while !finished {
            finished = splitter.feed(RawSpan(), stopAfter: 25) { piece in
                if case .frame(let f) = piece { got.append(String(decodingUTF8: f)) }
                return true
            }
            calls += 1
        }
        #expect(got == (0..<10).map { "frame-\($0)xx" })
        #expect(calls == 4 && !splitter.hasBacklog)
        var all = 0
        _ = splitter.feed(stream.span.bytes, stopAfter: stream.count) { _ in all += 1; return true }
        #expect(all == 10 && !splitter.hasBacklog, "a bound at the chunk's end does not stop it")
    }
}
