// The validating scanner's quick form for the broker's specialised publish
// path (PublishScanner.swift): one value, one loop, the open containers on a
// bit stack, the position in a register, no error to describe. It accepts
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
    public static func validateQuickly(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = 512) -> JSONToken? {
        precondition(maxDepth <= 512, "the quick scan keeps at most 512 open containers")
        var scanner = JSONScanner(bytes, maxDepth: maxDepth)
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
        guard position < end, let base = bytes.baseAddress else { return nil }
        let start = position
        switch base.load(fromByteOffset: start, as: UInt8.self) {
        case 0x22:
            guard let escaped = quickString() else { return nil }
            return JSONToken(start: start, end: position, kind: .string(escaped: escaped))
        case 0x7B:
            guard quickContainers(depth: depth) else { return nil }
            return JSONToken(start: start, end: position, kind: .object)
        case 0x5B:
            guard quickContainers(depth: depth) else { return nil }
            return JSONToken(start: start, end: position, kind: .array)
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

    /// The object or array at `position` with everything nested in it;
    /// `depth` containers are open around it (the limit is `maxDepth`, as
    /// `scanObject(depth:)` counts). Returns false where the general
    /// scanner throws.
    @usableFromInline
    mutating func quickContainers(depth: Int) -> Bool {
        // Bit i of `kinds` (words of 64) is set when the container at level
        // i + 1 is an array; `level` containers are open.
        var kinds: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        let capacity = 512
        return withUnsafeMutableBytes(of: &kinds) { raw in
            let stack = raw.baseAddress.unsafelyUnwrapped.assumingMemoryBound(to: UInt64.self)
            var level = 0
            // Opens the container at `position` ({ or [); false past the limit.
            func open(_ isArray: Bool) -> Bool {
                guard depth &+ level &+ 1 <= maxDepth, level < capacity else { return false }
                let word = level &>> 6, bit: UInt64 = 1 &<< UInt64(truncatingIfNeeded: level & 63)
                if isArray { stack[word] |= bit } else { stack[word] &= ~bit }
                level &+= 1
                position &+= 1
                return true
            }
            func innermostIsArray() -> Bool {
                let i = level &- 1
                return stack[i &>> 6] & (1 &<< UInt64(truncatingIfNeeded: i & 63)) != 0
            }
            guard open(byte(position) == 0x5B) else { return false }
            // At the start of a container: it may close at once.
            var justOpened = true
            while true {
                skipWhitespace()
                guard position < end else { return false }
                let isArray = innermostIsArray()
                if justOpened && byte(position) == (isArray ? 0x5D : 0x7D) {
                    position &+= 1
                    level &-= 1
                } else {
                    if !isArray {
                        // "key" : value
                        guard byte(position) == 0x22, quickString() != nil else { return false }
                        skipWhitespace()
                        guard position < end, byte(position) == 0x3A else { return false }
                        position &+= 1
                        skipWhitespace()
                        guard position < end else { return false }
                    }
                    let b = byte(position)
                    if b == 0x22 {
                        guard quickString() != nil else { return false }
                    } else if b == 0x7B || b == 0x5B {
                        guard open(b == 0x5B) else { return false }
                        justOpened = true
                        continue
                    } else {
                        guard quickScalar() != nil else { return false }
                    }
                }
                // After a value (or a closed container): `,` for the next one,
                // or the close of the innermost container, perhaps several.
                while true {
                    guard level > 0 else { return true }
                    skipWhitespace()
                    guard position < end else { return false }
                    let b = byte(position)
                    position &+= 1
                    if b == 0x2C { break }
                    guard b == (innermostIsArray() ? 0x5D : 0x7D) else { return false }
                    level &-= 1
                }
                justOpened = false
            }
        }
    }
}
