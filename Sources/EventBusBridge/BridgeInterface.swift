// The declaration of `eventbus-bridge`'s command line (EventBusCommandLine's
// Interface.swift): every flag with its value, help and completion, the prose
// of `eventbus-bridge --help` and eventbus-bridge(8). The defaults it states
// are read from `BridgeConfiguration`.
//
// Before editing: a setting flag has the name of its `ConfigFile` key (the
// file's keys without a flag are `ConfigFile.fileOnly`, and `bus`, which the
// flags `--system`/`--user` set); InterfaceAgreementTests checks that every
// key but those is declared here, and every declared flag accepted.
import EventBusCommandLine
@_spi(Package) import EventBusProtocol

/// The declaration of the `eventbus-bridge` command line.
package var bridgeInterface: ProgramDeclaration {
    let defaults = BridgeConfiguration(servers: [], node: NodeName("x")!)
    let duration = ValueDeclaration("DURATION", .duration)
    return ProgramDeclaration(
        name: "eventbus-bridge",
        manualSection: 8,
        summary: "carry events between the local bus and a NATS cluster",
        root: CommandDeclaration(
            "",
            summary: "carry events between the local bus and a NATS cluster",
            usage: [
                // Each line within 80 columns after "Usage: eventbus-bridge ".
                "[--socket PATH | --system | --user] --nats URL[,URL...]",
                " --node NAME [--export PATTERN]... [--import PATTERN]...",
                " [--export-requests PATTERN]...",
                " [--import-requests PATTERN]...",
                " [--export-group NAME:PATTERN[@USER]]...",
                " [--import-group NAME:PATTERN[@USER]]...",
                " [--prefix PREFIX] [--config FILE]",
                "--status [--node NAME | --status-file PATH | -c FILE]",
            ],
            about: """
            Carries events between this machine's bus and a NATS cluster (docs/BRIDGE.md):
            local events matching an --export pattern go to NATS subject
            PREFIX.evt.NODE.TYPE (CloudEvents headers, data bytes unchanged); NATS
            messages on PREFIX.evt.*.PATTERN from other nodes are published here with
            "origin". Both links reconnect forever; exports are held in order while
            NATS is away (up to --buffer-events / --buffer-bytes, then dropped,
            counted and reported on PREFIX.ctl.NODE.dropped). A request no local server
            takes, of an --export-requests type, is asked on NATS
            (PREFIX.req.NODE.TYPE) and answered by one machine that imports it with
            --import-requests and has a server of it. An event of an --export-group
            NAME:PATTERN that no local member of queue group NAME may receive goes to
            PREFIX.grp.NAME.NODE.TYPE, and one machine of those with --import-group
            NAME:PATTERN (a NATS queue group) gives it to one of its members of NAME.
            With @USER only that local user's group NAME takes part; without it,
            every user's group of that name (warned). The same settings also run
            inside the broker (eventbusd(8), its bridge option).
            """,
            sections: [
                OptionSection("Local bus (first that applies; PROTOCOL.md \"Transport\"):", [
                    OptionDeclaration("socket", "s", ValueDeclaration("PATH", .file), "the broker's socket"),
                    OptionDeclaration("system", nil, nil, "the system bus, \(SocketPath.systemBus)"),
                    OptionDeclaration("user", nil, nil, "the user bus, $XDG_RUNTIME_DIR/eventbus/bus.sock; otherwise $EVENTBUS_SOCKET; else the user bus when XDG_RUNTIME_DIR is set and not root; else the system bus"),
                ]),
                OptionSection("NATS and what to carry:", [
                    OptionDeclaration("nats", nil, ValueDeclaration("URL[,URL...]", .url), "seed servers (nats://HOST[:PORT]); more are learnt from the cluster (INFO connect_urls); repeatable"),
                    OptionDeclaration("node", nil, ValueDeclaration("NAME", .text), "this bus's name in subjects and origin (1-63 of A-Z a-z 0-9 _ -); one bridge per NAME per NATS system"),
                    OptionDeclaration("export", nil, ValueDeclaration("PATTERN", .pattern), "local types to send (repeatable, or a comma list)"),
                    OptionDeclaration("import", nil, ValueDeclaration("PATTERN", .pattern), "remote types to receive (repeatable, or a comma list)"),
                    OptionDeclaration("export-requests", nil, ValueDeclaration("PATTERN", .pattern), "request types to ask other machines when no local server takes them (repeatable, or a comma list)"),
                    OptionDeclaration("import-requests", nil, ValueDeclaration("PATTERN", .pattern), "request types other machines may ask this bus's servers (repeatable, or a comma list)"),
                    OptionDeclaration("export-group", nil, ValueDeclaration("NAME:PATTERN[@USER]", .text), "queue group NAME's events of PATTERN go to another machine when no local member of NAME may receive them; @USER: of that local user's group NAME only (without it, every user's group NAME takes part: warned) (repeatable, or a comma list)"),
                    OptionDeclaration("import-group", nil, ValueDeclaration("NAME:PATTERN[@USER]", .text), "other machines' events of group NAME go to one local member of NAME (@USER: of that user's group NAME only) (repeatable, or a comma list)"),
                    OptionDeclaration("prefix", nil, ValueDeclaration("PREFIX", .text), "subject root (default \(defaults.prefix.text))"),
                    OptionDeclaration("name", nil, ValueDeclaration("NAME", .text), "CONNECT name (default \"eventbus-bridge NODE\")"),
                    OptionDeclaration("reconnect-initial", nil, duration, "NATS backoff after a failed pass (default \(durationText(defaults.reconnectInitial)))"),
                    OptionDeclaration("reconnect-max", nil, duration, "its ceiling (default \(durationText(defaults.reconnectMaximum))); never gives up"),
                    OptionDeclaration("ping-interval", nil, duration, "NATS keepalive (default \(durationText(defaults.pingInterval)))"),
                    OptionDeclaration("buffer-events", nil, ValueDeclaration("N", .count), "exports held while NATS is away (default \(defaults.bufferEvents))"),
                    OptionDeclaration("buffer-bytes", nil, ValueDeclaration("SIZE", .size), "and their bytes (default \(sizeText(defaults.bufferBytes)))"),
                ]),
                OptionSection("Running:", [
                    OptionDeclaration("config", "c", ValueDeclaration("FILE", .file), "read settings from FILE first (same names as these flags, plus nats-user, nats-password, nats-token); flags override it. Example: /etc/eventbus/bridge.conf as installed (config/bridge.conf in the source)"),
                    OptionDeclaration("status-file", nil, ValueDeclaration("PATH", .file), "where the counters are written every second (default $RUNTIME_DIRECTORY/NODE.json under systemd, else /run/eventbus-bridge/NODE.json for root, $XDG_RUNTIME_DIR/eventbus-bridge/NODE.json otherwise)"),
                    OptionDeclaration("status", nil, nil, "print the counters of the running bridges (one JSON line each: link states, buffered, exported, imported, dropped by reason, reconnects) and exit"),
                    OptionDeclaration("log-level", nil, ValueDeclaration("LEVEL", .choice(["error", "warning", "notice", "info", "debug"])), "error, warning, notice, info (default) or debug"),
                    OptionDeclaration("help", "h", nil, "show this help"),
                    OptionDeclaration("version", "V", nil, "show the version"),
                ], footer: """
                DURATION is a time span as in systemd.time(7): 250ms, 30s, 5min, plain
                seconds. SIZE is bytes, or with K, M, G (binary multiples).
                """),
            ],
            exitStatus: """
            Exit status: 0 clean stop (SIGTERM, SIGINT) or live bridges for --status,
            64 usage error, 69 no live bridge for --status, 70 internal failure,
            78 unreadable or invalid config file.
            """
        ),
        manualSections: [
            ("FILES", """
            /etc/eventbus/bridge.conf: the settings of the packaged unit (--config), one
            'key = value' per line with the names of the flags, plus nats-user,
            nats-password and nats-token (never on a command line).

            $RUNTIME_DIRECTORY/NODE.json: the status file (--status-file).
            """),
        ],
        seeAlso: [("eventbus", 1), ("eventbus", 7), ("eventbusd", 8)]
    )
}
