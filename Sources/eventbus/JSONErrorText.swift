// The message for data that is not valid JSON: the scanner's reason and
// offset, a hint for the usual mistakes (unquoted keys, single quotes), and
// the text around the offending byte with a caret under it:
//
//   eventbus: DATA is not valid JSON: unexpected character at byte 18
//     {"id": 1, "name": bob}
//                       ^
//
// Before editing: this runs only once validation has failed, so it may scan
// the input again; it must stay linear in the input's size.
@_spi(Package) import EventBusProtocol

/// Bytes shown before and after the offending byte, at most (on its line).
private let excerptBefore = 40
private let excerptAfter = 30

/// The whole message for `error` in `bytes`, without the `eventbus: ` prefix:
/// `"<origin> is not valid JSON: <error><hint>"`, then two lines (each
/// starting with two spaces): the excerpt and the caret line.
/// - Parameters:
///   - origin: what held the text, e.g. `"DATA"`, `"line 3"`.
///   - hint: appended to the first line when no quoting mistake explains the
///     error, e.g. `"; to send text use --string TEXT"` (empty: none).
///   - alwaysHint: appended to the first line in every case (empty: none).
func invalidJSONMessage(_ bytes: [UInt8], _ error: JSONSyntaxError, origin: String, hint: String, alwaysHint: String = "") -> String {
    let specific = quotingHint(bytes, error)
    // The scanner's own wording is the broker's ("end of frame"); here the text is the user's.
    let reason = error.reason == .unexpectedEnd ? "unexpected end of the text at byte \(error.offset)" : "\(error)"
    var message = "\(origin) is not valid JSON: \(reason)\(specific ?? hint)\(alwaysHint)"
    if let (line, caret) = excerpt(bytes, at: error.offset) {
        message += "\n  \(line)\n  \(caret)"
    }
    return message
}

/// A hint for keys or strings written without double quotes, or nil:
/// `{id: 1}` and `{'id': 1}` get "object keys need double quotes", `['a']`
/// gets "strings need double quotes".
func quotingHint(_ bytes: [UInt8], _ error: JSONSyntaxError) -> String? {
    guard error.reason == .unexpectedByte, error.offset < bytes.count else { return nil }
    let byte = bytes[error.offset]
    let isNameStart = byte == UInt8(ascii: "_") || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    guard isNameStart || byte == UInt8(ascii: "'") else { return nil }
    if isObjectKeyPosition(bytes, error.offset) {
        return "; object keys need double quotes, e.g. {\"id\": 1}"
    }
    return byte == UInt8(ascii: "'") ? "; JSON strings need double quotes, e.g. \"text\"" : nil
}

/// Whether `offset` is where an object key must start: directly inside an
/// object, after its `{` or a `,`. The bytes before `offset` are a valid
/// JSON prefix (the scanner got that far), so tracking strings and brackets
/// is enough.
private func isObjectKeyPosition(_ bytes: [UInt8], _ offset: Int) -> Bool {
    var containers: [UInt8] = []
    var lastSignificant: UInt8 = 0
    var inString = false
    var escaped = false
    for byte in bytes[..<offset] {
        if inString {
            if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
            lastSignificant = UInt8(ascii: "\"")
            continue
        }
        switch byte {
        case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): continue
        case UInt8(ascii: "\""): inString = true
        case UInt8(ascii: "{"), UInt8(ascii: "["): containers.append(byte)
        case UInt8(ascii: "}"), UInt8(ascii: "]"): _ = containers.popLast()
        default: break
        }
        lastSignificant = byte
    }
    return containers.last == UInt8(ascii: "{") && (lastSignificant == UInt8(ascii: "{") || lastSignificant == UInt8(ascii: ","))
}

/// The part of the line holding `offset` (at most `excerptBefore` bytes
/// before it and `excerptAfter` from it, `…` where cut) and a line with `^`
/// under the byte at `offset`. Control characters show as spaces. At the end
/// of the text the caret goes just after its last non-blank character.
/// - Returns: nil for an empty or all-blank text.
func excerpt(_ bytes: [UInt8], at offset: Int) -> (line: String, caret: String)? {
    var anchor = min(offset, bytes.count)
    if anchor == bytes.count {
        while anchor > 0, isBlankByte(bytes[anchor - 1]) { anchor -= 1 }
        guard anchor > 0 else { return nil }
    }
    let lineStart = bytes[..<anchor].lastIndex(of: 0x0A).map { $0 + 1 } ?? 0
    let lineEnd = bytes[anchor...].firstIndex(of: 0x0A) ?? bytes.count
    let start = max(lineStart, anchor - excerptBefore)
    let end = min(lineEnd, anchor + excerptAfter)
    let before = (start > lineStart ? "…" : "") + printable(bytes[start..<anchor])
    let after = printable(bytes[anchor..<end]) + (end < lineEnd ? "…" : "")
    return (before + after, String(repeating: " ", count: before.count) + "^")
}

/// `bytes` as text, invalid UTF-8 replaced, control characters as spaces.
private func printable(_ bytes: ArraySlice<UInt8>) -> String {
    String(String(decoding: bytes, as: UTF8.self).map { $0.isASCII && ($0.asciiValue! < 0x20 || $0.asciiValue! == 0x7F) ? " " : $0 })
}

private func isBlankByte(_ byte: UInt8) -> Bool {
    byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
}
