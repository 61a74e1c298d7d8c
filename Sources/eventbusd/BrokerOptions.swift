// The broker's command line: its option table, what each option sets, and the
// `eventbusd --help` text. Parsing is EventBusCommandLine's GNU-style parser
// (`--opt value`, `--opt=value`, `-s PATH`, `-sPATH`, `--`), with its
// DURATION, SIZE and N parsers, shared with `eventbus`.
//
// Before editing: a new option is one `OptionSpec` in `specs`, one `case` in
// `apply`, and one line in `usage`; the help states the real defaults because
// it reads them from `ServerConfiguration()`. EventBusIntegrationTests checks
// that every option in the help is accepted, and that every documented
// DURATION parses (DocumentedDurationTests).
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
    var socketMode: UInt32 = 0o666
    var logLevel = LogLevel.info
    var showHelp = false
    var showVersion = false
    /// `--policy FILE`, in the order given (repeatable).
    var policyFiles: [String] = []
    /// `--check-policy [FILE...]`: check and print the policy, then exit.
    var checkPolicy = false
    /// The operands (only with `--check-policy`: the files to check).
    var checkFiles: [String] = []

    /// Every option `eventbusd` accepts.
    static let specs: [OptionSpec] = [
        OptionSpec("socket", "s", value: true),
        OptionSpec("system"),
        OptionSpec("user"),
        OptionSpec("mode", value: true),
        OptionSpec("max-frame", value: true),
        OptionSpec("max-outbound", value: true),
        OptionSpec("max-queued", value: true),
        OptionSpec("max-connections", value: true),
        OptionSpec("max-subscriptions", value: true),
        OptionSpec("history-events", value: true),
        OptionSpec("history-bytes", value: true),
        OptionSpec("state-dir", value: true),
        OptionSpec("max-connections-per-uid", value: true),
        OptionSpec("max-subscriptions-per-uid", value: true),
        OptionSpec("max-subscriptions-total", value: true),
        OptionSpec("max-inbound-per-uid", value: true),
        OptionSpec("max-inbound", value: true),
        OptionSpec("max-outbound-per-uid", value: true),
        OptionSpec("max-retained", value: true),
        OptionSpec("max-retained-bytes", value: true),
        OptionSpec("max-retained-bytes-per-uid", value: true),
        OptionSpec("trusted-hold-window", value: true),
        OptionSpec("frame-timeout", value: true),
        OptionSpec("stall-timeout", value: true),
        OptionSpec("exit-idle-time", value: true),
        OptionSpec("shutdown-timeout", value: true),
        OptionSpec("log-level", value: true),
        OptionSpec("policy", value: true),
        OptionSpec("check-policy"),
        OptionSpec("help", "h"),
        OptionSpec("version", "V"),
    ]

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
        case "trusted-hold-window":
            let nanoseconds = try parsed(parseDuration).totalNanoseconds
            guard nanoseconds > 0 else { throw UsageError("--trusted-hold-window must be more than 0") }
            server.broker.trustedHoldWindowNanoseconds = nanoseconds
        case "frame-timeout": server.broker.quotas.frameTimeoutNanoseconds = try parsed(parseDuration).totalNanoseconds
        case "stall-timeout":
            let nanoseconds = try parsed(parseDuration).totalNanoseconds
            guard nanoseconds > 0 else { throw UsageError("--stall-timeout must be more than 0") }
            server.broker.stallTimeoutNanoseconds = nanoseconds
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

    /// The `--help` text; defaults are read from `ServerConfiguration()`.
    static var usage: String {
        let defaults = ServerConfiguration()
        let limits = defaults.broker
        let quotas = limits.quotas
        let mode = "0" + String(BrokerOptions().socketMode, radix: 8)
        return """
        Usage: eventbusd [OPTIONS]

        The eventbus broker: routes newline-delimited JSON events between processes
        over a Unix domain socket (wire protocol version \(ProtocolConstants.version): docs/PROTOCOL.md in the
        source tree).

        Socket (first that applies; under systemd socket activation the passed
        sockets are used instead and no path is bound or unlinked):
          -s, --socket PATH        listen on PATH
              --system             the system bus, \(SocketPath.systemBus)
              --user               the user bus, $XDG_RUNTIME_DIR/eventbus/bus.sock
                                   otherwise $EVENTBUS_SOCKET; else the user bus when
                                   XDG_RUNTIME_DIR is set and not root; else the system bus
              --mode OCTAL         permissions of the socket file (default \(mode))

        Limits:
              --max-frame SIZE         largest incoming frame (default \(sizeText(limits.maxFrameBytes)) = \(limits.maxFrameBytes) bytes)
              --max-outbound SIZE      outbound queue per connection (default \(sizeText(limits.maxOutboundBytes)))
              --max-queued SIZE        all outbound queues together (default \(sizeText(limits.maxQueuedBytes)))
              --max-connections N      connections at most (default \(limits.maxConnections); the
                                       last \(quotas.reservedRootConnections) are kept for uid 0)
              --max-subscriptions N    patterns per connection (default \(limits.maxSubscriptionsPerConnection))

        Flow control (1.2): a subscriber under overflow "wait" (the default) whose
        queue is full holds back a publisher of its own uid (not read until the
        queue is below half), as a full pipe would; one that takes no byte for
        the stall timeout is behind and holds no one:
              --stall-timeout DURATION  (default \(durationText(.nanoseconds(limits.stallTimeoutNanoseconds))))
        A connection the policy lets hold other uids' publishers (allow hold) that
        keeps them held for 95 % of a window is behind for them until its queue
        is empty (their events that do not fit are dropped for it):
              --trusted-hold-window DURATION  (default \(durationText(.nanoseconds(limits.trustedHoldWindowNanoseconds))))

        Limits per uid (uid 0 and the broker's own uid have none; `limit` lines of
        the policy file change them for one uid):
              --max-connections-per-uid N    connections (default \(quotas.maxConnectionsPerUID))
              --max-subscriptions-per-uid N  patterns over its connections (default \(quotas.maxSubscriptionsPerUID))
              --max-inbound-per-uid SIZE     bytes of incomplete incoming frames; over it
                                             its connections are read one at a time
                                             (default \(sizeText(quotas.maxInboundBytesPerUID)))
              --max-outbound-per-uid SIZE    outbound queues together (default \(sizeText(quotas.maxOutboundBytesPerUID)))
              --max-retained-bytes-per-uid SIZE  retained events it published
                                             (default 1/8 of --max-retained-bytes)

        Limits in total:
              --max-subscriptions-total N    patterns (default \(quotas.maxSubscriptions))
              --max-inbound SIZE       bytes of incomplete incoming frames; over it the
                                       uids above their share are read one connection
                                       at a time (default \(sizeText(quotas.maxInboundBytes)))
              --max-retained N         retained events (default \(quotas.maxRetainedEvents))
              --max-retained-bytes SIZE  bytes of retained events (default \(sizeText(quotas.maxRetainedBytes)))
              --frame-timeout DURATION   close a connection whose incomplete frame gets
                                       no byte for DURATION, with error code timeout
                                       (default \(durationText(.nanoseconds(quotas.frameTimeoutNanoseconds))); 0: never)
            SIZE is bytes, or with K, M, G (binary multiples).

        Retained events and history (1.1):
              --state-dir DIR          keep retained events in DIR/retained.jsonl across
                                       restarts (the units pass $STATE_DIRECTORY;
                                       default: none, retention lasts for the run)
              --history-events N       events kept for 'subscribe' with 'since'
                                       (default \(defaults.broker.retention.historyEvents); 0 turns history off)
              --history-bytes SIZE     bytes of events kept for it (default \(sizeText(defaults.broker.retention.historyBytes)); 0: off)

        Access policy (docs/POLICY.md):
              --policy FILE            read the policy from FILE; repeat for more files,
                                       read in order. Default: none, except on the
                                       system bus (\(SocketPath.systemBus), or --system
                                       under socket activation): the vendor file
                                       PREFIX/share/eventbus/policy.conf next to this
                                       binary's PREFIX/bin, then /etc/eventbus/policy.conf
                                       if it exists, then /etc/eventbus/policy.d/*.conf
              --check-policy [FILE...] read FILE... (default: the files this command
                                       line would read), print the effective rules with
                                       names resolved to numbers, and exit: 0 valid,
                                       78 invalid (each error as file:line: message)

        Lifecycle:
              --exit-idle-time DURATION  exit after DURATION with no connections
                                         (for socket activation; default: never)
              --shutdown-timeout DURATION  how long SIGTERM/SIGINT waits for queued
                                         events to be written (default \(durationText(.nanoseconds(defaults.shutdownFlushNanoseconds))))
              --log-level LEVEL        error, warning, notice, info (default) or debug
          -h, --help                   show this help
          -V, --version                show the version
            DURATION is a time span as in systemd.time(7): 500ms, 30s, 5min, 1h30m,
            2d, or plain seconds; units us, ms, s, min (or m), h, d, w, M, y.

        Under systemd the units add $EVENTBUSD_OPTIONS to the command line: set it in
        a drop-in (docs/SYSTEMD.md), e.g. to exit after 5 idle minutes, no editor needed:
          mkdir -p /etc/systemd/system/eventbus.service.d
          printf '[Service]\\nEnvironment="EVENTBUSD_OPTIONS=--exit-idle-time 5min"\\n' \\
              > /etc/systemd/system/eventbus.service.d/options.conf
          systemctl daemon-reload && systemctl try-restart eventbus.service
        For the user bus: ~/.config/systemd/user/eventbus.service.d and systemctl --user.

        Signals: SIGTERM and SIGINT stop accepting, flush queues (bounded by
        --shutdown-timeout), unlink the socket path if this process bound it, and
        exit 0. SIGHUP reads the policy files again: all or nothing (an invalid
        file keeps the policy in force and logs file:line); 'eventbus reload
        --wait' sends it and reports the outcome.

        Exit status: 0 clean stop, 64 usage error, 69 cannot listen (path in use by
        a live broker, not a socket, too long), 70 internal failure, 78 invalid
        policy file or unusable --state-dir (e.g. owned by another uid).
        """
    }
}
