// Which configuration file eventbusd reads (eventbusd.conf(5), docs/SYSTEMD.md
// "The configuration file"), and `eventbusd --check-config`.
//
// Before editing: the file is chosen from the command line alone (a `socket`
// line in the file cannot choose another file): `--config FILE` (which must
// exist); else, on the system bus (the path is /run/eventbus/bus.sock:
// `--system`, as the shipped unit passes, or root's automatic choice),
// /etc/eventbus/eventbusd.conf; on the user bus
// ($XDG_RUNTIME_DIR/eventbus/bus.sock: `--user`, or a user's automatic choice,
// as the user unit runs it), $XDG_CONFIG_HOME/eventbus/eventbusd.conf
// (~/.config when unset); those two only when they exist. A broker on any
// other `--socket` path reads no file unless given `--config`, so tests and
// brokers started by hand are not changed by a file in /etc. The file is read
// once at start: SIGHUP re-reads the policy files only, so a changed setting
// needs a restart (`systemctl restart eventbus`; retained events are kept in
// the state directory).
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSystem
import Glibc

/// A command line, or a file's line, that cannot be used.
enum OptionsError: Error {
    /// Of the command line: exit 64.
    case usage(UsageError)
    /// Of the configuration file, naming `file:line`: exit 78.
    case config(ConfigError)
}

/// One setting as given, for `--check-config`.
struct GivenSetting {
    var key: String
    /// nil for a flag on the command line.
    var value: String?
    /// `FILE:LINE`, or nil for the command line.
    var origin: String?
    /// A file's line whose key the command line also gives (not applied).
    var overridden = false
}

/// Where the buses' own configuration files are.
enum ConfigPaths {
    /// The system bus's file.
    static let system = "/etc/eventbus/eventbusd.conf"

    /// The user bus's file: `$XDG_CONFIG_HOME/eventbus/eventbusd.conf`, or
    /// `$HOME/.config/eventbus/eventbusd.conf`; nil with neither variable.
    static func user(environment: [String: String]) -> String? {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") { return config + "/eventbus/eventbusd.conf" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.config/eventbus/eventbusd.conf" }
        return nil
    }
}

/// The configuration file the command line in `options` reads, and whether it
/// must exist (`--config`) or is skipped when missing (the bus's own file).
func selectConfigFile(_ options: BrokerOptions, environment: [String: String], effectiveUID: UInt32) -> (path: String, required: Bool)? {
    if let file = options.configFile { return (file, true) }
    guard let path = try? SocketPath.resolve(options.bus, environment: environment, effectiveUID: effectiveUID) else { return nil }
    if path == SocketPath.systemBus { return (ConfigPaths.system, false) }
    if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty, path == SocketPath.userBus(runtimeDirectory: runtime),
       let file = ConfigPaths.user(environment: environment) {
        return (file, false)
    }
    return nil
}

/// The command line in `arguments` over the configuration file it selects.
/// - Returns: the options, and the file read (nil when none was).
/// - Throws: `.usage` for the command line; `.config` for the file (a line,
///   or a `--config` file that cannot be read).
func loadOptions(_ arguments: [String], environment: [String: String], effectiveUID: UInt32) throws(OptionsError) -> (BrokerOptions, String?) {
    let commandLine: BrokerOptions
    do {
        commandLine = try BrokerOptions.parse(arguments)
    } catch {
        throw .usage(error)
    }
    if commandLine.showHelp || commandLine.showVersion { return (commandLine, nil) }
    guard let (path, required) = selectConfigFile(commandLine, environment: environment, effectiveUID: effectiveUID) else {
        return (commandLine, nil)
    }
    let bytes: [UInt8]
    do {
        bytes = try FileSystem.readFile(path, maxBytes: 1 << 20)
    } catch {
        if !required && error.errno.rawValue == ENOENT { return (commandLine, nil) }
        throw .config(ConfigError(file: path, line: 0, message: "cannot read the configuration file: \(error)"))
    }
    guard let text = String(validating: bytes, as: UTF8.self) else {
        throw .config(ConfigError(file: path, line: 0, message: "not UTF-8 text"))
    }
    return (try BrokerOptions.parse(arguments, settings: (text, path)), path)
}

/// `eventbusd --check-config`: the file read and every setting given, one
/// `key = value` line each with where it came from; the rest are defaults
/// (`eventbusd --help`).
func checkConfigText(_ options: BrokerOptions, file: String?) -> String {
    var text = file.map { "# \($0): valid\n" } ?? "# no configuration file read (\(ConfigPaths.system) for the system bus, $XDG_CONFIG_HOME/eventbus/eventbusd.conf for the user bus, or --config FILE)\n"
    for setting in options.given {
        let line = "\(setting.key) = \(setting.value ?? "yes")"
        let origin = setting.origin.map { setting.overridden ? "\($0), overridden by the command line" : $0 } ?? "command line"
        text += line.padding(toLength: 40) + " # " + origin + "\n"
    }
    text += "# every other setting has its default (eventbusd --help, config/eventbusd.conf)\n"
    return text
}

extension String {
    /// Padded with spaces to at least `length` characters.
    fileprivate func padding(toLength length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }
}
