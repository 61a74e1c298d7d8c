// Helpers shared by the protocol tests: byte conversions, a seeded random
// number generator, and one-call wrappers around the scanner and splitter.
//
// Before editing: everything random here is seeded, so a failure reproduces.
@_spi(Package) @testable import EventBusProtocol
import EventBusTestSupport

/// The UTF-8 bytes of `text`.
func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The shared seeded generator (EventBusProtocol's SplitMix64).
typealias SeededGenerator = EventBusProtocol.SplitMix64

/// Runs `JSONScanner.validate` over `bytes`.
func validateJSON(_ bytes: [UInt8], maxDepth: Int = 512) -> Result<JSONToken, JSONSyntaxError> {
    bytes.withByteView { raw in
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
