"""The sans-I/O core shared by the blocking and the asyncio clients.

Bytes in, frames, replies, events and notices out; requests out as bytes.
Nothing here touches a socket, a thread or a clock: `client` and `aio` feed
it what they read and write what it returns, so every protocol rule
(PROTOCOL.md "Framing", "Requests", "Events", "Retained events and history")
is written once, here.

Before editing: `Session.receive` is the receive hot path (one call per read
of up to 256 KiB); measure with ``bench/bench_redis.py`` after changing it.
"""

import datetime
import decimal
import errno as _errno
import json
import json.encoder
import logging
import os
import re
import stat
import sys
import threading
import time

from . import errors

# ---------------------------------------------------------------------------
# Transport (PROTOCOL.md "Transport"; Sources/EventBusProtocol/SocketPath.swift)

SYSTEM_BUS = "/run/eventbus/bus.sock"

#: Largest line accepted from the broker. Events may exceed the broker's own
#: 1 MiB request limit by their envelope and ``--max-frame`` is configurable
#: there, so this only guards against a runaway peer (the CLI's limit too).
MAX_INCOMING_FRAME = 256 << 20

#: Bytes asked for per read.
READ_SIZE = 256 << 10


def user_bus(runtime_dir):
    """``$XDG_RUNTIME_DIR/eventbus/bus.sock``."""
    return runtime_dir + "/eventbus/bus.sock"


def resolve_socket(socket=None, *, system=False, user=False, environ=None, euid=None):
    """The socket path, first that applies: ``socket``; ``system`` or ``user``;
    ``$EVENTBUS_SOCKET``; the user bus when ``XDG_RUNTIME_DIR`` is set and the
    process is not root; the system bus (PROTOCOL.md "Transport", the same
    order as the CLI's ``--socket``, ``--system``, ``--user``).

    Raises ValueError for an empty path, ``system`` with ``user``, or ``user``
    without ``XDG_RUNTIME_DIR``."""
    environ = os.environ if environ is None else environ
    euid = os.geteuid() if euid is None else euid
    chosen = (socket is not None) + bool(system) + bool(user)
    if chosen > 1:
        raise ValueError("give one of socket, system and user")
    runtime = environ.get("XDG_RUNTIME_DIR") or None
    if socket is not None:
        socket = os.fspath(socket)
        if not socket:
            raise ValueError("the socket path is empty")
        return socket
    if system:
        return SYSTEM_BUS
    if user:
        if runtime is None:
            raise ValueError("user=True needs XDG_RUNTIME_DIR to be set")
        return user_bus(runtime)
    path = environ.get("EVENTBUS_SOCKET")
    if path:
        return path
    if runtime is not None and euid != 0:
        return user_bus(runtime)
    return SYSTEM_BUS


def _start_command(path):
    # SocketPath.startCommand (Sources/EventBusProtocol/StartFailureHint.swift): eventbusd by hand
    # (the system bus with --system), the systemd way to start a well-known bus, and reset-failed
    # for a socket unit systemd gave up on.
    if path == SYSTEM_BUS:
        return "start it with 'eventbusd --system' or " + _systemd_start("systemctl", "journalctl")
    text = f"start it with 'eventbusd --socket {path}'"
    if path.endswith("/eventbus/bus.sock"):
        return text + " or " + _systemd_start("systemctl --user", "journalctl --user")
    return text


def _systemd_start(manager, journal):
    return (f"'{manager} start eventbus.socket'; when the socket unit failed ('{manager} status eventbus.socket eventbus.service'), "
            f"fix the cause ('{journal} -u eventbus'), then '{manager} reset-failed eventbus.service eventbus.socket' and start it again")


def connect_error(path, exc):
    """The `errors.Unavailable` for a failed ``connect(2)`` to ``path``, worded
    as the CLI's (``eventbus: cannot connect to the broker at PATH: ...``)."""
    code = getattr(exc, "errno", None)
    reason = os.strerror(code) if code else str(exc)
    head = f"cannot connect to the broker at {path}: "
    if code == _errno.ECONNREFUSED and not _is_socket(path):
        text = head + "it is not a socket (give the broker's socket with socket= or $EVENTBUS_SOCKET)"
    elif code in (_errno.ENOENT, _errno.ECONNREFUSED):
        text = head + f"{reason} (is eventbusd running? {_start_command(path)})"
    elif code in (_errno.EACCES, _errno.EPERM):
        text = head + f"{reason} (you need write permission on the socket and search permission on its folders: see eventbusd --mode and SocketGroup= in the .socket unit)"
    elif code == _errno.EAGAIN:
        text = head + "its listen queue is full"
    elif isinstance(exc, OSError) and "too long" in str(exc).lower():
        text = f"socket path is longer than 107 bytes: {path}"
    else:
        text = head + reason
    return errors.Unavailable(text, path)


def _is_socket(path):
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def start_failure_hint(path, runtime_dir=None):
    """What may have happened when the broker at ``path`` closed a connection
    before answering (Sources/EventBusProtocol/StartFailureHint.swift)."""
    if path == SYSTEM_BUS:
        return "it may have failed to start (see 'systemctl status eventbus.service' and 'journalctl -u eventbus')"
    if runtime_dir and path == user_bus(runtime_dir):
        return "it may have failed to start (see 'systemctl --user status eventbus.service' and 'journalctl --user -u eventbus')"
    return "it may have exited (see its standard error or log)"


def closed_error(path, heard, reason=None):
    """The error for a connection the broker closed: before answering anything
    (`errors.Unavailable` with the start-failure hint), after an ``error``
    frame without ``req`` (that error), or otherwise `errors.ConnectionLost`."""
    if reason is not None:
        return reason
    if not heard:
        hint = start_failure_hint(path, os.environ.get("XDG_RUNTIME_DIR"))
        return errors.Unavailable(f"the broker at {path} closed the connection before answering: {hint}", path)
    return errors.ConnectionLost(f"the broker at {path} closed the connection", path)


class Backoff:
    """Reconnect delays: 50 ms doubling to 5 s (the Swift library's
    ``ReconnectPolicy.standard``, without jitter). ``next()`` gives seconds."""

    def __init__(self, first=0.05, limit=5.0):
        self.first, self.limit, self._next = first, limit, first

    def next(self):
        delay = self._next
        self._next = min(self._next * 2, self.limit)
        return delay

    def reset(self):
        self._next = self.first


# ---------------------------------------------------------------------------
# Names (PROTOCOL.md "Names and patterns")

_SEGMENT = r"[A-Za-z0-9_:\-]+"
_TYPE_RE = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT})*")
_PATTERN_RE = re.compile(rf"(?:{_SEGMENT}|\*)(?:\.(?:{_SEGMENT}|\*))*(?:\.>)?|>")
_valid_types = {}


def check_type(name):
    """Returns ``name`` if it is an event type (1-255 bytes of segments of
    ``A-Z a-z 0-9 _ - :`` separated by ``.``); raises `errors.BadType`."""
    if name in _valid_types:
        return name
    if not isinstance(name, str) or len(name) > 255 or not _TYPE_RE.fullmatch(name):
        raise errors.BadType("bad_type", f"invalid event type: {name!r}")
    if len(_valid_types) < 4096:
        _valid_types[name] = True
    return name


def check_pattern(pattern):
    """Returns ``pattern`` if it is a subscription pattern (``*`` for one
    segment, a final ``>`` for one or more); raises `errors.BadType`."""
    if not isinstance(pattern, str) or len(pattern) > 255 or not _PATTERN_RE.fullmatch(pattern):
        raise errors.BadType("bad_type", f"invalid pattern: {pattern!r}")
    return pattern


_GROUP_RE = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")


def check_group(group):
    """Returns ``group`` if it is a queue group name (1-64 bytes of
    ``A-Z a-z 0-9 _ . - :``, PROTOCOL.md "Queue groups"); raises ValueError."""
    if not isinstance(group, str) or not _GROUP_RE.fullmatch(group):
        raise ValueError(f"invalid group name: {group!r} (1-64 bytes of A-Z a-z 0-9 _ . - :)")
    return group


def check_key(key):
    """Returns ``key`` if it is a publish/request key (a string of 1-255
    bytes, PROTOCOL.md "Queue groups"); raises ValueError."""
    if not isinstance(key, str) or not 1 <= len(key.encode()) <= 255:
        raise ValueError(f"invalid key: {key!r} (a string of 1-255 bytes)")
    return key


# ---------------------------------------------------------------------------
# Encoding requests

def _unencodable(value):
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


# The C encoder made once (json.dumps makes one per call): compact, UTF-8
# kept, NaN and infinities refused (not JSON). No check for circular
# containers: those end in RecursionError.
_c_encoder = json.encoder.c_make_encoder
if _c_encoder is not None:
    _c_encoder = _c_encoder(None, _unencodable, json.encoder.encode_basestring, None, ":", ",", False, False, False)

    def _encode(value, _join="".join, _enc=_c_encoder):
        return _join(_enc(value, 0))
else:  # pragma: no cover (CPython always has the C encoder)
    _encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


# U+2028, U+2029 and U+0085 split a line for str.splitlines(), and the broker
# refuses them raw (PROTOCOL-NOTES.md "Framing"); the encoder keeps UTF-8, so
# they are escaped afterwards (they can only be inside strings; the value is
# the same). Three C scans of the text, nothing more in the common case.
_unescaped = _encode


def _encode(value, _raw=_unescaped):
    try:
        text = _raw(value)
    except (ValueError, TypeError):
        text = deep_stack(_encode_big, value)
    if "\u2028" in text or "\u2029" in text or "\x85" in text:
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\x85", "\\u0085")
    return text


def _int_text(n):
    """str(n) for an int of any size, whatever the interpreter's int-digit
    limit (by halves: 10**k is computed, not converted)."""
    if n < 0:
        return "-" + _int_text(-n)
    digits = int(n.bit_length() * 0.30103) + 1
    if digits <= 600:                                   # (the smallest limit Python allows is 640)
        return str(n)
    k = digits // 2
    high, low = divmod(n, 10 ** k)
    return (_int_text(high) if high else "") + _int_text(low).zfill(k if high else 1)


def _encode_big(value):
    """The JSON of ``value`` when the fast encoder refused it: integers past
    the interpreter's int-digit limit and `decimal.Decimal` numbers (as
    `decode_int` gives them) written as their digits, so that what was
    received can be sent on. Raises the encoder's error when neither is the
    cause (NaN, an object JSON cannot hold)."""
    numbers = []
    mark = os.urandom(8).hex()      # (no string of the value can hold it)

    def swap(v):
        cls = v.__class__
        if cls is dict:
            return {k: swap(x) for k, x in v.items()}
        if cls is list or cls is tuple:
            return [swap(x) for x in v]
        if cls is int and v.bit_length() > 1900:        # (past about 570 digits: below any limit)
            numbers.append(_int_text(v))
        elif cls is decimal.Decimal and v.is_finite():
            numbers.append(str(v))
        else:
            return v
        return f"{mark}:{len(numbers) - 1}"
    swapped = swap(value)
    if not numbers:
        return _unescaped(value)                        # (raises the encoder's own error)
    return re.sub(f'"{mark}:([0-9]+)"', lambda m: numbers[int(m.group(1))], _unescaped(swapped))


def encode_json(value):
    """Compact JSON text of ``value`` on one line (raises TypeError or
    ValueError for what JSON cannot hold, before anything is sent)."""
    return _encode(value)


def encode_request(op, req, fields):
    """One request frame as bytes: ``{"op":OP,"req":REQ,...fields}`` + LF.
    Fields whose value is None are left out (the broker's default applies)."""
    frame = {"op": op}
    if req is not None:
        frame["req"] = req
    for key, value in fields.items():
        if value is not None:
            frame[key] = value
    return (_encode(frame) + "\n").encode()


def encode_publish(req, type, data, retain, source, id, key=None):
    """A ``publish`` frame as bytes (the publish hot path: no dict built)."""
    check_type(type)
    parts = ['{"op":"publish","req":', str(req), ',"type":"', type, '","data":', _encode(data)]
    if retain:
        parts.append(',"retain":true')
    if source is not None:
        parts.append(',"source":')
        parts.append(_encode(str(source)))
    if id is not None:
        parts.append(',"id":')
        parts.append(_encode(str(id)))
    if key is not None:
        parts.append(',"key":')
        parts.append(_encode(check_key(key)))
    parts.append("}\n")
    return "".join(parts).encode()


# ---------------------------------------------------------------------------
# Framing (PROTOCOL.md "Framing")

class FrameSplitter:
    """Splits the byte stream into lines: LF-terminated, a CR before the LF
    tolerated, blank lines skipped, a line over ``max_frame`` bytes discarded
    up to its LF (its first 100 bytes kept in ``oversized``, to tell what
    was lost)."""

    __slots__ = ("max_frame", "_partial", "_discarding", "oversized")

    def __init__(self, max_frame=MAX_INCOMING_FRAME):
        self.max_frame = max_frame
        self._partial = b""
        self._discarding = False
        self.oversized = []

    def feed(self, data):
        """The complete lines in ``data`` (bytes, without LF; may include a
        trailing CR, which JSON treats as whitespace)."""
        if self._partial:
            data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if self._discarding:
            if not lines:
                self._partial = b""
                return lines
            del lines[0]
            self._discarding = False
        if len(data) > self.max_frame:
            self.oversized += [line[:100] for line in lines if len(line) > self.max_frame]
            lines = [line for line in lines if len(line) <= self.max_frame]
            if len(self._partial) > self.max_frame:
                self.oversized.append(self._partial[:100])
                self._partial = b""
                self._discarding = True
        return lines

    def reset(self):
        self._partial = b""
        self._discarding = False

    def pending_bytes(self):
        """Bytes of an incomplete last line."""
        return len(self._partial)


# ---------------------------------------------------------------------------
# What comes out of a Session

_parse_time = datetime.datetime.fromisoformat
_monotonic = time.monotonic
_wall_clock = time.time


class Event:
    """One event (PROTOCOL.md "Events").

    Attributes: ``type`` (str), ``data`` (decoded JSON), ``seq`` (int),
    ``time`` (an aware `datetime.datetime` in UTC), ``source``, ``id`` (str),
    ``pid``, ``uid``, ``gid`` (int, the publisher's kernel credentials),
    ``retained``, ``replayed`` (bool), ``origin`` (dict or None, bridged
    events); 1.3: ``key`` (str or None), ``redelivered`` (bool: a queue
    group member closed before this event was written to it, so it came to
    this member instead). ``frame`` is the event frame as a dict, with any
    field a newer broker adds."""

    __slots__ = ("frame", "_time")

    def __init__(self, frame):
        self.frame = frame
        self._time = None

    type = property(lambda self: self.frame["type"])
    data = property(lambda self: self.frame.get("data"))
    seq = property(lambda self: self.frame["seq"])
    source = property(lambda self: self.frame.get("source"))
    id = property(lambda self: self.frame.get("id"))
    pid = property(lambda self: self.frame.get("pid"))
    uid = property(lambda self: self.frame.get("uid"))
    gid = property(lambda self: self.frame.get("gid"))
    retained = property(lambda self: self.frame.get("retained") is True)
    replayed = property(lambda self: self.frame.get("replayed") is True)
    origin = property(lambda self: self.frame.get("origin"))
    key = property(lambda self: self.frame.get("key"))
    redelivered = property(lambda self: self.frame.get("redelivered") is True)

    @property
    def time(self):
        """The broker's receipt time, an aware datetime (UTC, ms precision)."""
        if self._time is None:
            text = self.frame.get("time")
            self._time = _parse_time(text) if isinstance(text, str) else None
        return self._time

    def __repr__(self):
        return f"{self.__class__.__name__}(seq={self.seq!r}, type={self.type!r}, data={_short_repr(self.data)})"

    def __eq__(self, other):
        return isinstance(other, Event) and other.frame == self.frame

    __hash__ = None


def _short_repr(value):
    try:
        text = repr(value)
    except ValueError:          # an int past the interpreter's int-digit limit
        return "<a value too large to show>"
    return text if len(text) <= 1000 else text[:1000] + "..."


class Request(Event):
    """A request a service received (PROTOCOL.md "Request/reply (1.3)"):
    the fields of an `Event` (the requester's ``pid``, ``uid``, ``gid``,
    ``source``, ``data``, ``key``), ``token`` (the broker's reply token),
    ``timeout`` (seconds left now before the requester's deadline; 0 once
    it passed: a reply then is too late). Answer it with ``reply(data)`` or
    ``fail(text)`` (the drivers bind them); ``answered`` says whether one
    was sent.

    The frame's ``timeout`` is the time left when the broker *queued* the
    request, not when it was read: one that waited behind others (a busy
    service, or another user's requests sent to expire) may be past its
    deadline already. So, as ``eventbus serve`` does, the deadline is taken
    when the frame is read and bounded by the broker's receipt ``time`` plus
    that ``timeout`` (a first delivery was queued when received; a
    ``redelivered`` one later, so its bound is the frame's alone)."""

    __slots__ = ("_answer", "answered", "_deadline")

    def __init__(self, frame, answer=None):
        super().__init__(frame)
        self._answer = answer
        self.answered = False
        ms = frame.get("timeout")
        left = ms / 1000 if isinstance(ms, (int, float)) and not isinstance(ms, bool) else DEFAULT_REQUEST_TIMEOUT
        received = frame.get("time")
        if not self.redelivered and isinstance(received, str):
            try:
                left = min(left, _parse_time(received).timestamp() + left - _wall_clock())
            except ValueError:
                pass
        self._deadline = _monotonic() + left

    token = property(lambda self: self.frame.get("reply"))

    @property
    def timeout(self):
        """Seconds left before the requester's deadline (0.0 once past)."""
        return max(0.0, self._deadline - _monotonic())

    def reply(self, data=None):
        """Answers the request with ``data``; the driver's answer (blocking:
        True when the broker accepted it, False when not; asyncio: an
        awaitable of that)."""
        return self._answer(self, data, None)

    def fail(self, text):
        """Answers the request with the service's failure ``text`` (the
        requester gets `errors.ServiceError` with it); as `reply`."""
        return self._answer(self, None, str(text))


class Response:
    """The answer to ``request`` (PROTOCOL.md "Request/reply (1.3)"):
    ``data`` (decoded JSON), ``pid``, ``uid``, ``gid`` (the server's kernel
    credentials: check who answered), ``time`` (when the broker received the
    reply, an aware datetime), ``seq`` (the request's seq). ``frame`` is the
    whole ``ok`` frame."""

    __slots__ = ("frame", "reply")

    def __init__(self, frame):
        self.frame = frame
        reply = frame.get("reply")
        self.reply = reply if isinstance(reply, dict) else {}

    data = property(lambda self: self.reply.get("data"))
    pid = property(lambda self: self.reply.get("pid"))
    uid = property(lambda self: self.reply.get("uid"))
    gid = property(lambda self: self.reply.get("gid"))
    seq = property(lambda self: self.frame.get("seq"))

    @property
    def time(self):
        text = self.reply.get("time")
        return _parse_time(text) if isinstance(text, str) else None

    def __repr__(self):
        return f"Response(seq={self.seq!r}, pid={self.pid!r}, data={_short_repr(self.data)})"


class Reply:
    """The ``ok`` or ``error`` answering request ``req``: ``frame`` (dict),
    ``error`` (a `errors.ProtocolError`, or None for ``ok``)."""

    __slots__ = ("req", "frame", "error")

    def __init__(self, req, frame, error):
        self.req, self.frame, self.error = req, frame, error


class Notice:
    """Something besides events and replies. ``kind`` is one of:

    - ``"dropped"``: the broker dropped ``count`` events for this connection,
      the first with seq ``since_seq`` (PROTOCOL.md "Semantics"); or (with
      ``error`` set) this client could not decode the event (or request)
      with seq ``since_seq`` (``count`` 1): lost all the same, so told the
      same way and counted in ``dropped``;
    - ``"gap"``: a history replay for ``pattern`` could not reach back to
      ``since_seq`` + 1; events up to ``first_seq`` - 1 may be missed
      (``since_seq`` 0: the broker restarted);
    - ``"error"``: an ``error`` frame that answered no request (``error``);
    - ``"malformed"``: a line this client could not read (``error``);
    - ``"disconnected"`` / ``"reconnected"``: the connection was lost
      (``error``) / is back and resubscribed (``path``).

    ``frame`` is the notice frame as a dict when there is one."""

    __slots__ = ("kind", "count", "since_seq", "first_seq", "pattern", "error", "frame", "path")

    def __init__(self, kind, frame=None, *, error=None, path=None):
        self.kind, self.frame, self.error, self.path = kind, frame, error, path
        frame = frame or {}
        self.count = frame.get("count")
        self.since_seq = frame.get("since_seq")
        self.first_seq = frame.get("first_seq")
        self.pattern = frame.get("type")

    def __str__(self):
        if self.kind == "dropped" and self.error is not None:
            return f"dropped the event or request with seq {self.since_seq}: this client could not decode it ({self.error})"
        if self.kind == "dropped":
            return f"the broker dropped {self.count} events for this connection, starting at seq {self.since_seq} (reading too slowly)"
        if self.kind == "gap":
            if self.since_seq == 0:
                return f"the broker restarted; events of {self.pattern!r} published in between may have been missed, replaying this run's from seq {self.first_seq}"
            return f"the broker's history no longer reaches back to seq {self.since_seq + 1}; events of {self.pattern!r} from seq {self.since_seq + 1} to {self.first_seq - 1} may have been missed"
        if self.kind == "reconnected":
            return f"reconnected to the broker at {self.path}"
        if self.kind == "disconnected":
            return f"lost the connection to the broker: {self.error}; reconnecting"
        return f"{self.kind}: {self.error}"

    def __repr__(self):
        return f"Notice({self.kind!r}, {self.frame!r})"


# ---------------------------------------------------------------------------
# Decoding (PROTOCOL.md "Framing": numbers of any magnitude, 512 levels)

_loads = json.loads

#: Digits up to which an integer past the interpreter's int-digit limit
#: (``sys.get_int_max_str_digits()``, 4300 by default) is still made an
#: ``int`` (by halves, about 30 ms at 50,000 digits); a longer one comes as
#: an exact, integral `decimal.Decimal` (linear time), so that no publisher
#: can make a subscriber spend seconds on one number (1,000,000 digits as an
#: int: about 4 s on Python 3.11).
BIG_INT_DIGITS = 50_000


def _join_digits(digits, chunk):
    n = len(digits)
    if n <= chunk:
        return int(digits)
    half = n // 2
    return _join_digits(digits[:half], chunk) * 10 ** (n - half) + _join_digits(digits[half:], chunk)


def decode_int(text):
    """The value of a JSON integer literal (``-?[0-9]+``) of any length: an
    ``int`` up to `BIG_INT_DIGITS` digits whatever the interpreter's
    int-digit limit, beyond that an exact `decimal.Decimal`."""
    limit = sys.get_int_max_str_digits()
    if limit == 0 or len(text) <= limit:
        return int(text)
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    if len(digits) > BIG_INT_DIGITS:
        return decimal.Decimal(text)
    value = _join_digits(digits, max(limit // 2, 300))
    return -value if negative else value


_deep_lock = threading.Lock()
#: Recursion levels added while a deeply nested value is decoded or encoded
#: the slow way: the broker allows 512 levels, the C scanner counts one per
#: level, a Python walk two.
_DEEP_MARGIN = 1200


def decode_frame(line):
    """One line (bytes) as JSON, for every value the broker forwards: the
    fast ``json.loads`` first; on failure again with `decode_int` for the
    integers (the interpreter's int-digit limit) and, for a RecursionError
    (a deep value read from deep in the caller's stack), with the recursion
    limit raised by `_DEEP_MARGIN` for that call (under a lock; put back
    unless someone changed it meanwhile). Raises ValueError or
    RecursionError for a line that is not JSON even so."""
    try:
        return _loads(line)
    except ValueError:
        return _loads(line, parse_int=decode_int)
    except RecursionError:
        pass
    return deep_stack(_loads, line, parse_int=decode_int)


def deep_stack(function, *args, **kwargs):
    """``function(*args, **kwargs)`` with the recursion limit raised by
    `_DEEP_MARGIN` levels (two frames each for a Python walk of 512 levels),
    under a lock, put back afterwards unless someone changed it meanwhile."""
    with _deep_lock:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(old + _DEEP_MARGIN)
        try:
            return function(*args, **kwargs)
        finally:
            if sys.getrecursionlimit() == old + _DEEP_MARGIN:
                sys.setrecursionlimit(old)


# What the broker writes first in an event or request frame, and in a reply
# (Sources/EventBusProtocol's encoders): how an undecodable line is told.
_EVENT_HEAD = re.compile(rb'\s*\{\s*"op"\s*:\s*"(event|request)"\s*,\s*"seq"\s*:\s*([0-9]{1,19})\b')
_REPLY_HEAD = re.compile(rb'\s*\{\s*"op"\s*:\s*"(?:ok|error)"\s*,\s*"req"\s*:\s*(-?[0-9]{1,16}\b|"[^"\\]{0,256}")')


# ---------------------------------------------------------------------------
# Session: the protocol state of one connection


def take_flush_errors(session, deferred, path):
    """The errors `flush` reports, oldest first (clears them): those of the
    unawaited publishes, and one `errors.ConnectionLost` for those whose
    connection was lost before they were answered."""
    found = list(deferred)
    deferred.clear()
    if session.posts_lost:
        found.append(errors.ConnectionLost(
            f"{session.posts_lost} publish(es) were unanswered when the connection to the broker at {path} was lost "
            "(they may or may not have been handled)", path))
        session.posts_lost = 0
    if found:
        found[0].failed = len(found)
    return found


def raise_first_error(reqs, answered):
    """Raises the error of the first of ``reqs`` answered with one
    (``answered``: req -> `Reply`)."""
    for req in reqs:
        if answered[req].error is not None:
            raise answered[req].error


class Left:
    """Marks, among a session's items, the answer to the last ``unsubscribe``
    of a `Session.leave_requests`: every event before it arrived before the
    broker took the subscription out (PROTOCOL.md "Queue groups": leaving)."""


LEFT = Left()


class Session:
    """The protocol state of one connection, across reconnects.

    ``start()`` gives the ``hello`` frame of a new connection;
    ``request()`` numbers and encodes a request; ``receive(data)`` turns
    bytes read into a list of `Event`, `Request`, `Reply` and `Notice`
    objects (and `LEFT`). ``info`` is the last ``hello`` reply (a dict:
    ``instance``, ``conn``, ``features`` and, from a 1.2 broker, ``pid``, as
    they came).

    For subscriptions it also keeps the patterns and the position to resume
    from (``instance``, ``last_seq``: the newest seq read), ``serve`` and
    ``group`` (1.3: what every subscribe of this connection says), and for a
    publisher the seqs of its own events (for ``echo=False`` across the
    publishing and subscribing connections of one bus, see ``own_seq``).
    ``answer`` is given to every `Request` received (the driver's reply)."""

    def __init__(self, *, client=None, echo=False, overflow=None, max_frame=None):
        if client is not None and (not isinstance(client, str) or not re.fullmatch(r"[A-Za-z0-9_.:\-]{1,64}", client)):
            raise ValueError(f"invalid client name: {client!r} (1-64 bytes of A-Z a-z 0-9 _ . - :)")
        if overflow is not None and overflow not in ("wait", "drop-new", "drop-old", "disconnect"):
            raise ValueError(f"invalid overflow: {overflow!r} (wait, drop-new, drop-old or disconnect)")
        self.client, self.echo, self.overflow = client, echo, overflow
        self.info = None
        self.heard = False
        self._next_req = 1
        self._splitter = FrameSplitter(MAX_INCOMING_FRAME if max_frame is None else max_frame)
        #: req -> op of every request written and not answered yet (in order).
        self.pending = {}
        #: The newest req answered: a frame answered without req is the
        #: oldest pending one after it (requests are handled in order, only
        #: the answers of ``request`` come out of order).
        self.max_answered = 0
        self.abandoned = set()      # reqs of requests given up locally (their late answers are ignored)
        # Resume state (subscriptions).
        self.patterns = {}          # pattern -> True, in subscription order
        self.serve = False          # (1.3) the subscriptions receive requests
        self.group = None           # (1.3) the queue group they join
        self.members = None         # (1.3) members of the group, from the last subscribe's ok
        self.leaving = None         # reqs of the unsubscribes of leave_requests, until answered
        self.instance = None        # the broker run last_seq belongs to
        self.last_seq = None
        self._resume_req = None     # the stats request that closes a (re)subscribe batch
        self.answer = None
        # Own publications (publisher).
        self.record_own = False
        self.own = {}               # seq -> True, newest last
        self._own_instance = None   # the broker run those seqs belong to
        self.max_acked = 0
        self.publishes_pending = 0
        self.posts_lost = 0         # publish(wait=False) unanswered when a connection was lost
        # What the broker told this connection besides replies.
        self.dropped = 0            # events dropped for it (sum of dropped notices, and those not decodable)
        self.gaps = 0               # gap notices
        self.last_error = None      # the last error frame without req (why a close came)

    # -- requests ------------------------------------------------------------

    def start(self):
        """Resets the per-connection state and returns ``(req, bytes)`` of the
        ``hello`` to send first on a new connection."""
        self._splitter.reset()
        self.pending.clear()
        self.abandoned.clear()
        self.publishes_pending = 0
        self.max_answered = self._next_req - 1
        self.heard = False
        self.last_error = None
        self.info = None
        return self.request("hello", client=self.client, echo=True if self.echo else None, overflow=self.overflow)

    def request(self, op, **fields):
        """``(req, bytes)`` of a request; the reply will come as a `Reply`
        with that ``req``."""
        req = self._next_req
        self._next_req = req + 1
        self.pending[req] = op
        return req, encode_request(op, req, fields)

    def ask(self, type, data=None, *, timeout=None, key=None, source=None, id=None):
        """``(req, bytes)`` of a ``request`` (1.3) for ``type``; ``timeout`` in
        seconds (sent as milliseconds; None: the broker's default, 25 s). Its
        `Reply` carries the ``ok`` (see `Response`) or a request error
        (`errors.NoResponders`, `errors.NoReply`, `errors.RequestTimeout`,
        `errors.ServiceError`, ...). Raises `errors.BadType`, ValueError,
        TypeError before anything is sent."""
        check_type(type)
        if key is not None:
            check_key(key)
        ms = None
        if timeout is not None:
            if not isinstance(timeout, (int, float)) or timeout != timeout or timeout < 0:
                raise ValueError(f"invalid timeout: {timeout!r} (seconds, >= 0)")
            ms = max(1, round(timeout * 1000))
        return self.request("request", type=type, data=data, timeout=ms, key=key,
                            source=None if source is None else str(source), id=None if id is None else str(id))

    def reply_request(self, token, data=None, error=None):
        """``(req, bytes)`` of a ``reply`` (1.3) to the request that carried
        ``token``; its `Reply`'s frame has ``accepted``."""
        if error is not None:
            return self.request("reply", to=token, data=data, error=str(error))
        return self.request("reply", to=token, data=data)

    def abandon(self, req):
        """Forgets request ``req`` (the caller stopped waiting): its answer,
        when it comes, is ignored."""
        if self.pending.pop(req, None) is not None:
            self.abandoned.add(req)

    def publish(self, type, data=None, retain=False, source=None, id=None, wait=True, key=None):
        """``(req, bytes)`` of a ``publish`` (raises `errors.BadType` for a bad
        type, TypeError/ValueError for data JSON cannot hold or a bad ``key``).
        With ``wait=False`` its ``ok`` gives no `Reply` (only an error does)."""
        req = self._next_req
        frame = encode_publish(req, type, data, retain, source, id, key)
        self._next_req = req + 1
        self.pending[req] = "publish" if wait else "post"
        self.publishes_pending += 1
        return req, frame

    def subscribe_requests(self, patterns, *, last=False, since=None, instance=None):
        """The frames (bytes) adding ``patterns`` and the reqs to wait for:
        one ``subscribe`` each (with this session's ``serve`` and ``group``),
        then a ``stats`` whose answer tells the broker's seq at that point
        (the position to resume from when no event has arrived yet;
        PROTOCOL-NOTES "Retained events and history")."""
        if self.group is not None and (last or since is not None):
            raise ValueError("last and since cannot be combined with group (a queue group shares live events only)")
        reqs, out = [], []
        for pattern in patterns:
            check_pattern(pattern)
            req, frame = self.request("subscribe", type=pattern, last=True if last else None,
                                      since=since, instance=instance, serve=True if self.serve else None,
                                      group=self.group)
            self.patterns[pattern] = True
            reqs.append(req)
            out.append(frame)
        req, frame = self.request("stats")
        self._resume_req = req
        reqs.append(req)
        out.append(frame)
        return reqs, b"".join(out)

    def open_subscription(self, patterns=(), *, last=False, since=None, instance=None, initial=True):
        """``(reqs, bytes)`` that open a subscription connection: ``hello``,
        then (``initial``) the subscribes of ``patterns`` or (a reconnect) the
        resubscribes; wait for every req, then `raise_first_error`."""
        hello_req, hello = self.start()
        if initial:
            reqs, frames = self.subscribe_requests(patterns, last=last, since=since, instance=instance)
        else:
            reqs, frames = self.resubscribe_requests()
        return [hello_req, *reqs], hello + frames

    def leave_requests(self):
        """``(reqs, bytes)``: an ``unsubscribe`` of every pattern (with
        ``serve`` and ``group``), to leave cleanly. When the last is
        answered, `receive` gives `LEFT` in its place: the events before it
        arrived before the broker took the subscription out, none after."""
        reqs, out = [], []
        for pattern in self.patterns:
            req, frame = self.request("unsubscribe", type=pattern, serve=True if self.serve else None,
                                      group=self.group)
            reqs.append(req)
            out.append(frame)
        self.patterns.clear()       # (nothing to resubscribe after a reconnect)
        self.leaving = set(reqs)
        return reqs, b"".join(out)

    def get_requests(self, type):
        """``(reqs, bytes)`` asking for the retained event of ``type`` on a
        connection that does not subscribe to it otherwise: ``subscribe``
        with ``last`` then ``unsubscribe``; the events read until the second
        is answered go to `retained_result`."""
        check_type(type)
        a, subscribe = self.request("subscribe", type=type, last=True)
        b, unsubscribe = self.request("unsubscribe", type=type)
        return (a, b), subscribe + unsubscribe

    @staticmethod
    def retained_result(type, replies, events):
        """The retained `Event` of ``type`` among ``events`` (or None), once
        both ``replies`` of `get_requests` came; raises the subscribe's error."""
        if replies[0].error is not None:
            raise replies[0].error
        found = [ev for ev in events if ev.retained and ev.type == type]
        return found[-1] if found else None

    def resubscribe_requests(self):
        """After a reconnect: every pattern again, with ``since`` the newest
        seq read and ``instance`` its broker run, so the broker replays what
        was missed (same run) or says ``gap`` and replays its whole history
        (a new run). A queue group or a service shares live events (and
        requests) only: without ``since``."""
        patterns = list(self.patterns)
        if self.last_seq is None or self.group is not None or self.serve:
            return self.subscribe_requests(patterns)
        return self.subscribe_requests(patterns, since=self.last_seq, instance=self.instance)

    # -- own publications ----------------------------------------------------

    def own_seq(self, seq):
        """Whether ``seq`` is an event this connection published: True, False,
        or None when that cannot be told yet (a publish is unanswered and
        ``seq`` is newer than every answered one: read more replies)."""
        if seq in self.own:
            return True
        if seq <= self.max_acked or not self.publishes_pending:
            return False
        return None

    def _acked(self, seq):
        if seq > self.max_acked:
            self.max_acked = seq
        if self.record_own:
            own = self.own
            own[seq] = True
            if len(own) > 65536:
                for old in list(own)[:16384]:
                    del own[old]

    # -- receiving -----------------------------------------------------------

    def receive(self, data):
        """The events, requests, replies and notices in ``data`` (bytes read),
        in order."""
        lines = self._splitter.feed(data)
        out = []
        if self._splitter.oversized:
            for head in self._splitter.oversized:
                self._undecodable(head, f"longer than {self._splitter.max_frame} bytes, skipped", out)
            self._splitter.oversized = []
        if not lines:
            return out
        self.heard = True
        try:
            # One parse for the whole batch: far cheaper than one call a line.
            frames = _loads(b"[" + b",".join(lines) + b"]") if len(lines) > 1 else [_loads(lines[0])]
        except (ValueError, RecursionError):
            frames = self._parse_each(lines, out)
        last_seq = self.last_seq
        if last_seq is None:
            last_seq = -1
        append = out.append
        new_event, is_int, is_str = Event, int, str
        for frame in frames:
            try:
                op = frame["op"]
            except (KeyError, TypeError):
                append(Notice("malformed", error=errors.MalformedFrame(f"frame without op: {_short_repr(frame)[:200]}")))
                continue
            if op == "event":
                seq = frame.get("seq")
                if seq.__class__ is not is_int or frame.get("type").__class__ is not is_str:
                    append(Notice("malformed", frame, error=errors.MalformedFrame("event without integer seq and string type")))
                    continue
                if seq > last_seq:
                    last_seq = seq
                append(new_event(frame))
            elif op == "ok" or op == "error":
                req = frame.get("req")
                if op == "error" and req is None and frame.get("code") in ("frame_too_large", "bad_frame") and self.pending:
                    # Answered without req (PROTOCOL.md "Requests"): requests are
                    # handled in order, so it is the oldest pending one after
                    # the newest answered.
                    req = next((r for r in self.pending if r > self.max_answered), None)
                if req.__class__ is is_int and req > self.max_answered:
                    self.max_answered = req
                if req is None or req not in self.pending:
                    if req in self.abandoned:
                        self.abandoned.discard(req)
                    elif op == "error":
                        self.last_error = errors.error_from_frame(frame)
                        append(Notice("error", frame, error=self.last_error))
                    continue
                kind = self.pending.pop(req)
                if kind == "post" or kind == "publish":
                    self.publishes_pending -= 1
                    if kind == "post" and op == "ok":
                        seq = frame.get("seq")
                        if type(seq) is int:
                            self._acked(seq)
                        continue
                if op == "ok":
                    if kind == "publish":
                        seq = frame.get("seq")
                        if type(seq) is int:
                            self._acked(seq)
                    elif kind == "hello":
                        self.info = frame
                        if frame.get("instance") != self._own_instance:
                            # Seqs start again in a new broker run: the old ones mean nothing.
                            self._own_instance = frame.get("instance")
                            self.own.clear()
                            self.max_acked = 0
                    elif kind == "stats" and req == self._resume_req:
                        if last_seq >= 0 and (self.last_seq is None or last_seq > self.last_seq):
                            self._note_seq(last_seq)
                        self._resume_from_stats(frame)
                        last_seq = -1 if self.last_seq is None else self.last_seq
                    elif kind == "subscribe" and type(frame.get("members")) is int:
                        self.members = frame["members"]
                    append(Reply(req, frame, None))
                else:
                    append(Reply(req, frame, errors.error_from_frame(frame, request=kind == "request")))
                if self.leaving and req in self.leaving:
                    self.leaving.discard(req)
                    if not self.leaving:
                        append(LEFT)
            elif op == "request":
                if frame.get("seq").__class__ is not is_int or frame.get("type").__class__ is not is_str \
                        or frame.get("reply").__class__ is not is_str:
                    append(Notice("malformed", frame, error=errors.MalformedFrame("request without integer seq, string type and reply token")))
                    continue
                append(Request(frame, self.answer))
            elif op == "dropped":
                count = frame.get("count")
                self.dropped += count if type(count) is int else 0
                append(Notice(op, frame))
            elif op == "gap":
                self.gaps += 1
                append(Notice(op, frame))
            # Unknown ops are ignored (forward compatibility).
        if last_seq >= 0 and (self.last_seq is None or last_seq > self.last_seq):
            self._note_seq(last_seq)
        return out

    def _note_seq(self, seq):
        self.last_seq = seq
        if self.info is not None:
            self.instance = self.info.get("instance")

    def _resume_from_stats(self, frame):
        first, count, instance = frame.get("history_first_seq"), frame.get("history_events"), frame.get("instance")
        if type(first) is not int or type(count) is not int:
            return
        current = first + count - 1
        if instance == self.instance and self.last_seq is not None:
            self.last_seq = max(self.last_seq, current)
        else:
            self.instance, self.last_seq = instance, current

    def _parse_each(self, lines, out):
        frames = []
        for line in lines:
            if not line.strip():
                continue
            try:
                frames.append(decode_frame(line))
            except (ValueError, RecursionError, MemoryError) as exc:
                self._undecodable(line[:200], f"not JSON this client can read ({exc.__class__.__name__}: {str(exc)[:200]})", out)
        return frames

    def _undecodable(self, head, why, out):
        """A line this client cannot decode (``head``: its first bytes): an
        event or request is lost as surely as one the broker dropped, so it
        is counted in ``dropped`` and told as a ``dropped`` notice (with
        ``error``); a reply fails its request; anything else is
        ``malformed``."""
        found = _EVENT_HEAD.match(head)
        if found is not None:
            self.dropped += 1
            seq = int(found.group(2))
            out.append(Notice("dropped", {"op": "dropped", "count": 1, "since_seq": seq},
                              error=errors.MalformedFrame(f"{found.group(1).decode()} {seq}: {why}")))
            return
        found = _REPLY_HEAD.match(head)
        req = _loads(found.group(1)) if found is not None else None
        if req is not None and req in self.pending:
            kind = self.pending.pop(req)
            if kind == "publish" or kind == "post":
                self.publishes_pending -= 1
            out.append(Reply(req, {}, errors.MalformedFrame(f"the answer to request {req}: {why}")))
            return
        out.append(Notice("malformed", error=errors.MalformedFrame(f"{why}: {head[:100]!r}")))

    def lost(self):
        """The connection ended: forgets the unanswered requests and returns
        their reqs (they failed with `errors.ConnectionLost`)."""
        reqs = list(self.pending)
        self.posts_lost += sum(1 for kind in self.pending.values() if kind == "post")
        self.pending.clear()
        self.abandoned.clear()
        self.publishes_pending = 0
        self._splitter.reset()
        return reqs


# ---------------------------------------------------------------------------
# Shared by the drivers

#: Unanswered ``publish(wait=False)`` requests past which a bus reads the
#: replies that have come, and past which it waits for some: the broker's
#: replies to one connection are bounded by its outbound limit (PROTOCOL.md
#: "Semantics": it stops reading a connection whose queue is over it), so
#: they must be read while publishing.
DRAIN_AT = 2048
WAIT_AT = 32768

#: Seconds a request waits past its own timeout for the broker's answer
#: (the broker answers ``timeout`` itself at the deadline; this only guards
#: against a broker that answers nothing).
REQUEST_GRACE = 2.0
#: The broker's default request timeout (PROTOCOL.md "Request/reply"), for
#: the local guard of a request sent without ``timeout``.
DEFAULT_REQUEST_TIMEOUT = 25.0

_log = logging.getLogger("eventbus")


def log_notice(notice):
    """The default notice handler: one line on the ``eventbus`` logger
    (``reconnected`` at INFO, the others at WARNING)."""
    _log.log(logging.INFO if notice.kind == "reconnected" else logging.WARNING, "%s", notice)


def reply_fields(frame):
    """A reply's fields without ``op`` and ``req``."""
    return {k: v for k, v in frame.items() if k not in ("op", "req")}


class _Process:
    """This process's pid (kept right across fork): events with another pid
    cannot be this process's own, so ``echo=False`` checks only these."""
    pid = os.getpid()


process = _Process()


def may_be_own(frame):
    """Whether the event ``frame`` (a dict) may be one this process published,
    so that ``echo=False`` has to look at its seq: its ``pid`` is this
    process's and it is not a retained copy (PROTOCOL.md "Retained events and
    history": `last` sends the retained event whoever published it; the
    no-echo rule holds for live and `since` events)."""
    return frame.get("pid") == process.pid and frame.get("retained") is not True


def _after_fork():
    _Process.pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork)
