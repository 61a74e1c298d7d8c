// The one seeded hash of the package (issue 25): the broker's table of
// published types (EventBusCore's EventTypeTable, on every publish) and the
// decoder's check of unknown keys (`UnknownKeys`, UnknownKeys.swift) hash bytes
// a client chose, so both mix in a seed that is random per run or process:
// no input can be made to collide on purpose.
//
// Before editing: the words are part of what EventTypeTable compares (for 1
// to 16 bytes the two words and the length identify the bytes), so `words`
// must keep covering every byte; `mix` is on the publish path (a few
// multiplies, no loop for 16 bytes or fewer), keep it inlinable.

/// A seeded 64-bit hash of a byte string: two overlapping little-endian
/// words cover every byte, the middle of a longer string is folded in 8
/// bytes a round (multiply-xorshift).
@_spi(Package) public enum SeededHash {
    /// Two words covering every byte of `raw`, which holds at least 1 byte
    /// (overlapping loads: for 1-16 bytes the words and the length
    /// determine the bytes).
    @inlinable @inline(__always)
    static func words(_ raw: ByteView) -> (UInt64, UInt64) {
        let n = raw.count
        if n >= 8 {
            return (raw.word(at: 0), raw.word(at: n &- 8))
        } else if n >= 4 {
            return (UInt64(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt32.self))),
                    UInt64(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self))))
        }
        return (UInt64(raw[0]), UInt64(raw[n &- 1]) &<< 8 | UInt64(raw[n &>> 1]))
    }

    /// The hash of `raw` (at least 1 byte) under `seed`, given its `words`.
    @inlinable @inline(__always)
    static func mix(_ raw: ByteView, words: (UInt64, UInt64), seed: UInt64) -> UInt64 {
        let n = raw.count
        var h = seed ^ (UInt64(truncatingIfNeeded: n) &* 0x9E37_79B9_7F4A_7C15)
        h = (h ^ words.0) &* 0xBF58_476D_1CE4_E5B9
        h = (h ^ (h &>> 29) ^ words.1) &* 0x94D0_49BB_1331_11EB
        var offset = 8
        while offset &+ 8 < n {  // the middle of a string longer than 16 bytes
            h = (h ^ (h &>> 29) ^ raw.word(at: offset)) &* 0xBF58_476D_1CE4_E5B9
            offset &+= 8
        }
        return h ^ (h &>> 32)
    }

    /// `words(_:)` of a span.
    @inlinable @inline(__always)
    @_spi(Package) public static func words(_ raw: RawSpan) -> (UInt64, UInt64) {
        @inline(__always) func body(_ p: ByteView) -> (UInt64, UInt64) { words(p) }
        return raw.withByteView(body)
    }

    /// `mix(_:words:seed:)` of a span.
    @inlinable @inline(__always)
    @_spi(Package) public static func mix(_ raw: RawSpan, words: (UInt64, UInt64), seed: UInt64) -> UInt64 {
        @inline(__always) func body(_ p: ByteView) -> UInt64 { mix(p, words: words, seed: seed) }
        return raw.withByteView(body)
    }

    /// `hash(_:seed:)` of a span.
    @inlinable
    @_spi(Package) public static func hash(_ raw: RawSpan, seed: UInt64) -> UInt64 {
        @inline(__always) func body(_ p: ByteView) -> UInt64 { hash(p, seed: seed) }
        return raw.withByteView(body)
    }

    /// The hash of `raw` under `seed`; any length, 0 included.
    @inlinable
    static func hash(_ raw: ByteView, seed: UInt64) -> UInt64 {
        if raw.isEmpty { return (seed &* 0xBF58_476D_1CE4_E5B9) ^ 0x94D0_49BB_1331_11EB }
        return mix(raw, words: words(raw), seed: seed)
    }
}
