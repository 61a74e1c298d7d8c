// Exact relations between subscription patterns (PROTOCOL.md "Access policy
// (1.1)": "Pattern containment is exact"), and segment access without
// allocation for code that walks a type segment by segment.
//
// Before editing: "exact" means over the *valid* event types, 255-byte bound
// included (`a.>` can hold more than `a.*` only while a two-segment tail still
// fits in 255 bytes). Each Bool relation is computed by the function that
// builds its shortest witness type, so the property tests in
// EventBusPolicyTests, which check every witness with `matches`, cover both.

extension EventType {
    /// Calls `body` with each segment of the type, in order, as a slice of
    /// `name` (no allocation); stops early when `body` returns false.
    /// Example: `order.created` gives `order`, then `created`.
    @inlinable
    @_spi(Package) public func forEachSegment(_ body: (Substring) -> Bool) {
        let utf8 = name.utf8
        var start = utf8.startIndex
        var index = start
        while index != utf8.endIndex {
            if utf8[index] == 0x2E {
                if !body(name[start..<index]) { return }
                start = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        _ = body(name[start..<utf8.endIndex])
    }

    /// Number of `.`-separated segments, e.g. 2 for `order.created`.
    @_spi(Package) public var segmentCount: Int {
        var count = 1
        for byte in name.utf8 where byte == 0x2E { count += 1 }
        return count
    }
}

extension Pattern {
    /// One segment of a pattern, by kind.
    @_spi(Package) public enum Segment: Hashable, Sendable {
        /// A name segment that matches only itself, e.g. `order`.
        case literal(Substring)
        /// `*`: exactly one segment.
        case star
        /// `>`: one or more segments (only ever the last).
        case tail
    }

    /// The segments by kind, e.g. `order.*.>` gives
    /// `[.literal("order"), .star, .tail]`.
    @_spi(Package) public var parsedSegments: [Segment] {
        segments.map { segment in
            switch segment {
            case "*": .star
            case ">": .tail
            default: .literal(segment)
            }
        }
    }

    /// Whether every valid type that `other` matches, this pattern matches too
    /// (`foo.>` contains `foo.*` and `foo.a.b`; `foo.*` does not contain
    /// `foo.>`, since `foo.a.b` is in one and not the other).
    @_spi(Package) public func contains(_ other: Pattern) -> Bool {
        other.shortestType(notMatchedBy: self) == nil
    }

    /// Whether some valid type is matched by both patterns (`foo.*` and
    /// `*.bar` overlap in `foo.bar`; `foo.*` and `foo.a.>` do not).
    /// (watchlist) Decided by walking both patterns' bytes, allocating
    /// nothing: the broker asks it of every serving pattern for each list of
    /// a watch (Broker+ServerWatch.swift), 16,004 of them from one uid. It
    /// is `shortestCommonType(with:) != nil` (PatternRelationTests checks
    /// that), the witness's length counted rather than built.
    @_spi(Package) public func overlaps(_ other: Pattern) -> Bool {
        var a = SegmentWalk(text), b = SegmentWalk(other.text)
        var segments = 0, bytes = 0
        while true {
            switch (a.next(), b.next()) {
            case (.end, .end):
                return bytes + segments - 1 <= 255
            case (.tail, .tail):
                // Both tails from here: one free segment (`a`) more.
                return bytes + segments + 1 <= 255
            case (.tail, .end), (.end, .tail), (.end, _), (_, .end):
                // A tail needs one segment more than the other has; otherwise the counts differ.
                return false
            case (.tail, let segment):
                return b.restFits(after: segment, bytes: bytes, segments: segments)
            case (let segment, .tail):
                return a.restFits(after: segment, bytes: bytes, segments: segments)
            case (.star, .star):
                bytes += 1
            case (.star, .literal(let length)), (.literal(let length), .star):
                bytes += length
            case (.literal(let length), .literal):
                guard a.lastSegment.elementsEqual(b.lastSegment) else { return false }
                bytes += length
            }
            segments += 1
        }
    }

    /// The shortest valid type (in bytes) that both patterns match, or nil when
    /// they are disjoint. Free segments become `a`. Example: `foo.*` and
    /// `*.bar` give `foo.bar`; `a.>` and `>` give `a.a`.
    @_spi(Package) public func shortestCommonType(with other: Pattern) -> EventType? {
        let p = Shape(self), q = Shape(other)
        let count: Int
        switch (p.tail, q.tail) {
        case (false, false):
            guard p.fixed.count == q.fixed.count else { return nil }
            count = p.fixed.count
        case (true, false):
            guard q.fixed.count > p.fixed.count else { return nil }
            count = q.fixed.count
        case (false, true):
            guard p.fixed.count > q.fixed.count else { return nil }
            count = p.fixed.count
        case (true, true):
            count = max(p.fixed.count, q.fixed.count) + 1
        }
        var parts: [Substring] = []
        parts.reserveCapacity(count)
        for i in 0..<count {
            switch (p.literal(at: i), q.literal(at: i)) {
            case let (a?, b?):
                guard a == b else { return nil }
                parts.append(a)
            case let (a?, nil): parts.append(a)
            case let (nil, b?): parts.append(b)
            case (nil, nil): parts.append("a")
            }
        }
        return Pattern.joinedType(parts)
    }

    /// The shortest valid type (in bytes) that this pattern matches and
    /// `container` does not, or nil when `container` contains this pattern.
    /// Example: `foo.>` not in `foo.*` gives `foo.a.a`; `foo.*` not in `foo.a`
    /// gives `foo.b`.
    @_spi(Package) public func shortestType(notMatchedBy container: Pattern) -> EventType? {
        let p = Shape(self), a = Shape(container)
        // Candidate segment counts of this pattern's types, shortest first;
        // beyond `a.fixed.count + 1` segments nothing about `a` changes.
        let first = p.tail ? p.fixed.count + 1 : p.fixed.count
        let last = p.tail ? max(first, a.fixed.count + 1) : first
        for count in first...last {
            let acceptsCount = a.tail ? count > a.fixed.count : count == a.fixed.count
            var differAt: Int? = nil
            if acceptsCount {
                for i in 0..<min(count, a.fixed.count) {
                    guard let wanted = a.literal(at: i) else { continue }  // `*` takes anything
                    if let mine = p.literal(at: i) {
                        if mine != wanted { differAt = i; break }
                    } else {
                        differAt = i
                        break
                    }
                }
                if differAt == nil { continue }
            }
            var parts: [Substring] = []
            parts.reserveCapacity(count)
            for i in 0..<count {
                if let mine = p.literal(at: i) {
                    parts.append(mine)
                } else if i == differAt {
                    parts.append(a.literal(at: i) == "a" ? "b" : "a")
                } else {
                    parts.append("a")
                }
            }
            // Longer counts only cost more bytes: the first witness that does
            // not fit means none fits.
            return Pattern.joinedType(parts)
        }
        return nil
    }

    /// A pattern's segments one at a time, by kind, over its bytes.
    private struct SegmentWalk {
        enum Segment { case literal(Int), star, tail, end }
        let utf8: String.UTF8View
        var position: String.Index
        var finished = false
        /// The bytes of the segment `next` gave last.
        private(set) var lastSegment: Substring.UTF8View

        init(_ text: String) {
            utf8 = text.utf8
            position = utf8.startIndex
            lastSegment = utf8[position..<position]
        }

        mutating func next() -> Segment {
            guard !finished else { return .end }
            let start = position
            var length = 0
            while position != utf8.endIndex && utf8[position] != 0x2E {
                position = utf8.index(after: position)
                length += 1
            }
            lastSegment = utf8[start..<position]
            if position == utf8.endIndex { finished = true } else { position = utf8.index(after: position) }
            if length == 1 {
                switch lastSegment.first {
                case 0x2A: return .star
                case 0x3E: return .tail
                default: break
                }
            }
            return .literal(length)
        }

        /// The other pattern's `>` takes `segment` and the rest of this one:
        /// whether the shortest type they make (`*` as `a`, this one's own
        /// `>` as one `a` more) fits in 255 bytes.
        mutating func restFits(after segment: Segment, bytes: Int, segments: Int) -> Bool {
            var bytes = bytes, segments = segments, segment = segment
            while true {
                switch segment {
                case .end: return bytes + segments - 1 <= 255
                case .tail, .star: bytes += 1
                case .literal(let length): bytes += length
                }
                segments += 1
                if case .tail = segment { return bytes + segments - 1 <= 255 }
                segment = next()
            }
        }
    }

    /// `fixed` segments (literal or `*`) and whether a `>` follows them.
    private struct Shape {
        var fixed: [Substring?]  // nil for `*`
        var tail: Bool

        init(_ pattern: Pattern) {
            var segments = pattern.segments
            tail = segments.last == ">"
            if tail { segments.removeLast() }
            fixed = segments.map { $0 == "*" ? nil : $0 }
        }

        /// The literal this pattern requires at segment `i`, nil when any
        /// segment will do (`*`, or inside the `>` tail).
        func literal(at i: Int) -> Substring? { i < fixed.count ? fixed[i] : nil }
    }

    /// `parts` joined with `.`, nil when over 255 bytes (no valid type).
    private static func joinedType(_ parts: [Substring]) -> EventType? {
        EventType(parts.joined(separator: "."))
    }
}
