// Matching a pattern against raw type bytes without allocating, for the
// replays (history and retained events, PROTOCOL.md "Retained events and
// history (1.1)"), which test one pattern against thousands of stored types;
// and a cheap conservative overlap test between two patterns, for choosing
// which of a connection's subscriptions a replay must de-duplicate against.
//
// Before editing: matching is `Pattern.matches(_:_:)` on bytes, the one
// byte-level matcher (EventBusProtocol's Names.swift); RetentionTests checks
// it against `Pattern.matches` on a table. Both inputs are already validated
// (a `Pattern`, a type from a frame the broker built), so no byte is checked
// for validity here.
@_spi(Package) import EventBusProtocol

/// A pattern compiled to its UTF-8 bytes.
struct PatternMatcher {
    let pattern: Pattern
    let bytes: [UInt8]

    init(_ pattern: Pattern) {
        self.pattern = pattern
        self.bytes = Array(pattern.text.utf8)
    }

    /// Whether the pattern matches the event type whose bytes are `type`.
    func matches(_ type: RawSpan) -> Bool {
        Pattern.matches(bytes.span.bytes, type)
    }

    /// Whether the pattern matches `type`.
    func matches(_ type: String) -> Bool {
        matches(type.utf8Span.span.bytes)
    }

    /// Whether some type might match both patterns: false only when they are
    /// certainly disjoint (a literal segment differs at the same position, or
    /// the segment counts cannot agree). A `>` is taken to overlap whatever
    /// follows (the 255-byte bound is ignored), so the answer errs towards true.
    func mayOverlap(_ other: PatternMatcher) -> Bool {
        PatternMatcher.mayOverlap(bytes.span, other.bytes.span)
    }

    static func mayOverlap(_ a: Span<UInt8>, _ b: Span<UInt8>) -> Bool {
        var ai = 0, bi = 0
        while true {
            let aTail = a[ai] == 0x3E && ai + 1 == a.count
            let bTail = b[bi] == 0x3E && bi + 1 == b.count
            if aTail || bTail { return true }
            let aEnd = segmentEnd(a, ai), bEnd = segmentEnd(b, bi)
            let aStar = aEnd - ai == 1 && a[ai] == 0x2A
            let bStar = bEnd - bi == 1 && b[bi] == 0x2A
            if !aStar && !bStar {
                guard aEnd - ai == bEnd - bi else { return false }
                for k in 0..<(aEnd - ai) where a[ai + k] != b[bi + k] { return false }
            }
            let aDone = aEnd == a.count, bDone = bEnd == b.count
            if aDone || bDone { return aDone && bDone }
            ai = aEnd + 1
            bi = bEnd + 1
        }
    }

    private static func segmentEnd(_ p: Span<UInt8>, _ start: Int) -> Int {
        var i = start
        while i < p.count && p[i] != 0x2E { i += 1 }
        return i
    }
}
