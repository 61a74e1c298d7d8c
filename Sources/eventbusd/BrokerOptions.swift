// The broker's command line: its option table, what each option sets, and the
// `eventbusd --help` text. Parsing is EventBusCommandLine's GNU-style parser
// (`--opt value`, `--opt=value`, `-s PATH`, `-sPATH`, `--`), with its
// DURATION, SIZE and N parsers, shared with `eventbus`.
//
// Before editing: a new option is one `OptionDeclaration` in `brokerInterface`
// (EventBusServer/BrokerInterface.swift: the parser's table, the help,
// eventbusd(8), eventbusd.conf(5) and the completions come from it) and one
// `case` in `apply`. EventBusIntegrationTests checks that every option in the
// help is accepted, and that every documented DURATION parses
// (DocumentedDurationTests).
import EventBusCommandLine
import EventBusLog
import EventBusProtocol
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

    /// Every option `eventbusd` accepts: those of its declaration,
    /// `brokerInterface` (EventBusServer/BrokerInterface.swift).
    static var specs: [OptionSpec] { brokerInterface.specs() }

    /// Parses `arguments` (without the program name). Options apply in order,
    /// so a later `--socket`/`--system`/`--user` overrides an earlier one.
    /// - Throws: `UsageError`, one line ending in `(see eventbusd --help)`, for
    ///   unknown options, operands, missing or malformed values.
    static func parse(_ arguments: [String]) throws(UsageError) -> BrokerOptions {
        var options = BrokerOptions()
        do throws(UsageError) {
            let parsed = try parseArguments(arguments[...], specs: specs)
            for (name, value) in parsed.options {
                try options.apply(name, value ?? "")
            }
            if let operand = parsed.operands.first, !options.checkPolicy { throw UsageError("unexpected argument '\(operand)'") }
            options.checkFiles = parsed.operands
        } catch {
            throw UsageError("\(error.message) (see eventbusd --help)")
        }
        return options
    }

    /// Sets what option `--name` (from `specs`) with `value` sets; `value` is
    /// empty for flags.
    private mutating func apply(_ name: String, _ value: String) throws(UsageError) {
        /// `value` through a DURATION, SIZE or N parser, its error worded for this option.
        func parsed<T>(_ parse: (String) throws(ValueError) -> T) throws(UsageError) -> T {
            try parseValue(value, of: "--" + name, parse)
        }
        switch name {
        case "help": showHelp = true
        case "version": showVersion = true
        case "socket": bus = .path(value)
        case "system": bus = .system
        case "user": bus = .user
        case "mode":
            guard let mode = UInt32(value, radix: 8), mode <= 0o777 else {
                throw UsageError("--mode takes octal permission bits such as 0660, not '\(value)'")
            }
            socketMode = mode
        case "log-level":
            guard let level = LogLevel(name: value) else {
                throw UsageError("--log-level takes error, warning, notice, info or debug, not '\(value)'")
            }
            logLevel = level
        case "max-frame": server.broker.maxFrameBytes = try parsed { v throws(ValueError) in try parseSize(v, minimum: 64) }
        case "max-outbound": server.broker.maxOutboundBytes = try parsed { v throws(ValueError) in try parseSize(v, minimum: 1024) }
        case "max-queued": server.broker.maxQueuedBytes = try parsed { v throws(ValueError) in try parseSize(v, minimum: 1024) }
        case "max-connections": server.broker.maxConnections = try parsed(parseCount)
        case "max-subscriptions": server.broker.maxSubscriptionsPerConnection = try parsed(parseCount)
        case "history-events": server.broker.retention.historyEvents = value == "0" ? 0 : try parsed(parseCount)
        case "history-bytes": server.broker.retention.historyBytes = try parsed { v throws(ValueError) in try parseSize(v) }
        case "state-dir":
            guard !value.isEmpty else { throw UsageError("--state-dir needs a directory") }
            server.stateDirectory = value
        case "max-connections-per-uid": server.broker.quotas.maxConnectionsPerUID = try parsed(parseCount)
        case "max-subscriptions-per-uid": server.broker.quotas.maxSubscriptionsPerUID = try parsed(parseCount)
        case "max-subscriptions-total": server.broker.quotas.maxSubscriptions = try parsed(parseCount)
        case "max-inbound-per-uid": server.broker.quotas.maxInboundBytesPerUID = try parsed { v throws(ValueError) in try parseSize(v, minimum: 1024) }
        case "max-inbound": server.broker.quotas.maxInboundBytes = try parsed { v throws(ValueError) in try parseSize(v, minimum: 1024) }
        case "max-outbound-per-uid": server.broker.quotas.maxOutboundBytesPerUID = try parsed { v throws(ValueError) in try parseSize(v, minimum: 1024) }
        case "max-retained": server.broker.quotas.maxRetainedEvents = try parsed(parseCount)
        case "max-retained-bytes": server.broker.quotas.maxRetainedBytes = try parsed { v throws(ValueError) in try parseSize(v, minimum: 1024) }
        case "max-retained-bytes-per-uid": server.broker.quotas.maxRetainedBytesPerUID = try parsed { v throws(ValueError) in try parseSize(v, minimum: 1024) }
        case "frame-timeout": server.broker.quotas.frameTimeoutNanoseconds = try parsed(parseDuration).totalNanoseconds
        case "stall-timeout":
            let nanoseconds = try parsed(parseDuration).totalNanoseconds
            guard nanoseconds > 0 else { throw UsageError("--stall-timeout must be more than 0") }
            server.broker.stallTimeoutNanoseconds = nanoseconds
        case "max-request-timeout":
            let nanoseconds = try parsed(parseDuration).totalNanoseconds
            guard nanoseconds >= 1_000_000 else { throw UsageError("--max-request-timeout must be at least 1ms") }
            server.broker.maxRequestTimeoutMilliseconds = UInt64(nanoseconds / 1_000_000)
            server.broker.defaultRequestTimeoutMilliseconds = min(server.broker.defaultRequestTimeoutMilliseconds, server.broker.maxRequestTimeoutMilliseconds)
        case "max-pending-requests": server.broker.maxPendingRequestsPerConnection = try parsed(parseCount)
        case "exit-idle-time":
            let nanoseconds = try parsed(parseDuration).totalNanoseconds
            server.exitIdleNanoseconds = nanoseconds > 0 ? nanoseconds : nil
        case "shutdown-timeout": server.shutdownFlushNanoseconds = try parsed(parseDuration).totalNanoseconds
        case "policy":
            guard !value.isEmpty else { throw UsageError("--policy takes a file name") }
            policyFiles.append(value)
        case "check-policy": checkPolicy = true
        default: preconditionFailure("option --\(name) is in `specs` but not handled")
        }
    }

    /// The `--help` text, rendered from `brokerInterface` (whose defaults are
    /// read from `ServerConfiguration()`).
    static var usage: String { HelpText.render(brokerInterface, command: brokerInterface.root) }
}
