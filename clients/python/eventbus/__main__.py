"""``python3 -m eventbus publish|listen``: a small twin of the ``eventbus``
CLI for machines without it (docs/CLI.md: the same options where they
exist, the same ``eventbus: ...`` messages and sysexits(3) statuses)."""

import argparse
import json
import os
import sys

from . import core, errors
from .client import Bus

EX_USAGE, EX_DATAERR, EX_UNAVAILABLE, EX_SOFTWARE, EX_IOERR, EX_TEMPFAIL, EX_PROTOCOL, EX_NOPERM = 64, 65, 69, 70, 74, 75, 76, 77
TIMED_OUT = 124

_STATUS = {"bad_frame": EX_DATAERR, "bad_request": EX_DATAERR, "bad_type": EX_DATAERR, "frame_too_large": EX_DATAERR,
           "limit": EX_TEMPFAIL, "slow_consumer": EX_TEMPFAIL, "forbidden": EX_NOPERM}


class _Fail(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"eventbus: {message}", file=sys.stderr)
        sys.exit(EX_USAGE)


def _bus_options(parser, **defaults):
    """--socket, --system, --user: before the command or after it, as the
    Swift CLI takes them (a command's copies leave the values given before
    it alone unless given: ``default=SUPPRESS``)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-s", "--socket", metavar="PATH", help="the broker's socket", **defaults)
    where.add_argument("--system", action="store_true", help="the system bus, /run/eventbus/bus.sock", **defaults)
    where.add_argument("--user", action="store_true", help="the user bus, $XDG_RUNTIME_DIR/eventbus/bus.sock", **defaults)


def _parser():
    parser = _Parser(prog="python3 -m eventbus", description="Publish and listen on the event bus (the Python twin of the eventbus CLI).")
    _bus_options(parser)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    pub = commands.add_parser("publish", help="publish one event (or one per input line with --lines)")
    _bus_options(pub, default=argparse.SUPPRESS)
    pub.add_argument("type", metavar="TYPE")
    pub.add_argument("data", metavar="DATA", nargs="?", help="one JSON value; '-' or none: standard input (unless a terminal)")
    pub.add_argument("--string", metavar="TEXT", help="publish TEXT as a JSON string")
    pub.add_argument("--retain", action="store_true", help="also keep it as the type's current value")
    pub.add_argument("--source", help="the event's source")
    pub.add_argument("--id", help="the event's id")
    pub.add_argument("-p", "--print-seq", action="store_true", help="print the seq of each published event")
    pub.add_argument("-l", "--lines", action="store_true", help="one event per input line, as a JSON string")
    pub.add_argument("-j", "--json-lines", action="store_true", help="one event per input line, each a JSON value")

    listen = commands.add_parser("listen", help="print events as they arrive")
    _bus_options(listen, default=argparse.SUPPRESS)
    listen.add_argument("patterns", metavar="PATTERN", nargs="*", default=[">"])
    listen.add_argument("-f", "--format", choices=("json", "pretty", "data"), help="json (default when not a terminal), pretty, data")
    listen.add_argument("-n", "--count", type=int, metavar="N", help="exit after N events")
    listen.add_argument("-t", "--timeout", type=float, metavar="SECONDS", help="exit 124 when no event arrives for SECONDS")
    listen.add_argument("-r", "--reconnect", action="store_true", help="reconnect and resume when the broker goes away")
    listen.add_argument("--last", action="store_true", help="first the retained event of every matching type")
    listen.add_argument("--since", type=int, metavar="SEQ", help="first the events after SEQ still in the broker's history")
    return parser


def _connect(args, reconnect=False, on_notice=None):
    if (args.socket is not None) + args.system + args.user > 1:
        # Given on both sides of the command (the parser sees each side alone).
        raise _Fail(EX_USAGE, "give only one of --socket, --system and --user")
    try:
        path = core.resolve_socket(args.socket, system=args.system, user=args.user)
    except ValueError as exc:
        raise _Fail(EX_USAGE, str(exc)) from None
    return Bus(path, reconnect=reconnect, on_notice=on_notice)


def _parse_json(text, what):
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _Fail(EX_DATAERR, f"{what} is not valid JSON: {exc}") from None


def _publish(args):
    core.check_type(args.type)
    if args.lines or args.json_lines:
        return _publish_lines(args)
    if args.string is not None:
        data = args.string
    elif args.data not in (None, "-"):
        data = _parse_json(args.data, "DATA")
    elif sys.stdin is None or sys.stdin.isatty():
        data = None
    else:
        text = sys.stdin.read()
        data = _parse_json(text, "standard input") if text.strip() else None
    with _connect(args) as bus:
        seq = bus.publish(args.type, data, retain=args.retain, source=args.source, id=args.id)
    if args.print_seq:
        print(seq)
    return 0


def _publish_lines(args):
    status = 0
    with _connect(args) as bus:
        with bus.batch():
            for number, raw in enumerate(sys.stdin.buffer, 1):
                line = raw.rstrip(b"\n").removesuffix(b"\r")
                try:
                    text = line.decode()
                except UnicodeDecodeError:
                    print(f"eventbus: line {number} is not valid UTF-8; not published", file=sys.stderr)
                    status = status or EX_DATAERR
                    continue
                if args.json_lines:
                    if not text.strip():
                        continue
                    try:
                        data = json.loads(text)
                    except ValueError as exc:
                        print(f"eventbus: line {number} is not valid JSON: {exc}", file=sys.stderr)
                        status = status or EX_DATAERR
                        continue
                else:
                    data = text
                seq = bus.publish(args.type, data, retain=args.retain, source=args.source, id=args.id, wait=args.print_seq)
                if args.print_seq:
                    print(seq)
        try:
            bus.flush()
        except errors.ProtocolError as exc:
            print(f"eventbus: {getattr(exc, 'failed', 1)} line(s) failed, the first: {exc}", file=sys.stderr)
            status = status or _STATUS.get(exc.code, EX_PROTOCOL)
    return status


def _format(kind):
    if kind is None:
        kind = "pretty" if sys.stdout.isatty() else "json"
    if kind == "json":
        return lambda ev: core.encode_json(ev.frame)
    if kind == "data":
        return lambda ev: core.encode_json(ev.data)

    def pretty(ev):
        when = ev.time.astimezone().strftime("%H:%M:%S.%f")[:-3] if ev.time else "-"
        return f"{when} {ev.type} {core.encode_json(ev.data)}"
    return pretty


def _listen_notice(notice):
    if notice.kind == "dropped" and notice.error is None:
        text = f"the broker dropped {notice.count} events for this listener, starting at seq {notice.since_seq} (reading too slowly)"
    else:
        text = str(notice)
    print(f"eventbus: {text}", file=sys.stderr, flush=True)


def _listen(args):
    for pattern in args.patterns:
        core.check_pattern(pattern)
    show = _format(args.format)
    out = sys.stdout
    count = 0
    with _connect(args, reconnect=args.reconnect, on_notice=_listen_notice) as bus:
        with bus.subscribe(*args.patterns, last=args.last, since=args.since) as sub:
            while args.count is None or count < args.count:
                event = sub.get(args.timeout)
                if event is None:
                    return TIMED_OUT
                out.write(show(event) + "\n")
                out.flush()
                count += 1
    return 0


def main(argv=None):
    """Runs the command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return _publish(args) if args.command == "publish" else _listen(args)
    except _Fail as exc:
        print(f"eventbus: {exc}", file=sys.stderr)
        return exc.status
    except errors.BadType as exc:
        print(f"eventbus: {exc.message}", file=sys.stderr)
        return EX_USAGE
    except errors.Unavailable as exc:
        print(f"eventbus: {exc}", file=sys.stderr)
        return EX_UNAVAILABLE
    except errors.ConnectionLost as exc:
        print(f"eventbus: {exc}", file=sys.stderr)
        return EX_UNAVAILABLE
    except errors.ProtocolError as exc:
        print(f"eventbus: {args.command} failed: {exc}", file=sys.stderr)
        return _STATUS.get(exc.code, EX_PROTOCOL)
    except (TypeError, ValueError) as exc:
        print(f"eventbus: {exc}", file=sys.stderr)
        return EX_DATAERR
    except BrokenPipeError:
        # A closed stdout (listen | head -n 1) ends quietly, as the CLI does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
