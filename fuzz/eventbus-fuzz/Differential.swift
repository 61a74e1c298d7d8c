// The differential property: `JSONScanner.validate` and Foundation's
// `JSONSerialization.jsonObject(with:options: .fragmentsAllowed)` agree on
// accept/reject for every input, except for the known classes below, each
// judged against RFC 8259 in docs/RELIABILITY.md. A known class is excused
// only by removing it from the input and checking that the two then agree,
// so it cannot hide a different disagreement in the same input.
//
// Before editing: a new class needs its RFC 8259 verdict in RELIABILITY.md.
@_spi(Package) import EventBusProtocol
import Foundation

/// Known, documented ways the two parsers disagree.
enum Disagreement: String, CaseIterable {
    /// Foundation guesses UTF-16/UTF-32 from NUL bytes among the first four
    /// or skips a byte-order mark; RFC 8259 section 8.1 requires UTF-8 and no
    /// BOM (a parser "MAY ignore" one). We accept UTF-8 only.
    case foundationDetectsEncoding
    /// Foundation accepts one trailing comma before `]` or `}`; RFC 8259
    /// sections 4 and 5 have no such production. We reject it.
    case foundationAcceptsTrailingComma
    /// Foundation rejects numbers a `Double` cannot hold (`1e400`, 400
    /// digits); RFC 8259 section 6 allows any magnitude in the grammar and
    /// PROTOCOL.md "Framing" says every such number is valid. We accept them.
    case foundationRejectsHugeNumber
}

enum Differential {
    /// How often each class was excused in this process (for `--stats`).
    nonisolated(unsafe) static var counts: [Disagreement: Int] = [:]
    nonisolated(unsafe) static var agreements = 0

    static func ours(_ input: [UInt8]) -> Result<JSONToken, JSONSyntaxError> {
        input.withUnsafeBytes { bytes in Result { () throws(JSONSyntaxError) in try JSONScanner.validate(bytes.bytes) } }
    }

    static func foundation(_ input: [UInt8]) -> Any? {
        try? JSONSerialization.jsonObject(with: Data(input), options: [.fragmentsAllowed])
    }

    static func check(_ original: [UInt8]) {
        var input = original
        var excused: [Disagreement] = []
        for _ in 0..<64 {
            let mine = ours(input)
            let theirs = foundation(input)
            switch (mine, theirs) {
            case (.success(let token), let value?):
                compareValues(input, token, value)
                record(excused)
                return
            case (.failure, nil):
                record(excused)
                return
            case (.failure(let error), _?):
                if detectsEncoding(input) {
                    record(excused + [.foundationDetectsEncoding])
                    return
                }
                if let fixed = removingTrailingComma(input, at: error) {
                    excused.append(.foundationAcceptsTrailingComma)
                    input = fixed
                    continue
                }
                fuzzFailure("we reject (\(error)) what Foundation accepts: \(FuzzInput.preview(original))")
            case (.success, nil):
                let zeroed = zeroingNumbers(input)
                if zeroed != input && foundation(zeroed) != nil {
                    excused.append(.foundationRejectsHugeNumber)
                    input = zeroed
                    continue
                }
                fuzzFailure("we accept what Foundation rejects: \(FuzzInput.preview(original))")
            }
        }
        fuzzFailure("differential did not settle: \(FuzzInput.preview(original))")
    }

    static func record(_ excused: [Disagreement]) {
        if excused.isEmpty { agreements += 1 }
        for reason in Set(excused) { counts[reason, default: 0] += 1 }
    }

    /// A BOM, or a NUL among the first bytes in the places Foundation's
    /// encoding detection looks (UTF-16/32, either byte order).
    static func detectsEncoding(_ input: [UInt8]) -> Bool {
        if input.starts(with: [0xEF, 0xBB, 0xBF]) || input.starts(with: [0xFE, 0xFF]) || input.starts(with: [0xFF, 0xFE]) {
            return true
        }
        return input.count >= 2 && (input[0] == 0 || input[1] == 0)
    }

    /// When our scanner stopped at `]` or `}` right after a `,` (whitespace
    /// between allowed), the input without that comma.
    static func removingTrailingComma(_ input: [UInt8], at error: JSONSyntaxError) -> [UInt8]? {
        guard error.reason == .unexpectedByte, error.offset < input.count,
              input[error.offset] == 0x5D || input[error.offset] == 0x7D else { return nil }
        var i = error.offset - 1
        while i >= 0, [0x20, 0x09, 0x0A, 0x0D].contains(input[i]) { i -= 1 }
        guard i >= 0, input[i] == 0x2C else { return nil }
        var fixed = input
        fixed.remove(at: i)
        return fixed
    }

    /// Every number outside strings replaced by `0` (input already validated).
    static func zeroingNumbers(_ input: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        var inString = false
        while i < input.count {
            let b = input[i]
            if inString {
                out.append(b)
                if b == 0x5C { out.append(input[i + 1]); i += 2; continue }
                if b == 0x22 { inString = false }
                i += 1
            } else if b == 0x22 {
                inString = true
                out.append(b)
                i += 1
            } else if b == 0x2D || (b >= 0x30 && b <= 0x39) {
                while i < input.count, [0x2D, 0x2B, 0x2E, 0x45, 0x65].contains(input[i]) || (input[i] >= 0x30 && input[i] <= 0x39) { i += 1 }
                out.append(0x30)
            } else {
                out.append(b)
                i += 1
            }
        }
        return out
    }

    /// Both accepted: top-level strings decode to the same text and objects
    /// have the same set of keys (Foundation keeps one of duplicates).
    static func compareValues(_ input: [UInt8], _ token: JSONToken, _ value: Any) {
        input.withUnsafeBytes { bytes in
            switch token.kind {
            case .string:
                let mine = JSONString.decode(bytes.bytes, token)
                guard let theirs = value as? String else { fuzzFailure("Foundation made \(type(of: value)) of a string") }
                if Array(mine.unicodeScalars) != Array(theirs.unicodeScalars) {
                    fuzzFailure("string decodes differently: ours \(mine.debugDescription), Foundation \(theirs.debugDescription)")
                }
            case .object:
                guard let members = try? JSONObject.members(bytes.bytes) else { fuzzFailure("JSONObject.members rejects a validated object") }
                guard let dictionary = value as? [String: Any] else { fuzzFailure("Foundation made \(type(of: value)) of an object") }
                // Compared as Swift strings (canonical equivalence), because a
                // Swift dictionary merges keys like "\u00e9" and "e\u0301"
                // that RFC 8259 section 8.3 and our scanner keep apart.
                let mine = Set(members.map(\.key))
                let theirs = Set(dictionary.keys)
                if mine != theirs { fuzzFailure("object keys differ: ours \(members.map(\.key)), Foundation \(Array(dictionary.keys))") }
            default:
                break
            }
        }
    }
}
