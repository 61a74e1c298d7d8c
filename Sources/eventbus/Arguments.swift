// The CLI's side of command-line parsing: the CLI's wording of
// EventBusCommandLine's errors (status 64 with a
// pointer to the command's --help). The parser itself and the DURATION and N
// parsers are EventBusCommandLine's, shared with eventbusd.
//
// Before editing: parse option values only through
// `ParsedArguments.value(_:command:as:)` below, so every command words a bad
// value the same way (with examples of good ones).
@_spi(Package) import EventBusCLI
import EventBusCommandLine

/// `parseArguments` with its `UsageError` as a `CLIError`.
/// - Parameters:
///   - command: the subcommand, for error messages (nil at top level).
///   - stopAtFirstOperand: stop at the first operand (used to find the subcommand).
/// - Throws: `CLIError` with status 64 for an unknown option, a missing value,
///   or a value given to a flag.
func parseCommand(_ arguments: ArraySlice<String>, specs: [OptionSpec], command: String?, stopAtFirstOperand: Bool = false) throws(CLIError) -> ParsedArguments {
    do {
        return try parseArguments(arguments, specs: specs, stopAtFirstOperand: stopAtFirstOperand)
    } catch {
        throw .usage(command, error.message)
    }
}

extension ParsedArguments {
    /// The format asked for with `--format` or `--json`: the last `--format` value,
    /// `json` for `--json`, nil for neither.
    /// - Throws: `CLIError` 64 for `--json` with another `--format`.
    func format(command: String) throws(CLIError) -> String? {
        let named = value("format")
        guard has("json") else { return named }
        if let named, named != "json" { throw .usage(command, "give --json or --format \(named), not both") }
        return "json"
    }

    /// Whether `--format` or `--json` asks for `json` rather than `plain`
    /// (the default, also when neither is given).
    /// - Throws: `CLIError` 64 for another format: `unknown format 'x'; use
    ///   PLAIN or json` and `note`; as `format(command:)`.
    func asksForJSON(command: String, plain: String, note: String = "") throws(CLIError) -> Bool {
        switch try format(command: command) {
        case nil: return false
        case "json": return true
        case let other? where other == plain: return false
        case let other?: throw .usage(command, "unknown format '\(TerminalText.escaped(other))'; use \(plain) or json\(note)")
        }
    }

    /// The last value of `--name` read with `parse` (`parseDuration`,
    /// `parseCount`), nil when not given.
    /// - Throws: `CLIError` 64, e.g. `invalid duration '5x' for --timeout:
    ///   unknown unit 'x' (examples: 10, 500ms, 30s, 5min, 1h30m, 2d) (see 'eventbus listen --help')`.
    func value<T>(_ name: String, command: String, as parse: (String) throws(ValueError) -> T) throws(CLIError) -> T? {
        do {
            return try value(name, as: parse)
        } catch {
            throw .usage(command, error.message)
        }
    }
}
