// Reading the top-level members of one JSON object (a whole frame), and
// compacting validated JSON.
//
// Before editing: `scan` is on the broker's per-frame path (the envelope);
// `members` allocates and is for clients and tests.

/// One top-level member of a scanned object: decoded key, raw value token.
@_spi(Package) public struct JSONMember: Equatable, Sendable {
    @_spi(Package) public var key: String
    @_spi(Package) public var value: JSONToken
}

@_spi(Package) public enum JSONObject {
    /// Errors: not JSON at all, or JSON that is not an object.
    @_spi(Package) public enum ReadError: Error, Equatable, Sendable, CustomStringConvertible {
        case syntax(JSONSyntaxError)
        case notAnObject

        @_spi(Package) public var description: String {
            switch self {
            case .syntax(let error): "invalid JSON: \(error)"
            case .notAnObject: "not a JSON object"
            }
        }
    }

    /// Validates `bytes` as one JSON object (whitespace around it allowed) and
    /// calls `member(key, value)` for each top-level member in order, later
    /// duplicates included (the key token includes its quotes). The one way a
    /// whole frame is read: the broker's envelope, the clients' `BrokerFrame`
    /// and `members` all go through it.
    /// - Throws: `ReadError`.
    @inline(__always)
    /// - Parameter lineSafe: refuse a raw CR, U+0085, U+2028 or U+2029
    ///   (`JSONScanner.lineSafe`: the broker's requests); an error at a raw
    ///   CR (not whitespace then, a control character in a string) is `.lineBreak`.
    @_spi(Package) public static func scan(_ bytes: RawSpan, maxDepth: Int = ProtocolConstants.maxDepth, lineSafe: Bool = false, _ member: (JSONToken, JSONToken) -> Void) throws(ReadError) {
        try bytes.withByteView { (bytes) throws(ReadError) in try scan(bytes, maxDepth: maxDepth, lineSafe: lineSafe, member) }
    }

    /// `scan` on a view of the bytes (the envelope's, the span form's).
    @inline(__always)
    static func scan(_ bytes: ByteView, maxDepth: Int = ProtocolConstants.maxDepth, lineSafe: Bool = false, _ member: (JSONToken, JSONToken) -> Void) throws(ReadError) {
        var s = JSONScanner(bytes, maxDepth: maxDepth, lineSafe: lineSafe)
        s.skipWhitespace()
        guard s.position < bytes.count, bytes[s.position] == 0x7B else {
            do { _ = try JSONScanner.validate(bytes, maxDepth: maxDepth, lineSafe: lineSafe) } catch { throw .syntax(lineBreak(error, bytes, lineSafe)) }
            throw .notAnObject
        }
        do {
            try s.scanTopLevelObject(member)
        } catch {
            throw .syntax(lineBreak(error, bytes, lineSafe))
        }
    }

    /// `error`, or `.lineBreak` when a line-safe scan stopped at a raw CR.
    static func lineBreak(_ error: JSONSyntaxError, _ bytes: ByteView, _ lineSafe: Bool) -> JSONSyntaxError {
        guard lineSafe, error.offset < bytes.count, bytes[error.offset] == 0x0D else { return error }
        return JSONSyntaxError(.lineBreak, at: error.offset)
    }

    /// The top-level members of one JSON object, in order, later duplicates included.
    /// - Throws: `ReadError`.
    @_spi(Package) public static func members(_ bytes: RawSpan, maxDepth: Int = ProtocolConstants.maxDepth) throws(ReadError) -> [JSONMember] {
        try bytes.withByteView { (bytes) throws(ReadError) in try members(bytes, maxDepth: maxDepth) }
    }

    /// `members` on a view of the bytes.
    static func members(_ bytes: ByteView, maxDepth: Int = ProtocolConstants.maxDepth) throws(ReadError) -> [JSONMember] {
        var result: [JSONMember] = []
        try scan(bytes, maxDepth: maxDepth) { key, value in
            result.append(JSONMember(key: JSONString.decode(bytes, key), value: value))
        }
        return result
    }

    /// Whether valid UTF-8 `bytes` hold U+0085, U+2028 or U+2029.
    static func containsLineSeparator(_ bytes: ByteView) -> Bool {
        lineSeparatorLength(bytes, at: 0, end: bytes.count, scanning: true) != 0
    }

    /// The length (2 or 3) of U+0085, U+2028 or U+2029 at `i`, 0 when none
    /// is there; `scanning`: at the first one from `i` on (its end offset
    /// then, not its length; 0 when none).
    static func lineSeparatorLength(_ bytes: ByteView, at start: Int, end: Int, scanning: Bool = false) -> Int {
        var i = start
        repeat {
            guard i < end else { return 0 }
            let b = bytes[i]
            if b == 0xC2, i + 1 < end, bytes[i + 1] == 0x85 { return scanning ? i + 2 : 2 }
            if b == 0xE2, i + 2 < end, bytes[i + 1] == 0x80, bytes[i + 2] & 0xFE == 0xA8 { return scanning ? i + 3 : 3 }
            i += 1
        } while scanning
        return 0
    }

    /// Appends `bytes[token]` with insignificant whitespace removed (strings kept
    /// as they are, but for U+0085, U+2028 and U+2029, written as `\u`
    /// escapes: the same value): compacts pretty-printed JSON that the
    /// scanner validated.
    @_spi(Package) public static func appendCompacted(_ bytes: RawSpan, _ token: JSONToken, to out: inout [UInt8]) {
        bytes.withByteView { appendCompacted($0, token, to: &out) }
    }

    static func appendCompacted(_ bytes: ByteView, _ token: JSONToken, to out: inout [UInt8]) {
        var i = token.start
        var inString = false
        while i < token.end {
            let b = bytes[i]
            if inString {
                if b >= 0xC2, case let length = lineSeparatorLength(bytes, at: i, end: token.end), length > 0 {
                    let code: [UInt8] = length == 2 ? Array("\\u0085".utf8) : bytes[i + 2] == 0xA8 ? Array("\\u2028".utf8) : Array("\\u2029".utf8)
                    out.append(contentsOf: code)
                    i += length
                    continue
                }
                out.append(b)
                if b == 0x5C { out.append(bytes[i + 1]); i += 2; continue }
                if b == 0x22 { inString = false }
            } else if b == 0x22 {
                inString = true
                out.append(b)
            } else if b != 0x20 && b != 0x09 && b != 0x0A && b != 0x0D {
                out.append(b)
            }
            i += 1
        }
    }
}
