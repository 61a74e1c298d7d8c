// JSONScanner's validation of a line-safe JSON text (the broker's requests),
// resumable: the text is handed in as it arrives, a piece at a time, and
// each call looks only at the bytes it was not shown before (issue 37: a
// large frame is validated while it comes in, so no piece of the broker's
// work is a whole frame's parse). Grammar, error reason and error offset are
// JSONScanner's exactly (JSONScanner.swift); it reports each member of a
// top-level object as `JSONScanner.scanMembers` does.
//
// Before editing: a call that is not `final` must never report what depends
// on where the text ends: it stops before an escape with fewer than 12
// bytes after its backslash (`\uD83D\uDE00`), a UTF-8 sequence with fewer
// than 4 after its lead byte, and at the end of a number or a literal cut
// short; `unexpectedEnd` and a number's end come only in the final call.
// A CR is never whitespace here (`lineSafe`); the caller leaves a trailing
// CR out of a call that is not final (the splitter drops a CR before the LF).
// Offsets are into the whole text; the buffer may move between calls.

/// A JSON text validated as it arrives (`advance` with more of it each time).
struct JSONStreamValidator {
    private enum State {
        /// A value (the text's, after `:`, after `,` in an array).
        case value
        /// After `[`: `]` or a value.
        case arrayFirst
        /// After `{`: `}` or a key.
        case objectFirst
        /// After `,` in an object: a key.
        case objectKey
        /// After a key: `:`.
        case colon
        /// After a value: `,`, the container's end, or (at the top) the end of the text.
        case afterValue
        /// In a string from `tokenStart` (a key when `stringIsKey`).
        case string
        /// In a number from `tokenStart`, at `numberPhase`.
        case number
        /// In `true`, `false` or `null` from `tokenStart`.
        case literal
    }

    /// The first byte not validated yet.
    private(set) var position = 0
    /// The first error, once found; nothing more is looked at then.
    private(set) var error: JSONSyntaxError? = nil
    /// The text's value is an object (known from its first byte on).
    private(set) var topIsObject = false
    /// The text's value is complete (only whitespace may follow).
    var isComplete: Bool { depth == 0 && state == .afterValue }

    private var state = State.value
    /// Containers open; bit `i` of `objects` says whether the one at depth
    /// `i + 1` is an object (`maxDepth` bits).
    private var depth = 0
    private var objects: [UInt64]
    private let maxDepth: Int
    private var tokenStart = 0
    private var stringIsKey = false
    private var stringEscaped = false
    /// 1: a first digit wanted (after `-`); 2: after the integer part (`.`,
    /// `e` or the end); 3: in the integer's digits; 4: a fraction digit
    /// wanted; 5: in the fraction's digits; 6: after `e` (sign or digit);
    /// 7: an exponent digit wanted; 8: in the exponent's digits.
    private var numberPhase = 1
    private var numberInteger = true
    /// The key of the top-level member being read, and where its value began.
    private var memberKey = JSONToken(start: 0, end: 0, kind: .null)
    private var memberValueStart = 0

    init(maxDepth: Int = ProtocolConstants.maxDepth) {
        self.maxDepth = maxDepth
        objects = [UInt64](repeating: 0, count: (maxDepth + 63) / 64)
    }

    /// Bytes it holds beyond its own size.
    var heldBytes: Int { objects.capacity * 8 }

    /// Validates `text[position..<end]`.
    /// - Parameters:
    ///   - text: the text from its first byte (at least `end` bytes).
    ///   - final: `end` is the end of the text: what is cut short is an error.
    ///   - member: called for each member of a top-level object, in order,
    ///     with its key token and value token, as `JSONScanner.scanMembers` does.
    mutating func advance(_ text: ByteView, end: Int, final: Bool, member: (JSONToken, JSONToken) -> Void) {
        let text = text.extracting(0..<end)
        while error == nil {
            switch state {
            case .value, .arrayFirst:
                skipWhitespace(text)
                guard position < end else { return endOfInput(final) }
                let b = text[position]
                if state == .arrayFirst && b == 0x5D {
                    position += 1
                    closeContainer(member)
                } else {
                    begin(b)
                }
            case .objectFirst, .objectKey:
                skipWhitespace(text)
                guard position < end else { return endOfInput(final) }
                let b = text[position]
                if state == .objectFirst && b == 0x7D {
                    position += 1
                    closeContainer(member)
                } else if b == 0x22 {
                    beginString(key: true)
                } else {
                    fail(.unexpectedByte, at: position)
                }
            case .colon:
                skipWhitespace(text)
                guard position < end else { return endOfInput(final) }
                guard text[position] == 0x3A else { return fail(.unexpectedByte, at: position) }
                position += 1
                state = .value
            case .afterValue:
                skipWhitespace(text)
                if depth == 0 {
                    if position < end { fail(.trailingBytes, at: position) }
                    return
                }
                guard position < end else { return endOfInput(final) }
                let b = text[position]
                position += 1
                let inObject = isObject(depth)
                if b == 0x2C {
                    state = inObject ? .objectKey : .value
                } else if b == (inObject ? 0x7D : 0x5D) {
                    closeContainer(member)
                } else {
                    fail(.unexpectedByte, at: position - 1)
                }
            case .string:
                guard scanString(text, final: final, member) else { return }
            case .number:
                guard scanNumber(text, final: final, member) else { return }
            case .literal:
                guard scanLiteral(text, final: final, member) else { return }
            }
        }
    }

    private mutating func fail(_ reason: JSONSyntaxError.Reason, at offset: Int) {
        error = JSONSyntaxError(reason, at: offset)
    }

    /// Out of bytes between tokens: wait for more, or (final) the text ended too soon.
    private mutating func endOfInput(_ final: Bool) {
        if final { fail(.unexpectedEnd, at: position) }
    }

    private mutating func skipWhitespace(_ text: ByteView) {
        while position < text.count {
            let b = text[position]
            guard b == 0x20 || b == 0x09 || b == 0x0A else { return }
            position += 1
        }
    }

    private func isObject(_ level: Int) -> Bool {
        objects[(level - 1) >> 6] & (1 << UInt64((level - 1) & 63)) != 0
    }

    /// A value starts with `b` at `position`.
    private mutating func begin(_ b: UInt8) {
        if depth == 1 { memberValueStart = position }
        switch b {
        case 0x22:
            beginString(key: false)
        case 0x7B, 0x5B:
            guard depth + 1 <= maxDepth else { return fail(.tooDeep, at: position) }
            if depth == 0 { topIsObject = b == 0x7B }
            depth += 1
            let word = (depth - 1) >> 6, bit: UInt64 = 1 << UInt64((depth - 1) & 63)
            if b == 0x7B { objects[word] |= bit } else { objects[word] &= ~bit }
            position += 1
            state = b == 0x7B ? .objectFirst : .arrayFirst
        case 0x74, 0x66, 0x6E:
            tokenStart = position
            position += 1
            state = .literal
        case 0x2D, 0x30...0x39:
            tokenStart = position
            if b == 0x2D { position += 1 }
            numberPhase = 1
            numberInteger = true
            state = .number
        default:
            fail(.unexpectedByte, at: position)
        }
    }

    private mutating func beginString(key: Bool) {
        tokenStart = position
        position += 1
        stringIsKey = key
        stringEscaped = false
        state = .string
    }

    /// A value ended at `position`: a top-level member is complete when it was one.
    private mutating func valueEnded(_ kind: JSONKind, _ member: (JSONToken, JSONToken) -> Void) {
        if depth == 1 && topIsObject {
            member(memberKey, JSONToken(start: memberValueStart, end: position, kind: kind))
        }
        state = .afterValue
    }

    /// The container at `depth` ended (its closing byte read).
    private mutating func closeContainer(_ member: (JSONToken, JSONToken) -> Void) {
        let kind: JSONKind = isObject(depth) ? .object : .array
        depth -= 1
        valueEnded(kind, member)
    }

    /// - Returns: false when it stopped (more bytes needed, or an error).
    private mutating func scanString(_ text: ByteView, final: Bool, _ member: (JSONToken, JSONToken) -> Void) -> Bool {
        let end = text.count
        while true {
            position = JSONScanner.plainRunEnd(text, from: position)
            guard position < end else {
                endOfInput(final)
                return false
            }
            let b = text[position]
            if b == 0x22 {
                position += 1
                if stringIsKey {
                    if depth == 1 { memberKey = JSONToken(start: tokenStart, end: position, kind: .string(escaped: stringEscaped)) }
                    state = .colon
                } else {
                    valueEnded(.string(escaped: stringEscaped), member)
                }
                return true
            }
            if b < 0x20 && b != 0x5C {
                fail(.controlCharacterInString, at: position)
                return false
            }
            // An escape (at most 12 bytes) or a UTF-8 sequence (at most 4):
            // JSONScanner's own code, once all of it that can matter is here.
            if b == 0x5C { stringEscaped = true }
            guard final || end - position >= (b == 0x5C ? 12 : 4) else { return false }
            var scanner = JSONScanner(text, maxDepth: maxDepth, lineSafe: true)
            scanner.position = position
            do {
                if b == 0x5C { try scanner.scanEscape() } else { try scanner.scanUTF8Sequence(lead: b) }
            } catch {
                self.error = error
                return false
            }
            position = scanner.position
        }
    }

    /// `JSONScanner.scanNumber` a byte at a time.
    /// - Returns: false when it stopped (more bytes needed, or an error).
    private mutating func scanNumber(_ text: ByteView, final: Bool, _ member: (JSONToken, JSONToken) -> Void) -> Bool {
        let end = text.count
        while true {
            guard position < end else {
                guard final else { return false }
                switch numberPhase {
                case 2, 3, 5, 8:
                    valueEnded(.number(integer: numberInteger), member)
                    return true
                default:
                    fail(.invalidNumber, at: tokenStart)
                    return false
                }
            }
            let b = text[position]
            let digit = b &- 0x30 < 10
            switch numberPhase {
            case 1:
                guard digit else { fail(.invalidNumber, at: tokenStart); return false }
                position += 1
                numberPhase = b == 0x30 ? 2 : 3
            case 3, 5, 8:
                if digit {
                    position += 1
                    while position < end, text[position] &- 0x30 < 10 { position += 1 }
                } else if numberPhase == 8 || (numberPhase == 5 && b | 0x20 != 0x65) {
                    valueEnded(.number(integer: numberInteger), member)
                    return true
                } else {
                    numberPhase = numberPhase == 3 ? 2 : 6
                    if numberPhase == 6 {
                        position += 1
                        numberInteger = false
                    }
                }
            case 2:
                if b == 0x2E {
                    position += 1
                    numberInteger = false
                    numberPhase = 4
                } else if b | 0x20 == 0x65 {
                    position += 1
                    numberInteger = false
                    numberPhase = 6
                } else {
                    valueEnded(.number(integer: numberInteger), member)
                    return true
                }
            case 4, 7:
                guard digit else { fail(.invalidNumber, at: tokenStart); return false }
                position += 1
                numberPhase = numberPhase == 4 ? 5 : 8
            default:  // 6
                if b == 0x2B || b == 0x2D {
                    position += 1
                    numberPhase = 7
                } else if digit {
                    position += 1
                    numberPhase = 8
                } else {
                    fail(.invalidNumber, at: tokenStart)
                    return false
                }
            }
        }
    }

    /// `JSONScanner.expectLiteral`, resumable.
    /// - Returns: false when it stopped (more bytes needed, or an error).
    private mutating func scanLiteral(_ text: ByteView, final: Bool, _ member: (JSONToken, JSONToken) -> Void) -> Bool {
        let first = text[tokenStart]
        // The literal's bytes after the first: "rue", "alse", "ull".
        let (rest, count, kind): (UInt32, Int, JSONKind) = first == 0x74 ? (0x65_7572, 3, .true) : first == 0x66 ? (0x6573_6C61, 4, .false) : (0x6C_6C75, 3, .null)
        while position - tokenStart - 1 < count {
            guard position < text.count else {
                endOfInput(final)
                return false
            }
            let i = position - tokenStart - 1
            guard text[position] == UInt8(truncatingIfNeeded: rest >> (UInt32(i) * 8)) else {
                fail(.unexpectedByte, at: position)
                return false
            }
            position += 1
        }
        valueEnded(kind, member)
        return true
    }
}
