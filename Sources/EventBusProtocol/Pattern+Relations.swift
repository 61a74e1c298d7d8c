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
    @_spi(Package) public func overlaps(_ other: Pattern) -> Bool {
        shortestCommonType(with: other) != nil
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
