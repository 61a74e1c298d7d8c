// The broker's command line: its option table, what each option sets, and the
// `eventbusd --help` text. Parsing is EventBusCommandLine's GNU-style parser
// (`--opt value`, `--opt=value`, `-s PATH`, `-sPATH`, `--`), with its
// DURATION, SIZE and N parsers, shared with `eventbus`.
//
// The configuration file (eventbusd.conf(5), ConfigSelection.swift) takes
// every option of `specs` as a `key = value` line, its key the long name,
// except `brokerCommandLineOnly`: the keys come from the one declaration, so
// a new option is a new key with nothing else to update (config/eventbusd.conf
// documents it: ConfigFileTests fails until it does). The file applies first,
// the command line after it, so a flag wins; an option given on the command
// line replaces the file's lines for it (`--policy` replaces the file's list).
//
// Before editing: a new option is one `OptionDeclaration` in `brokerInterface`
// (EventBusServer/BrokerInterface.swift: the parser's table, the help,
// eventbusd(8), eventbusd.conf(5) and the completions come from it) and one
// `case` in `apply`, or for what sets a `ServerConfiguration` (a limit, a
// quota, a timeout) in EventBusServer's ServerConfiguration+Options.swift. EventBusIntegrationTests checks that every option in the
// help is accepted, and that every documented DURATION parses
// (DocumentedDurationTests).
import EventBusCommandLine
import EventBusLog
@_spi(Package) import EventBusProtocol
import EventBusServer
import EventBusSystem

/// The broker's command-line options.
struct BrokerOptions {
    var bus = BusSelection.automatic
    var server = ServerConfiguration()
    /// Socket file mode for a path the broker binds (`--mode`, octal, default 0666).
    var socketMode: UInt32 = defaultSocketMode
    var logLevel = LogLevel.info
    var showHelp = false
    var showVersion = false
    /// `--policy FILE`, in the order given (repeatable).
    var policyFiles: [String] = []
    /// `--check-policy [FILE...]`: check and print the policy, then exit.
    var checkPolicy = false
    /// The operands (only with `--check-policy`: the files to check).
    var checkFiles: [String] = []
    /// `--bridge FILE`: run the link to NATS inside the broker (BridgeSelection.swift).
    var bridgeFile: String?
    /// `--bridge-user USER`: whose connection the link is.
    var bridgeUser: String?
    /// `--config FILE`: the configuration file to read instead of the bus's own.
    var configFile: String?
    /// `--check-config`: check the configuration file, print the settings, exit.
    var checkConfig = false
    /// Every setting given, in the order applied, for `--check-config`.
    var given: [GivenSetting] = []

    /// Every option `eventbusd` accepts: those of its declaration,
    /// `brokerInterface` (EventBusServer/BrokerInterface.swift).
    static var specs: [OptionSpec] { brokerInterface.specs() }

    /// The options that only the command line may give (actions, and the
    /// choice of file); every other option of `specs` is a key of eventbusd.conf.
    static var commandLineOnly: Set<String> { brokerCommandLineOnly }

    /// The keys of eventbusd.conf, in the order of `specs`.
    static var settingKeys: [String] {
        specs.map(\.long).filter { !commandLineOnly.contains($0) }
    }

    /// Parses `arguments` (without the program name). Options apply in order,
    /// so a later `--socket`/`--system`/`--user` overrides an earlier one.
    /// - Throws: `UsageError`, one line ending in `(see eventbusd --help)`, for
    ///   unknown options, operands, missing or malformed values.
    static func parse(_ arguments: [String]) throws(UsageError) -> BrokerOptions {
        do {
            return try parse(arguments, settings: nil)
        } catch {
            switch error {
            case .usage(let usage): throw usage
            case .config: preconditionFailure("no settings file was given")
            }
        }
    }

    /// Parses the settings file's `text` (named `file` in errors), then
    /// `arguments` over it: a command-line option wins over the file's lines
    /// for it.
    /// - Throws: `.config` naming `file:line` for a line that is not `key =
    ///   value`, an unknown key, a command-line-only one or a bad value;
    ///   `.usage` as `parse(_:)` throws it.
    static func parse(_ arguments: [String], settings: (text: String, file: String)?) throws(OptionsError) -> BrokerOptions {
        var options = BrokerOptions()
        let parsed: ParsedArguments
        do throws(UsageError) {
            parsed = try parseArguments(arguments[...], specs: specs)
        } catch {
            throw .usage(UsageError("\(error.message) (see eventbusd --help)"))
        }
        if let (text, file) = settings {
            let onCommandLine = Set(parsed.options.map(\.name))
            do throws(ConfigError) {
                for line in try SettingsFile.lines(text, file: file) {
                    try options.apply(line, from: file, overridden: onCommandLine.contains(line.key))
                }
            } catch {
                throw .config(error)
            }
        }
        do throws(UsageError) {
            for (name, value) in parsed.options {
                try options.apply(name, value ?? "", shownAs: "--" + name)
                if !commandLineOnly.contains(name) { options.given.append(GivenSetting(key: name, value: value, origin: nil)) }
            }
            if let operand = parsed.operands.first, !options.checkPolicy { throw UsageError("unexpected argument '\(operand)'") }
            options.checkFiles = parsed.operands
        } catch {
            throw .usage(UsageError("\(error.message) (see eventbusd --help)"))
        }
        return options
    }

    /// Applies one line of a settings file: `key = value` as `--key value`; a
    /// flag's line says `yes` (given) or `no` (not given). A line whose key the
    /// command line gives is checked, recorded as overridden, and not applied.
    private mutating func apply(_ line: SettingsLine, from file: String, overridden: Bool) throws(ConfigError) {
        guard let spec = Self.specs.first(where: { $0.long == line.key }), !Self.commandLineOnly.contains(line.key) else {
            if Self.commandLineOnly.contains(line.key) {
                throw ConfigError(file: file, line: line.line, message: "unknown key '\(line.key)': it is for the command line only (the keys: \(Self.settingKeys.joined(separator: ", ")))")
            }
            // A typo is answered with the key meant, as on the command line.
            let near = Suggestion.closest(to: line.key, among: Self.settingKeys).map { "; did you mean '\($0)'?" }
            throw ConfigError(file: file, line: line.line, message: "unknown key '\(line.key)': it is not a setting" + (near ?? " (the keys: \(Self.settingKeys.joined(separator: ", ")))"))
        }
        var value = line.value
        if !spec.takesValue {
            switch value.lowercased() {
            case "yes", "true": value = ""
            case "no", "false":
                given.append(GivenSetting(key: line.key, value: "no", origin: "\(file):\(line.line)", overridden: overridden))
                return
            default: throw ConfigError(file: file, line: line.line, message: "\(line.key) takes yes or no, not '\(value)'")
            }
        }
        var scratch = self
        do throws(UsageError) {
            try scratch.apply(line.key, value, shownAs: line.key)
        } catch {
            throw ConfigError(file: file, line: line.line, message: error.message)
        }
        given.append(GivenSetting(key: line.key, value: spec.takesValue ? line.value : "yes", origin: "\(file):\(line.line)", overridden: overridden))
        if !overridden {
            scratch.given = given
            self = scratch
        }
    }

    /// Sets what option `--name` (from `specs`) with `value` sets; `value` is
    /// empty for flags. The server's options (limits, quotas, timeouts, the
    /// state directory) are `ServerConfiguration.apply(option:_:shownAs:)`'s.
    /// - Parameter shownAs: the name errors use (`--max-frame` on the command
    ///   line, `max-frame` in the file).
    private mutating func apply(_ name: String, _ value: String, shownAs: String) throws(UsageError) {
        if try server.apply(option: name, value, shownAs: shownAs) { return }
        /// `value`, which must not be empty: `what` the option takes.
        func named(_ what: String) throws(UsageError) -> String {
            guard !value.isEmpty else { throw UsageError("\(shownAs) takes \(what)") }
            return value
        }
        switch name {
        case "help": showHelp = true
        case "version": showVersion = true
        case "socket": bus = .path(value)
        case "system": bus = .system
        case "user": bus = .user
        case "mode":
            guard let mode = UInt32(value, radix: 8), mode <= 0o777 else {
                throw UsageError("\(shownAs) takes octal permission bits such as 0660, not '\(value)'")
            }
            socketMode = mode
        case "log-level":
            guard let level = LogLevel(name: value) else {
                throw UsageError("\(shownAs) takes error, warning, notice, info or debug, not '\(value)'")
            }
            logLevel = level
        case "policy": policyFiles.append(try named("a file name"))
        case "check-policy": checkPolicy = true
        case "bridge": bridgeFile = try named("a file name")
        case "bridge-user": bridgeUser = try named("a user name or a uid")
        case "config":
            guard !value.isEmpty else { throw UsageError("--config takes a file name") }
            configFile = value
        case "check-config": checkConfig = true
        default: preconditionFailure("option --\(name) is in `specs` but not handled")
        }
    }

    /// The `--help` text, rendered from `brokerInterface` (whose defaults are
    /// read from `ServerConfiguration()`).
    static var usage: String { HelpText.render(brokerInterface, command: brokerInterface.root) }
}
