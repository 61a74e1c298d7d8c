// Helpers shared by the protocol tests: byte conversions, a seeded random
// number generator, and one-call wrappers around the scanner and splitter.
//
// Before editing: everything random here is seeded, so a failure reproduces.
import EventBusProtocol

/// The UTF-8 bytes of `text`.
func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// SplitMix64: a small, fast, seeded generator so every random test is repeatable.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Runs `JSONScanner.validate` over `bytes`.
func validateJSON(_ bytes: [UInt8], maxDepth: Int = 512) -> Result<JSONToken, JSONSyntaxError> {
    bytes.withUnsafeBytes { raw in
        Result { () throws(JSONSyntaxError) in try JSONScanner.validate(raw, maxDepth: maxDepth) }
    }
}

/// Whether `bytes` is one valid JSON text for our scanner.
func scannerAccepts(_ bytes: [UInt8]) -> Bool {
    if case .success = validateJSON(bytes) { return true }
    return false
}

/// `n` nested arrays around `inner`: `[[[inner]]]`.
func nestedArrays(_ n: Int, inner: String = "") -> [UInt8] {
    utf8(String(repeating: "[", count: n) + inner + String(repeating: "]", count: n))
}

/// `n` nested objects: `{"a":{"a":{}}}`.
func nestedObjects(_ n: Int) -> [UInt8] {
    utf8(String(repeating: "{\"a\":", count: n - 1) + "{}" + String(repeating: "}", count: n - 1))
}
