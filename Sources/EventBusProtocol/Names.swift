// Event type names and subscription patterns (PROTOCOL.md "Names and patterns"),
// the same shape as NATS subjects: `.`-separated segments, `*` for exactly one
// segment, a trailing `>` for one or more.
//
// Before editing: both types can only be made through their failable
// initialisers, so holding one means it is valid.
import Glibc

/// A validated event type: 1 to 255 bytes of `.`-separated segments, each one or
/// more of `A-Z a-z 0-9 _ - :`. Case-sensitive. Example: `order.created`.
@_spi(Package) public struct EventType: Hashable, Sendable, CustomStringConvertible {
    /// The type as sent on the wire.
    @_spi(Package) public let name: String

    /// Validates `name`; nil when it breaks a rule of PROTOCOL.md "Names and patterns".
    @_spi(Package) public init?(_ name: String) {
        guard EventType.isValid(name.utf8) else { return nil }
        self.name = name
    }

    /// For callers that validated with `isValid(raw:)`.
    init(unchecked name: String) { self.name = name }

    /// Whether the bytes are a valid event type (the broker's per-publish check).
    static func isValid(raw: ByteView) -> Bool {
        let count = raw.count
        guard count >= 1 && count <= 255 else { return false }
        var segmentLength = 0
        for i in 0..<count {
            let b = raw[i]
            if b == 0x2E {
                if segmentLength == 0 { return false }
                segmentLength = 0
            } else if isSegmentByte(b) {
                segmentLength += 1
            } else {
                return false
            }
        }
        return segmentLength > 0
    }

    /// Whether `utf8` is a valid event type.
    @_spi(Package) public static func isValid<C: Collection>(_ utf8: C) -> Bool where C.Element == UInt8 {
        let bytes = Array(utf8)
        return bytes.withByteView { isValid(raw: $0) }
    }

    /// Whether the type starts with `eventbus.` (reserved for the broker).
    @_spi(Package) public var isReserved: Bool {
        guard name.utf8.first == 0x65 else { return false }  // "e"
        var utf8 = name.utf8.makeIterator()
        for expected in "eventbus.".utf8 {
            guard utf8.next() == expected else { return false }
        }
        return true
    }

    @_spi(Package) public var description: String { name }

    /// `A-Z a-z 0-9 _ - :`
    @inlinable @_spi(Package) public static func isSegmentByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x5F, 0x2D, 0x3A: return true
        default: return false
        }
    }
}

/// A validated subscription pattern: an event type in which a whole segment may
/// be `*` (exactly one segment) and the last segment may be `>` (one or more
/// segments). `>` alone matches every type. Examples: `order.*`, `order.>`.
@_spi(Package) public struct Pattern: Hashable, Sendable, CustomStringConvertible {
    /// The pattern as sent on the wire.
    @_spi(Package) public let text: String
    /// Whether it contains `*` or `>` (otherwise it matches exactly one type).
    @_spi(Package) public let hasWildcards: Bool

    /// Validates `text`; nil when it breaks a rule of PROTOCOL.md "Names and patterns".
    /// (watchlist) One pass over the bytes, allocating nothing: a bridge
    /// reads a watch's list of up to 16,384 patterns from one uid at once.
    @_spi(Package) public init?(_ text: String) {
        var total = 0, length = 0, wild = false
        /// The current segment holds a `*` or `>` (then it must be that byte alone).
        var special: UInt8 = 0
        for b in text.utf8 {
            total += 1
            if b == 0x2E {
                // A segment ended, not the last: `>` may not end it.
                guard length > 0, special == 0 || (length == 1 && special == 0x2A) else { return nil }
                if special != 0 { wild = true }
                length = 0
                special = 0
                continue
            }
            if b == 0x2A || b == 0x3E {
                special = b
            } else if !EventType.isSegmentByte(b) {
                return nil
            }
            length += 1
        }
        guard total >= 1 && total <= 255, length > 0, special == 0 || length == 1 else { return nil }
        self.text = text
        self.hasWildcards = wild || special != 0
    }

    /// The segments of the pattern, e.g. `["order", "*"]`, slices of `text`
    /// found by its bytes: a pattern is ASCII, so a `.` byte is a `.`
    /// character, and `String.split` walked grapheme clusters at ~20 ns a
    /// byte (watchlist: 40 % of a 16,004-pattern watch list's half second on
    /// the broker's loop, broker and link together).
    @_spi(Package) public var segments: [Substring] {
        let utf8 = text.utf8
        var segments: [Substring] = []
        var start = utf8.startIndex
        var index = start
        while index != utf8.endIndex {
            if utf8[index] == 0x2E {
                segments.append(text[start..<index])
                start = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        segments.append(text[start..<utf8.endIndex])
        return segments
    }

    /// Whether this pattern matches `type` (the broker uses an index with the
    /// same semantics). Walks both names' bytes segment by segment; allocates nothing.
    @_spi(Package) public func matches(_ type: EventType) -> Bool {
        text.withByteView { p in type.name.withByteView { t in Pattern.matches(p, t) } }
    }

    /// `matches(_:_:)` of spans.
    @_spi(Package) public static func matches(_ p: RawSpan, _ t: RawSpan) -> Bool {
        p.withByteView { p in t.withByteView { t in matches(p, t) } }
    }

    /// The one byte-level matcher (`matches(_:)` and the broker's replays,
    /// which test stored types' bytes, use it): `p` (a valid pattern's
    /// UTF-8) against `t` (a valid type's UTF-8). Allocates nothing.
    static func matches(_ p: ByteView, _ t: ByteView) -> Bool {
        var i = 0  // start of the pattern's segment
        var j = 0  // start of the type's segment; past `t.count` once every segment is used
        while i < p.count {
            var pe = i
            while pe < p.count && p[pe] != 0x2E { pe += 1 }
            let single = pe - i == 1
            if single && p[i] == 0x3E { return j < t.count }  // `>`: one or more segments left
            guard j < t.count else { return false }
            var te = j
            while te < t.count && t[te] != 0x2E { te += 1 }
            if !(single && p[i] == 0x2A) {
                guard pe - i == te - j, p.extracting(i..<pe).sameBytes(as: t.extracting(j..<te)) else { return false }
            }
            i = pe + 1
            j = te + 1
        }
        return j > t.count
    }

    @_spi(Package) public var description: String { text }
}
