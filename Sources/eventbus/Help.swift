// `--help` texts for `eventbus` and each subcommand, and `--version`.
// Printed to standard output with exit status 0 (GNU coding standards).
//
// Before editing: keep the option lists in step with the `OptionSpec`
// tables of each subcommand, and every example runnable as written (every
// DURATION shown here is parsed by DocumentedDurationTests). The version is
// `EventBusRelease.version`, shared with eventbusd.
import EventBusProtocol

/// What `--version` prints: the release, the protocol edition and the features.
let versionText = EventBusRelease.versionText(program: "eventbus")

private let socketOptionsHelp = """
  -s, --socket PATH        broker socket (default: $EVENTBUS_SOCKET, else the
                           user bus $XDG_RUNTIME_DIR/eventbus/bus.sock when not
                           root, else the system bus /run/eventbus/bus.sock)
      --system             use the system bus /run/eventbus/bus.sock
      --user               use the user bus $XDG_RUNTIME_DIR/eventbus/bus.sock
  -h, --help               show this help
"""

private let durationHelp = """
DURATION is a time span as in systemd.time(7): a number with an optional unit
us, ms, s (default), min (or m), h, d, w, M or y, and parts add up: 10, 2.5s,
500ms, 5min, 1h30m, 2d.
"""

let mainHelp = """
Usage: eventbus [--socket PATH | --system | --user] COMMAND [ARGS...]

Publish and receive events on an eventbus broker (eventbusd).

Commands:
  publish TYPE [DATA]     publish one event (or one per input line with --lines)
  listen [PATTERN...]     print events as they arrive
  wait PATTERN [-- CMD]   run CMD once subscribed, then wait for one event
  get PATTERN             print the retained event(s): the current value
  clear TYPE              remove the retained event of TYPE
  stats                   show the broker's counters and your own usage
  clients                 list the connections you may see and what they hold
  types [PATTERN]         per-type counters: published, delivered, dropped
  top                     a live view: hot types, queues, who is behind
  ping                    check that the broker answers
  reload [--wait]         make the broker read its access policy again

Options:
\(socketOptionsHelp)
  -V, --version            show the version

Run 'eventbus COMMAND --help' for the options and examples of each command.

The broker under systemd takes its options (the idle time after which it
exits, the log level) from $EVENTBUSD_OPTIONS, set in a drop-in; for the user
bus, without an editor (the system bus: /etc/systemd/system/eventbus.service.d,
systemctl without --user; more in 'eventbusd --help' and docs/SYSTEMD.md):
  mkdir -p ~/.config/systemd/user/eventbus.service.d
  printf '[Service]\\nEnvironment="EVENTBUSD_OPTIONS=--exit-idle-time 5min"\\n' \\
      > ~/.config/systemd/user/eventbus.service.d/options.conf
  systemctl --user daemon-reload && systemctl --user try-restart eventbus.service

Exit status: 0 success, 1 no retained event (get, clear), 64 usage error,
65 bad data, 69 broker unavailable, 75 a broker limit (try again later), 77
permission denied or forbidden by the policy, 124 timed out (see each
command's help for more).

"""

let publishHelp = """
Usage: eventbus publish [OPTIONS] TYPE [DATA | -]
       eventbus publish [OPTIONS] --string TEXT TYPE
       eventbus publish [OPTIONS] --lines [--json-lines] TYPE

Publish an event of type TYPE and wait for the broker to accept it. Quiet on
success. DATA is one JSON value (object, array, string, number, true, false,
null); pretty-printed JSON is compacted before it is sent. Without DATA, or
with '-', DATA is read from standard input unless that is a terminal (then
the event has no data: null; empty input also gives null).

Options:
      --string TEXT        publish TEXT as a JSON string (no quoting needed)
      --source SOURCE      the event's source (default: pid/<pid> of this process)
      --id ID              the event's id (default: <broker instance>-<seq>)
  -p, --print-seq          print the broker's sequence number of the event
  -l, --lines              publish every line of standard input as one event,
                           a JSON string, over one connection (replies are
                           read while lines are sent, so a listener of your
                           uid that reads slower than the input comes slows
                           it to the listener's pace, and nothing is lost)
  -j, --json-lines         --lines where every line is a JSON value (implies
                           --lines; blank lines are skipped, bad lines
                           reported and skipped)
  -r, --retain             also keep the event as the retained event of TYPE
                           (its current value): 'get' prints it, 'listen
                           --last' and new subscribers with 'last' get it
                           first; it survives broker restarts when the broker
                           has a state directory
\(socketOptionsHelp)

TYPE is 1-255 bytes of '.'-separated segments of A-Z a-z 0-9 _ - : (no
wildcards). A negative number can be given as DATA directly: -5.

Examples:
  eventbus publish order.created '{"id": 42, "total": 9.5}'
  eventbus publish backup.finished                  # no data (null)
  eventbus publish --string "disk almost full" alert.disk
  jq -c '.items[]' items.json | eventbus publish --lines --json-lines item.added
  tail -F /var/log/app.log | eventbus publish --lines app.log.line
  seq=$(eventbus publish --print-seq job.started '{"job": 7}')
  eventbus publish --retain currency.changed '{"code": "EUR"}'

In a 'while read' loop, give DATA (or '< /dev/null') so publish does not
read the loop's input.

Exit status: 0 published, 64 usage error, 65 DATA is not valid JSON or the
broker rejected it (nothing is sent for invalid JSON), 69 broker unavailable,
75 a broker limit was reached (with --retain: the retained events' limits;
then nothing is published), 77 forbidden by the broker's access policy, or
TYPE begins 'eventbus.' (reserved for the broker).

"""

let listenHelp = """
Usage: eventbus listen [OPTIONS] [PATTERN...]

Print events matching any PATTERN (default: every event) as they arrive,
one per line.

Options:
  -f, --format FORMAT      json: the event as the broker sent it, compact
                             (default when standard output is not a terminal)
                           pretty: local time, type and data, coloured on a
                             terminal unless NO_COLOR is set (default on a terminal)
                           data: only the event's data
                           cloudevents: a CloudEvents 1.0 JSON object
  -j, --json               the same as --format json
  -n, --count N            exit after N events
  -t, --timeout DURATION   exit with status 124 when no event arrives for
                           DURATION (the clock restarts with every event)
  -r, --reconnect          keep listening when the broker restarts: reconnect,
                           resubscribe, and say so on standard error; events
                           published meanwhile are replayed from the broker's
                           history (what it no longer holds is reported as a
                           gap on standard error)
      --last               print the retained event of every matching type
                           first (the current values), then new events
      --since SEQ          first print the events after SEQ that the broker's
                           history still holds (a gap is reported on standard
                           error when it no longer reaches back to SEQ + 1)
      --resume FILE        remember in FILE where this listener got to (the
                           broker run and seq, rewritten atomically after each
                           batch of events); started again with the same FILE,
                           continue from there: nothing the history still
                           holds is missed, gaps are reported on standard error
      --overflow RULE      what the broker does when this listener falls
                           behind (its queue reaches the broker's
                           --max-outbound): wait (the default): publishers of
                           your uid wait for it, so nothing is lost, and a
                           listener that reads slower than they publish slows
                           them to its pace; one that stops reading costs them
                           at most the broker's --stall-timeout, then loses
                           events (reported on standard error). drop-old: lose
                           the oldest queued events instead, never slowing
                           anyone (a monitor that prefers the newest);
                           drop-new: lose the new ones; disconnect
\(socketOptionsHelp)

PATTERN is an event type in which a whole segment may be '*' (exactly one
segment) and the last segment may be '>' (one or more): 'order.*',
'order.>', '>'. Quote patterns so the shell leaves '*' and '>' alone.
\(durationHelp)

Examples:
  eventbus listen                                   # everything, pretty on a terminal
  eventbus listen 'order.>' | jq -r '.data.id'
  eventbus listen --format data --count 1 'job.finished'
  eventbus listen --timeout 30s --reconnect 'sensor.*.temperature' >> temps.jsonl
  eventbus listen --format cloudevents 'order.*'
  eventbus listen --last --format data currency.changed
  eventbus listen --resume ~/.cache/orders.pos --timeout 2s 'order.>'  # from cron: exits 124 once quiet
  eventbus listen --overflow drop-old 'metrics.>'   # a dashboard: newest first, never slows a publisher

Exit status: 0 after --count events, or when standard output is closed
(e.g. '| head -n 1'); 64 usage error; 65 the --resume FILE does not hold a
position (remove it to start afresh); 69 broker unavailable or gone (without
--reconnect); 74 the --resume FILE cannot be written; 77 a PATTERN is
forbidden by the broker's policy; 124 --timeout passed with no event.
Ctrl-C ends it quietly.

"""

let waitHelp = """
Usage: eventbus wait [OPTIONS] PATTERN... [-- COMMAND [ARGS...]]

Subscribe to PATTERN; once the broker has acknowledged the subscription, run
COMMAND (if given); then wait for the first matching event, print it as
'listen' does, and exit 0. Because the subscription exists before COMMAND
starts, an event that COMMAND causes cannot be missed. With several
patterns, the first event matching any of them ends the wait.

The wait ends when the event has arrived and COMMAND has exited 0. If
COMMAND fails first, wait stops at once with COMMAND's exit status (128+N if
killed by signal N).

Options:
  -t, --timeout DURATION   give up after DURATION (counted from the start,
                           COMMAND included) with status 124; a COMMAND still
                           running then gets SIGTERM
  -f, --format FORMAT      json, pretty, data or cloudevents (see 'listen')
  -j, --json               the same as --format json
  -q, --quiet              do not print the event
      --overflow RULE      wait (default), drop-new, drop-old or disconnect
                           (see 'listen')
\(socketOptionsHelp)

\(durationHelp)

Examples:
  eventbus wait --timeout 30s backup.finished -- systemctl start backup.service
  eventbus wait -q 'deploy.done' -- ./deploy.sh && echo deployed
  eventbus wait --format data 'job.42.*' -- eventbus publish job.42.start
  eventbus wait --timeout 5 'build.finished' || echo 'no build in 5 s'

Exit status: 0 event received (and COMMAND succeeded), 64 usage error, 69
broker unavailable, 77 a PATTERN is forbidden by the broker's policy, 124
timed out, 126 COMMAND cannot be run, 127 COMMAND not found, otherwise
COMMAND's own failure status.

"""

let statsHelp = """
Usage: eventbus stats [OPTIONS]

Show the broker's counters: connections, subscriptions, published,
delivered, dropped, queued_bytes, uptime_s, instance, policy_generation,
retained, retained_bytes, history_first_seq, history_events; held
(publishers held back now because a subscriber of their uid has no room),
holds (times one was held), stalls (times a subscriber stopped reading for
the broker's --stall-timeout while holding one); and under 'me'
your own uid's usage (connections, subscriptions, subscription_bytes,
inbound_bytes, queued_bytes, retained_bytes, retained_events) and its limits
(a limit of null does not apply: uid 0 has none).

With --prometheus: the Prometheus text format (0.0.4) of stats, types and
clients: eventbus_up, eventbus_published_total and the other counters,
eventbus_type_..._total{type="..."} for the busiest types and
eventbus_client_...{conn,client,uid} for the largest queues. A broker that
does not answer gives eventbus_up 0 (exit status 69).

Options:
  -f, --format FORMAT      table: one 'name  value' line per counter (default)
                           json: one compact JSON object
  -j, --json               the same as --format json
      --prometheus         print the Prometheus exposition instead
      --max-types N        with --prometheus: per-type series for at most N
                           types, the most published first (default 100)
      --max-clients N      with --prometheus: per-connection series for at
                           most N connections, the largest queues first (default 100)
  -o, --output FILE        with --prometheus: replace FILE atomically (mode
                           0644) instead of printing, for node_exporter's
                           textfile collector (systemd/eventbus-metrics.timer)
\(socketOptionsHelp)

Examples:
  eventbus stats
  eventbus stats --json | jq .dropped
  eventbus --system stats --prometheus | promtool check metrics
  eventbus --system stats --prometheus --output /var/lib/prometheus/node-exporter/eventbus.prom

Exit status: 0 success, 64 usage error, 69 broker unavailable, 74 FILE
could not be written.

"""

let pingHelp = """
Usage: eventbus ping [OPTIONS]

Check that the broker answers. Quiet; exit status 0 once it has answered.

Options:
  -w, --wait DURATION      keep trying (every 50 ms) until the broker answers
                           or DURATION has passed
\(socketOptionsHelp)

\(durationHelp)

Examples:
  eventbusd --socket /tmp/bus.sock & eventbus --socket /tmp/bus.sock ping --wait 5s
  until eventbus ping; do sleep 1; done

Exit status: 0 the broker answered, 64 usage error, 69 broker unavailable
(no answer within DURATION with --wait).

"""

let getHelp = """
Usage: eventbus get [OPTIONS] PATTERN

Print the retained event of every type PATTERN matches (the current values,
kept by 'publish --retain'), oldest first, and exit. Prints nothing and exits
1 when there is none.

Options:
  -f, --format FORMAT      json, pretty, data or cloudevents (see 'listen')
  -j, --json               the same as --format json
\(socketOptionsHelp)

Examples:
  eventbus get --format data currency.changed
  if code=$(eventbus get -f data currency.changed); then echo "now $code"; fi
  eventbus get 'settings.>'

Exit status: 0 printed, 1 no retained event matches, 64 usage error, 69
broker unavailable, 77 forbidden by the broker's policy.

"""

let clearHelp = """
Usage: eventbus clear [OPTIONS] TYPE

Remove the retained event of TYPE (kept by 'publish --retain'). Needs the
permission to publish TYPE.

Options:
\(socketOptionsHelp)

Examples:
  eventbus clear currency.changed

Exit status: 0 removed, 1 there was none, 64 usage error, 69 broker
unavailable, 77 forbidden.

"""

let clientsHelp = """
Usage: eventbus clients [OPTIONS]

List the broker's connections: id, uid, gid, pid, client name, connected
since, subscriptions, queued bytes, events published, delivered and dropped,
overflow rule, echo, holding (how many publishers this connection holds back
now), held (true: it is held back by a subscriber with no room), behind
(true: it stopped reading and holds no one until its queue is empty), and
the first patterns. uid 0 sees every connection, other users see their own
uid's. This is how to find who holds the memory, and who slows whom.

Options:
  -f, --format FORMAT      table: aligned columns (default on a terminal)
                           json: one JSON object per connection and line, as
                             the broker sent it (default when piped)
  -j, --json               the same as --format json
\(socketOptionsHelp)

Examples:
  sudo eventbus --system clients
  eventbus clients --json | jq -s 'sort_by(-.queued_bytes) | .[0]'

Exit status: 0 success, 64 usage error, 69 broker unavailable.

"""

let typesHelp = """
Usage: eventbus types [OPTIONS] [PATTERN]

List the event types published in this broker run (and the retained ones),
most recently published first: events published, deliveries queued,
deliveries dropped, subscribers now, whether one is retained, the last seq
and time. You see only the types the access policy lets you receive. The
broker keeps counters for 65,536 types (the least recently published are
forgotten first).

Options:
  -f, --format FORMAT      table: aligned columns (default), or json: one
                           JSON object per type and line
  -j, --json               the same as --format json
  -n, --limit N            at most N types (default 1000)
\(socketOptionsHelp)

Examples:
  eventbus types
  eventbus types 'order.>'
  eventbus types --json | jq -s 'sort_by(-.dropped)[0]'

Exit status: 0 success, 64 usage error, 69 broker unavailable.

"""

let topHelp = """
Usage: eventbus top [OPTIONS]

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

Options:
  -i, --interval DURATION  time between polls (default 1s, at least 100ms)
  -n, --count N            stop after N polls (a failed one counts too)
  -f, --format FORMAT      view: the live view, or plain snapshots without a
                           terminal (default); json: one JSON object per poll
  -j, --json               the same as --format json
      --queue-limit SIZE   the queue size shown as a full bar: the broker's
                           --max-outbound (default 8M)
\(socketOptionsHelp)

\(durationHelp)

Examples:
  sudo eventbus --system top
  eventbus top --interval 5s --count 12 > top.log
  eventbus top --json --count 2 | jq -c '.types[] | select(.drops_per_s > 0)'

Exit status: 0 success, 64 usage error, 69 broker unavailable at start or at
the last of --count polls.

"""

let reloadHelp = """
Usage: eventbus reload [OPTIONS]

Ask the broker to read its access-policy files again (docs/POLICY.md): sends
SIGHUP to the broker process at the other end of the socket, or to $MAINPID
when set (systemd sets it for the unit's ExecReload=). Under socket
activation the socket's other end is systemd, not the broker: use
'systemctl reload eventbus' (or 'systemctl --user reload eventbus'), which
runs this command with $MAINPID. Reloading is all or nothing: if any file is
invalid, the broker keeps the policy in force. Subscriptions the new policy
forbids are removed (their connections are told).

Options:
  -w, --wait               wait for the outcome: print the new policy
                           generation, or fail with the broker's reason
  -t, --timeout DURATION   with --wait: give up after DURATION (default \(defaultReloadTimeoutText))
\(socketOptionsHelp)

\(durationHelp)

Examples:
  systemctl reload eventbus                         # the installed system bus
  eventbus --socket /tmp/bus.sock reload --wait     # a broker started by hand
  eventbusd --check-policy /etc/eventbus/policy.d/50-audit.conf && eventbus --system reload --wait

Exit status: 0 reloaded (without --wait: signal sent), 64 usage error, 65 the
broker refused the new policy (its files are invalid; the old one stays), 69
broker unavailable, or the socket's other end is not eventbusd (nothing is
signalled), 77 not allowed to signal the broker (run as root or as
its user), 124 timed out.

"""

/// The help text of a subcommand, or nil for an unknown name.
func helpText(for command: String) -> String? {
    switch command {
    case "publish": publishHelp
    case "listen": listenHelp
    case "wait": waitHelp
    case "stats": statsHelp
    case "ping": pingHelp
    case "get": getHelp
    case "clear": clearHelp
    case "clients": clientsHelp
    case "types": typesHelp
    case "top": topHelp
    case "reload": reloadHelp
    default: nil
    }
}
