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
        do {
            try s.scanTopLevelObject { key, value in
                result.append(JSONMember(key: JSONString.decode(bytes, key), value: value))
            }
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
