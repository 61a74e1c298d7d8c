// Searching the bytes of a `RawSpan` with the C library's SIMD memchr, and
// comparing them with a static string's (memcmp): the one place code outside
// the memory-owning files does so (issue 35), next to RawSpan+Copy.swift
// (which compares two spans, `sameBytes(as:)`).
//
// Before editing: every call stays inside the span it is given (memchr is
// handed the range's length, memcmp a length checked against the span's);
// nothing here keeps a pointer past the call.
import Glibc

extension RawSpan {
    /// The offset of the first `byte` in `range` (offsets of this span), nil if none.
    /// - Precondition: `range` is within the span.
    @inlinable @inline(__always) package func firstOffset(of byte: UInt8, in range: Range<Int>) -> Int? {
        precondition(range.lowerBound >= 0 && range.upperBound <= byteCount, "range outside the span")
        guard !range.isEmpty else { return nil }
        return withUnsafeBytes { raw -> Int? in
            guard let hit = memchr(raw.baseAddress! + range.lowerBound, Int32(byte), range.count) else { return nil }
            return raw.baseAddress!.distance(to: UnsafeRawPointer(hit))
        }
    }

    /// The offset of the first `byte` at or after `start`, nil if none.
    @inlinable @inline(__always) package func firstOffset(of byte: UInt8, from start: Int = 0) -> Int? {
        firstOffset(of: byte, in: start..<byteCount)
    }
}

extension String {
    /// Calls `body` with the string's UTF-8 bytes (made contiguous first if
    /// need be); the span lives during the call only. (`utf8Span` is a call
    /// into the standard library each time: ~50 instructions on the bridge's
    /// per-event path; this inlines.)
    @inlinable @inline(__always) package func withUTF8Bytes<R>(_ body: (RawSpan) -> R) -> R {
        var text = self
        return text.withUTF8 { body(RawSpan(_unsafeElements: $0)) }
    }
}

extension RawSpan {
    /// Whether the bytes at `offset` are those of `text` (false when the span ends first).
    @inlinable @inline(__always) package func hasBytes(_ text: StaticString, at offset: Int) -> Bool {
        let k = text.utf8CodeUnitCount
        guard offset >= 0, byteCount - offset >= k else { return false }
        guard k > 0 else { return true }
        return withUnsafeBytes { raw in memcmp(raw.baseAddress! + offset, text.utf8Start, k) == 0 }
    }
}
