// The declaration of `eventbus`, the CLI (Interface.swift): every command,
// option, operand, example and exit status. The CLI parses with
// `eventbusInterface.specs(for:)`, prints `HelpText.render` of it for
// `--help`, and eventbus(1) and the shell completions are generated from it
// (scripts/manual, EventBusManual).
//
// Before editing: an option added here is accepted at once; the command's
// `run` function must read it (InterfaceAgreementTests runs every declared
// option against the built CLI). Keep every example runnable as written
// (DocumentedDurationTests parses every DURATION shown here).

/// What `--help` says a DURATION is (eventbus commands that take one).
package let durationNote = """
DURATION is a time span as in systemd.time(7): a number with an optional unit
us, ms, s (default), min (or m), h, d, w, M or y, and parts add up: 10, 2.5s,
500ms, 5min, 1h30m, 2d.
"""

/// `eventbus reload --timeout`'s default.
package let defaultReloadTimeoutText = "30s"

/// `eventbus stats --min-client-age`'s default.
package let defaultMinClientAgeText = "1min"

private let formats = ValueDeclaration("FORMAT", .choice(["json", "pretty", "data", "cloudevents"]))
private let overflowRules = ValueDeclaration("RULE", .choice(["wait", "drop-new", "drop-old", "disconnect"]))
private let json = OptionDeclaration("json", "j", nil, "the same as --format json")

private let helpOption = OptionDeclaration("help", "h", nil, "show this help")

/// The options every command accepts (PROTOCOL.md "Transport" for the bus choice).
private let commonOptions: [OptionDeclaration] = [
    OptionDeclaration("socket", "s", ValueDeclaration("PATH", .file), "broker socket (default: $EVENTBUS_SOCKET, else the user bus $XDG_RUNTIME_DIR/eventbus/bus.sock when not root, else the system bus /run/eventbus/bus.sock)"),
    OptionDeclaration("system", nil, nil, "use the system bus /run/eventbus/bus.sock"),
    OptionDeclaration("user", nil, nil, "use the user bus $XDG_RUNTIME_DIR/eventbus/bus.sock"),
    helpOption,
    OptionDeclaration("version", "V", nil, "show the version"),
]

/// The declaration of the `eventbus` command line.
package let eventbusInterface = ProgramDeclaration(
    name: "eventbus",
    manualSection: 1,
    summary: "publish and receive events on an eventbus broker",
    commonOptions: commonOptions,
    root: CommandDeclaration(
        "",
        summary: "publish and receive events on an eventbus broker (eventbusd)",
        usage: ["[--socket PATH | --system | --user] COMMAND [ARGS...]"],
        about: "Publish and receive events on an eventbus broker (eventbusd).",
        sections: [OptionSection([], showsCommonOptions: true)],
        notes: """
        Run 'eventbus COMMAND --help' for the options and examples of each command.

        The broker reads its settings (the idle time after which it exits, the log
        level, its limits) from eventbusd.conf: /etc/eventbus/eventbusd.conf for the
        system bus, ~/.config/eventbus/eventbusd.conf for the user bus
        (eventbusd.conf(5), 'eventbusd --check-config'). Under systemd
        $EVENTBUSD_OPTIONS, set in a drop-in, wins over the file; for the user bus,
        without an editor (the system bus: /etc/systemd/system/eventbus.service.d,
        systemctl without --user; more in 'eventbusd --help' and docs/SYSTEMD.md):
          mkdir -p ~/.config/systemd/user/eventbus.service.d
          printf '[Service]\\nEnvironment="EVENTBUSD_OPTIONS=--exit-idle-time 5min"\\n' \\
              > ~/.config/systemd/user/eventbus.service.d/options.conf
          systemctl --user daemon-reload && systemctl --user try-restart eventbus
        """,
        exitStatus: """
        Exit status: 0 success, 1 no retained event (get, clear), 2 the service
        answered with an error (request), 3 no reply (request), 64 usage error, 65
        bad data, 67 no one serves the type (request), 69 broker unavailable, 75 a
        broker limit (try again later), 77 permission denied or forbidden by the
        policy, 124 timed out (see each command's help for more).
        """,
        operands: OperandsDeclaration([.command])
    ),
    commands: [
        CommandDeclaration(
            "publish",
            operandsSummary: "TYPE [DATA]",
            summary: "publish one event (or one per input line with --lines)",
            usage: ["publish [OPTIONS] TYPE [DATA | -]", "publish [OPTIONS] --string TEXT TYPE", "publish [OPTIONS] --lines [--json-lines] TYPE"],
            about: """
            Publish an event of type TYPE and wait for the broker to accept it. Quiet on
            success. DATA is one JSON value (object, array, string, number, true, false,
            null); pretty-printed JSON is compacted before it is sent. Without DATA, or
            with '-', DATA is read from standard input unless that is a terminal (then
            the event has no data: null; empty input also gives null).
            """,
            sections: [OptionSection([
                OptionDeclaration("string", nil, ValueDeclaration("TEXT", .text), "publish TEXT as a JSON string (no quoting needed)"),
                OptionDeclaration("source", nil, ValueDeclaration("SOURCE", .text), "the event's source (default: pid/<pid> of this process)"),
                OptionDeclaration("id", nil, ValueDeclaration("ID", .text), "the event's id (default: <broker instance>-<seq>)"),
                OptionDeclaration("print-seq", "p", nil, "print the broker's sequence number of the event"),
                OptionDeclaration("lines", "l", nil, "publish every line of standard input as one event, a JSON string, over one connection (replies are read while lines are sent, so a listener of your uid that reads slower than the input comes slows it to the listener's pace, and nothing is lost)"),
                OptionDeclaration("json-lines", "j", nil, "--lines where every line is a JSON value (implies --lines; blank lines are skipped, bad lines reported and skipped)"),
                OptionDeclaration("retain", "r", nil, "also keep the event as the retained event of TYPE (its current value): 'get' prints it, 'listen --last' and new subscribers with 'last' get it first; it survives broker restarts when the broker has a state directory"),
                OptionDeclaration("key", "k", ValueDeclaration("KEY", .text), "a key of 1-255 bytes: in each queue group ('listen --group') the events with one key go to one member, in order, while the group's members do not change"),
            ], showsCommonOptions: true)],
            notes: """
            TYPE is 1-255 bytes of '.'-separated segments of A-Z a-z 0-9 _ - : (no
            wildcards). A negative number can be given as DATA directly: -5.
            """,
            examples: [
                #"eventbus publish order.created '{"id": 42, "total": 9.5}'"#,
                "eventbus publish backup.finished                  # no data (null)",
                #"eventbus publish --string "disk almost full" alert.disk"#,
                "jq -c '.items[]' items.json | eventbus publish --lines --json-lines item.added",
                "tail -F /var/log/app.log | eventbus publish --lines app.log.line",
                #"seq=$(eventbus publish --print-seq job.started '{"job": 7}')"#,
                #"eventbus publish --retain currency.changed '{"code": "EUR"}'"#,
                "# one worker per customer (in a queue group):",
                #"eventbus publish --key customer-7 order.paid '{"id": 42}'"#,
            ],
            afterExamples: """
            In a 'while read' loop, give DATA (or '< /dev/null') so publish does not
            read the loop's input.
            """,
            exitStatus: """
            Exit status: 0 published, 64 usage error, 65 DATA is not valid JSON or the
            broker rejected it (nothing is sent for invalid JSON), 69 broker unavailable,
            75 a broker limit was reached (with --retain: the retained events' limits;
            then nothing is published), 77 forbidden by the broker's access policy, or
            TYPE begins 'eventbus.' (reserved for the broker).
            """,
            operands: OperandsDeclaration([.eventType, .json])
        ),
        CommandDeclaration(
            "listen",
            operandsSummary: "[PATTERN...]",
            summary: "print events as they arrive",
            usage: ["listen [OPTIONS] [PATTERN...]"],
            about: """
            Print events matching any PATTERN (default: every event) as they arrive,
            one per line.
            """,
            sections: [OptionSection([
                OptionDeclaration("format", "f", formats, """
                json: the event as the broker sent it, compact (default when standard output is not a terminal)
                pretty: local time, type and data, coloured on a terminal unless NO_COLOR is set (default on a terminal)
                data: only the event's data
                cloudevents: a CloudEvents 1.0 JSON object
                """),
                json,
                OptionDeclaration("count", "n", ValueDeclaration("N", .count), "exit after N events"),
                OptionDeclaration("timeout", "t", ValueDeclaration("DURATION", .duration), "exit with status 124 when no event arrives for DURATION (the clock restarts with every event)"),
                OptionDeclaration("reconnect", "r", nil, "keep listening when the broker restarts: reconnect, resubscribe, and say so on standard error; events published meanwhile are replayed from the broker's history (what it no longer holds is reported as a gap on standard error). A subscribe refused for a limit (the --group's member limit, your uid's subscriptions) is waited out the same way: tried again on a new connection, pauses growing to 2s, instead of exiting 75"),
                OptionDeclaration("last", nil, nil, "print the retained event of every matching type first (the current values), then new events"),
                OptionDeclaration("since", nil, ValueDeclaration("SEQ", .count), "first print the events after SEQ that the broker's history still holds (a gap is reported on standard error when it no longer reaches back to SEQ + 1)"),
                OptionDeclaration("resume", nil, ValueDeclaration("FILE", .file), "remember in FILE where this listener got to (the broker run and seq, rewritten atomically after each batch of events); started again with the same FILE, continue from there: nothing the history still holds is missed, gaps are reported on standard error"),
                OptionDeclaration("group", "g", ValueDeclaration("NAME", .text), "join the queue group NAME (1-64 bytes of A-Z a-z 0-9 _ . - :): each event goes to one listener of the group, taking turns among those that keep up (those with a --key: the same listener for one key), instead of to all; groups are per uid and PATTERN; not with --last, --since or --resume (a group shares live events only)"),
                OptionDeclaration("overflow", nil, overflowRules, "what the broker does when this listener falls behind (its queue reaches the broker's --max-outbound): wait (the default): publishers of your uid wait for it, so nothing is lost, and a listener that reads slower than they publish slows them to its pace; one that stops reading costs them at most the broker's --stall-timeout, then loses events (reported on standard error). drop-old: lose the oldest queued events instead, never slowing anyone (a monitor that prefers the newest); drop-new: lose the new ones; disconnect"),
            ], showsCommonOptions: true)],
            notes: """
            PATTERN is an event type in which a whole segment may be '*' (exactly one
            segment) and the last segment may be '>' (one or more): 'order.*',
            'order.>', '>'. Quote patterns so the shell leaves '*' and '>' alone.
            \(durationNote)
            """,
            examples: [
                "eventbus listen                    # everything, pretty on a terminal",
                "eventbus listen 'order.>' | jq -r '.data.id'",
                "eventbus listen --format data --count 1 'job.finished'",
                "eventbus listen --timeout 30s --reconnect 'sensor.*.temp' >> temps.jsonl",
                "eventbus listen --format cloudevents 'order.*'",
                "eventbus listen --last --format data currency.changed",
                "# from cron: what came since the last run, then exit 124 once quiet for 2s",
                "eventbus listen --resume ~/.cache/orders.pos --timeout 2s 'order.>'",
                "# a dashboard: the newest events first, never slowing a publisher down",
                "eventbus listen --overflow drop-old 'metrics.>'",
                "# one of several workers: each job to one of them",
                "eventbus listen --group thumbs --format data thumb.requested |",
                "    while read -r job; do ...; done",
            ],
            exitStatus: """
            Exit status: 0 after --count events, or when standard output is closed
            (e.g. '| head -n 1'); 64 usage error; 65 the --resume FILE does not hold a
            position (remove it to start afresh); 69 broker unavailable or gone (without
            --reconnect); 74 the --resume FILE cannot be written; 75 a limit refused a
            subscription, e.g. the group is full (without --reconnect); 77 a PATTERN is
            forbidden by the broker's policy; 124 --timeout passed with no event.
            Ctrl-C ends it quietly.
            """,
            operands: OperandsDeclaration([.pattern], repeats: true)
        ),
        CommandDeclaration(
            "wait",
            operandsSummary: "PATTERN [-- CMD]",
            summary: "run CMD once subscribed, then wait for one event",
            usage: ["wait [OPTIONS] PATTERN... [-- COMMAND [ARGS...]]"],
            about: """
            Subscribe to PATTERN; once the broker has acknowledged the subscription, run
            COMMAND (if given); then wait for the first matching event, print it as
            'listen' does, and exit 0. Because the subscription exists before COMMAND
            starts, an event that COMMAND causes cannot be missed. With several
            patterns, the first event matching any of them ends the wait.

            The wait ends when the event has arrived and COMMAND has exited 0. If
            COMMAND fails first, wait stops at once with COMMAND's exit status (128+N if
            killed by signal N).
            """,
            sections: [OptionSection([
                OptionDeclaration("timeout", "t", ValueDeclaration("DURATION", .duration), "give up after DURATION (counted from the start, COMMAND included) with status 124; a COMMAND still running then gets SIGTERM"),
                OptionDeclaration("format", "f", formats, "json, pretty, data or cloudevents (see 'listen')"),
                json,
                OptionDeclaration("quiet", "q", nil, "do not print the event"),
                OptionDeclaration("overflow", nil, overflowRules, "wait (default), drop-new, drop-old or disconnect (see 'listen')"),
            ], showsCommonOptions: true)],
            notes: durationNote,
            examples: [
                "eventbus wait --timeout 30s backup.finished -- systemctl start backup.service",
                "eventbus wait -q 'deploy.done' -- ./deploy.sh && echo deployed",
                "eventbus wait --format data 'job.42.*' -- eventbus publish job.42.start",
                "eventbus wait --timeout 5 'build.finished' || echo 'no build in 5 s'",
            ],
            exitStatus: """
            Exit status: 0 event received (and COMMAND succeeded), 64 usage error, 69
            broker unavailable, 77 a PATTERN is forbidden by the broker's policy, 124
            timed out, 126 COMMAND cannot be run, 127 COMMAND not found, otherwise
            COMMAND's own failure status.
            """,
            operands: OperandsDeclaration([.pattern], repeats: true)
        ),
        CommandDeclaration(
            "get",
            operandsSummary: "PATTERN",
            summary: "print the retained event(s): the current value",
            usage: ["get [OPTIONS] PATTERN"],
            about: """
            Print the retained event of every type PATTERN matches (the current values,
            kept by 'publish --retain'), oldest first, and exit. Prints nothing and exits
            1 when there is none.
            """,
            sections: [OptionSection([
                OptionDeclaration("format", "f", formats, "json, pretty, data or cloudevents (see 'listen')"),
                json,
            ], showsCommonOptions: true)],
            examples: [
                "eventbus get --format data currency.changed",
                #"if code=$(eventbus get -f data currency.changed); then echo "now $code"; fi"#,
                "eventbus get 'settings.>'",
            ],
            exitStatus: """
            Exit status: 0 printed, 1 no retained event matches, 64 usage error, 69
            broker unavailable, 77 forbidden by the broker's policy.
            """,
            operands: OperandsDeclaration([.pattern])
        ),
        CommandDeclaration(
            "clear",
            operandsSummary: "TYPE",
            summary: "remove the retained event of TYPE",
            usage: ["clear [OPTIONS] TYPE"],
            about: """
            Remove the retained event of TYPE (kept by 'publish --retain'). Needs the
            permission to publish TYPE.
            """,
            sections: [OptionSection([], showsCommonOptions: true)],
            examples: ["eventbus clear currency.changed"],
            exitStatus: """
            Exit status: 0 removed, 1 there was none, 64 usage error, 69 broker
            unavailable, 77 forbidden.
            """,
            operands: OperandsDeclaration([.eventType])
        ),
        CommandDeclaration(
            "stats",
            summary: "show the broker's counters and your own usage",
            usage: ["stats [OPTIONS]"],
            about: """
            Show the broker's counters: connections, subscriptions, published,
            delivered, dropped, queued_bytes, uptime_s, instance, policy_generation,
            retained, retained_bytes, history_first_seq, history_events; held
            (publishers held back now because a subscriber of their uid has no room),
            holds (times one was held), stalls (times a subscriber stopped reading for
            the broker's --stall-timeout while holding one); requests, replies,
            no_responders and timeouts (request/reply); and under 'me' your own uid's
            usage (connections, subscriptions, subscription_bytes, inbound_bytes,
            queued_bytes, retained_bytes, retained_events, pending_requests,
            serving_requests) and its limits (a limit of null does not apply: uid 0
            has none).

            With --prometheus: the Prometheus text format (0.0.4) of stats, types and
            clients: eventbus_up, eventbus_published_total and the other counters,
            eventbus_type_..._total{type="..."} for the busiest types and
            eventbus_client_...{client,pid,uid} for the clients with the largest queues
            (the connections of one process and client name summed; only connections
            older than --min-client-age, so one-shot commands and this one make no
            series). A broker that does not answer gives eventbus_up 0 (exit status 69).
            """,
            sections: [OptionSection([
                OptionDeclaration("format", "f", ValueDeclaration("FORMAT", .choice(["table", "json"])), """
                table: one 'name  value' line per counter (default)
                json: one compact JSON object
                """),
                json,
                OptionDeclaration("prometheus", nil, nil, "print the Prometheus exposition instead"),
                OptionDeclaration("max-types", nil, ValueDeclaration("N", .count), "with --prometheus: per-type series for at most N types, the most published first (default 100)"),
                OptionDeclaration("max-clients", nil, ValueDeclaration("N", .count), "with --prometheus: per-client series for at most N clients, the largest queues first (default 100)"),
                OptionDeclaration("min-client-age", nil, ValueDeclaration("DURATION", .duration), "with --prometheus: per-client series only for connections at least DURATION old (default \(defaultMinClientAgeText))"),
                OptionDeclaration("output", "o", ValueDeclaration("FILE", .file), "with --prometheus: replace FILE atomically (mode 0644) instead of printing, for node_exporter's textfile collector (systemd/eventbus-metrics.timer)"),
            ], showsCommonOptions: true)],
            examples: [
                "eventbus stats",
                "eventbus stats --json | jq .dropped",
                "eventbus --system stats --prometheus | promtool check metrics",
                "eventbus --system stats --prometheus \\",
                "    --output /var/lib/prometheus/node-exporter/eventbus.prom",
            ],
            exitStatus: """
            Exit status: 0 success, 64 usage error, 69 broker unavailable, 74 FILE
            could not be written.
            """
        ),
        CommandDeclaration(
            "clients",
            summary: "list the connections you may see and what they hold",
            usage: ["clients [OPTIONS]"],
            about: """
            List the broker's connections: id, uid, gid, pid, client name, connected
            since, subscriptions, queued bytes, events published, delivered and dropped,
            overflow rule, echo, holding (how many publishers this connection holds back
            now), held (true: it is held back by a subscriber with no room), behind
            (true: it stopped reading and holds no one until its queue is empty), the
            first patterns; pending (requests it waits on), serving (requests it was
            given and has not answered), the patterns it serves and its queue groups
            (PATTERN@NAME(members)). uid 0 sees every connection, other users see their own
            uid's. This is how to find who holds the memory, and who slows whom.
            """,
            sections: [OptionSection([
                OptionDeclaration("format", "f", ValueDeclaration("FORMAT", .choice(["table", "json"])), """
                table: aligned columns (default on a terminal)
                json: one JSON object per connection and line, as the broker sent it (default when piped)
                """),
                json,
            ], showsCommonOptions: true)],
            examples: [
                "sudo eventbus --system clients",
                "eventbus clients --json | jq -s 'sort_by(-.queued_bytes) | .[0]'",
            ],
            exitStatus: "Exit status: 0 success, 64 usage error, 69 broker unavailable."
        ),
        CommandDeclaration(
            "types",
            operandsSummary: "[PATTERN]",
            summary: "per-type counters: published, delivered, dropped",
            usage: ["types [OPTIONS] [PATTERN]"],
            about: """
            List the event types published in this broker run (and the retained ones),
            most recently published first: events published, deliveries queued,
            deliveries dropped, requests asked (1.3), subscribers now, whether one is
            retained, the last seq and time. You see only the types the access policy
            lets you receive. The broker keeps counters for 65,536 types (the least
            recently published are forgotten first).
            """,
            sections: [OptionSection([
                OptionDeclaration("format", "f", ValueDeclaration("FORMAT", .choice(["table", "json"])), "table: aligned columns (default), or json: one JSON object per type and line"),
                json,
                OptionDeclaration("limit", "n", ValueDeclaration("N", .count), "at most N types (default 1000)"),
            ], showsCommonOptions: true)],
            examples: [
                "eventbus types",
                "eventbus types 'order.>'",
                "eventbus types --json | jq -s 'sort_by(-.dropped)[0]'",
            ],
            exitStatus: "Exit status: 0 success, 64 usage error, 69 broker unavailable.",
            operands: OperandsDeclaration([.pattern])
        ),
        CommandDeclaration(
            "top",
            summary: "a live view: hot types, queues, who is behind",
            usage: ["top [OPTIONS]"],
            about: """
            A live view of the bus, redrawn every interval: the totals and the broker's
            uptime; per event type events/s, deliveries/s, drops/s and subscribers; per
            connection its queue fill as a bar, deliveries/s, drops/s, the held and
            behind marks of flow control, client name, pid and uid. Rates are the
            differences of the broker's counters between two polls.

            Keys: q quit; e, d, x, n sort the types by events/s, deliveries/s, drops/s,
            name; c sorts the connections by queue or by id; space redraws. The terminal
            is restored on q, ^C, SIGTERM and ^Z (and taken again on fg).

            Without a terminal it prints one plain snapshot per interval (--json: one
            JSON object per line), so it works in a pipe. If the broker goes away, the
            view says so and tries again every interval.
            """,
            sections: [OptionSection([
                OptionDeclaration("interval", "i", ValueDeclaration("DURATION", .duration), "time between polls (default 1s, at least 100ms)"),
                OptionDeclaration("count", "n", ValueDeclaration("N", .count), "stop after N polls (a failed one counts too)"),
                OptionDeclaration("format", "f", ValueDeclaration("FORMAT", .choice(["view", "json"])), "view: the live view, or plain snapshots without a terminal (default); json: one JSON object per poll"),
                json,
                OptionDeclaration("queue-limit", nil, ValueDeclaration("SIZE", .size), "the queue size shown as a full bar: the broker's --max-outbound (default 8M)"),
            ], showsCommonOptions: true)],
            notes: durationNote,
            examples: [
                "sudo eventbus --system top",
                "eventbus top --interval 5s --count 12 > top.log",
                "eventbus top --json --count 2 | jq -c '.types[] | select(.drops_per_s > 0)'",
            ],
            exitStatus: """
            Exit status: 0 success, 64 usage error, 69 broker unavailable at start or at
            the last of --count polls.
            """
        ),
        CommandDeclaration(
            "request",
            operandsSummary: "TYPE [DATA]",
            summary: "ask the service for TYPE and print its reply",
            usage: ["request [OPTIONS] TYPE [DATA | -]", "request [OPTIONS] --string TEXT TYPE"],
            about: """
            Send a request of type TYPE to the connections that serve it ('eventbus
            serve', or a program using a client library), wait for the first reply, and
            print the reply's data (one JSON value and a newline). DATA is read as for
            'publish': one JSON value, '-' or none for standard input unless it is a
            terminal, --string TEXT for a JSON string. When nobody serves TYPE the answer
            comes at once (status 67), not after the timeout; when every server the
            request reached goes away without replying, also at once (status 3).
            """,
            sections: [OptionSection([
                OptionDeclaration("timeout", "t", ValueDeclaration("DURATION", .duration), "how long the broker waits for a reply (default 25s, at most the broker's --max-request-timeout); then status 124"),
                OptionDeclaration("format", "f", ValueDeclaration("FORMAT", .choice(["data", "json"])), """
                data: the reply's data, compact (default)
                json: one object of seq (the request's), time (when the broker received the reply), pid, uid, gid (the server's kernel credentials) and data
                """),
                json,
                OptionDeclaration("string", nil, ValueDeclaration("TEXT", .text), "send TEXT as a JSON string (no quoting needed)"),
                OptionDeclaration("key", "k", ValueDeclaration("KEY", .text), "a key of 1-255 bytes: among servers in a queue group ('serve --group'), requests with one key go to one server"),
                OptionDeclaration("source", nil, ValueDeclaration("SOURCE", .text), "the request's source (default: the connection's client name)"),
                OptionDeclaration("id", nil, ValueDeclaration("ID", .text), "the request's id (default: <broker instance>-<seq>)"),
            ], showsCommonOptions: true)],
            notes: durationNote,
            examples: [
                "eventbus serve math.add -- jq '.a + .b' &         # a service (see 'serve')",
                #"eventbus request math.add '{"a": 2, "b": 3}'       # prints 5"#,
                "eventbus request --timeout 2s --format json disk.usage '\"/home\"'",
                "# a script: the reply's data, or the exit status (2, 3, 67, 124...)",
                #"out=$(eventbus request thumb.make '{"path": "a.png"}') || echo "failed: $?""#,
            ],
            exitStatus: """
            Exit status: 0 the reply was printed; 2 the service answered with an error
            (its message on standard error); 3 no reply: every server the request reached
            went away (closed, stopped serving, or stopped reading) without replying; 64
            usage error; 65 DATA is not valid JSON; 67 (EX_NOUSER) no one serves TYPE; 69
            broker unavailable; 75 a broker limit (too many requests waiting); 77
            forbidden by the broker's policy; 124 no reply within the timeout.
            """,
            operands: OperandsDeclaration([.eventType, .json])
        ),
        CommandDeclaration(
            "serve",
            operandsSummary: "TYPE... -- CMD",
            summary: "answer requests for TYPE by running CMD (or through stdin/stdout)",
            usage: ["serve [OPTIONS] TYPE... -- COMMAND [ARGS...]", "serve [OPTIONS] --json TYPE..."],
            about: """
            Answer the requests for TYPE (a pattern serves every type it matches) by
            running COMMAND once per request: the request's data, one JSON value and a
            newline, on its standard input; what it writes to standard output, one JSON
            value (blank: null), is the reply's data. When COMMAND exits non-zero, the
            reply is an error whose text is the first line of its standard error (all of
            which is passed through to serve's). A COMMAND still running at the request's
            deadline is sent SIGTERM (SIGKILL a second later), with every process it
            started, and no reply is sent (the requester has been told 'timeout'). Serve
            says on standard error when it is ready.

            With --json and no COMMAND, serve prints each request on standard output as
            one JSON line, as the broker sent it ({"op":"request","seq":..,"type":..,
            "data":..,"reply":"<token>","timeout":<ms left>,...}), and reads replies from
            standard input, one JSON object per line: {"to":"<token>","data":...} or
            {"to":"<token>","error":"text"}. So a program in any language can serve
            through two pipes. It exits 0 at the end of standard input.

            Serving needs the policy's 'serve' permission for TYPE (docs/POLICY.md). With
            --group, the servers of one group (same uid, TYPE and NAME) share the
            requests: each goes to one of them.
            """,
            sections: [OptionSection([
                OptionDeclaration("group", "g", ValueDeclaration("NAME", .text), "serve in the queue group NAME (1-64 bytes of A-Z a-z 0-9 _ . - :): each request goes to one server of the group instead of to every server"),
                OptionDeclaration("concurrency", "c", ValueDeclaration("N", .count), "run COMMAND for up to N requests at once (default 1); further requests wait in the broker"),
                OptionDeclaration("string", nil, nil, "send COMMAND's standard output as a JSON string (one trailing newline removed) instead of parsing it as JSON"),
                OptionDeclaration("json", "j", nil, "print requests as JSON lines, read replies from standard input (no COMMAND)"),
                OptionDeclaration("count", "n", ValueDeclaration("N", .count), "exit 0 after answering N requests"),
            ], showsCommonOptions: true)],
            examples: [
                "eventbus serve math.add -- jq '.a + .b'",
                "eventbus serve --string host.uptime -- uptime -p",
                "eventbus serve --group thumbs --concurrency 4 thumb.make -- ./make-thumb.sh",
                #"eventbus serve disk.usage -- sh -c 'du -sb "$(jq -r .)" | cut -f1'"#,
                "mkfifo replies",
                "eventbus serve --json math.add < replies | python3 server.py > replies",
            ],
            exitStatus: """
            Exit status: 0 after --count answers, or (--json) at the end of standard
            input or when standard output's reader has gone; 64 usage error; 69 broker
            unavailable or gone; 77 serving TYPE is forbidden by the broker's policy; 126
            COMMAND cannot be run; 127 COMMAND not found.
            """,
            operands: OperandsDeclaration([.pattern], repeats: true)
        ),
        CommandDeclaration(
            "ping",
            summary: "check that the broker answers",
            usage: ["ping [OPTIONS]"],
            about: "Check that the broker answers. Quiet; exit status 0 once it has answered.",
            sections: [OptionSection([
                OptionDeclaration("wait", "w", ValueDeclaration("DURATION", .duration), "keep trying (every 50 ms) until the broker answers or DURATION has passed"),
            ], showsCommonOptions: true)],
            notes: durationNote,
            examples: [
                "eventbusd --socket /tmp/bus.sock &",
                "eventbus --socket /tmp/bus.sock ping --wait 5s",
                "until eventbus ping; do sleep 1; done",
            ],
            exitStatus: """
            Exit status: 0 the broker answered, 64 usage error, 69 broker unavailable
            (no answer within DURATION with --wait).
            """
        ),
        CommandDeclaration(
            "reload",
            operandsSummary: "[--wait]",
            summary: "make the broker read its access policy again",
            usage: ["reload [OPTIONS]"],
            about: """
            Ask the broker to read its access-policy files again (docs/POLICY.md): sends
            SIGHUP to the broker process at the other end of the socket, or to $MAINPID
            when set (systemd sets it for the unit's ExecReload=). Under socket
            activation the socket's other end is systemd, not the broker: use
            'systemctl reload eventbus' (or 'systemctl --user reload eventbus'), which
            runs this command with $MAINPID. Reloading is all or nothing: if any file is
            invalid, the broker keeps the policy in force. Subscriptions the new policy
            forbids are removed (their connections are told).
            """,
            sections: [OptionSection([
                OptionDeclaration("wait", "w", nil, "wait for the outcome: print the new policy generation, or fail with the broker's reason"),
                OptionDeclaration("timeout", "t", ValueDeclaration("DURATION", .duration), "with --wait: give up after DURATION (default \(defaultReloadTimeoutText))"),
            ], showsCommonOptions: true)],
            notes: durationNote,
            examples: [
                "systemctl reload eventbus                         # the installed system bus",
                "eventbus --socket /tmp/bus.sock reload --wait     # a broker started by hand",
                "eventbusd --check-policy /etc/eventbus/policy.d/50-audit.conf &&",
                "    eventbus --system reload --wait",
            ],
            exitStatus: """
            Exit status: 0 reloaded (without --wait: signal sent), 64 usage error, 65 the
            broker refused the new policy (its files are invalid; the old one stays), 69
            broker unavailable, or the socket's other end is not eventbusd (nothing is
            signalled), 77 not allowed to signal the broker (run as root or as its
            user), 124 timed out.
            """
        ),
        CommandDeclaration(
            "help",
            operandsSummary: "[COMMAND]",
            summary: "show the help of COMMAND",
            usage: ["help [COMMAND]"],
            about: "Show the help of COMMAND, the same as 'eventbus COMMAND --help'; without\nCOMMAND, the help of eventbus.",
            // It talks to no broker: the bus options are accepted (as by every
            // command) but not listed.
            sections: [OptionSection([helpOption])],
            examples: ["eventbus help publish"],
            exitStatus: "Exit status: 0 success, 64 unknown COMMAND.",
            operands: OperandsDeclaration([.subcommand])
        ),
    ],
    manualSections: [
        ("ENVIRONMENT", """
        EVENTBUS_SOCKET: the broker's socket when no --socket, --system or --user
        is given.

        XDG_RUNTIME_DIR: the user bus is $XDG_RUNTIME_DIR/eventbus/bus.sock.

        NO_COLOR: when set, 'listen --format pretty' prints no colours.

        MAINPID: 'reload' signals this process (systemd sets it for ExecReload=).
        """),
        ("FILES", """
        /run/eventbus/bus.sock: the system bus.

        $XDG_RUNTIME_DIR/eventbus/bus.sock: the user bus.
        """),
    ],
    seeAlso: [("eventbus", 7), ("eventbus-bridge", 8), ("eventbusd", 8), ("eventbus-policy", 5), ("eventbusd.conf", 5)]
)
