// The envelope's keys that are not in `EnvelopeKey` (PROTOCOL.md "Framing":
// unknown fields are ignored, but a duplicate top-level key is
// `bad_request`), and the one check that finds a repeated one.
//
// Before editing: this is on the path of every frame with an unknown
// top-level key, and a client chooses how many (issue 20's cost-keys row:
// 85,000 in a 1 MiB frame). Keys are only collected while the frame is
// scanned (8 bytes each: a hash and an offset, appended in frame order,
// room for them reserved once); the duplicate check runs once, after the scan, in
// two passes that stream over them with tables that stay in the cache
// (`filteredRepeat`). A hash table probed per key (what this replaced) cost
// a cache miss or two per key once it outgrew the cache, and its growth
// fresh pages: 16 ms of broker CPU for such a frame against 3 ms for a
// 100,000-element array (docs/RELIABILITY.md, issue 20).


/// The unknown top-level keys of one frame, by their decoded bytes, in
/// frame order. The hash is seeded per process, so no frame can be made to
/// collide on purpose. Valid while the frame is.
struct UnknownKeys {
    /// One key: 8 bytes.
    private struct Entry {
        /// The seeded hash of the decoded bytes, folded to 32 bits.
        var hash: UInt32
        /// The offset of the key token's opening quote in the frame (entries
        /// are appended in frame order, so this orders them too).
        var start: Int32
    }

    private var entries: [Entry] = []
    /// The decoded bytes of the last key written with escapes (one buffer per frame).
    private var decoded: [UInt8] = []

    /// Bytes it holds (a `RequestScan` is charged them).
    var heldBytes: Int { entries.capacity * MemoryLayout<Entry>.stride + decoded.capacity }

    /// Per-process random seed of the hash.
    private static let processSeed = UInt64.random(in: 1 ... .max)
    private let seed = UnknownKeys.processSeed

    /// The hash of decoded key bytes.
    @inline(__always)
    private func hash(_ bytes: ByteView) -> UInt32 {
        let h = SeededHash.hash(bytes, seed: seed)
        return UInt32(truncatingIfNeeded: h ^ (h &>> 32))
    }

    /// Adds a key token without escapes that is not a known key.
    @inline(__always)
    mutating func insertPlain(_ token: JSONToken, in frame: ByteView) {
        if entries.isEmpty { reserve(for: frame) }
        let bytes = frame.extracting((token.start &+ 1)..<(token.end &- 1))
        entries.append(Entry(hash: hash(bytes), start: Int32(token.start)))
    }

    /// Decodes a key token written with escapes and asks `known` for the
    /// position of the name it spells: a known key is not added (its
    /// position is returned), any other one is.
    mutating func insertEscaped(_ token: JSONToken, in frame: ByteView, known: (ByteView) -> Int?) -> Int? {
        decoded.removeAll(keepingCapacity: true)
        JSONString.appendDecoded(frame, token, to: &decoded)
        let (position, keyHash) = decoded.withByteView { bytes -> (Int?, UInt32) in (bytes.isEmpty ? nil : known(bytes), hash(bytes)) }
        if position != nil { return position }
        if entries.isEmpty { reserve(for: frame) }
        entries.append(Entry(hash: keyHash, start: Int32(token.start)))
        return nil
    }

    /// Room for as many keys as the frame can hold (a member takes at least
    /// 5 bytes, `"":0,`), at once: no copy as they come, and the pages a
    /// frame of few keys does not fill are never touched.
    private mutating func reserve(for frame: ByteView) {
        entries.reserveCapacity(frame.count / 5 + 1)
    }

    /// The key token of the earliest key (in frame order) that repeats an
    /// earlier one, or nil when all are different. Up to 16 keys are
    /// compared pairwise; more by `filteredRepeat`.
    func firstDuplicate(in frame: ByteView) -> JSONToken? {
        let n = entries.count
        guard n > 1 else { return nil }
        let all = entries.span
        let found: Int32? = n <= 16 ? pairwiseRepeat(all, in: frame) : filteredRepeat(all, in: frame)
        return found.map { UnknownKeys.keyToken(at: $0, in: frame) }
    }

    /// The offset of the first entry of `list` (in frame order) equal to one before it.
    private func pairwiseRepeat(_ list: Span<Entry>, in frame: ByteView) -> Int32? {
        for j in 1..<list.count {
            let later = list[j]
            for i in 0..<j where list[i].hash == later.hash && UnknownKeys.sameKey(list[i].start, later.start, frame) { return later.start }
        }
        return nil
    }

    /// `pairwiseRepeat` in two passes over the entries in frame order, both
    /// streaming, with tables that stay in the cache and branches that go
    /// one way nearly always. Each key has a bit, by its hash's top bits, in
    /// two bit arrays of at least 8 bits per key (at most 2^21 bits, 256 KiB,
    /// each). The first pass sets a key's bit in `seen`; a key whose bit is
    /// set already may repeat an earlier one (every repeat does, a few other
    /// keys too) and gets its bit set in `suspect`. The second pass compares
    /// exactly only the keys whose bit is suspect (which include the earlier
    /// key each repeat equals), in a table of them by the hash's low bits,
    /// until one equals an earlier one.
    private func filteredRepeat(_ all: Span<Entry>, in frame: ByteView) -> Int32? {
        var bitCount = 1 << 12
        while bitCount < 8 * all.count && bitCount < 1 << 21 { bitCount <<= 1 }
        let shift = UInt32(32 - bitCount.trailingZeroBitCount)
        let words = bitCount / 64
        // `seen` is words 0..<words, `suspect` the next `words`.
        var array = [UInt64](repeating: 0, count: 2 * words)
        var bits = array.mutableSpan
        do {
            var suspects = 0
            for k in all.indices {
                let entry = all[k]
                let bit = Int(truncatingIfNeeded: entry.hash &>> shift)
                let mask: UInt64 = 1 &<< UInt64(truncatingIfNeeded: bit & 63)
                let word = bit &>> 6
                if bits[word] & mask == 0 {
                    bits[word] |= mask
                } else {
                    bits[words &+ word] |= mask
                    suspects &+= 1
                }
            }
            guard suspects > 0 else { return nil }
            var table = [Int32](repeating: -1, count: 64)
            var placed = 0
            for j in 0..<all.count {
                let entry = all[j]
                let bit = Int(truncatingIfNeeded: entry.hash &>> shift)
                guard bits[words &+ bit &>> 6] & (1 &<< UInt64(truncatingIfNeeded: bit & 63)) != 0 else { continue }
                var mask = table.count &- 1
                var i = Int(truncatingIfNeeded: entry.hash) & mask
                while table[i] >= 0 {
                    let other = all[Int(table[i])]
                    if other.hash == entry.hash && UnknownKeys.sameKey(other.start, entry.start, frame) { return entry.start }
                    i = (i &+ 1) & mask
                }
                table[i] = Int32(j)
                placed &+= 1
                if placed * 2 > table.count {
                    // Doubled; every placed key goes in again.
                    var bigger = [Int32](repeating: -1, count: table.count * 2)
                    mask = bigger.count &- 1
                    for index in table where index >= 0 {
                        var k = Int(truncatingIfNeeded: all[Int(index)].hash) & mask
                        while bigger[k] >= 0 { k = (k &+ 1) & mask }
                        bigger[k] = index
                    }
                    table = bigger
                }
            }
            return nil
        }
    }

    /// The validated key token whose opening quote is at `start`.
    private static func keyToken(at start: Int32, in frame: ByteView) -> JSONToken {
        var scanner = JSONScanner(frame)
        scanner.position = Int(start)
        let escaped = (try? scanner.scanString()) ?? true
        return JSONToken(start: Int(start), end: scanner.position, kind: .string(escaped: escaped))
    }

    /// Whether the key tokens at `a` and `b` decode to the same bytes (asked
    /// only when their hashes are equal: for a repeat, and rarely else).
    private static func sameKey(_ a: Int32, _ b: Int32, _ frame: ByteView) -> Bool {
        let x = keyToken(at: a, in: frame), y = keyToken(at: b, in: frame)
        if case .string(escaped: false) = x.kind, case .string(escaped: false) = y.kind {
            return frame.extracting(x.range).sameBytes(as: frame.extracting(y.range))
        }
        return JSONString.decodeBytes(frame, x) == JSONString.decodeBytes(frame, y)
    }
}
