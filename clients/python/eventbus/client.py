"""The blocking client: `Bus` (requests, thread-safe) and `Subscription`
(an iterator of events on a connection of its own).

The protocol is `core.Session`'s; this module only moves bytes. A `Bus`
talks to the broker over one connection for requests; each `subscribe()`
opens another connection (as redis-py's pubsub does), read only while the
application iterates, so a subscriber that stops iterating stops reading
its socket and the broker's flow control (PROTOCOL.md 1.2 "Flow control")
holds the publisher instead of this process buffering events.

Before editing: a `Bus`'s lock is held for a whole request, replies
included; a thread that needs a reply reads them itself (no reader thread).
"""

import select
import socket as _socket
import threading
import time as _time
import weakref

from . import core, errors
from .core import Event

_DRAIN_AT, _WAIT_AT = core.DRAIN_AT, core.WAIT_AT
#: Buffered publish bytes past which they are written (inside `Bus.batch`).
_WRITE_AT = 64 << 10


def open_socket(path):
    """A connected Unix stream socket to ``path`` (close-on-exec), or
    `errors.Unavailable` naming the path and how to start the broker."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        sock.close()
        raise core.connect_error(path, exc) from None
    return sock


class _Link:
    """One connection: a socket and its `core.Session`. Reads hand back the
    session's items; failures close the socket and raise the error to report."""

    def __init__(self, path, session):
        self.path = path
        self.session = session
        self.sock = None

    def open(self):
        """Connects; the session is reset for the new connection."""
        self.sock = open_socket(self.path)

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise self.lost(exc) from None

    def peer_closed(self):
        """Whether the broker closed this connection while nothing was asked
        (EOF or a reset waiting to be read; data waiting is not a close)."""
        try:
            return self.sock.recv(1, _socket.MSG_PEEK | _socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def read(self, timeout=None):
        """The items of one read (blocking, or up to ``timeout`` seconds: []
        when nothing came). Raises the error for a closed connection."""
        sock = self.sock
        if sock is None:
            raise self.lost(None)
        try:
            if timeout is not None:
                if not select.select([sock], [], [], max(timeout, 0))[0]:
                    return []
            data = sock.recv(core.READ_SIZE)
        except OSError as exc:
            raise self.lost(exc) from None
        if not data:
            raise self.lost(None)
        return self.session.receive(data)

    def read_available(self):
        """The items of what has arrived, without waiting."""
        out = []
        while self.sock is not None:
            try:
                data = self.sock.recv(core.READ_SIZE, _socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError as exc:
                raise self.lost(exc) from None
            if not data:
                raise self.lost(None)
            out.extend(self.session.receive(data))
        return out

    def lost(self, exc):
        """Closes the socket; the error to raise for it."""
        heard, reason = self.session.heard, self.session.last_error
        self.close()
        self.session.lost()
        if exc is not None and not isinstance(exc, (ConnectionResetError, BrokenPipeError)):
            return errors.ConnectionLost(f"connection to the broker at {self.path} lost: {exc}", self.path)
        return core.closed_error(self.path, heard, reason)

    def close(self):
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()


class Bus:
    """A connection to the broker (made by `eventbus.connect`). Thread-safe:
    any thread may publish or ask; subscriptions are their own objects."""

    def __init__(self, path, *, client=None, echo=False, overflow=None, reconnect=True, on_notice=None):
        self.path = path
        self.echo = echo
        self._options = {"client": client, "echo": echo, "overflow": overflow}
        self._reconnect = reconnect
        self._on_notice = on_notice or core.log_notice
        self._link = _Link(path, core.Session(**self._options))
        self._link.session.record_own = not echo   # (its subscriptions skip what it published)
        self._lock = threading.RLock()
        self._closed = False
        self._deferred = []        # errors of publish(wait=False), for flush()
        self._collect = None       # events read by get()
        self._wbuf = []
        self._wbytes = 0
        self._corked = 0
        self._subscriptions = weakref.WeakSet()
        with self._lock:
            self._open()

    # -- connection ----------------------------------------------------------

    @property
    def info(self):
        """The broker's ``hello`` reply (dict): ``server``, ``version``,
        ``instance``, ``conn``, ``features`` and (1.2) ``pid``, as it came."""
        return self._link.session.info

    def _open(self):
        self._link.open()
        req, hello = self._link.session.start()
        self._link.send(hello)
        reply = self._replies({req})[req]
        if reply.error is not None:
            self._link.close()
            raise reply.error

    def _ensure(self):
        if self._closed:
            raise errors.Closed("the bus was closed")
        if self._link.sock is not None:
            if self._wbuf or not self._link.peer_closed():
                return
            self._link.lost(None)   # closed while idle (a broker restart): nothing was in flight, so connect again
        if not self._reconnect:
            raise errors.ConnectionLost(f"the connection to the broker at {self.path} was lost (reconnect=False)", self.path)
        # Publishing while disconnected waits up to 5 s for the broker, then fails.
        backoff, deadline = core.Backoff(), _time.monotonic() + 5
        while True:
            try:
                self._open()
                self._on_notice(core.Notice("reconnected", path=self.path))
                return
            except errors.Unavailable:
                if _time.monotonic() >= deadline:
                    raise
            _time.sleep(backoff.next())

    def close(self):
        """Writes what is buffered and closes the connection (the broker handles
        every frame written before it; their errors are not reported: call
        `flush` first to see them), and closes the bus's subscriptions."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._link.sock is not None:
                    self._write()
            except errors.EventBusError:
                pass
            self._link.close()
        for sub in list(self._subscriptions):
            sub.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- replies -------------------------------------------------------------

    def _dispatch(self, items, wanted, got):
        for item in items:
            cls = item.__class__
            if cls is core.Reply:
                if item.req in wanted:
                    got[item.req] = item
                elif item.error is not None:
                    self._deferred.append(item.error)
            elif cls is Event:
                if self._collect is not None:
                    self._collect.append(item)
            else:
                self._on_notice(item)

    def _replies(self, wanted):
        """Reads until every req in ``wanted`` is answered; {req: Reply}."""
        got = {}
        try:
            while len(got) < len(wanted):
                self._dispatch(self._link.read(), wanted, got)
        except errors.EventBusError:
            self._deferred_lost()
            raise
        return got

    def _deferred_lost(self):
        self._wbuf.clear()
        self._wbytes = 0

    def _write(self):
        if self._wbuf:
            data = b"".join(self._wbuf)
            self._wbuf.clear()
            self._wbytes = 0
            self._link.send(data)

    def _call(self, op, **fields):
        with self._lock:
            self._ensure()
            req, frame = self._link.session.request(op, **fields)
            self._wbuf.append(frame)
            self._write()
            reply = self._replies({req})[req]
        if reply.error is not None:
            raise reply.error
        return reply.frame

    # -- publishing ----------------------------------------------------------

    def publish(self, type, data=None, *, retain=False, source=None, id=None, wait=True):
        """Publishes an event; returns its ``seq`` (int).

        ``data``: any value `json.dumps` takes (TypeError/ValueError before
        anything is sent otherwise). ``retain``: also keep it as the type's
        current value (`get`). ``wait=False``: do not wait for the broker's
        answer; returns None, and `flush` raises the first error of those
        publishes. Raises `errors.BadType` (checked locally), `errors.Forbidden`,
        `errors.LimitExceeded`, ..., `errors.Unavailable` when the broker cannot
        be reached within 5 s, `errors.ConnectionLost`."""
        with self._lock:
            if wait or self._closed or self._link.sock is None:
                self._ensure()
            session = self._link.session
            req, frame = session.publish(type, data, retain, source, id, wait)
            self._wbuf.append(frame)
            if wait:
                self._write()
                reply = self._replies({req})[req]
                if reply.error is not None:
                    raise reply.error
                return reply.frame.get("seq")
            self._wbytes += len(frame)
            if not self._corked or self._wbytes >= _WRITE_AT:
                self._write()
            if session.publishes_pending >= _DRAIN_AT:
                self._drain()
            return None

    def _drain(self):
        session = self._link.session
        try:
            if session.publishes_pending >= _WAIT_AT:
                self._write()
                while session.publishes_pending > _WAIT_AT // 2:
                    self._dispatch(self._link.read(), (), {})
            elif session.publishes_pending % 512 == 0:
                self._dispatch(self._link.read_available(), (), {})
        except errors.EventBusError as exc:
            self._deferred_lost()
            self._deferred.append(exc)

    def batch(self):
        """A context manager in which ``publish(wait=False)`` frames are
        written 64 KiB at a time instead of one write each (like a redis-py
        pipeline); everything is written when it exits."""
        return _Batch(self)

    def flush(self):
        """Writes what is buffered and waits until the broker has answered every
        ``publish(wait=False)``; raises the first error among them (with the
        number of failures in its ``failed`` attribute)."""
        with self._lock:
            if self._link.sock is not None:
                try:
                    self._write()
                    while self._link.session.publishes_pending:
                        self._dispatch(self._link.read(), (), {})
                except errors.EventBusError as exc:
                    self._deferred_lost()
                    if not (isinstance(exc, errors.ConnectionLost) and self._link.session.posts_lost):
                        self._deferred.append(exc)      # (else take_flush_errors says it, with the count)
            found = core.take_flush_errors(self._link.session, self._deferred, self.path)
        if found:
            raise found[0]

    # -- other requests ------------------------------------------------------

    def get(self, type):
        """The retained event of ``type`` (an `Event` with ``retained`` true),
        or None (PROTOCOL.md "Retained events and history")."""
        with self._lock:
            self._ensure()
            reqs, frames = self._link.session.get_requests(type)
            self._wbuf.append(frames)
            self._collect = []
            try:
                self._write()
                got = self._replies(set(reqs))
                events = self._collect
            finally:
                self._collect = None
        return core.Session.retained_result(type, [got[req] for req in reqs], events)

    def clear(self, type):
        """Removes the retained event of ``type``; True if there was one."""
        core.check_type(type)
        return self._call("clear", type=type).get("removed") is True

    def ping(self):
        """A round trip (the broker has handled everything sent before)."""
        self._call("ping")

    def stats(self):
        """The broker's counters (dict of the ``stats`` reply, every field as it
        came: 1.2 brokers add ``held``, ``holds``, ``stalls``)."""
        return core.reply_fields(self._call("stats"))

    def clients(self):
        """The connections the caller may see (list of dicts; 1.2 adds
        ``holding``, ``held``, ``behind``)."""
        return self._call("clients").get("clients", [])

    def types(self, limit=None):
        """Per-type counters (list of dicts, PROTOCOL.md 1.2 "Per-type
        counters"); raises `errors.UnknownOp` from a broker without ``types``."""
        return self._call("types", limit=limit).get("types", [])

    # -- subscribing ---------------------------------------------------------

    def subscribe(self, *patterns, last=False, since=None, instance=None, on_notice=None):
        """A `Subscription` to ``patterns`` (default ``>``: everything) on a
        connection of its own. ``last``: first the retained event of every
        matching type; ``since``: first the events after that seq the broker's
        history still holds (``instance``: the broker run it belongs to).
        Raises `errors.BadType` for a bad pattern, the broker's error when it
        refuses one (`errors.Forbidden`, `errors.LimitExceeded`)."""
        if self._closed:
            raise errors.Closed("the bus was closed")
        sub = Subscription(self, patterns or (">",), last=last, since=since, instance=instance, on_notice=on_notice)
        self._subscriptions.add(sub)
        return sub

    def wait(self, pattern, timeout=None):
        """Subscribes to ``pattern`` and returns the first event matching it
        published after that, or None after ``timeout`` seconds."""
        with self.subscribe(pattern) as sub:
            return sub.get(timeout)

    # -- echo across connections ---------------------------------------------

    def _is_own(self, seq):
        """Whether event ``seq`` was published through this bus (so that
        ``echo=False`` holds for its subscriptions, which are other
        connections). The broker queues a publish's ``ok`` when it routes the
        event, so waiting for the replies here is short."""
        session = self._link.session
        own = session.own_seq(seq)
        if own is not None:
            return own
        with self._lock:
            try:
                while (own := session.own_seq(seq)) is None:
                    self._write()
                    self._dispatch(self._link.read(), (), {})
            except errors.EventBusError as exc:
                self._deferred.append(exc)
                return False
        return own


class _Batch:
    def __init__(self, bus):
        self.bus = bus

    def __enter__(self):
        with self.bus._lock:
            self.bus._corked += 1
        return self.bus

    def __exit__(self, *exc):
        with self.bus._lock:
            self.bus._corked -= 1
            if not self.bus._corked and self.bus._link.sock is not None:
                self.bus._write()


class Subscription:
    """Events matching some patterns, on a connection of its own: iterate it
    (``for ev in sub:``) or call `get`. The socket is read only while the
    application iterates, one read (at most 256 KiB) at a time.

    After a lost connection it reconnects (``reconnect=True``, the default of
    `eventbus.connect`), resubscribes with ``since`` the newest seq it read,
    and the broker replays what was missed; what cannot be recovered comes as
    a ``gap`` `core.Notice` to ``on_notice`` (default: a warning on the
    ``eventbus`` logger), never as an exception. ``dropped`` counts the events
    the broker said it dropped for this subscription, ``gaps`` the gap notices."""

    def __init__(self, bus, patterns, *, last=False, since=None, instance=None, on_notice=None):
        self.path = bus.path
        self.patterns = tuple(patterns)
        self._bus = bus
        self._filter_own = not bus.echo
        self._reconnect = bus._reconnect
        self._on_notice = on_notice or bus._on_notice
        self._link = _Link(bus.path, core.Session(**bus._options))
        self._batch = []
        self._index = 0
        self._closed = False
        self._stop = threading.Event()
        for pattern in self.patterns:
            core.check_pattern(pattern)
        self._open(last, since, instance)

    def _open(self, last=False, since=None, instance=None, initial=True):
        link = self._link
        link.open()
        reqs, frames = link.session.open_subscription(self.patterns, last=last, since=since,
                                                      instance=instance, initial=initial)
        link.send(frames)
        wanted, answered = set(reqs), {}
        while len(answered) < len(wanted):
            for item in link.read():
                if item.__class__ is core.Reply and item.req in wanted:
                    answered[item.req] = item
                else:
                    self._batch.append(item)
        try:
            core.raise_first_error(reqs, answered)
        except errors.ProtocolError:
            link.close()
            raise

    @property
    def dropped(self):
        """Events the broker said it dropped for this subscription (its ``dropped`` notices)."""
        return self._link.session.dropped

    @property
    def gaps(self):
        """``gap`` notices so far (history that could not be replayed)."""
        return self._link.session.gaps

    @property
    def info(self):
        """The ``hello`` reply of this subscription's connection (dict)."""
        return self._link.session.info

    def __iter__(self):
        return self

    def __next__(self):
        # The fast path: the next item of the last read is an event to hand out.
        i, batch = self._index, self._batch
        if i < len(batch):
            item = batch[i]
            if item.__class__ is Event and not (self._filter_own and core.may_be_own(item.frame)):
                self._index = i + 1
                return item
        event = self._next(None)
        if event is None:
            raise StopIteration
        return event

    def get(self, timeout=None):
        """The next event, or None when ``timeout`` seconds pass without one
        (or the subscription was closed)."""
        deadline = None if timeout is None else _time.monotonic() + timeout
        return self._next(deadline)

    def _next(self, deadline):
        while True:
            batch, i = self._batch, self._index
            n = len(batch)
            while i < n:
                item = batch[i]
                i += 1
                if item.__class__ is Event:
                    if self._filter_own and core.may_be_own(item.frame) and self._bus._is_own(item.frame["seq"]):
                        continue
                    self._index = i
                    return item
                self._index = i
                self._notice(item)
            self._batch, self._index = [], 0
            if self._closed:
                return None
            timeout = None
            if deadline is not None:
                timeout = deadline - _time.monotonic()
                if timeout <= 0:
                    return None
            try:
                self._batch = self._link.read(timeout)
            except errors.EventBusError as exc:
                if self._closed:
                    return None
                self._lost(exc)

    def _notice(self, item):
        if item.__class__ is not core.Reply:    # (a reply to nothing waited for)
            self._on_notice(item)

    def _lost(self, exc):
        if not self._reconnect or isinstance(exc, errors.Closed):
            raise exc
        self._on_notice(core.Notice("disconnected", error=exc))
        backoff = core.Backoff()
        while not self._stop.wait(backoff.next()):
            try:
                self._open(initial=False)
            except errors.Unavailable:
                continue
            except errors.ConnectionLost:
                continue
            self._on_notice(core.Notice("reconnected", path=self.path))
            return

    def close(self):
        """Ends the subscription: iteration stops, the connection closes (its
        patterns vanish with it at the broker). Callable from any thread."""
        self._closed = True
        self._stop.set()
        sock = self._link.sock
        if sock is not None:
            try:
                sock.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass
            self._link.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
