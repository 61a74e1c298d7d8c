// The bridge's command line: its option table, how flags and the config file
// combine into `BridgeSettings`, the exit statuses and the `--help` text.
// Parsing is EventBusCommandLine's GNU-style parser, shared with `eventbusd`
// and `eventbus`; every value is checked by `ConfigFile.apply`, the same code
// that reads `/etc/eventbus/bridge.conf`, so a value means the same in both.
//
// Before editing: a new setting is a key in ConfigFile (with its case in
// `apply`), an `OptionSpec` here with the same name, and a line in `usage`.
import EventBusBridge
import EventBusCommandLine
import EventBusProtocol
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

    /// The flags that are settings, named as in the file (`ConfigFile.keys`).
    static let settingFlags: [OptionSpec] = ConfigFile.keys
        .filter { !ConfigFile.fileOnly.contains($0) && $0 != "bus" }
        .map { OptionSpec($0, $0 == "socket" ? "s" : nil, value: true) }

    /// Every option `eventbus-bridge` accepts.
    static let specs: [OptionSpec] = settingFlags + [
        OptionSpec("system"),
        OptionSpec("user"),
        OptionSpec("config", "c", value: true),
        OptionSpec("status"),
        OptionSpec("help", "h"),
        OptionSpec("version", "V"),
    ]

    /// Parses `arguments` (without the program name) and reads `--config`.
    /// - Throws: `BridgeFailure` 64 for the command line (ending in `(see
    ///   eventbus-bridge --help)`), 78 for the config file (`file:line: ...`).
    static func parse(_ arguments: [String], readFile: (String) throws -> String = BridgeOptions.readText) throws(BridgeFailure) -> BridgeOptions {
        func usage(_ message: String) -> BridgeFailure { BridgeFailure(status: .usage, message: "\(message) (see eventbus-bridge --help)") }
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

        var flags = BridgeSettings()
        for (name, value) in parsed.options {
            do throws(SettingsError) {
                switch name {
                case "system", "user": try ConfigFile.apply("bus", name, to: &flags, shownAs: "--\(name)")
                case "config", "status", "help", "version": break
                default: try ConfigFile.apply(name, value ?? "", to: &flags, shownAs: "--\(name)")
                }
            } catch {
                throw usage(error.description)
            }
        }
        var file = BridgeSettings()
        if let path = parsed.value("config") {
            options.configFile = path
            let text: String
            do {
                text = try readFile(path)
            } catch {
                throw BridgeFailure(status: .config, message: "cannot read the config file \(path): \(BridgeOptions.reason(error))")
            }
            do {
                file = try ConfigFile.parse(text, file: path)
            } catch {
                throw BridgeFailure(status: .config, message: error.description)
            }
        }
        options.settings = file.overlaid(by: flags)
        return options
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

    /// The `--help` text; defaults are read from `BridgeConfiguration`.
    static var usage: String {
        let defaults = BridgeConfiguration(servers: [], node: NodeName("x")!)
        return """
        Usage: eventbus-bridge [--socket PATH | --system | --user] --nats URL[,URL...] --node NAME
                               [--export PATTERN]... [--import PATTERN]... [--prefix PREFIX] [--config FILE]
               eventbus-bridge --status [--node NAME | --status-file PATH | --config FILE]

        Carries events between this machine's bus and a NATS cluster (docs/BRIDGE.md):
        local events matching an --export pattern go to NATS subject
        PREFIX.evt.NODE.TYPE (CloudEvents headers, data bytes unchanged); NATS
        messages on PREFIX.evt.*.PATTERN from other nodes are published here with
        "origin". Both links reconnect forever; exports are held in order while
        NATS is away (up to --buffer-events / --buffer-bytes, then dropped,
        counted and reported on PREFIX.ctl.NODE.dropped).

        Local bus (first that applies; PROTOCOL.md "Transport"):
          -s, --socket PATH           the broker's socket
              --system                the system bus, \(SocketPath.systemBus)
              --user                  the user bus, $XDG_RUNTIME_DIR/eventbus/bus.sock
                                      otherwise $EVENTBUS_SOCKET; else the user bus when
                                      XDG_RUNTIME_DIR is set and not root; else the system bus

        NATS and what to carry:
              --nats URL[,URL...]     seed servers (nats://HOST[:PORT]); more are learnt
                                      from the cluster (INFO connect_urls); repeatable
              --node NAME             this bus's name in subjects and origin (1-63 of
                                      A-Z a-z 0-9 _ -); one bridge per NAME per NATS system
              --export PATTERN        local types to send (repeatable, or a comma list)
              --import PATTERN        remote types to receive (repeatable, or a comma list)
              --prefix PREFIX         subject root (default \(defaults.prefix.text))
              --name NAME             CONNECT name (default "eventbus-bridge NODE")
              --reconnect-initial DURATION  NATS backoff after a failed pass (default \(durationText(defaults.reconnectInitial)))
              --reconnect-max DURATION      its ceiling (default \(durationText(defaults.reconnectMaximum))); never gives up
              --ping-interval DURATION      NATS keepalive (default \(durationText(defaults.pingInterval)))
              --buffer-events N       exports held while NATS is away (default \(defaults.bufferEvents))
              --buffer-bytes SIZE     and their bytes (default \(sizeText(defaults.bufferBytes)))

        Running:
          -c, --config FILE           read settings from FILE first (same names as these
                                      flags, plus nats-user, nats-password, nats-token);
                                      flags override it. Example: config/bridge.conf
              --status-file PATH      where the counters are written every second (default
                                      $RUNTIME_DIRECTORY/NODE.json under systemd, else
                                      /run/eventbus-bridge/NODE.json for root,
                                      $XDG_RUNTIME_DIR/eventbus-bridge/NODE.json otherwise)
              --status                print the counters of the running bridges (one JSON
                                      line each: link states, buffered, exported, imported,
                                      dropped by reason, reconnects) and exit
              --log-level LEVEL       error, warning, notice, info (default) or debug
          -h, --help                  show this help
          -V, --version               show the version
            DURATION is a time span as in systemd.time(7): 250ms, 30s, 5min, plain
            seconds. SIZE is bytes, or with K, M, G (binary multiples).

        Exit status: 0 clean stop (SIGTERM, SIGINT) or live bridges for --status,
        64 usage error, 69 no live bridge for --status, 70 internal failure,
        78 unreadable or invalid config file.
        """
    }
}
