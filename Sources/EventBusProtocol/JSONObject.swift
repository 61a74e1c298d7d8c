// Reading the top-level members of one JSON object (a whole frame), and
// compacting validated JSON.
//
// Before editing: `scan` is on the broker's per-frame path (the envelope);
// `members` allocates and is for clients and tests.

/// One top-level member of a scanned object: decoded key, raw value token.
public struct JSONMember: Equatable, Sendable {
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
    /// calls `member(key, value)` for each top-level member in order, later
    /// duplicates included (the key token includes its quotes). The one way a
    /// whole frame is read: the broker's envelope, the clients' `BrokerFrame`
    /// and `members` all go through it.
    /// - Throws: `ReadError`.
    @inline(__always)
    public static func scan(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = ProtocolConstants.maxDepth, _ member: (JSONToken, JSONToken) -> Void) throws(ReadError) {
        var s = JSONScanner(bytes, maxDepth: maxDepth)
        s.skipWhitespace()
        guard s.position < bytes.count, bytes[s.position] == 0x7B else {
            do { _ = try JSONScanner.validate(bytes, maxDepth: maxDepth) } catch { throw .syntax(error) }
            throw .notAnObject
        }
        do {
            try s.scanTopLevelObject(member)
        } catch {
            throw .syntax(error)
        }
    }

    /// The top-level members of one JSON object, in order, later duplicates included.
    /// - Throws: `ReadError`.
    public static func members(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = ProtocolConstants.maxDepth) throws(ReadError) -> [JSONMember] {
        var result: [JSONMember] = []
        try scan(bytes, maxDepth: maxDepth) { key, value in
            result.append(JSONMember(key: JSONString.decode(bytes, key), value: value))
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
