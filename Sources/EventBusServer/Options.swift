// Parsing of the broker's command line (`eventbusd --help` shows the result):
// GNU-style long options, `--opt value` and `--opt=value`, sizes with binary
// suffixes and durations with units.
//
// Before editing: every flag here must appear in `BrokerOptions.usage`, and
// the usage text must state the real defaults.
import EventBusCore
import EventBusProtocol
import EventBusSystem

/// The broker's command-line options.
public struct BrokerOptions: Sendable {
    public var bus = BusSelection.automatic
    public var server = ServerConfiguration()
    /// Socket file mode for a path the broker binds (`--mode`, octal, default 0666).
    public var socketMode: UInt32 = 0o666
    public var logLevel = LogLevel.info
    public var showHelp = false
    public var showVersion = false

    public init() {}

    /// A usage error: one line, for `eventbusd: <message>` and exit 64.
    public struct UsageError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Parses `arguments` (without the program name).
    /// - Throws: `UsageError` for unknown options, missing or malformed values.
    public static func parse(_ arguments: [String]) throws(UsageError) -> BrokerOptions {
        var options = BrokerOptions()
        var i = 0
        func value(_ name: String, inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            i += 1
            guard i < arguments.count else { throw UsageError(description: "option \(name) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            let argument = arguments[i]
            var name = argument
            var inline: String? = nil
            if argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") {
                name = String(argument[..<eq])
                inline = String(argument[argument.index(after: eq)...])
            }
            switch name {
            case "-h", "--help": options.showHelp = true
            case "-V", "--version": options.showVersion = true
            case "-s", "--socket": options.bus = .path(try value(name, inline: inline))
            case "--system": options.bus = .system
            case "--user": options.bus = .user
            case "--max-frame":
                options.server.broker.maxFrameBytes = try parseSize(try value(name, inline: inline), name, minimum: 64)
            case "--max-outbound":
                options.server.broker.maxOutboundBytes = try parseSize(try value(name, inline: inline), name, minimum: 1024)
            case "--max-queued":
                options.server.broker.maxQueuedBytes = try parseSize(try value(name, inline: inline), name, minimum: 1024)
            case "--max-connections":
                options.server.broker.maxConnections = try parseCount(try value(name, inline: inline), name)
            case "--max-subscriptions":
                options.server.broker.maxSubscriptionsPerConnection = try parseCount(try value(name, inline: inline), name)
            case "--mode":
                let text = try value(name, inline: inline)
                guard let mode = UInt32(text, radix: 8), mode <= 0o777 else {
                    throw UsageError(description: "--mode takes octal permission bits such as 0660, not '\(text)'")
                }
                options.socketMode = mode
            case "--log-level":
                let text = try value(name, inline: inline)
                guard let level = LogLevel(name: text) else {
                    throw UsageError(description: "--log-level takes error, warning, notice, info or debug, not '\(text)'")
                }
                options.logLevel = level
            case "--exit-idle-time":
                let ns = try parseDuration(try value(name, inline: inline), name)
                options.server.exitIdleNanoseconds = ns > 0 ? ns : nil
            case "--shutdown-timeout":
                options.server.shutdownFlushNanoseconds = try parseDuration(try value(name, inline: inline), name)
            default:
                if argument.hasPrefix("-") {
                    throw UsageError(description: "unknown option '\(argument)' (see eventbusd --help)")
                }
                throw UsageError(description: "unexpected argument '\(argument)' (see eventbusd --help)")
            }
            i += 1
        }
        return options
    }

    /// Parses `123`, `64K`, `8M`, `1G` (binary multiples, optional `iB`/`B`).
    public static func parseSize(_ text: String, _ name: String, minimum: Int) throws(UsageError) -> Int {
        var digits = Substring(text)
        var multiplier = 1
        for (suffixes, factor) in [(["KiB", "KB", "K", "k"], 1 << 10), (["MiB", "MB", "M", "m"], 1 << 20), (["GiB", "GB", "G", "g"], 1 << 30)] {
            if let suffix = suffixes.first(where: { text.hasSuffix($0) }) {
                digits = text.dropLast(suffix.count)
                multiplier = factor
                break
            }
        }
        if multiplier == 1 && digits.hasSuffix("B") { digits = digits.dropLast() }
        guard let number = Int(digits), number >= 0 else {
            throw UsageError(description: "\(name) takes a size in bytes such as 1048576, 64K or 8M, not '\(text)'")
        }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
        guard !overflow, bytes >= minimum else {
            throw UsageError(description: "\(name) must be at least \(minimum) bytes, not '\(text)'")
        }
        return bytes
    }

    static func parseCount(_ text: String, _ name: String) throws(UsageError) -> Int {
        guard let n = Int(text), n >= 1 else { throw UsageError(description: "\(name) takes a positive whole number, not '\(text)'") }
        return n
    }

    /// Parses `500ms`, `30s`, `5m`, `1h` or a plain number of seconds (decimals allowed).
    /// - Returns: nanoseconds.
    public static func parseDuration(_ text: String, _ name: String) throws(UsageError) -> Int64 {
        var number = Substring(text)
        var scale = 1_000_000_000.0
        for (suffix, factor) in [("ms", 1_000_000.0), ("s", 1_000_000_000.0), ("m", 60_000_000_000.0), ("h", 3_600_000_000_000.0)] {
            if text.hasSuffix(suffix) {
                number = text.dropLast(suffix.count)
                scale = factor
                break
            }
        }
        guard let value = Double(number), value >= 0, value.isFinite, value * scale < 9e18 else {
            throw UsageError(description: "\(name) takes a duration such as 500ms, 30s, 5m or 1h, not '\(text)'")
        }
        return Int64(value * scale)
    }

    /// The `--help` text.
    public static let usage = """
    Usage: eventbusd [OPTIONS]

    The eventbus broker: routes newline-delimited JSON events between processes
    over a Unix domain socket (wire protocol version 1: docs/PROTOCOL.md in the
    source tree).

    Socket (first that applies; under systemd socket activation the passed
    sockets are used instead and no path is bound or unlinked):
      -s, --socket PATH        listen on PATH
          --system             the system bus, /run/eventbus/bus.sock
          --user               the user bus, $XDG_RUNTIME_DIR/eventbus/bus.sock
                               otherwise $EVENTBUS_SOCKET; else the user bus when
                               XDG_RUNTIME_DIR is set and not root; else the system bus
          --mode OCTAL         permissions of the socket file (default 0666)

    Limits:
          --max-frame SIZE         largest incoming frame (default 1M = 1048576 bytes)
          --max-outbound SIZE      outbound queue per connection (default 8M)
          --max-queued SIZE        all outbound queues together (default 512M)
          --max-connections N      connections at most (default 4096)
          --max-subscriptions N    patterns per connection (default 4096)
        SIZE is bytes, or with K, M, G (binary multiples).

    Lifecycle:
          --exit-idle-time DURATION  exit after DURATION with no connections
                                     (for socket activation; default: never)
          --shutdown-timeout DURATION  how long SIGTERM/SIGINT waits for queued
                                     events to be written (default 2s)
          --log-level LEVEL        error, warning, notice, info (default) or debug
      -h, --help                   show this help
      -V, --version                show the version
        DURATION is 500ms, 30s, 5m, 1h or plain seconds.

    Signals: SIGTERM and SIGINT stop accepting, flush queues (bounded by
    --shutdown-timeout), unlink the socket path if this process bound it, and
    exit 0. SIGHUP is not a restart: it is logged and otherwise ignored.

    Exit status: 0 clean stop, 64 usage error, 69 cannot listen (path in use by
    a live broker, not a socket, too long), 70 internal failure.
    """
}
