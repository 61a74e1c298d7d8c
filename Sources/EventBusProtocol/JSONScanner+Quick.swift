// The validating scanner's quick form for the broker's specialised publish
// path (PublishScanner.swift): one value, one loop, the open containers on a
// bit stack (64 deep; deeper values go to the general scanner), the
// position in a local, no error to describe. It accepts
// exactly what `scanValue(depth:)` accepts and returns the same token; where
// `scanValue` would throw it returns nil, and the caller hands the whole
// frame to the general decoder, which says what is wrong.
//
// Before editing: eventbus-fuzz checks `validateQuickly` against `validate`
// on every input (verdict and token); keep the grammar here in step with
// JSONScanner.swift. Escapes, non-ASCII bytes and numbers go to the general
// scanner's own routines, so only the structure is written twice.

extension JSONScanner {
    /// Validates one whole JSON text as `validate` does.
    /// - Parameter maxDepth: at most 512 (`ProtocolConstants.maxDepth`).
    /// - Returns: the value's token, or nil where `validate` throws.
    @_spi(Package) public static func validateQuickly(_ bytes: RawSpan, maxDepth: Int = 512, lineSafe: Bool = false) -> JSONToken? {
        bytes.withByteView { validateQuickly($0, maxDepth: maxDepth, lineSafe: lineSafe) }
    }

    /// `validateQuickly` on a view of the bytes.
    static func validateQuickly(_ bytes: ByteView, maxDepth: Int = 512, lineSafe: Bool = false) -> JSONToken? {
        precondition(maxDepth <= 512, "the quick scan keeps at most 512 open containers")
        var scanner = JSONScanner(bytes, maxDepth: maxDepth, lineSafe: lineSafe)
        scanner.skipWhitespace()
        guard let token = scanner.quickValue(depth: 0) else { return nil }
        scanner.skipWhitespace()
        return scanner.position == scanner.end ? token : nil
    }

    /// Scans one value starting at `position`, as `scanValue(depth:)` does,
    /// leaving `position` just after it.
    /// - Returns: its token, or nil where `scanValue` would throw
    ///   (`position` is then anywhere).
    @usableFromInline
    mutating func quickValue(depth: Int) -> JSONToken? {
        guard position < end else { return nil }
        let start = position
        switch bytes[start] {
        case 0x22:
            guard let escaped = quickString() else { return nil }
            return JSONToken(start: start, end: position, kind: .string(escaped: escaped))
        case 0x7B, 0x5B:
            switch quickContainers(depth: depth) {
            case .valid:
                return JSONToken(start: start, end: position, kind: bytes[start] == 0x7B ? .object : .array)
            case .invalid:
                // A raw CR stopped the quick loop: whitespace unless
                // `lineSafe`, for the general scanner to tell (a cold path:
                // the frame is refused or goes to the general decoder).
                guard !lineSafe, bytes.firstOffset(of: 0x0D, in: start..<end) != nil else { return nil }
                position = start
                return try? scanValue(depth: depth)
            case .tooDeepToTell:
                position = start
                return try? scanValue(depth: depth)
            }
        default:
            guard let kind = quickScalar() else { return nil }
            return JSONToken(start: start, end: position, kind: kind)
        }
    }

    /// A string at `position` (its opening quote): whether it has escapes,
    /// or nil where `scanString` throws.
    @inline(__always) @usableFromInline
    mutating func quickString() -> Bool? {
        var escaped = false
        position &+= 1
        while true {
            position = JSONScanner.plainRunEnd(bytes, from: position)
            guard position < end else { return nil }
            let b = byte(position)
            if b == 0x22 {
                position &+= 1
                return escaped
            }
            // The rare bytes: the general scanner's own checks.
            if b == 0x5C {
                escaped = true
                guard (try? scanEscape()) != nil else { return nil }
            } else if b < 0x20 {
                return nil
            } else {
                guard (try? scanUTF8Sequence(lead: b)) != nil else { return nil }
            }
        }
    }

    /// A number or literal at `position`: its kind, or nil.
    @inline(__always) @usableFromInline
    mutating func quickScalar() -> JSONKind? {
        switch byte(position) {
        case 0x74:
            guard (try? expectLiteral(startingWith: 0x74)) != nil else { return nil }
            return .true
        case 0x66:
            guard (try? expectLiteral(startingWith: 0x66)) != nil else { return nil }
            return .false
        case 0x6E:
            guard (try? expectLiteral(startingWith: 0x6E)) != nil else { return nil }
            return .null
        case 0x2D, 0x30...0x39:
            guard let integer = try? scanNumber() else { return nil }
            return .number(integer: integer)
        default:
            return nil
        }
    }

    /// What `quickContainers` found.
    @usableFromInline
    enum QuickVerdict {
        case valid
        case invalid
        /// Nested deeper than its bit stack: ask `scanValue`.
        case tooDeepToTell
    }

    /// The object or array at `position` with everything nested in it;
    /// `depth` containers are open around it (the limit is `maxDepth`, as
    /// `scanObject(depth:)` counts). `.invalid` where the general scanner
    /// throws; `position` is after the value when `.valid`.
    @usableFromInline
    mutating func quickContainers(depth: Int) -> QuickVerdict {
        let base = bytes
        let end = self.end
        // The position lives in `p` and goes to `position` only around the
        // general scanner's routines (escapes, non-ASCII, numbers, literals).
        var p = position
        // Bit i is set when the container at level i + 1 is an array;
        // `level` containers are open.
        var kinds: UInt64 = 0
        var level = 0
        var justOpened = true
        // Open the first container.
        if depth &+ 1 > maxDepth { return .invalid }
        if Self.at(base, p) == 0x5B { kinds = 1 }
        level = 1
        p &+= 1
        while true {
            Self.skipWhitespace(base, &p, end)
            guard p < end else { return .invalid }
            let isArray = kinds & (1 &<< UInt64(truncatingIfNeeded: level &- 1)) != 0
            if justOpened && Self.at(base, p) == (isArray ? 0x5D : 0x7D) {
                p &+= 1
                level &-= 1
            } else {
                if !isArray {
                    // "key" : value
                    guard Self.at(base, p) == 0x22 else { return .invalid }
                    let after = Self.plainStringEnd(bytes, p)
                    if after > 0 { p = after } else if !quickString(at: &p) { return .invalid }
                    Self.skipWhitespace(base, &p, end)
                    guard p < end, Self.at(base, p) == 0x3A else { return .invalid }
                    p &+= 1
                    Self.skipWhitespace(base, &p, end)
                    guard p < end else { return .invalid }
                }
                let b = Self.at(base, p)
                if b == 0x22 {
                    let after = Self.plainStringEnd(bytes, p)
                    if after > 0 { p = after } else if !quickString(at: &p) { return .invalid }
                } else if b == 0x7B || b == 0x5B {
                    if depth &+ level &+ 1 > maxDepth { return .invalid }
                    if level == 64 { return .tooDeepToTell }
                    let bit: UInt64 = 1 &<< UInt64(truncatingIfNeeded: level)
                    if b == 0x5B { kinds |= bit } else { kinds &= ~bit }
                    level &+= 1
                    p &+= 1
                    justOpened = true
                    continue
                } else {
                    position = p
                    guard quickScalar() != nil else { return .invalid }
                    p = position
                }
            }
            // After a value (or a closed container): `,` for the next one,
            // or the close of the innermost container, perhaps several.
            while true {
                guard level > 0 else {
                    position = p
                    return .valid
                }
                Self.skipWhitespace(base, &p, end)
                guard p < end else { return .invalid }
                let b = Self.at(base, p)
                p &+= 1
                if b == 0x2C { break }
                let innermostIsArray = kinds & (1 &<< UInt64(truncatingIfNeeded: level &- 1)) != 0
                guard b == (innermostIsArray ? 0x5D : 0x7D) else { return .invalid }
                level &-= 1
            }
            justOpened = false
        }
    }

    /// Where the string at `start` ends (after its closing quote) when it
    /// is all plain bytes, else 0 (it has an escape, a non-ASCII or control
    /// byte, or no end).
    @inline(__always) @usableFromInline
    static func plainStringEnd(_ bytes: ByteView, _ start: Int) -> Int {
        let close = plainRunEnd(bytes, from: start &+ 1)
        return close < bytes.count && bytes[close] == 0x22 ? close &+ 1 : 0
    }

    /// A string at `p` by `quickString`. False where `scanString` throws.
    @usableFromInline
    mutating func quickString(at p: inout Int) -> Bool {
        position = p
        guard quickString() != nil else { return false }
        p = position
        return true
    }

    @inline(__always) @usableFromInline
    static func at(_ base: ByteView, _ i: Int) -> UInt8 { base[i] }

    /// `skipWhitespace` on a local position, space, tab and LF only: a CR
    /// stops it (the general scanner decides: whitespace, or with
    /// `lineSafe` an error), so the loop has no flag to test.
    @inline(__always) @usableFromInline
    static func skipWhitespace(_ base: ByteView, _ p: inout Int, _ end: Int) {
        while p < end {
            let b = at(base, p)
            guard b == 0x20 || b == 0x09 || b == 0x0A else { return }
            p &+= 1
        }
    }
}
