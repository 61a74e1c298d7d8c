// Copies out of a `RawSpan`: the one way code outside the memory-owning
// files keeps bytes it was lent (issue 35: spans in signatures, pointers
// only where memory is owned); and the two byte tests the broker makes of
// a span (equality, a byte's presence), read within its bounds.
//
// Before editing: a span handed to a callback lives only during the call;
// whatever must outlast it is copied here, never by reaching for its pointer.

extension Array where Element == UInt8 {
    /// A copy of `bytes`.
    @inlinable package init(copying bytes: RawSpan) {
        self = bytes.withUnsafeBytes { Array($0) }
    }

    /// Appends a copy of `bytes`.
    @inlinable package mutating func append(copying bytes: RawSpan) {
        bytes.withUnsafeBytes { append(contentsOf: $0) }
    }
}

extension RawSpan {
    /// Whether both spans hold the same bytes (8 at a time).
    @inlinable
    package func sameBytes(as other: RawSpan) -> Bool {
        let count = byteCount
        guard other.byteCount == count else { return false }
        var i = 0
        while i &+ 8 <= count {
            if unsafeLoadUnaligned(fromUncheckedByteOffset: i, as: UInt64.self)
                != other.unsafeLoadUnaligned(fromUncheckedByteOffset: i, as: UInt64.self) { return false }
            i &+= 8
        }
        while i < count {
            if unsafeLoad(fromUncheckedByteOffset: i, as: UInt8.self) != other.unsafeLoad(fromUncheckedByteOffset: i, as: UInt8.self) { return false }
            i &+= 1
        }
        return true
    }
}

extension String {
    /// `bytes` decoded as UTF-8 (invalid sequences become U+FFFD, as `String(decoding:as:)`).
    @inlinable package init(decodingUTF8 bytes: RawSpan) {
        self = bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }
}
