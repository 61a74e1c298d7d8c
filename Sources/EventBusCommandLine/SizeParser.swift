// The SIZE and N parsers of every executable: byte sizes with binary suffixes
// (`eventbusd --max-frame 1M`) and positive whole numbers (`--max-connections
// 4096`, `eventbus listen --count 5`).
//
// Before editing: suffixes are binary multiples whatever their spelling
// (`K`, `KB`, `KiB`, `k` are all 1024), as in the broker's help since 0.1;
// nothing here accepts a sign, a fraction or white space.

/// Examples shown in every error message about a SIZE.
package let sizeExamples = "1048576, 64K, 8M, 1G"

/// Parses a SIZE in bytes: `123`, `123B`, `64K`, `8M`, `1G` (binary multiples;
/// `KiB`, `KB`, `k` and the like mean the same).
/// - Parameters:
///   - text: the value as given on the command line.
///   - minimum: the smallest size the option accepts, in bytes.
/// - Returns: bytes.
/// - Throws: `ValueError` (kind `"size"`): `.empty`, `.missingNumber` (`K`),
///   `.negative`, `.unknownUnit` (`1T`), `.malformedNumber`,
///   `.tooLarge` (beyond `Int.max` bytes), `.tooSmall` (below `minimum`).
package func parseSize(_ text: String, minimum: Int = 0) throws(ValueError) -> Int {
    func failure(_ problem: ValueError.Problem) -> ValueError {
        ValueError(kind: "size", value: text, problem: problem, examples: sizeExamples)
    }
    var digits = Substring(text)
    var multiplier = 1
    for (suffixes, factor) in [(["KiB", "KB", "K", "k"], 1 << 10), (["MiB", "MB", "M", "m"], 1 << 20), (["GiB", "GB", "G", "g"], 1 << 30)] {
        if let suffix = suffixes.first(where: { text.hasSuffix($0) }) {
            digits = digits.dropLast(suffix.count)
            multiplier = factor
            break
        }
    }
    if multiplier == 1 && digits.hasSuffix("B") { digits = digits.dropLast() }
    if digits.hasPrefix("-") { throw failure(.negative) }
    if digits.isEmpty { throw failure(text.isEmpty ? .empty : .missingNumber(before: text)) }
    guard digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
        // Digits then letters (`1T`, `8X`): a unit this parser does not know.
        let letters = digits.drop { $0 >= "0" && $0 <= "9" }
        if letters.count < digits.count, letters.utf8.allSatisfy({ ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A }) {
            throw failure(.unknownUnit(String(letters)))
        }
        throw failure(.malformedNumber(String(digits)))
    }
    guard let number = Int(digits) else { throw failure(.tooLarge(limit: "\(Int.max) bytes")) }
    let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
    guard !overflow else { throw failure(.tooLarge(limit: "\(Int.max) bytes")) }
    guard bytes >= minimum else { throw failure(.tooSmall(limit: "\(minimum) bytes")) }
    return bytes
}

/// A size as the help texts show it, which `parseSize` reads back unchanged:
/// `1048576` gives `"1M"`, `65536` `"64K"`, `1000` `"1000"`.
package func sizeText(_ bytes: Int) -> String {
    for (suffix, factor) in [("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)] where bytes != 0 && bytes % factor == 0 {
        return "\(bytes / factor)\(suffix)"
    }
    return "\(bytes)"
}

/// Parses N, a positive whole number in decimal digits: `1`, `4096`.
/// - Throws: `ValueError` (kind `"number"`): `.empty`, `.negative`,
///   `.malformedNumber` (anything but digits), `.tooSmall` (0), `.tooLarge`
///   (beyond `Int.max`).
package func parseCount(_ text: String) throws(ValueError) -> Int {
    func failure(_ problem: ValueError.Problem) -> ValueError {
        ValueError(kind: "number", value: text, problem: problem, examples: "1, 10, 4096")
    }
    if text.isEmpty { throw failure(.empty) }
    if text.hasPrefix("-") { throw failure(.negative) }
    guard text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { throw failure(.malformedNumber(text)) }
    guard let value = Int(text) else { throw failure(.tooLarge(limit: "\(Int.max)")) }
    guard value >= 1 else { throw failure(.tooSmall(limit: "1")) }
    return value
}
