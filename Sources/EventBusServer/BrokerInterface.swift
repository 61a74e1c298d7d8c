// The declaration of `eventbusd`'s command line (EventBusCommandLine's
// Interface.swift): every option with its value, help and completion, the
// prose of `eventbusd --help` and eventbusd(8). The defaults it states are
// read from `ServerConfiguration()`, so the help cannot drift from them.
//
// Before editing: an option declared here is accepted by eventbusd at once;
// give it a `case` in `BrokerOptions.apply` (eventbusd), which fails loudly
// on a declared option it does not handle (InterfaceAgreementTests runs every
// declared option against the built broker).
import EventBusCommandLine
@_spi(Package) import EventBusProtocol

/// The socket file mode eventbusd binds a path with unless `--mode` says otherwise.
package let defaultSocketMode: UInt32 = 0o666

/// The declaration of the `eventbusd` command line, its defaults from `ServerConfiguration()`.
package var brokerInterface: ProgramDeclaration {
    let defaults = ServerConfiguration()
    let limits = defaults.broker
    let quotas = limits.quotas
    let mode = "0" + String(defaultSocketMode, radix: 8)
    func duration(_ nanoseconds: Int64) -> String { durationText(.nanoseconds(nanoseconds)) }
    let size = { (name: String) in ValueDeclaration(name, .size) }
    let count = ValueDeclaration("N", .count)
    return ProgramDeclaration(
        name: "eventbusd",
        manualSection: 8,
        summary: "the eventbus broker",
        root: CommandDeclaration(
            "",
            summary: "the eventbus broker",
            usage: ["[OPTIONS]", "--check-policy [OPTIONS] [FILE...]"],
            about: """
            The eventbus broker: routes newline-delimited JSON events between processes
            over a Unix domain socket (wire protocol version \(ProtocolConstants.version): docs/PROTOCOL.md in the
            source tree).
            """,
            sections: [
                OptionSection("""
                Socket (first that applies; under systemd socket activation the passed
                sockets are used instead and no path is bound or unlinked):
                """, [
                    OptionDeclaration("socket", "s", ValueDeclaration("PATH", .file), "listen on PATH"),
                    OptionDeclaration("system", nil, nil, "the system bus, \(SocketPath.systemBus)"),
                    OptionDeclaration("user", nil, nil, "the user bus, $XDG_RUNTIME_DIR/eventbus/bus.sock; otherwise $EVENTBUS_SOCKET; else the user bus when XDG_RUNTIME_DIR is set and not root; else the system bus"),
                    OptionDeclaration("mode", nil, ValueDeclaration("OCTAL", .octal), "permissions of the socket file (default \(mode))"),
                ]),
                OptionSection("Limits:", [
                    OptionDeclaration("max-frame", nil, size("SIZE"), "largest incoming frame (default \(sizeText(limits.maxFrameBytes)) = \(limits.maxFrameBytes) bytes)"),
                    OptionDeclaration("max-outbound", nil, size("SIZE"), "outbound queue per connection (default \(sizeText(limits.maxOutboundBytes)))"),
                    OptionDeclaration("max-queued", nil, size("SIZE"), "all outbound queues together (default \(sizeText(limits.maxQueuedBytes)))"),
                    OptionDeclaration("max-connections", nil, count, "connections at most (default \(limits.maxConnections); the last \(quotas.reservedRootConnections) are kept for uid 0)"),
                    OptionDeclaration("max-subscriptions", nil, count, "patterns per connection (default \(limits.maxSubscriptionsPerConnection))"),
                ]),
                OptionSection("""
                Flow control (1.2): a subscriber under overflow "wait" (the default) whose
                queue is full holds back a publisher of its own uid (not read until the
                queue is below half), as a full pipe would; one that takes no byte for
                the stall timeout is behind and holds no one:
                """, [
                    OptionDeclaration("stall-timeout", nil, ValueDeclaration("DURATION", .duration), "the stall timeout (default \(duration(limits.stallTimeoutNanoseconds)))"),
                ]),
                OptionSection("""
                A connection the policy lets hold other uids' publishers (allow hold) that
                keeps them held for 95 % of a window is behind for them until its queue
                is empty (their events that do not fit are dropped for it):
                """, [
                    OptionDeclaration("trusted-hold-window", nil, ValueDeclaration("DURATION", .duration), "the window (default \(duration(limits.trustedHoldWindowNanoseconds)))"),
                ]),
                OptionSection("""
                Request/reply (1.3): a request waits for its first reply until its own
                timeout (default \(duration(Int64(limits.defaultRequestTimeoutMilliseconds) * 1_000_000))); requests asked and not answered are
                bounded per connection, per uid (\(quotas.maxPendingRequestsPerUID); uid 0 and the broker's uid: none)
                and in total (\(quotas.maxPendingRequests)):
                """, [
                    OptionDeclaration("max-request-timeout", nil, ValueDeclaration("DURATION", .duration), "the largest timeout a request may ask for (default \(duration(Int64(limits.maxRequestTimeoutMilliseconds) * 1_000_000))); a larger one is bad_request"),
                    OptionDeclaration("max-pending-requests", nil, ValueDeclaration("N", .count), "per connection (default \(limits.maxPendingRequestsPerConnection))"),
                ]),
                OptionSection("""
                Queue groups (1.3): a group is its uid's; each event goes to one member in
                turn, a write to that member's socket, so a group's members are bounded
                (uid 0 and the broker's uid: none); one more is refused with error limit:
                """, [
                    OptionDeclaration("max-group-members", nil, count, "members of one group (default \(quotas.maxGroupMembers))"),
                ]),
                OptionSection("""
                Limits per uid (uid 0 and the broker's own uid have none; `limit` lines of
                the policy file change them for one uid):
                """, [
                    OptionDeclaration("max-connections-per-uid", nil, count, "connections (default \(quotas.maxConnectionsPerUID))"),
                    OptionDeclaration("max-subscriptions-per-uid", nil, count, "patterns over its connections (default \(quotas.maxSubscriptionsPerUID))"),
                    OptionDeclaration("max-inbound-per-uid", nil, size("SIZE"), "bytes of incomplete incoming frames; over it its connections are read one at a time (default \(sizeText(quotas.maxInboundBytesPerUID)))"),
                    OptionDeclaration("max-outbound-per-uid", nil, size("SIZE"), "outbound queues together (default \(sizeText(quotas.maxOutboundBytesPerUID)))"),
                    OptionDeclaration("max-retained-bytes-per-uid", nil, size("SIZE"), "retained events it published (default 1/8 of --max-retained-bytes)"),
                ]),
                OptionSection("Limits in total:", [
                    OptionDeclaration("max-subscriptions-total", nil, count, "patterns (default \(quotas.maxSubscriptions))"),
                    OptionDeclaration("max-inbound", nil, size("SIZE"), "bytes of incomplete incoming frames; over it the uids above their share are read one connection at a time (default \(sizeText(quotas.maxInboundBytes)))"),
                    OptionDeclaration("max-retained", nil, count, "retained events (default \(quotas.maxRetainedEvents))"),
                    OptionDeclaration("max-retained-bytes", nil, size("SIZE"), "bytes of retained events (default \(sizeText(quotas.maxRetainedBytes)))"),
                    OptionDeclaration("frame-timeout", nil, ValueDeclaration("DURATION", .duration), "close a connection whose incomplete frame gets no byte for DURATION, with error code timeout (default \(duration(quotas.frameTimeoutNanoseconds)); 0: never)"),
                ], footer: "SIZE is bytes, or with K, M, G (binary multiples)."),
                OptionSection("Retained events and history (1.1):", [
                    OptionDeclaration("state-dir", nil, ValueDeclaration("DIR", .directory), "keep retained events in DIR/retained.jsonl across restarts (the units pass $STATE_DIRECTORY; default: none, retention lasts for the run)"),
                    OptionDeclaration("history-events", nil, count, "events kept for 'subscribe' with 'since' (default \(limits.retention.historyEvents); 0 turns history off)"),
                    OptionDeclaration("history-bytes", nil, size("SIZE"), "bytes of events kept for it (default \(sizeText(limits.retention.historyBytes)); 0: off)"),
                ]),
                OptionSection("""
                Across machines (docs/BRIDGE.md): the link to a NATS cluster can run inside
                the broker (its events on a thread of its own, its requests on the broker's
                loop) instead of as an eventbus-bridge process (the same code, settings and
                counters). It is a connection of the bridge user like any client's, so the
                policy's bridge, hold, publish and subscribe rules apply to it. Without
                --bridge the broker opens no network socket.
                """, [
                    OptionDeclaration("bridge", nil, ValueDeclaration("FILE", .file), "run the link with the settings of FILE, in bridge.conf's format (eventbus-bridge(8): nats, node, export, import, ...; its socket, bus and log-level are this broker's)"),
                    OptionDeclaration("bridge-user", nil, ValueDeclaration("USER", .text), "the link's connection is this user's, for the policy and the limits: a name (its uid and primary group) or a number (uid and gid both); default: the broker's own user"),
                ]),
                OptionSection("Access policy (docs/POLICY.md, eventbus-policy(5)):", [
                    OptionDeclaration("policy", nil, ValueDeclaration("FILE", .file), "read the policy from FILE; repeat for more files, read in order. Default: none, except on the system bus (\(SocketPath.systemBus), or --system under socket activation): the vendor file PREFIX/share/eventbus/policy.conf next to this binary's PREFIX/bin, then /etc/eventbus/policy.conf if it exists, then /etc/eventbus/policy.d/*.conf"),
                    OptionDeclaration("check-policy", nil, nil, operands: "[FILE...]", "read FILE... (default: the files this command line would read), print the effective rules with names resolved to numbers, and exit: 0 valid, 78 invalid (each error as file:line: message)"),
                ]),
                OptionSection("""
                Configuration file (eventbusd.conf(5), config/eventbusd.conf): every option
                but the actions, as a `key = value` line (`max-connections = 1024`, a switch
                as `system = yes`); the command line wins over the file. The file is read at
                start: a changed setting needs a restart (systemctl restart eventbus);
                SIGHUP re-reads the policy files only.
                """, [
                    OptionDeclaration("config", "c", ValueDeclaration("FILE", .file), "read FILE (it must exist). Default: on the system bus /etc/eventbus/eventbusd.conf, on the user bus $XDG_CONFIG_HOME/eventbus/eventbusd.conf (~/.config/...), each if it exists; none for another --socket path"),
                    OptionDeclaration("check-config", nil, nil, "read the file and the command line, print every setting given and where (with bridge, also the bridge file read and its warnings), and exit: 0 valid, 78 invalid (the error as file:line: message)"),
                ]),
                OptionSection("Lifecycle:", [
                    OptionDeclaration("exit-idle-time", nil, ValueDeclaration("DURATION", .duration), "exit after DURATION with no connections (for socket activation; default: never)"),
                    OptionDeclaration("shutdown-timeout", nil, ValueDeclaration("DURATION", .duration), "how long SIGTERM/SIGINT waits for queued events to be written (default \(duration(defaults.shutdownFlushNanoseconds)))"),
                    OptionDeclaration("log-level", nil, ValueDeclaration("LEVEL", .choice(["error", "warning", "notice", "info", "debug"])), "error, warning, notice, info (default) or debug"),
                    OptionDeclaration("help", "h", nil, "show this help"),
                    OptionDeclaration("version", "V", nil, "show the version"),
                ], footer: """
                DURATION is a time span as in systemd.time(7): 500ms, 30s, 5min, 1h30m,
                2d, or plain seconds; units us, ms, s, min (or m), h, d, w, M, y.
                """),
            ],
            notes: """
            Under systemd the units add $EVENTBUSD_OPTIONS to the command line (after the
            file, so it wins): set it in a drop-in (docs/SYSTEMD.md), e.g. to exit after
            5 idle minutes, no editor needed:
              mkdir -p /etc/systemd/system/eventbus.service.d
              printf '[Service]\\nEnvironment="EVENTBUSD_OPTIONS=--exit-idle-time 5min"\\n' \\
                  > /etc/systemd/system/eventbus.service.d/options.conf
              systemctl daemon-reload && systemctl try-restart eventbus.service
            For the user bus: ~/.config/systemd/user/eventbus.service.d and systemctl
            --user.

            Signals: SIGTERM and SIGINT stop accepting, flush queues (bounded by
            --shutdown-timeout), unlink the socket path if this process bound it, and
            exit 0. SIGHUP reads the policy files again: all or nothing (an invalid
            file keeps the policy in force and logs file:line); 'eventbus reload
            --wait' sends it and reports the outcome.
            """,
            exitStatus: """
            Exit status: 0 clean stop, 64 usage error, 69 cannot listen (path in use by
            a live broker, not a socket, too long), 70 internal failure, 78 invalid
            configuration file or policy file, or unusable --state-dir (e.g. owned by
            another uid).
            """,
            operands: OperandsDeclaration([.file], repeats: true)
        ),
        manualSections: [
            ("ENVIRONMENT", """
            EVENTBUS_SOCKET: the socket path when no --socket, --system or --user is
            given.

            XDG_RUNTIME_DIR: the user bus is $XDG_RUNTIME_DIR/eventbus/bus.sock.

            LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES: the sockets systemd passes under
            socket activation (sd_listen_fds(3)); NOTIFY_SOCKET, WATCHDOG_USEC: the
            readiness, status and watchdog notifications (sd_notify(3)).
            """),
            ("FILES", """
            /run/eventbus/bus.sock: the system bus.

            /etc/eventbus/eventbusd.conf: the system bus's settings;
            $XDG_CONFIG_HOME/eventbus/eventbusd.conf: the user bus's (eventbusd.conf(5)).

            /etc/eventbus/policy.conf, /etc/eventbus/policy.d/*.conf: the system bus's
            access policy (eventbus-policy(5)), after the vendor file
            /usr/share/eventbus/policy.conf.

            $STATE_DIRECTORY/retained.jsonl: the retained events, with --state-dir.
            """),
        ],
        seeAlso: [("eventbus", 1), ("eventbusd.conf", 5), ("eventbus-policy", 5), ("eventbus", 7), ("eventbus-bridge", 8), ("systemd.socket", 5)]
    )
}

/// The options of `brokerInterface` that only the command line may give
/// (actions, and the choice of file); every other one is a key of
/// eventbusd.conf(5).
package let brokerCommandLineOnly: Set<String> = ["config", "check-config", "check-policy", "help", "version"]
