// Validating JSON scanner over raw bytes: RFC 8259 grammar, strict UTF-8
// (RFC 3629), bounded nesting. It never builds values; it reports token ranges
// so callers can splice validated bytes (PROTOCOL.md "Framing": `data` is
// forwarded byte-for-byte, never re-serialized).
//
// Before editing: this is the broker's per-frame hot path. Keep it free of
// allocation and of Foundation; every branch must keep `position <= end`.

/// What a scanned JSON value is. Ranges are byte offsets into the scanned buffer.
@_spi(Package) public enum JSONKind: Equatable, Sendable {
    /// A string; `escaped` tells whether it contains a backslash escape.
    case string(escaped: Bool)
    /// A number; `integer` when it has neither fraction nor exponent.
    case number(integer: Bool)
    case object
    case array
    case `true`
    case `false`
    case null
}

/// One scanned value: `bytes[start..<end]` is its exact source text
/// (for a string, including the quotes).
@_spi(Package) public struct JSONToken: Equatable, Sendable {
    @_spi(Package) public var start: Int
    @_spi(Package) public var end: Int
    @_spi(Package) public var kind: JSONKind

    @inlinable @_spi(Package) public init(start: Int, end: Int, kind: JSONKind) {
        self.start = start
        self.end = end
        self.kind = kind
    }

    /// The token's length in bytes.
    @inlinable @_spi(Package) public var count: Int { end - start }

    /// The token's byte offsets, for `RawSpan.extracting`.
    @inlinable @_spi(Package) public var range: Range<Int> { start..<end }
}

/// Why bytes are not one valid JSON text; `offset` is where the scanner stopped.
@_spi(Package) public struct JSONSyntaxError: Error, Equatable, Sendable, CustomStringConvertible {
    @_spi(Package) public enum Reason: String, Sendable {
        case unexpectedEnd = "unexpected end of frame"
        case unexpectedByte = "unexpected character"
        case invalidUTF8 = "invalid UTF-8"
        case controlCharacterInString = "unescaped control character in string"
        case invalidEscape = "invalid escape in string"
        case loneSurrogate = "\\u escape is a lone UTF-16 surrogate"
        case invalidNumber = "invalid number"
        case tooDeep = "nesting deeper than the limit"
        case trailingBytes = "bytes after the JSON value"
        /// (`lineSafe` scanners) A raw CR, U+0085, U+2028 or U+2029: a line
        /// reader would split the frame there (PROTOCOL-NOTES.md "Framing").
        case lineBreak = "raw CR, U+0085, U+2028 or U+2029 (a line reader splits there: write a space, or \\r, \\u0085, \\u2028, \\u2029 in a string)"
    }

    @_spi(Package) public var reason: Reason
    @_spi(Package) public var offset: Int

    @_spi(Package) public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    @_spi(Package) public var description: String { "\(reason.rawValue) at byte \(offset)" }
}

/// A cursor over a byte buffer that validates JSON values.
///
/// The buffer must outlive the scanner. Nesting is limited to `maxDepth`
/// containers (PROTOCOL.md "Framing": deeper than 512 is `bad_frame`).
@_spi(Package) public struct JSONScanner {
    @_spi(Package) public let bytes: ByteView
    @_spi(Package) public var position: Int
    @_spi(Package) public let maxDepth: Int
    /// Refuses what a line reader would split a frame at (the broker's
    /// requests, PROTOCOL-NOTES.md "Framing"): a raw CR is then not
    /// whitespace, and a raw U+0085, U+2028 or U+2029 in a string is an
    /// error (`.lineBreak`). Checked only where those bytes can be: on the
    /// whitespace and non-ASCII slow paths.
    @_spi(Package) public let lineSafe: Bool

    /// - Parameters:
    ///   - bytes: the text to scan; not copied.
    ///   - maxDepth: the deepest nesting of objects and arrays accepted (default 512).
    ///   - lineSafe: refuse a raw CR, U+0085, U+2028, U+2029 (default false).
    @inlinable init(_ bytes: ByteView, maxDepth: Int = 512, lineSafe: Bool = false) {
        self.bytes = bytes
        self.position = 0
        self.maxDepth = maxDepth
        self.lineSafe = lineSafe
    }

    @inline(__always) @usableFromInline var end: Int { bytes.count }

    @inline(__always) @usableFromInline func byte(_ i: Int) -> UInt8 { bytes[i] }

    /// Skips JSON whitespace (space, tab, CR, LF; no CR when `lineSafe`).
    @inlinable @inline(__always) @_spi(Package) public mutating func skipWhitespace() {
        if position < end && bytes[position] > 0x20 { return }  // the common case: nothing to skip
        while position < end {
            let b = bytes[position]
            if b == 0x20 || b == 0x09 || b == 0x0A || (b == 0x0D && !lineSafe) { position += 1 } else { return }
        }
    }

    /// Whether only whitespace remains.
    @_spi(Package) public mutating func atEndAfterWhitespace() -> Bool {
        skipWhitespace()
        return position == end
    }

    /// `validate(_:maxDepth:lineSafe:)` of a span.
    @_spi(Package) public static func validate(_ bytes: RawSpan, maxDepth: Int = 512, lineSafe: Bool = false) throws(JSONSyntaxError) -> JSONToken {
        try bytes.withByteView { (raw) throws(JSONSyntaxError) -> JSONToken in try validate(raw, maxDepth: maxDepth, lineSafe: lineSafe) }
    }

    /// Validates one whole JSON text: whitespace, one value, whitespace, end.
    /// - Returns: the value's token.
    /// - Throws: `JSONSyntaxError` for anything RFC 8259 or RFC 3629 rejects.
    static func validate(_ bytes: ByteView, maxDepth: Int = 512, lineSafe: Bool = false) throws(JSONSyntaxError) -> JSONToken {
        var scanner = JSONScanner(bytes, maxDepth: maxDepth, lineSafe: lineSafe)
        scanner.skipWhitespace()
        let token = try scanner.scanValue(depth: 0)
        scanner.skipWhitespace()
        if scanner.position != scanner.end { throw JSONSyntaxError(.trailingBytes, at: scanner.position) }
        return token
    }

    /// Scans one value starting at `position` (no leading whitespace) and
    /// leaves `position` just after it.
    /// - Parameter depth: containers already open around this value.
    @_spi(Package) public mutating func scanValue(depth: Int) throws(JSONSyntaxError) -> JSONToken {
        guard position < end else { throw JSONSyntaxError(.unexpectedEnd, at: position) }
        let start = position
        switch byte(position) {
        case UInt8(ascii: "\""):
            let escaped = try scanString()
            return JSONToken(start: start, end: position, kind: .string(escaped: escaped))
        case UInt8(ascii: "{"):
            try scanObject(depth: depth + 1)
            return JSONToken(start: start, end: position, kind: .object)
        case UInt8(ascii: "["):
            try scanArray(depth: depth + 1)
            return JSONToken(start: start, end: position, kind: .array)
        case UInt8(ascii: "t"):
            try expectLiteral(startingWith: 0x74)
            return JSONToken(start: start, end: position, kind: .true)
        case UInt8(ascii: "f"):
            try expectLiteral(startingWith: 0x66)
            return JSONToken(start: start, end: position, kind: .false)
        case UInt8(ascii: "n"):
            try expectLiteral(startingWith: 0x6E)
            return JSONToken(start: start, end: position, kind: .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let integer = try scanNumber()
            return JSONToken(start: start, end: position, kind: .number(integer: integer))
        default:
            throw JSONSyntaxError(.unexpectedByte, at: position)
        }
    }

    /// Expects the literal whose bytes are `word` (little-endian, `count`
    /// of them) at `position`; an error names the first byte that differs.
    @usableFromInline mutating func expectLiteral(_ word: UInt32, count: Int) throws(JSONSyntaxError) {
        for i in 0..<count {
            guard position < end else { throw JSONSyntaxError(.unexpectedEnd, at: position) }
            guard byte(position) == UInt8(truncatingIfNeeded: word &>> (UInt32(i) &* 8)) else { throw JSONSyntaxError(.unexpectedByte, at: position) }
            position += 1
        }
    }

    /// Expects `true`, `false` or `null` at `position` (`first` its first byte).
    @inline(__always) @usableFromInline mutating func expectLiteral(startingWith first: UInt8) throws(JSONSyntaxError) {
        // The literal's bytes after the first: "rue", "alse", "ull".
        let (rest, count): (UInt32, Int) = first == 0x74 ? (0x65_7572, 3) : first == 0x66 ? (0x6573_6C61, 4) : (0x6C_6C75, 3)
        position += 1
        if end &- position >= 4 {
            // The common case at once: all of it there (one load, one compare).
            let mask: UInt32 = count == 4 ? ~0 : 0xFF_FFFF
            if bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self) & mask == rest {
                position &+= count
                return
            }
        }
        try expectLiteral(rest, count: count)
    }

    /// Scans `"..."` with its escapes and UTF-8; returns whether it had escapes.
    @_spi(Package) public mutating func scanString() throws(JSONSyntaxError) -> Bool {
        position += 1  // opening quote
        var escaped = false
        while true {
            position = JSONScanner.plainRunEnd(bytes, from: position)
            guard position < end else { throw JSONSyntaxError(.unexpectedEnd, at: position) }
            let b = byte(position)
            if b == 0x22 {
                position += 1
                return escaped
            } else if b == 0x5C {
                escaped = true
                try scanEscape()
            } else if b < 0x20 {
                throw JSONSyntaxError(.controlCharacterInString, at: position)
            } else {
                // Non-ASCII text tends to come in runs: stay in the exact
                // validator while it lasts.
                try scanUTF8Sequence(lead: b)
                while position < end, byte(position) >= 0x80 { try scanUTF8Sequence(lead: byte(position)) }
            }
        }
    }

    /// The offset of the first byte at or after `start` that ends a run of
    /// plain string bytes (`"`, `\\`, a control character or non-ASCII), or
    /// `bytes.count`. 16 bytes at a time (`SIMD16<UInt8>`: one signed compare
    /// catches control and non-ASCII bytes, two equality compares the quote
    /// and the backslash); the last 1-15 bytes by one more load of the
    /// buffer's last 16 bytes, the lanes before `start` masked off (byte by
    /// byte only in a buffer shorter than 16 bytes).
    @inline(__always) @usableFromInline
    static func plainRunEnd(_ bytes: ByteView, from start: Int) -> Int {
        var position = start
        let end = bytes.count
        if end &- position >= 16 {
            // Most strings end in their first 16 bytes: look there inline,
            // and go to the loop for long runs only past them.
            let lanes = specialLanes(bytes, position)
            if lanes.low | lanes.high != 0 { return position &+ firstLane(lanes) }
            position &+= 16
            if end &- position >= 64 {
                position = longRunEnd(bytes, from: position, end: end)
                if position < end &- 15 { return position }  // found in a whole block
            }
            while end &- position >= 16 {
                let lanes = specialLanes(bytes, position)
                if lanes.low | lanes.high != 0 { return position &+ firstLane(lanes) }
                position &+= 16
            }
        }
        guard position < end else { return position }
        if end >= 16 {
            var lanes = specialLanes(bytes, end &- 16)
            // Lane i is byte end - 16 + i; the lanes below `position` were seen.
            let seen = UInt64(truncatingIfNeeded: position &- (end &- 16)) &* 8  // 8...120 bits
            if seen < 64 {
                lanes.low &= ~0 &<< seen
            } else {
                lanes.low = 0
                lanes.high &= ~0 &<< (seen &- 64)
            }
            if lanes.low | lanes.high != 0 { return end &- 16 &+ firstLane(lanes) }
            return end
        }
        while position < end {
            let b = bytes[position]
            if b >= 0x20 && b < 0x80 && b != 0x22 && b != 0x5C { position &+= 1 } else { break }
        }
        return position
    }

    /// `plainRunEnd` past a run's first 16 bytes: 64 bytes per turn while
    /// they last (four masks or-ed into one test), then 16.
    /// - Returns: the special byte's offset, or where fewer than 16 bytes
    ///   are left (at least `end - 15`).
    @usableFromInline
    static func longRunEnd(_ bytes: ByteView, from start: Int, end: Int) -> Int {
        var position = start
        while end &- position >= 64 {
            let p = position
            let a = specialVector(bytes, p), b = specialVector(bytes, p &+ 16), c = specialVector(bytes, p &+ 32), d = specialVector(bytes, p &+ 48)
            let any = unsafeBitCast(a | b | c | d, to: SIMD2<UInt64>.self)
            if any[0] | any[1] != 0 { break }  // the 16-byte loop below finds it
            position &+= 64
        }
        while end &- position >= 16 {
            let lanes = specialLanes(bytes, position)
            if lanes.low | lanes.high != 0 { return position &+ firstLane(lanes) }
            position &+= 16
        }
        return position
    }

    /// The 16 bytes at offset `p` as lanes of 0xFF where the byte is `"`, `\\`,
    /// below 0x20 or non-ASCII, 0x00 elsewhere.
    @inline(__always) @usableFromInline
    static func specialVector(_ bytes: ByteView, _ p: Int) -> SIMD16<UInt8> {
        let v = bytes.loadUnaligned(fromByteOffset: p, as: SIMD16<UInt8>.self)
        // Signed: non-ASCII bytes are negative, so `< 0x20` takes them too.
        let special = unsafeBitCast(v, to: SIMD16<Int8>.self) .< SIMD16<Int8>(repeating: 0x20)
            .| v .== SIMD16<UInt8>(repeating: 0x22) .| v .== SIMD16<UInt8>(repeating: 0x5C)
        return unsafeBitCast(special, to: SIMD16<UInt8>.self)
    }

    /// The 16 bytes at offset `p` as two words whose bytes are 0xFF where the byte
    /// is `"`, `\\`, below 0x20 or non-ASCII, 0x00 elsewhere.
    @inline(__always) @usableFromInline
    static func specialLanes(_ bytes: ByteView, _ p: Int) -> (low: UInt64, high: UInt64) {
        let words = unsafeBitCast(specialVector(bytes, p), to: SIMD2<UInt64>.self)
        return (UInt64(littleEndian: words[0]), UInt64(littleEndian: words[1]))
    }

    /// The index of the first 0xFF byte of two words that have one.
    @inline(__always) @usableFromInline
    static func firstLane(_ lanes: (low: UInt64, high: UInt64)) -> Int {
        lanes.low != 0 ? lanes.low.trailingZeroBitCount &>> 3 : 8 &+ lanes.high.trailingZeroBitCount &>> 3
    }

    @usableFromInline mutating func scanEscape() throws(JSONSyntaxError) {
        let at = position
        position += 1
        guard position < end else { throw JSONSyntaxError(.unexpectedEnd, at: position) }
        switch byte(position) {
        case 0x22, 0x5C, 0x2F, 0x62, 0x66, 0x6E, 0x72, 0x74:
            position += 1
        case 0x75:  // u
            position += 1
            let unit = try scanHex4()
            if unit >= 0xD800 && unit <= 0xDBFF {
                // Must be followed by \u low surrogate.
                guard position + 1 < end, byte(position) == 0x5C, byte(position + 1) == 0x75 else {
                    throw JSONSyntaxError(.loneSurrogate, at: at)
                }
                position += 2
                let low = try scanHex4()
                guard low >= 0xDC00 && low <= 0xDFFF else { throw JSONSyntaxError(.loneSurrogate, at: at) }
            } else if unit >= 0xDC00 && unit <= 0xDFFF {
                throw JSONSyntaxError(.loneSurrogate, at: at)
            }
        default:
            throw JSONSyntaxError(.invalidEscape, at: at)
        }
    }

    @usableFromInline mutating func scanHex4() throws(JSONSyntaxError) -> UInt32 {
        guard position + 4 <= end else { throw JSONSyntaxError(.unexpectedEnd, at: end) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = byte(position)
            let digit: UInt32
            switch b {
            case 0x30...0x39: digit = UInt32(b - 0x30)
            case 0x41...0x46: digit = UInt32(b - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(b - 0x61 + 10)
            default: throw JSONSyntaxError(.invalidEscape, at: position)
            }
            value = value << 4 | digit
            position += 1
        }
        return value
    }

    /// Validates one multi-byte UTF-8 sequence (RFC 3629 table 3-7: no overlongs,
    /// no surrogates, nothing above U+10FFFF).
    @usableFromInline mutating func scanUTF8Sequence(lead: UInt8) throws(JSONSyntaxError) {
        let at = position
        var need: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: need = 1
        case 0xE0: need = 2; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: need = 2
        case 0xED: need = 2; high = 0x9F
        case 0xF0: need = 3; low = 0x90
        case 0xF1...0xF3: need = 3
        case 0xF4: need = 3; high = 0x8F
        default: throw JSONSyntaxError(.invalidUTF8, at: at)
        }
        position += 1
        guard position + need <= end else { throw JSONSyntaxError(.invalidUTF8, at: at) }
        let first = byte(position)
        guard first >= low && first <= high else { throw JSONSyntaxError(.invalidUTF8, at: at) }
        position += 1
        need -= 1
        while need > 0 {
            let b = byte(position)
            guard b & 0xC0 == 0x80 else { throw JSONSyntaxError(.invalidUTF8, at: at) }
            position += 1
            need -= 1
        }
        // U+0085 is C2 85; U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
        if lineSafe && (lead == 0xC2 || lead == 0xE2) && first <= 0x85 {
            if lead == 0xC2 ? first == 0x85 : first == 0x80 && byte(at &+ 2) & 0xFE == 0xA8 {
                throw JSONSyntaxError(.lineBreak, at: at)
            }
        }
    }

    /// Scans a number per RFC 8259 section 6; returns whether it is an integer
    /// (no fraction, no exponent). Any magnitude is accepted.
    @_spi(Package) public mutating func scanNumber() throws(JSONSyntaxError) -> Bool {
        let start = position
        if byte(position) == 0x2D { position += 1 }
        guard position < end else { throw JSONSyntaxError(.invalidNumber, at: start) }
        let first = byte(position)
        if first == 0x30 {
            position += 1
        } else if first >= 0x31 && first <= 0x39 {
            position += 1
            while position < end, byte(position) &- 0x30 < 10 { position += 1 }
        } else {
            throw JSONSyntaxError(.invalidNumber, at: start)
        }
        var integer = true
        if position < end && byte(position) == 0x2E {
            integer = false
            position += 1
            let digits = position
            while position < end, byte(position) &- 0x30 < 10 { position += 1 }
            guard position > digits else { throw JSONSyntaxError(.invalidNumber, at: start) }
        }
        if position < end && (byte(position) | 0x20) == 0x65 {
            integer = false
            position += 1
            if position < end && (byte(position) == 0x2B || byte(position) == 0x2D) { position += 1 }
            let digits = position
            while position < end, byte(position) &- 0x30 < 10 { position += 1 }
            guard position > digits else { throw JSONSyntaxError(.invalidNumber, at: start) }
        }
        return integer
    }

    @usableFromInline mutating func scanObject(depth: Int) throws(JSONSyntaxError) {
        try scanMembers(depth: depth) { _, _ in }
    }

    /// Scans an object starting at its `{` and calls `member(key, value)` for
    /// each member in order (the key token includes its quotes). `depth` counts
    /// this object. Leaves `position` just after the `}`. The one member loop
    /// that validation, the broker's envelope and the clients' reader share.
    @inlinable
    @_spi(Package) public mutating func scanMembers(depth: Int, _ member: (JSONToken, JSONToken) -> Void) throws(JSONSyntaxError) {
        guard depth <= maxDepth else { throw JSONSyntaxError(.tooDeep, at: position) }
        position += 1
        skipWhitespace()
        guard position < end else { throw JSONSyntaxError(.unexpectedEnd, at: position) }
        if byte(position) == 0x7D { position += 1; return }
        while true {
            guard position < end else { throw JSONSyntaxError(.unexpectedEnd, at: position) }
            guard byte(position) == 0x22 else { throw JSONSyntaxError(.unexpectedByte, at: position) }
            let keyStart = position
            let escaped = try scanString()
            let key = JSONToken(start: keyStart, end: position, kind: .string(escaped: escaped))
            skipWhitespace()
            guard position < end else { throw JSONSyntaxError(.unexpectedEnd, at: position) }
            guard byte(position) == 0x3A else { throw JSONSyntaxError(.unexpectedByte, at: position) }
            position += 1
            skipWhitespace()
            let value = try scanValue(depth: depth)
            member(key, value)
            skipWhitespace()
            guard position < end else { throw JSONSyntaxError(.unexpectedEnd, at: position) }
            let b = byte(position)
            position += 1
            if b == 0x2C { skipWhitespace(); continue }
            if b == 0x7D { return }
            throw JSONSyntaxError(.unexpectedByte, at: position - 1)
        }
    }

    /// Scans a whole text that is one object (whitespace around it allowed),
    /// calling `member` for each top-level member; `position` must be at the `{`.
    /// - Throws: `JSONSyntaxError`, including `.trailingBytes`.
    @inlinable
    @_spi(Package) public mutating func scanTopLevelObject(_ member: (JSONToken, JSONToken) -> Void) throws(JSONSyntaxError) {
        try scanMembers(depth: 1, member)
        skipWhitespace()
        if position != end { throw JSONSyntaxError(.trailingBytes, at: position) }
    }

    @usableFromInline mutating func scanArray(depth: Int) throws(JSONSyntaxError) {
        try scanElements(depth: depth) { _ in }
    }

    /// Scans an array starting at its `[` and calls `element(value)` for each
    /// element in order. `depth` counts this array. Leaves `position` just
    /// after the `]`. The one element loop (validation, the clients' reader).
    @inlinable
    @_spi(Package) public mutating func scanElements(depth: Int, _ element: (JSONToken) -> Void) throws(JSONSyntaxError) {
        guard depth <= maxDepth else { throw JSONSyntaxError(.tooDeep, at: position) }
        position += 1
        skipWhitespace()
        guard position < end else { throw JSONSyntaxError(.unexpectedEnd, at: position) }
        if byte(position) == 0x5D { position += 1; return }
        while true {
            skipWhitespace()
            element(try scanValue(depth: depth))
            skipWhitespace()
            guard position < end else { throw JSONSyntaxError(.unexpectedEnd, at: position) }
            let b = byte(position)
            position += 1
            if b == 0x2C { continue }
            if b == 0x5D { return }
            throw JSONSyntaxError(.unexpectedByte, at: position - 1)
        }
    }
}
