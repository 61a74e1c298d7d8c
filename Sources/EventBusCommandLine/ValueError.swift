// The one error shape of every option-value parser (durations, sizes, counts):
// what was given, what is wrong with it, and examples of values that work, so
// that every program words a bad value the same way.
//
// Before editing: messages are one line, lower case, without the program name;
// the program prefixes `eventbusd: ` or `eventbus: ` and exits 64 (EX_USAGE).

/// A malformed option value, e.g. `--timeout 5x`.
///
/// `message(for: "--timeout")` reads
/// `invalid duration '5x' for --timeout: unknown unit 'x' (examples: 500ms, 30s, 5min, 1h30m, 2d)`.
package struct ValueError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What is wrong with the value.
    package enum Problem: Equatable, Sendable, CustomStringConvertible {
        /// Nothing but white space (or nothing at all).
        case empty
        /// Starts with `-`.
        case negative
        /// Letters with no number in front of them, e.g. `s`, `soon`, `1h min`.
        case missingNumber(before: String)
        /// Letters that are not a unit, e.g. `x` in `5x`.
        case unknownUnit(String)
        /// A character that belongs to no number or unit, e.g. `,` in `1,5s`.
        case unexpectedCharacter(Character)
        /// A number that is not written as digits with at most one `.` and a
        /// digit after it, e.g. `5.` or `1.2.3`.
        case malformedNumber(String)
        /// Larger than the parser allows (`limit` is that maximum, in words).
        case tooLarge(limit: String)
        /// Smaller than the option allows (`limit` is that minimum, in words).
        case tooSmall(limit: String)

        package var description: String {
            switch self {
            case .empty: "no value"
            case .negative: "negative values are not allowed"
            case .missingNumber(let word): "no number before '\(word)'"
            case .unknownUnit(let unit): "unknown unit '\(unit)'"
            case .unexpectedCharacter(let character): "unexpected '\(character)'"
            case .malformedNumber(let number): "malformed number '\(number)'"
            case .tooLarge(let limit): "larger than \(limit)"
            case .tooSmall(let limit): "less than the minimum \(limit)"
            }
        }
    }

    /// The kind of value expected, for the message: `"duration"`, `"size"`, `"number"`.
    package let kind: String
    /// The text given.
    package let value: String
    /// What is wrong with it.
    package let problem: Problem
    /// Values that would be accepted, e.g. `"500ms, 30s, 5min, 1h30m, 2d"`.
    package let examples: String

    package init(kind: String, value: String, problem: Problem, examples: String) {
        self.kind = kind
        self.value = value
        self.problem = problem
        self.examples = examples
    }

    /// `invalid duration '5x' for --timeout: unknown unit 'x' (examples: 500ms, 30s, 5min, 1h30m, 2d)`.
    /// - Parameter option: the option as the user typed it, e.g. `"--timeout"`.
    package func message(for option: String) -> String {
        "invalid \(kind) '\(value)' for \(option): \(problem) (examples: \(examples))"
    }

    /// The message without an option name: `invalid duration '5x': unknown unit 'x' (examples: ...)`.
    package var description: String {
        "invalid \(kind) '\(value)': \(problem) (examples: \(examples))"
    }
}
