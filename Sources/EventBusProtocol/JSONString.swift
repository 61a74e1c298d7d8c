// Decoding and encoding of JSON strings (RFC 8259 section 7), and comparison of
// a scanned string token against ASCII without decoding it when it has no escapes.
//
// Before editing: tokens handed in have already been validated by `JSONScanner`,
// so decoding never meets a malformed escape or lone surrogate.

@_spi(Package) public enum JSONString {
    /// Decodes a validated string token (quotes included) into its UTF-8 bytes.
    @_spi(Package) public static func decodeBytes(_ bytes: RawSpan, _ token: JSONToken) -> [UInt8] {
        bytes.withByteView { decodeBytes($0, token) }
    }

    /// Appends the decoded bytes of a validated string token to `out` (what
    /// `decodeBytes` returns, without an array of their own).
    @_spi(Package) public static func appendDecoded(_ bytes: RawSpan, _ token: JSONToken, to out: inout [UInt8]) {
        bytes.withByteView { appendDecoded($0, token, to: &out) }
    }

    /// Decodes a validated string token into a `String`.
    @_spi(Package) public static func decode(_ bytes: RawSpan, _ token: JSONToken) -> String {
        bytes.withByteView { decode($0, token) }
    }

    /// Whether a validated string token decodes to exactly `ascii`.
    @_spi(Package) public static func equals(_ bytes: RawSpan, _ token: JSONToken, _ ascii: StaticString) -> Bool {
        bytes.withByteView { equals($0, token, ascii) }
    }

    // The same on a view of the bytes (ByteView.swift): the decoder's own calls.

    static func decodeBytes(_ bytes: ByteView, _ token: JSONToken) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(token.count - 2)
        appendDecoded(bytes, token, to: &out)
        return out
    }

    static func appendDecoded(_ bytes: ByteView, _ token: JSONToken, to out: inout [UInt8]) {
        var i = token.start + 1
        let end = token.end - 1
        while i < end {
            let b = bytes[i]
            if b != 0x5C { out.append(b); i += 1; continue }
            let e = bytes[i + 1]
            i += 2
            switch e {
            case 0x62: out.append(0x08)
            case 0x66: out.append(0x0C)
            case 0x6E: out.append(0x0A)
            case 0x72: out.append(0x0D)
            case 0x74: out.append(0x09)
            case 0x75:
                var scalar = hex4(bytes, i)
                i += 4
                if scalar >= 0xD800 && scalar <= 0xDBFF {
                    let low = hex4(bytes, i + 2)
                    i += 6
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                appendUTF8(scalar, to: &out)
            default: out.append(e)  // " \ /
            }
        }
    }

    static func decode(_ bytes: ByteView, _ token: JSONToken) -> String {
        if case .string(escaped: false) = token.kind {
            return String(decoding: bytes.extracting((token.start + 1)..<(token.end - 1)), as: UTF8.self)
        }
        return String(decoding: decodeBytes(bytes, token), as: UTF8.self)
    }

    static func equals(_ bytes: ByteView, _ token: JSONToken, _ ascii: StaticString) -> Bool {
        let expected = ByteView(ascii)
        if case .string(escaped: false) = token.kind {
            guard token.count - 2 == expected.count else { return false }
            return bytes.hasBytes(ascii, at: token.start + 1)
        }
        let decoded = decodeBytes(bytes, token)
        return decoded.elementsEqual(expected)
    }

    static func hex4(_ bytes: ByteView, _ at: Int) -> UInt32 {
        var value: UInt32 = 0
        for k in 0..<4 {
            let b = bytes[at + k]
            let d: UInt32 = b <= 0x39 ? UInt32(b - 0x30) : UInt32((b | 0x20) - 0x61 + 10)
            value = value << 4 | d
        }
        return value
    }

    static func appendUTF8(_ scalar: UInt32, to out: inout [UInt8]) {
        switch scalar {
        case 0..<0x80: out.append(UInt8(scalar))
        case 0x80..<0x800:
            out.append(UInt8(0xC0 | (scalar >> 6)))
            out.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            out.append(UInt8(0xE0 | (scalar >> 12)))
            out.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            out.append(UInt8(0xF0 | (scalar >> 18)))
            out.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            out.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }

    /// Appends `text` as a JSON string literal (quotes included), escaping `"`,
    /// `\` and control characters, and U+0085, U+2028 and U+2029 as `\u`
    /// escapes (a line reader splits there: PROTOCOL-NOTES.md "Framing");
    /// other characters are written as UTF-8. Runs of bytes that need no
    /// escape are copied whole.
    @_spi(Package) public static func appendQuoted(_ text: String, to out: inout [UInt8]) {
        out.append(0x22)
        text.withByteView { bytes in
            var run = 0
            var i = 0
            while i < bytes.count {
                let b = bytes[i]
                i += 1
                if b >= 0x20 && b != 0x22 && b != 0x5C && b != 0xC2 && b != 0xE2 { continue }
                if b == 0xC2 || b == 0xE2 {
                    // U+0085 is C2 85, U+2028/U+2029 are E2 80 A8/A9 (valid UTF-8: a String).
                    let separator = b == 0xC2 ? bytes[i] == 0x85 : bytes[i] == 0x80 && bytes[i + 1] & 0xFE == 0xA8
                    guard separator else { continue }
                    let start = i - 1
                    if run < start { out.append(copying: bytes.extracting(run..<start)) }
                    let code: [UInt8] = b == 0xC2 ? [0x30, 0x30, 0x38, 0x35] : [0x32, 0x30, 0x32, bytes[i + 1] == 0xA8 ? 0x38 : 0x39]
                    out.append(0x5C); out.append(0x75); out.append(contentsOf: code)
                    i += b == 0xC2 ? 1 : 2
                    run = i
                    continue
                }
                if run < i - 1 { out.append(copying: bytes.extracting(run..<(i - 1))) }
                run = i
                switch b {
                case 0x22: out.append(0x5C); out.append(0x22)
                case 0x5C: out.append(0x5C); out.append(0x5C)
                case 0x0A: out.append(0x5C); out.append(0x6E)
                case 0x0D: out.append(0x5C); out.append(0x72)
                case 0x09: out.append(0x5C); out.append(0x74)
                default:
                    let digits = ByteView("0123456789abcdef")
                    out.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, digits[Int(b >> 4)], digits[Int(b & 0xF)]])
                }
            }
            if run < bytes.count { out.append(copying: bytes.extracting(from: run)) }
        }
        out.append(0x22)
    }

    /// `text` as a JSON string literal.
    @_spi(Package) public static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        appendQuoted(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
