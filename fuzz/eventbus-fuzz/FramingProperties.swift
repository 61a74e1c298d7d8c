// Properties of the frame splitter checked on every fuzz input: the frames
// it hands out do not depend on how the byte stream is cut into reads, and
// they equal those of a five-line reference model of PROTOCOL.md "Framing".
//
// Before editing: a violated property must trap (`fuzzFailure`) so libFuzzer
// saves the input; never print and continue.
@_spi(Package) import EventBusProtocol

/// One unit the splitter produced, copied out of the callback.
enum SplitItem: Equatable, CustomStringConvertible {
    case frame([UInt8])
    case tooLarge(Int)

    var description: String {
        switch self {
        case .frame(let bytes): "frame(\(bytes.count) bytes: \(FuzzInput.preview(bytes)))"
        case .tooLarge(let n): "tooLarge(\(n))"
        }
    }
}

enum FramingProperties {
    /// Runs the splitter over `input` in the chunk sizes `chunks` yields
    /// (0 = an empty read), then `finish`, as the broker does at EOF.
    static func split(_ input: [UInt8], maxFrameBytes: Int, chunks: inout ChunkSizes) -> [SplitItem] {
        var splitter = FrameSplitter(maxFrameBytes: maxFrameBytes)
        var items: [SplitItem] = []
        let collect: (SplitFrame) -> Bool = { piece in
            switch piece {
            case .frame(let bytes): items.append(.frame([UInt8](copying: bytes)))
            case .tooLarge(let n): items.append(.tooLarge(n))
            }
            return true
        }
        let all = input.span.bytes
        var offset = 0
        while offset < all.byteCount {
            let size = min(chunks.next(), all.byteCount - offset)
            splitter.feed(all.extracting(offset..<(offset + size)), collect)
            offset += size
        }
        splitter.finish(collect)
        if splitter.hasPartialFrame { fuzzFailure("splitter still holds a partial frame after finish") }
        return items
    }

    /// The reference model: split on LF, drop one CR before it, skip lines of
    /// only space/tab/CR, report lines over the limit with their length (CR
    /// not counted); a last line without LF counts as if it had one.
    static func reference(_ input: [UInt8], maxFrameBytes: Int) -> [SplitItem] {
        var items: [SplitItem] = []
        let lines = input.split(separator: 0x0A, omittingEmptySubsequences: false)
        for (i, raw) in lines.enumerated() {
            if i == lines.count - 1 && raw.isEmpty { break }
            var line = raw[...]
            if line.last == 0x0D { line = line.dropLast() }
            if line.count > maxFrameBytes {
                items.append(.tooLarge(line.count))
            } else if !line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) {
                items.append(.frame(Array(line)))
            }
        }
        return items
    }

    /// Checks chunking invariance and agreement with the model for a small
    /// limit derived from the input and for the default 1 MiB limit.
    /// - Returns: the frames under the default limit, for the frame properties.
    static func check(_ input: [UInt8], seed: UInt64) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        let small = 1 + Int(seed % 97)
        for limit in [small, ProtocolConstants.defaultMaxFrameBytes] {
            let expected = reference(input, maxFrameBytes: limit)
            var whole = ChunkSizes.whole
            var random = ChunkSizes.random(seed: seed ^ UInt64(limit))
            var tiny = ChunkSizes.random(seed: ~seed, maxSize: 3)
            var runs: [(String, [SplitItem])] = [
                ("one read", split(input, maxFrameBytes: limit, chunks: &whole)),
                ("random reads", split(input, maxFrameBytes: limit, chunks: &random)),
            ]
            if input.count <= 4096 {
                runs.append(("reads of 0-3 bytes", split(input, maxFrameBytes: limit, chunks: &tiny)))
            }
            for (name, got) in runs where got != expected {
                fuzzFailure("""
                    frame splitter (limit \(limit), \(name)) disagrees with the framing model
                      got:      \(got)
                      expected: \(expected)
                    """)
            }
            if limit == ProtocolConstants.defaultMaxFrameBytes {
                frames = expected.compactMap { if case .frame(let f) = $0 { f } else { nil } }
            }
        }
        return frames
    }
}

/// Deterministic read sizes for one split run.
struct ChunkSizes {
    var state: UInt64
    let maxSize: UInt64
    let isWhole: Bool

    static var whole: ChunkSizes { ChunkSizes(state: 0, maxSize: 0, isWhole: true) }

    /// Sizes 0...maxSize (0 is an empty read) from a xorshift generator.
    static func random(seed: UInt64, maxSize: UInt64 = 17) -> ChunkSizes {
        ChunkSizes(state: seed | 1, maxSize: maxSize, isWhole: false)
    }

    mutating func next() -> Int {
        if isWhole { return Int.max }
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return Int(state % (maxSize + 1))
    }
}
