// One frame received from the broker: the raw line and its JSON object.
//
// Before editing: parsing uses Foundation's JSONSerialization on purpose, so
// tests never depend on the EventBusProtocol code they are checking.
// JSONSerialization gives NSNumber for numbers and booleans; the accessors
// below tell them apart by objCType ("c" is a boolean), so `1` is never `true`.
import Foundation

/// One LF-terminated line from the broker, parsed as a JSON object.
///
/// Shape, e.g. `{"op":"ok","req":7,"seq":42,"delivered":2}`.
package struct Frame: CustomStringConvertible {
    /// The line as received, without its LF, decoded as UTF-8.
    package let raw: String
    /// The top-level JSON object.
    package let fields: [String: Any]

    /// Parses `line` (without its LF).
    /// - Throws: `RawClientError.invalidFrame` when it is not a JSON object.
    package init(line: [UInt8]) throws {
        raw = String(decoding: line, as: UTF8.self)
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(line), options: [.fragmentsAllowed])
        } catch {
            throw RawClientError.invalidFrame(raw: raw, reason: "\(error)")
        }
        guard let dict = object as? [String: Any] else {
            throw RawClientError.invalidFrame(raw: raw, reason: "not a JSON object")
        }
        fields = dict
    }

    /// The raw line.
    package var description: String { raw }

    /// The value at top-level `key`, as JSONSerialization made it.
    package subscript(key: String) -> Any? { fields[key] }

    /// `op`: `"ok"`, `"error"`, `"event"`, `"dropped"`.
    package var op: String? { string("op") }
    /// `code` of an `error` frame (PROTOCOL.md, Errors).
    package var code: String? { string("code") }
    /// `type` of an event (or of a `subscribe` reply).
    package var type: String? { string("type") }
    /// `seq` of an event or a `publish` reply.
    package var seq: Int? { int("seq") }
    /// Whether the frame has top-level `key` (even with a `null` value).
    package func has(_ key: String) -> Bool { fields[key] != nil }

    /// The string at `key`, or nil when absent or not a string.
    package func string(_ key: String) -> String? { fields[key] as? String }

    /// The integer at `key`, or nil when absent, a boolean, or not integral in `Int` range.
    package func int(_ key: String) -> Int? { Frame.integer(fields[key]) }

    /// The boolean at `key` (`true`/`false` only; `0` and `1` are not booleans).
    package func bool(_ key: String) -> Bool? { Frame.boolean(fields[key]) }

    /// The number at `key` as a `Double` (booleans excluded).
    package func double(_ key: String) -> Double? {
        guard let n = fields[key] as? NSNumber, !Frame.isBoolean(n) else { return nil }
        return n.doubleValue
    }

    /// The object at `key`.
    package func object(_ key: String) -> [String: Any]? { fields[key] as? [String: Any] }

    /// The array at `key`.
    package func array(_ key: String) -> [Any]? { fields[key] as? [Any] }

    /// `req` as a comparable value: `.string`, `.integer`, or nil when absent.
    package var req: RequestID? {
        guard let value = fields["req"] else { return nil }
        if let s = value as? String { return .string(s) }
        if let i = Frame.integer(value) { return .integer(i) }
        return .other("\(value)")
    }

    /// Whether `value` is an NSNumber made from a JSON `true`/`false`.
    static func isBoolean(_ n: NSNumber) -> Bool {
        // JSONSerialization makes booleans with NSNumber(value: Bool), whose
        // objCType is "c"; it makes integers as "i"/"q" and reals as "d".
        String(cString: n.objCType) == "c"
    }

    static func integer(_ value: Any?) -> Int? {
        guard let n = value as? NSNumber, !isBoolean(n), !(n is NSDecimalNumber) else { return nil }
        let objc = String(cString: n.objCType)
        guard objc != "d", objc != "f" else { return nil }
        return n.intValue
    }

    static func boolean(_ value: Any?) -> Bool? {
        guard let n = value as? NSNumber, isBoolean(n) else { return nil }
        return n.boolValue
    }
}

/// A `req` value as carried by a frame (PROTOCOL.md, Requests).
package enum RequestID: Equatable, Sendable, CustomStringConvertible {
    case string(String)
    case integer(Int)
    /// Anything else the broker sent back (always a test failure).
    case other(String)

    package var description: String {
        switch self {
        case .string(let s): "\"\(s)\""
        case .integer(let i): "\(i)"
        case .other(let o): "other(\(o))"
        }
    }
}
