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
    @_spi(Package) public static func words(_ raw: UnsafeRawBufferPointer) -> (UInt64, UInt64) {
        let n = raw.count
        let p = raw.baseAddress.unsafelyUnwrapped
        if n >= 8 {
            return (UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)),
                    UInt64(littleEndian: p.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)))
        } else if n >= 4 {
            return (UInt64(UInt32(littleEndian: p.loadUnaligned(as: UInt32.self))),
                    UInt64(UInt32(littleEndian: p.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self))))
        }
        return (UInt64(p.load(as: UInt8.self)),
                UInt64(p.load(fromByteOffset: n &- 1, as: UInt8.self)) &<< 8 | UInt64(p.load(fromByteOffset: n &>> 1, as: UInt8.self)))
    }

    /// The hash of `raw` (at least 1 byte) under `seed`, given its `words`.
    @inlinable @inline(__always)
    @_spi(Package) public static func mix(_ raw: UnsafeRawBufferPointer, words: (UInt64, UInt64), seed: UInt64) -> UInt64 {
        let n = raw.count
        let p = raw.baseAddress.unsafelyUnwrapped
        var h = seed ^ (UInt64(truncatingIfNeeded: n) &* 0x9E37_79B9_7F4A_7C15)
        h = (h ^ words.0) &* 0xBF58_476D_1CE4_E5B9
        h = (h ^ (h &>> 29) ^ words.1) &* 0x94D0_49BB_1331_11EB
        var offset = 8
        while offset &+ 8 < n {  // the middle of a string longer than 16 bytes
            h = (h ^ (h &>> 29) ^ UInt64(littleEndian: p.loadUnaligned(fromByteOffset: offset, as: UInt64.self))) &* 0xBF58_476D_1CE4_E5B9
            offset &+= 8
        }
        return h ^ (h &>> 32)
    }

    /// `words(_:)` of a span.
    @inlinable @inline(__always)
    @_spi(Package) public static func words(_ raw: RawSpan) -> (UInt64, UInt64) {
        @inline(__always) func body(_ p: UnsafeRawBufferPointer) -> (UInt64, UInt64) { words(p) }
        return raw.withUnsafeBytes(body)
    }

    /// `mix(_:words:seed:)` of a span.
    @inlinable @inline(__always)
    @_spi(Package) public static func mix(_ raw: RawSpan, words: (UInt64, UInt64), seed: UInt64) -> UInt64 {
        @inline(__always) func body(_ p: UnsafeRawBufferPointer) -> UInt64 { mix(p, words: words, seed: seed) }
        return raw.withUnsafeBytes(body)
    }

    /// `hash(_:seed:)` of a span.
    @inlinable
    @_spi(Package) public static func hash(_ raw: RawSpan, seed: UInt64) -> UInt64 {
        @inline(__always) func body(_ p: UnsafeRawBufferPointer) -> UInt64 { hash(p, seed: seed) }
        return raw.withUnsafeBytes(body)
    }

    /// The hash of `raw` under `seed`; any length, 0 included.
    @inlinable
    @_spi(Package) public static func hash(_ raw: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        if raw.isEmpty { return (seed &* 0xBF58_476D_1CE4_E5B9) ^ 0x94D0_49BB_1331_11EB }
        return mix(raw, words: words(raw), seed: seed)
    }
}
