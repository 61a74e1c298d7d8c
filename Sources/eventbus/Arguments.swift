// GNU-style command-line parsing, by hand (no swift-argument-parser):
// `--opt value`, `--opt=value`, `-o value`, `-ovalue`, bundled flags `-ab`,
// options anywhere among operands, `--` ends options, `-` is an operand.
//
// Before editing: an argument that starts with `-` followed by a digit
// (`-5`, `-1.5e3`) is an operand, never an option, so negative JSON numbers
// can be published without `--`. No option of this CLI uses a digit letter.

/// One option a command accepts.
struct OptionSpec {
    /// Long name without dashes, e.g. `"count"`.
    let long: String
    /// Short letter, e.g. `"n"`, or nil.
    let short: Character?
    /// Whether the option takes a value (`--count 5`) or is a flag.
    let takesValue: Bool

    init(_ long: String, _ short: Character? = nil, value: Bool = false) {
        self.long = long
        self.short = short
        self.takesValue = value
    }
}

/// Options every command accepts (PROTOCOL.md "Transport" for the bus choice).
let globalOptions: [OptionSpec] = [
    OptionSpec("socket", "s", value: true),
    OptionSpec("system"),
    OptionSpec("user"),
    OptionSpec("help", "h"),
    OptionSpec("version", "V"),
]

/// The options and operands of one command line, in the order given.
struct ParsedArguments {
    /// `(long name, value)` pairs; flags have a nil value.
    var options: [(name: String, value: String?)] = []
    /// Arguments that are not options.
    var operands: [String] = []
    /// How many operands came before a `--` (nil when there was none).
    var operandsBeforeDoubleDash: Int?

    /// Whether the flag or option was given at all.
    func has(_ name: String) -> Bool { options.contains { $0.name == name } }

    /// The last value given for `name` (later options override earlier ones).
    func value(_ name: String) -> String? { options.last { $0.name == name }?.value }
}

/// Parses `arguments` against `specs`.
/// - Parameters:
///   - command: the subcommand, for error messages (nil at top level).
///   - stopAtFirstOperand: stop at the first operand and leave the rest in
///     `operands` unparsed (used to find the subcommand).
/// - Throws: `CLIError` with status 64 for an unknown option, a missing value,
///   or a value given to a flag.
func parseArguments(_ arguments: ArraySlice<String>, specs: [OptionSpec], command: String?, stopAtFirstOperand: Bool = false) throws(CLIError) -> ParsedArguments {
    var result = ParsedArguments()
    var index = arguments.startIndex
    func spec(long name: String) -> OptionSpec? { specs.first { $0.long == name } }
    func spec(short letter: Character) -> OptionSpec? { specs.first { $0.short == letter } }

    while index < arguments.endIndex {
        let argument = arguments[index]
        index += 1
        if argument == "--" {
            result.operandsBeforeDoubleDash = result.operands.count
            result.operands.append(contentsOf: arguments[index...])
            return result
        }
        if argument.hasPrefix("--") {
            let body = argument.dropFirst(2)
            let name: Substring
            var inlineValue: String? = nil
            if let equals = body.firstIndex(of: "=") {
                name = body[..<equals]
                inlineValue = String(body[body.index(after: equals)...])
            } else {
                name = body
            }
            guard let option = spec(long: String(name)) else {
                throw .usage(command, "unknown option '--\(name)'")
            }
            if option.takesValue {
                if let inlineValue {
                    result.options.append((option.long, inlineValue))
                } else {
                    guard index < arguments.endIndex else { throw .usage(command, "option '--\(name)' needs a value") }
                    result.options.append((option.long, arguments[index]))
                    index += 1
                }
            } else {
                guard inlineValue == nil else { throw .usage(command, "option '--\(name)' takes no value") }
                result.options.append((option.long, nil))
            }
            continue
        }
        if argument.hasPrefix("-") && argument.count > 1 && !isNegativeNumber(argument) {
            // One or more short options: flags bundle, a value-taking one ends the bundle.
            var letters = argument.dropFirst()
            while let letter = letters.first {
                letters = letters.dropFirst()
                guard let option = spec(short: letter) else { throw .usage(command, "unknown option '-\(letter)'") }
                if option.takesValue {
                    if !letters.isEmpty {
                        result.options.append((option.long, String(letters)))
                    } else {
                        guard index < arguments.endIndex else { throw .usage(command, "option '-\(letter)' needs a value") }
                        result.options.append((option.long, arguments[index]))
                        index += 1
                    }
                    break
                }
                result.options.append((option.long, nil))
            }
            continue
        }
        result.operands.append(argument)
        if stopAtFirstOperand {
            result.operands.append(contentsOf: arguments[index...])
            return result
        }
    }
    return result
}

/// `-5`, `-0.5`: a JSON number, not an option.
private func isNegativeNumber(_ argument: String) -> Bool {
    let utf8 = argument.utf8
    guard utf8.count >= 2 else { return false }
    let second = utf8[utf8.index(after: utf8.startIndex)]
    return second >= 0x30 && second <= 0x39
}

/// Parses a DURATION as timeout(1) does, plus `ms`: a non-negative decimal
/// number with an optional unit `ms`, `s` (default), `m`, `h` or `d`.
/// Examples: `5`, `1.5s`, `250ms`, `2m`.
/// - Returns: the duration in milliseconds, or nil when malformed.
func parseDurationMilliseconds(_ text: String) -> Int64? {
    var digits = Substring(text)
    var scale: Double = 1000
    for (suffix, factor) in [("ms", 1.0), ("s", 1000.0), ("m", 60_000.0), ("h", 3_600_000.0), ("d", 86_400_000.0)] where digits.hasSuffix(suffix) {
        digits = digits.dropLast(suffix.count)
        scale = factor
        break
    }
    guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
          digits.filter({ $0 == "." }).count <= 1, digits != "." else { return nil }
    guard let value = Double(digits), value.isFinite else { return nil }
    let milliseconds = (value * scale).rounded(.up)
    guard milliseconds < 1e15 else { return nil }
    return Int64(milliseconds)
}

/// Parses a positive decimal integer (for `--count`).
func parsePositiveInteger(_ text: String) -> Int? {
    guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text), value > 0 else { return nil }
    return value
}
