// GNU-style command-line parsing for every executable of the package, by hand
// (no swift-argument-parser): `--opt value`, `--opt=value`, `-o value`,
// `-ovalue`, bundled flags `-ab`, options anywhere among operands, `--` ends
// options, `-` is an operand. Values are checked by the caller (with
// `parseDuration`, `parseSize`, `parseCount`), which knows what they mean.
//
// Before editing: an argument that starts with `-` followed by a digit
// (`-5`, `-1.5e3`) is an operand, never an option, so negative JSON numbers
// can be published without `--`. No option may use a digit as its letter.

/// One option a command accepts, e.g. `OptionSpec("timeout", "t", value: true)`
/// for `--timeout 30s`, `--timeout=30s`, `-t 30s`, `-t30s`.
package struct OptionSpec: Sendable {
    /// Long name without dashes, e.g. `"count"`.
    package let long: String
    /// Short letter, e.g. `"n"`, or nil.
    package let short: Character?
    /// Whether the option takes a value (`--count 5`) or is a flag.
    package let takesValue: Bool

    /// - Parameters:
    ///   - long: the name after `--`.
    ///   - short: the letter after `-`, if any (never a digit).
    ///   - value: whether the option takes a value.
    package init(_ long: String, _ short: Character? = nil, value: Bool = false) {
        self.long = long
        self.short = short
        self.takesValue = value
    }
}

/// The options and operands of one command line, in the order given.
package struct ParsedArguments: Sendable {
    /// `(long name, value)` pairs in command-line order; flags have a nil value.
    package var options: [(name: String, value: String?)] = []
    /// Arguments that are not options.
    package var operands: [String] = []
    /// How many operands came before a `--` (nil when there was none).
    package var operandsBeforeDoubleDash: Int?

    package init() {}

    /// Whether the flag or option was given at all.
    package func has(_ name: String) -> Bool { options.contains { $0.name == name } }

    /// The last value given for `name` (later options override earlier ones).
    package func value(_ name: String) -> String? { options.last { $0.name == name }?.value }

    /// The last value of `--name` read with `parse` (`parseDuration`,
    /// `parseSize`, `parseCount`), nil when the option was not given.
    /// - Throws: `UsageError` worded as `parseValue` words it.
    package func value<T>(_ name: String, as parse: (String) throws(ValueError) -> T) throws(UsageError) -> T? {
        guard let text = value(name) else { return nil }
        return try parseValue(text, of: "--" + name, parse)
    }
}

/// `parse(value)`, its `ValueError` turned into a `UsageError` for `option`:
/// `invalid duration '5x' for --timeout: unknown unit 'x' (examples: ...)`.
/// - Parameter option: the option as shown to the user, e.g. `"--timeout"`.
package func parseValue<T>(_ value: String, of option: String, _ parse: (String) throws(ValueError) -> T) throws(UsageError) -> T {
    do {
        return try parse(value)
    } catch {
        throw UsageError(error.message(for: option))
    }
}

/// A command line that does not fit the option table: one line for the user,
/// e.g. `unknown option '--bogus'`; the program adds where to find help.
package struct UsageError: Error, Equatable, Sendable, CustomStringConvertible {
    package let message: String

    package init(_ message: String) { self.message = message }

    package var description: String { message }
}

/// Parses `arguments` (without the program name) against `specs`.
/// `["-n1", "a.b", "--format=data"]` gives options `[("count", "1"), ("format", "data")]`
/// and operands `["a.b"]`.
/// - Parameters:
///   - specs: the options accepted; any other `-x`/`--name` is an error.
///   - stopAtFirstOperand: stop at the first operand and leave the rest in
///     `operands` unparsed (used to find a subcommand).
/// - Throws: `UsageError` for an unknown option, a missing value, or a value
///   given to a flag.
package func parseArguments(_ arguments: ArraySlice<String>, specs: [OptionSpec], stopAtFirstOperand: Bool = false) throws(UsageError) -> ParsedArguments {
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
                let near = Suggestion.closest(to: String(name), among: specs.map(\.long))
                throw UsageError("unknown option '--\(name)'" + (near.map { "; did you mean '--\($0)'?" } ?? ""))
            }
            if option.takesValue {
                if let inlineValue {
                    result.options.append((option.long, inlineValue))
                } else {
                    guard index < arguments.endIndex else { throw UsageError("option '--\(name)' needs a value") }
                    result.options.append((option.long, arguments[index]))
                    index += 1
                }
            } else {
                guard inlineValue == nil else { throw UsageError("option '--\(name)' takes no value") }
                result.options.append((option.long, nil))
            }
            continue
        }
        if argument.hasPrefix("-") && argument.count > 1 && !isNegativeNumber(argument) {
            // One or more short options: flags bundle, a value-taking one ends the bundle.
            var letters = argument.dropFirst()
            while let letter = letters.first {
                letters = letters.dropFirst()
                guard let option = spec(short: letter) else { throw UsageError("unknown option '-\(letter)'") }
                if option.takesValue {
                    if !letters.isEmpty {
                        result.options.append((option.long, String(letters)))
                    } else {
                        guard index < arguments.endIndex else { throw UsageError("option '-\(letter)' needs a value") }
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
