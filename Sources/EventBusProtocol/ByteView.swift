// The one view of raw bytes in EventBusProtocol (issue 35): where a `RawSpan`
// cannot do, because the bytes must sit in a struct (the JSON scanner's
// buffer, the encoder's `EventBytes`), the code holds a `ByteView`, a start
// and a count. Its members mirror `UnsafeRawBufferPointer`'s names (`count`,
// a byte subscript, `loadUnaligned`, `extracting`, `firstIndex(of:)`), and
// the byte tests the broker makes of a span (`sameBytes`, `firstOffset`,
// `hasBytes`, `package`: on the span directly, so other targets inline them)
// live here too. Every other Protocol file reads
// bytes through this one; the pointers stay in this file and in
// OwnedMemory.swift (what Protocol allocates and writes).
//
// Before editing: the invariant. A view never outlives the memory it was
// made from. It is made only inside a `with…` closure (`RawSpan.withByteView`,
// `Array.withByteView`, `String.withByteView`, `withByteView(of:)`), from a
// static string (immortal), or by the owner of the memory (`init(unsafe:)`,
// called only in owner files: Core's EventWriter, OutboundQueue, HistoryRing;
// `StampBytes`), and it is kept only in values that live no longer than that
// (a scanner during one call, an `EventBytes` during one write). The other
// way out is `withSpan`, whose span lives during the call only.
// Checks: the bridges, `extracting` and the searches check their bounds in
// every build (`precondition`: MemoryGuardExitTests); the per-byte subscript
// and loads check in debug builds (`assert`), as `UnsafeRawBufferPointer`'s
// do: their offsets come from the scanner, which keeps `position <= count`,
// and a check per byte there costs the broker's per-frame path.
import Glibc

/// A view of `count` bytes that someone else owns (invariant in the header of
/// ByteView.swift): valid only while that memory is.
@_spi(Package) public struct ByteView {
    /// The first byte (a valid, never-read address when `count` is 0).
    @usableFromInline let start: UnsafeRawPointer
    /// How many bytes.
    @_spi(Package) public let count: Int

    /// The bytes of `raw`, for the owner of that memory only (see the header).
    @inlinable @inline(__always)
    @_spi(Package) public init(unsafe raw: UnsafeRawBufferPointer) {
        start = raw.baseAddress ?? ByteView.emptyStart
        count = raw.count
    }

    /// The `count` bytes at `start`, for the owner of that memory only.
    @inlinable @inline(__always)
    @_spi(Package) public init(unsafeStart start: UnsafeRawPointer, count: Int) {
        assert(count >= 0, "a byte view of a negative count")
        self.start = start
        self.count = count
    }

    /// The bytes of a static string (immortal: any code may keep this view).
    @inlinable @inline(__always)
    @_spi(Package) public init(_ text: StaticString) {
        start = UnsafeRawPointer(text.utf8Start)
        count = text.utf8CodeUnitCount
    }

    /// No bytes.
    @inlinable @inline(__always)
    @_spi(Package) public init() {
        start = ByteView.emptyStart
        count = 0
    }

    /// An address for an empty view: aligned, never read.
    @usableFromInline static var emptyStart: UnsafeRawPointer { UnsafeRawPointer(bitPattern: 0x40).unsafelyUnwrapped }

    @inlinable @_spi(Package) public var isEmpty: Bool { count == 0 }

    /// The byte at `i` (checked in debug builds: see the header).
    @inlinable @inline(__always)
    @_spi(Package) public subscript(i: Int) -> UInt8 {
        assert(i >= 0 && i < count, "byte view read out of bounds")
        return start.load(fromByteOffset: i, as: UInt8.self)
    }

    /// The `T` at `offset`, unaligned (checked in debug builds).
    @inlinable @inline(__always)
    @_spi(Package) public func loadUnaligned<T: BitwiseCopyable>(fromByteOffset offset: Int = 0, as type: T.Type) -> T {
        assert(offset >= 0 && offset <= count &- MemoryLayout<T>.size, "byte view load out of bounds")
        return start.loadUnaligned(fromByteOffset: offset, as: T.self)
    }

    /// 8 bytes at `offset`, little-endian.
    @inlinable @inline(__always)
    @_spi(Package) public func word(at offset: Int) -> UInt64 {
        UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// The bytes at `range` (offsets of this view).
    /// - Precondition: `range` is within the view.
    @inlinable @inline(__always)
    @_spi(Package) public func extracting(_ range: Range<Int>) -> ByteView {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "byte view range out of bounds")
        return ByteView(start: start + range.lowerBound, count: range.count)
    }

    /// The bytes from `offset` to the end.
    @inlinable @inline(__always)
    @_spi(Package) public func extracting(from offset: Int) -> ByteView { extracting(offset..<count) }

    @inlinable @inline(__always)
    init(start: UnsafeRawPointer, count: Int) {
        self.start = start
        self.count = count
    }

    /// The offset of the first `byte` in `range` (memchr), nil if none.
    /// - Precondition: `range` is within the view.
    @inlinable @inline(__always)
    @_spi(Package) public func firstOffset(of byte: UInt8, in range: Range<Int>) -> Int? {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "byte view range out of bounds")
        guard !range.isEmpty, let hit = memchr(start + range.lowerBound, Int32(byte), range.count) else { return nil }
        return start.distance(to: UnsafeRawPointer(hit))
    }

    /// The offset of the first `byte`, nil if none.
    @inlinable @inline(__always)
    @_spi(Package) public func firstIndex(of byte: UInt8) -> Int? { firstOffset(of: byte, in: 0..<count) }

    /// Whether both views hold the same bytes (8 at a time).
    @inlinable
    @_spi(Package) public func sameBytes(as other: ByteView) -> Bool {
        guard other.count == count else { return false }
        var i = 0
        while i &+ 8 <= count {
            if start.loadUnaligned(fromByteOffset: i, as: UInt64.self) != other.start.loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
            i &+= 8
        }
        while i < count {
            if start.load(fromByteOffset: i, as: UInt8.self) != other.start.load(fromByteOffset: i, as: UInt8.self) { return false }
            i &+= 1
        }
        return true
    }

    /// Whether the bytes at `offset` are those of `text` (false when the view ends first).
    @inlinable @inline(__always)
    @_spi(Package) public func hasBytes(_ text: StaticString, at offset: Int) -> Bool {
        let k = text.utf8CodeUnitCount
        guard offset >= 0, count &- offset >= k else { return false }
        guard k > 0 else { return true }
        return memcmp(start + offset, text.utf8Start, k) == 0
    }

    /// Calls `body` with the bytes as a span, which lives during the call only.
    @inlinable @inline(__always)
    @_spi(Package) public func withSpan<R, E: Error>(_ body: (RawSpan) throws(E) -> R) throws(E) -> R {
        try body(RawSpan(_unsafeBytes: UnsafeRawBufferPointer(start: start, count: count)))
    }

    /// A copy of the bytes.
    @inlinable @_spi(Package) public var array: [UInt8] { [UInt8](UnsafeRawBufferPointer(start: start, count: count)) }
}

extension ByteView: RandomAccessCollection {
    @_spi(Package) public typealias Index = Int
    @_spi(Package) public typealias Indices = Range<Int>
    @inlinable @_spi(Package) public var startIndex: Int { 0 }
    @inlinable @_spi(Package) public var endIndex: Int { count }
    @inlinable @_spi(Package) public var indices: Range<Int> { 0..<count }

    @inlinable @_spi(Package) public func withContiguousStorageIfAvailable<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R? {
        try body(UnsafeBufferPointer(start: start.assumingMemoryBound(to: UInt8.self), count: count))
    }
}

// MARK: The bridges in: a view made inside a closure, valid during it only.

extension RawSpan {
    /// Calls `body` with a view of the span's bytes, valid during the call only.
    @inlinable @inline(__always)
    @_spi(Package) public func withByteView<R, E: Error>(_ body: (ByteView) throws(E) -> R) throws(E) -> R {
        try withUnsafeBytes { (raw) throws(E) -> R in try body(ByteView(unsafe: raw)) }
    }

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

    /// Whether the bytes at `offset` are those of `text` (false when the span ends first).
    @inlinable @inline(__always) package func hasBytes(_ text: StaticString, at offset: Int) -> Bool {
        let k = text.utf8CodeUnitCount
        guard offset >= 0, byteCount - offset >= k else { return false }
        guard k > 0 else { return true }
        return withUnsafeBytes { raw in memcmp(raw.baseAddress! + offset, text.utf8Start, k) == 0 }
    }
}

extension Array where Element == UInt8 {
    /// Calls `body` with a view of the array's bytes, valid during the call only.
    @inlinable @inline(__always)
    @_spi(Package) public func withByteView<R, E: Error>(_ body: (ByteView) throws(E) -> R) throws(E) -> R {
        try span.bytes.withByteView(body)
    }

    /// A copy of `bytes`.
    @inlinable package init(copying bytes: RawSpan) {
        self = bytes.withUnsafeBytes { Array($0) }
    }

    /// Appends a copy of `bytes`.
    @inlinable package mutating func append(copying bytes: RawSpan) {
        bytes.withUnsafeBytes { append(contentsOf: $0) }
    }

    /// Appends a copy of `bytes`.
    @inlinable @inline(__always) @_spi(Package) public mutating func append(copying bytes: ByteView) {
        append(contentsOf: UnsafeRawBufferPointer(start: bytes.start, count: bytes.count))
    }
}

extension String {
    /// `bytes` decoded as UTF-8 (invalid sequences become U+FFFD, as `String(decoding:as:)`).
    @inlinable package init(decodingUTF8 bytes: RawSpan) {
        self = bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// `bytes` decoded as UTF-8 (invalid sequences become U+FFFD).
    @inlinable @_spi(Package) public init(decodingUTF8 bytes: ByteView) {
        self = String(decoding: UnsafeRawBufferPointer(start: bytes.start, count: bytes.count), as: UTF8.self)
    }

    /// Calls `body` with the string's UTF-8 bytes (made contiguous first if
    /// need be); the span lives during the call only. (`utf8Span` is a call
    /// into the standard library each time: ~50 instructions on the bridge's
    /// per-event path; this inlines.)
    @inlinable @inline(__always) package func withUTF8Bytes<R>(_ body: (RawSpan) -> R) -> R {
        var text = self
        return text.withUTF8 { body(RawSpan(_unsafeElements: $0)) }
    }

    /// Calls `body` with a view of the string's UTF-8 bytes (made contiguous
    /// first if need be), valid during the call only.
    @inlinable @inline(__always) @_spi(Package) public func withByteView<R>(_ body: (ByteView) -> R) -> R {
        var text = self
        return text.withUTF8 { body(ByteView(unsafe: UnsafeRawBufferPointer($0))) }
    }
}

/// Calls `body` with a view of `value`'s bytes (a copy of it on the stack),
/// valid during the call only.
@inlinable @inline(__always)
@_spi(Package) public func withByteView<T: BitwiseCopyable, R>(of value: T, _ body: (ByteView) -> R) -> R {
    withUnsafeBytes(of: value) { body(ByteView(unsafe: $0)) }
}
