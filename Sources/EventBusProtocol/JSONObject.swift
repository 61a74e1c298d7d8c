// Reading the top-level members of a JSON object for clients (CLI, library),
// where a small allocation per frame is fine. The broker uses RequestDecoder.

/// One top-level member of a scanned object: decoded key, raw value token.
public struct JSONMember: Sendable {
    public var key: String
    public var value: JSONToken
}

public enum JSONObject {
    /// Errors: not JSON at all, or JSON that is not an object.
    public enum ReadError: Error, Equatable, Sendable, CustomStringConvertible {
        case syntax(JSONSyntaxError)
        case notAnObject

        public var description: String {
            switch self {
            case .syntax(let error): "invalid JSON: \(error)"
            case .notAnObject: "not a JSON object"
            }
        }
    }

    /// Validates `bytes` as one JSON object (whitespace around it allowed) and
    /// returns its top-level members in order, later duplicates included.
    /// - Throws: `ReadError`.
    public static func members(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = ProtocolConstants.maxDepth) throws(ReadError) -> [JSONMember] {
        var s = JSONScanner(bytes, maxDepth: maxDepth)
        s.skipWhitespace()
        guard s.position < bytes.count, bytes[s.position] == 0x7B else {
            do { _ = try JSONScanner.validate(bytes, maxDepth: maxDepth) } catch { throw .syntax(error) }
            throw .notAnObject
        }
        var result: [JSONMember] = []
        do throws(JSONSyntaxError) {
            s.position += 1
            s.skipWhitespace()
            guard s.position < bytes.count else { throw JSONSyntaxError(.unexpectedEnd, at: s.position) }
            if bytes[s.position] == 0x7D {
                s.position += 1
            } else {
                while true {
                    guard s.position < bytes.count else { throw JSONSyntaxError(.unexpectedEnd, at: s.position) }
                    guard bytes[s.position] == 0x22 else { throw JSONSyntaxError(.unexpectedByte, at: s.position) }
                    let keyStart = s.position
                    let escaped = try s.scanString()
                    let key = JSONString.decode(bytes, JSONToken(start: keyStart, end: s.position, kind: .string(escaped: escaped)))
                    s.skipWhitespace()
                    guard s.position < bytes.count, bytes[s.position] == 0x3A else { throw JSONSyntaxError(.unexpectedByte, at: s.position) }
                    s.position += 1
                    s.skipWhitespace()
                    let value = try s.scanValue(depth: 1)
                    result.append(JSONMember(key: key, value: value))
                    s.skipWhitespace()
                    guard s.position < bytes.count else { throw JSONSyntaxError(.unexpectedEnd, at: s.position) }
                    let b = bytes[s.position]
                    s.position += 1
                    if b == 0x2C { s.skipWhitespace(); continue }
                    if b == 0x7D { break }
                    throw JSONSyntaxError(.unexpectedByte, at: s.position - 1)
                }
            }
            s.skipWhitespace()
            if s.position != bytes.count { throw JSONSyntaxError(.trailingBytes, at: s.position) }
        } catch {
            throw .syntax(error)
        }
        return result
    }

    /// Appends `bytes[token]` with insignificant whitespace removed (strings kept
    /// as they are): compacts pretty-printed JSON that the scanner validated.
    public static func appendCompacted(_ bytes: UnsafeRawBufferPointer, _ token: JSONToken, to out: inout [UInt8]) {
        var i = token.start
        var inString = false
        while i < token.end {
            let b = bytes[i]
            if inString {
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
