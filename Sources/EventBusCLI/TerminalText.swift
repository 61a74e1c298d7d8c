// Text from the broker made safe for a terminal (issue 11: "the CLI never
// trusts its socket peer"): a peer that puts ESC sequences, OSC strings or
// C1 controls into an event's type, time or data, or into `clients` and
// `stats` fields, must not be able to drive the terminal that prints them.
//
// Before editing: every human-readable output of a string that came from
// the socket goes through `appendEscaped`; JSON output (`--format json`,
// `--json`, JSON Lines) needs no escaping: it is JSON the CLI validated.

package enum TerminalText {
    /// Appends `bytes` (UTF-8) with every control character written visibly:
    /// C0 controls and DEL as `\x1B`-style escapes (tab included), C1
    /// controls (U+0080...U+009F, which some terminals obey, e.g. U+009B CSI)
    /// and the bidirectional overrides and isolates (U+202A...U+202E,
    /// U+2066...U+2069) as `\u{9B}`, and bytes that are not UTF-8 as `\xFF`.
    package static func appendEscaped<C: Collection>(_ bytes: C, to out: inout [UInt8]) where C.Element == UInt8 {
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            if b < 0x20 || b == 0x7F {
                appendHexEscape(b, to: &out)
                i = bytes.index(after: i)
                continue
            }
            if b < 0x80 {
                out.append(b)
                i = bytes.index(after: i)
                continue
            }
            guard let (scalar, j) = utf8Scalar(bytes, at: i) else {
                appendHexEscape(b, to: &out)
                i = bytes.index(after: i)
                continue
            }
            if (0x80...0x9F).contains(scalar) || (0x202A...0x202E).contains(scalar) || (0x2066...0x2069).contains(scalar) {
                out.append(contentsOf: Array("\\u{\(String(scalar, radix: 16, uppercase: true))}".utf8))
            } else {
                out.append(contentsOf: bytes[i..<j])
            }
            i = j
        }
    }

    /// `text` escaped as `appendEscaped` does.
    package static func escaped(_ text: String) -> String {
        var out: [UInt8] = []
        appendEscaped(text.utf8, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The scalar of the UTF-8 sequence whose lead byte (0x80 or more) is at
    /// `i`, and the index after it; nil when it is not UTF-8 (a bad lead or
    /// continuation byte, cut short, overlong, a surrogate, past U+10FFFF).
    private static func utf8Scalar<C: Collection>(_ bytes: C, at i: C.Index) -> (UInt32, C.Index)? where C.Element == UInt8 {
        let b = bytes[i]
        let length = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0
        guard length > 0 && b < 0xF5 else { return nil }
        var scalar = UInt32(b) & (length == 4 ? 0x07 : length == 3 ? 0x0F : 0x1F)
        var j = bytes.index(after: i)
        for _ in 1..<length {
            guard j < bytes.endIndex, bytes[j] & 0xC0 == 0x80 else { return nil }
            scalar = scalar << 6 | UInt32(bytes[j] & 0x3F)
            j = bytes.index(after: j)
        }
        // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
        let minimum: UInt32 = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000
        guard scalar >= minimum && scalar <= 0x10FFFF && !(0xD800...0xDFFF).contains(scalar) else { return nil }
        return (scalar, j)
    }

    private static func appendHexEscape(_ b: UInt8, to out: inout [UInt8]) {
        let hex = Array("0123456789ABCDEF".utf8)
        out.append(0x5C); out.append(0x78)  // \x
        out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 0xF)])
    }
}
