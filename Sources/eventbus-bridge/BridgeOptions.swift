// The bridge's command line: its option table, how flags and the config file
// combine into `BridgeSettings`, the exit statuses and the `--help` text.
// Parsing is EventBusCommandLine's GNU-style parser, shared with `eventbusd`
// and `eventbus`; every value is checked by `ConfigFile.apply`, the same code
// that reads `/etc/eventbus/bridge.conf`, so a value means the same in both.
//
// Before editing: a new setting is a key in ConfigFile (with its case in
// `apply`) and an `OptionDeclaration` of the same name in `bridgeInterface`
// (EventBusBridge/BridgeInterface.swift: the parser's table, the help,
// eventbus-bridge(8) and the completions come from it).
import EventBusBridge
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSystem

/// A reason to stop before running: a status and one line for stderr.
/// Statuses used: 0 clean stop (SIGTERM, SIGINT), `--help`, `--version`, live
/// bridges for `--status`; 64 usage; 69 no live bridge for `--status`; 70
/// internal failure (no eventfd); 78 config file unreadable or invalid.
struct BridgeFailure: Error {
    var status: ExitStatus
    var message: String
}

/// What the command line asks for.
struct BridgeOptions {
    enum Mode {
        case run
        case help
        case version
        case status
    }

    var mode = Mode.run
    /// Flags and file combined (flags win; a list given as flags replaces the file's).
    var settings = BridgeSettings()
    /// `--config FILE`, if given.
    var configFile: String?

    /// Every option `eventbus-bridge` accepts: those of its declaration,
    /// `bridgeInterface` (EventBusBridge/BridgeInterface.swift).
    static var specs: [OptionSpec] { bridgeInterface.specs() }

    /// Parses `arguments` (without the program name) and reads `--config`.
    /// - Throws: `BridgeFailure` 64 for the command line (ending in `(see
    ///   eventbus-bridge --help)`), 78 for the config file (`file:line: ...`).
    static func parse(_ arguments: [String], readFile: (String) throws -> String = BridgeOptions.readText) throws(BridgeFailure) -> BridgeOptions {
        var options = BridgeOptions()
        let parsed: ParsedArguments
        do {
            parsed = try parseArguments(arguments[...], specs: specs)
        } catch {
            throw usage(error.message)
        }
        if let operand = parsed.operands.first { throw usage("unexpected argument '\(operand)'") }
        if parsed.has("help") { options.mode = .help; return options }
        if parsed.has("version") { options.mode = .version; return options }
        if parsed.has("status") { options.mode = .status }
        let buses = ["socket", "system", "user"].filter(parsed.has)
        if buses.count > 1 { throw usage("give only one of --socket, --system and --user") }

        let flags = try settings(of: parsed)
        var file = BridgeSettings()
        if let path = parsed.value("config") {
            options.configFile = path
            file = try readConfig(path, readFile: readFile)
        }
        options.settings = file.overlaid(by: flags)
        return options
    }

    /// "(see eventbus-bridge --help)" after `message`: exit 64.
    private static func usage(_ message: String) -> BridgeFailure {
        BridgeFailure(status: .usage, message: "\(message) (see eventbus-bridge --help)")
    }

    /// The settings the command line's options give (over the config file's).
    private static func settings(of parsed: ParsedArguments) throws(BridgeFailure) -> BridgeSettings {
        var flags = BridgeSettings()
        for (name, value) in parsed.options {
            do throws(SettingsError) {
                switch name {
                case "system", "user": try ConfigFile.apply("bus", name, to: &flags, shownAs: "--\(name)")
                case "config", "status", "help", "version": break
                case "socket":
                    // A relative path on the command line is the current
                    // directory's, as `eventbus --socket` takes it; made absolute
                    // here (reconnects, the status's bus_path). bridge.conf's must be absolute.
                    let path = value ?? ""
                    let absolute: String
                    do { absolute = path.isEmpty ? path : try FileSystem.absolute(path) } catch { throw SettingsError("--socket: \(error)") }
                    try ConfigFile.apply(name, absolute, to: &flags, shownAs: "--\(name)")
                default: try ConfigFile.apply(name, value ?? "", to: &flags, shownAs: "--\(name)")
                }
            } catch {
                throw usage(error.description)
            }
        }
        return flags
    }

    /// The settings of the config file `path`.
    /// - Throws: `BridgeFailure` 78 when it cannot be read or a line is wrong.
    private static func readConfig(_ path: String, readFile: (String) throws -> String) throws(BridgeFailure) -> BridgeSettings {
        let text: String
        do {
            text = try readFile(path)
        } catch {
            // The installed bridge.conf is root:eventbus-bridge 0640 (it can hold NATS
            // credentials): trying the bridge by hand as another user meets this first.
            let denied = (error as? SystemError)?.errno == .permissionDenied
            let hint = denied ? " (it can hold NATS credentials, so as installed only root and the group eventbus-bridge read it: "
                + "run the bridge as root, or as its unit does, as the user eventbus-bridge)" : ""
            throw BridgeFailure(status: .config, message: "cannot read the config file \(path): \(BridgeOptions.reason(error))\(hint)")
        }
        do {
            return try ConfigFile.parse(text, file: path)
        } catch {
            throw BridgeFailure(status: .config, message: error.description)
        }
    }

    /// The config file is not UTF-8.
    struct NotUTF8: Error, CustomStringConvertible {
        var description: String { "not UTF-8 text" }
    }

    /// The text of the config file at `path` (at most 1 MiB).
    /// - Throws: `SystemError` (`open: No such file or directory`), `NotUTF8`.
    static func readText(_ path: String) throws -> String {
        let bytes = try FileSystem.readFile(path, maxBytes: 1 << 20)
        guard let text = String(validating: bytes, as: UTF8.self) else { throw NotUTF8() }
        return text
    }

    /// A file error in one line (`No such file or directory`, `not UTF-8 text`).
    static func reason(_ error: any Error) -> String {
        if let error = error as? SystemError { return "\(error.errno)" }
        return "\(error)"
    }

    /// The `--help` text, rendered from `bridgeInterface` (whose defaults are
    /// read from `BridgeConfiguration`).
    static var usage: String { HelpText.render(bridgeInterface, command: bridgeInterface.root) }
}
