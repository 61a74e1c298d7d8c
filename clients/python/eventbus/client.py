"""The blocking client: `Bus` (requests, thread-safe) and `Subscription`
(an iterator of events on a connection of its own); `Bus.serve` gives a
`service.Service` (1.3).

The protocol is `core.Session`'s; this module only moves bytes. A `Bus`
talks to the broker over one connection for requests; each `subscribe()`
opens another connection (as redis-py's pubsub does), read only while the
application iterates, so a subscriber that stops iterating stops reading
its socket and the broker's flow control (PROTOCOL.md 1.2 "Flow control")
holds the publisher instead of this process buffering events.

Before editing: a `Bus` is a `connection._Shared` (read that module's
header: who writes, who reads, which lock); a `Subscription` belongs to the
thread iterating it: only that thread touches its session and writes to its
socket. `leave` (any thread, or a signal handler that may interrupt the
iterating thread anywhere) only sets a flag and writes its eventfd, which
wakes the iteration; the iteration sends the unsubscribes. `close` only
shuts the socket down.
"""

import os
import socket as _socket
import threading
import time as _time
import weakref

from . import core, errors
from .connection import _Link, _Shared
from .core import Event
from .service import Service

_DRAIN_AT, _WAIT_AT = core.DRAIN_AT, core.WAIT_AT
#: Buffered publish bytes past which they are written (inside `Bus.batch`).
_WRITE_AT = 64 << 10


class Bus(_Shared):
    """A connection to the broker (made by `eventbus.connect`). Thread-safe:
    any thread may publish or ask, and requests of several threads are in
    flight at once; subscriptions and services are their own objects."""

    def __init__(self, path, *, client=None, echo=False, overflow=None, reconnect=True, on_notice=None):
        self.path = path
        self.echo = echo
        self._options = {"client": client, "echo": echo, "overflow": overflow}
        self._reconnect = reconnect
        self._init_shared(_Link(path, core.Session(**self._options)), on_notice or core.log_notice)
        self._link.session.record_own = not echo   # (its subscriptions skip what it published)
        self._deferred = []        # errors of publish(wait=False), for flush()
        self._collect = None       # events read by get()
        self._get_lock = threading.Lock()
        self._corked = 0
        self._subscriptions = weakref.WeakSet()
        with self._locked():
            self._open()

    # -- connection ----------------------------------------------------------

    @property
    def info(self):
        """The broker's ``hello`` reply (dict): ``server``, ``version``,
        ``instance``, ``conn``, ``features`` and (1.2) ``pid``, as it came."""
        return self._link.session.info

    def _open(self):
        # (under _lock; nobody else uses a link that is being opened)
        self._link.open()
        req, hello = self._link.session.start()
        self._wanted.add(req)
        self._link.send(hello)
        reply = self._replies((req,))[req]
        if reply.error is not None:
            self._link.close()
            raise reply.error

    def _ensure(self):
        # (under _lock)
        if self._closed:
            raise errors.Closed("the bus was closed")
        if self._link.sock is not None:
            if self._reading or self._wbuf or not self._link.peer_closed():
                return
            self._link.lost(None)   # closed while idle (a broker restart): nothing was in flight, so connect again
        if not self._reconnect:
            raise errors.ConnectionLost(f"the connection to the broker at {self.path} was lost (reconnect=False)", self.path)
        # Publishing while disconnected waits up to 5 s for the broker, then fails.
        backoff, deadline = core.Backoff(), _time.monotonic() + 5
        while True:
            try:
                self._open()
                self._notices.append(core.Notice("reconnected", path=self.path))
                return
            except errors.Unavailable:
                if _time.monotonic() >= deadline:
                    raise
            _time.sleep(backoff.next())

    def close(self):
        """Writes what is buffered and closes the connection (the broker handles
        every frame written before it; their errors are not reported: call
        `flush` first to see them), and closes the bus's subscriptions and
        services."""
        with self._locked():
            if self._closed:
                return
            self._closed = True
        self._send()
        with self._locked():
            self._link.close()
            self._fail(errors.Closed("the bus was closed"))
        for sub in list(self._subscriptions):
            sub.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- replies -------------------------------------------------------------

    def _unwanted(self, reply):
        if reply.error is not None:
            self._deferred.append(reply.error)

    def _item(self, item):
        if item.__class__ is Event and self._collect is not None:
            self._collect.append(item)

    def _call(self, op, **fields):
        with self._locked():
            self._ensure()
        reply = self._ask(op, lambda session: session.request(op, **fields))
        if reply.error is not None:
            raise reply.error
        return reply.frame

    # -- publishing ----------------------------------------------------------

    def publish(self, type, data=None, *, retain=False, source=None, id=None, key=None, wait=True):
        """Publishes an event; returns its ``seq`` (int).

        ``data``: any value `json.dumps` takes (TypeError/ValueError before
        anything is sent otherwise). ``retain``: also keep it as the type's
        current value (`get`). ``key`` (1.3): events with one key go to one
        member of each queue group, in order. ``wait=False``: do not wait
        for the broker's answer; returns None, and `flush` raises the first
        error of those publishes. Raises `errors.BadType` (checked locally),
        `errors.Forbidden`, `errors.LimitExceeded`, ..., `errors.Unavailable`
        when the broker cannot be reached within 5 s, `errors.ConnectionLost`."""
        if wait:
            with self._locked():
                self._ensure()
            reply = self._ask("publish", lambda session: session.publish(type, data, retain, source, id, True, key))
            if reply.error is not None:
                raise reply.error
            return reply.frame.get("seq")
        self._lock.acquire()
        try:
            if self._closed or self._link.sock is None:
                self._ensure()
            session = self._link.session
            req, frame = session.publish(type, data, retain, source, id, False, key)
            if not self._corked and not self._wbuf and self._send_lock.acquire(False):
                # The common case: nothing queued, nobody writing: write it
                # here, in order, under the send lock (taken before _lock is
                # let go, so no later frame can pass it; never waited for
                # under _lock, the other order being _send's).
                write = frame
            else:
                self._wbuf.append(frame)
                self._wbytes += len(frame)
                write = None if self._corked and self._wbytes < _WRITE_AT else b""
        finally:
            self._unlock()
        if write:
            try:
                self._write_now(write)
            finally:
                self._send_lock.release()
        elif write is not None:
            self._send()
        if session.publishes_pending >= _DRAIN_AT:
            self._drain()
        return None

    def _drain(self):
        session = self._link.session
        with self._locked():
            if session.publishes_pending >= _WAIT_AT:
                pass
            elif session.publishes_pending % 512 == 0:
                self._wait(lambda: False, poll=True)
                return
            else:
                return
        self._send()
        with self._locked():
            self._wait(lambda: session.publishes_pending <= _WAIT_AT // 2)

    def batch(self):
        """A context manager in which ``publish(wait=False)`` frames are
        written 64 KiB at a time instead of one write each (like a redis-py
        pipeline); everything is written when it exits."""
        return _Batch(self)

    def flush(self):
        """Writes what is buffered and waits until the broker has answered every
        ``publish(wait=False)``; raises the first error among them (with the
        number of failures in its ``failed`` attribute)."""
        self._send()
        with self._locked():
            session = self._link.session
            if self._link.sock is not None:
                self._wait(lambda: not session.publishes_pending)
            found = core.take_flush_errors(session, self._deferred, self.path)
        if found:
            raise found[0]

    # -- request/reply (1.3) -------------------------------------------------

    def request(self, type, data=None, *, timeout=None, key=None, source=None, id=None):
        """Asks the service that serves ``type`` and returns its answer, a
        `core.Response` (``data``, and the server's ``pid``, ``uid``,
        ``gid``, ``time``). PROTOCOL.md "Request/reply (1.3)".

        ``timeout``: seconds (None: the broker's default, 25 s). ``key``: as
        `publish`'s, for a service in a queue group. Any number of threads
        may ask at once on one bus; answers come in any order.

        Raises `errors.NoResponders` (at once: nothing serves the type),
        `errors.NoReply` (every server it reached went away without
        answering), `errors.RequestTimeout` (the deadline passed; also a
        `TimeoutError`), `errors.ServiceError` (the service failed: its
        text in ``message``), all `errors.RequestError`; and as `publish`:
        `errors.BadType`, `errors.Forbidden`, `errors.LimitExceeded`,
        `errors.ConnectionLost`, ..."""
        with self._locked():
            self._ensure()
        wait = (core.DEFAULT_REQUEST_TIMEOUT if timeout is None else timeout) + core.REQUEST_GRACE
        reply = self._ask("request", lambda session: session.ask(type, data, timeout=timeout, key=key, source=source, id=id),
                          _time.monotonic() + wait)
        if reply is None:
            raise errors.RequestTimeout("timeout", f"the broker at {self.path} did not answer the request within {wait:g} s")
        if reply.error is not None:
            raise reply.error
        return core.Response(reply.frame)

    def serve(self, *patterns, group=None, on_notice=None):
        """A `Service`: the requests of the types ``patterns`` match, on a
        connection of its own (PROTOCOL.md "Request/reply (1.3)"). Iterate
        it and answer each with ``req.reply(data)`` or ``req.fail(text)``.
        ``group``: serve in a queue group (one member gets each request).
        Raises `errors.BadType`, `errors.Forbidden` (the policy's ``serve``),
        ValueError for a bad group name."""
        if self._closed:
            raise errors.Closed("the bus was closed")
        if not patterns:
            raise TypeError("serve() needs at least one pattern")
        service = Service(self, patterns, group=group, on_notice=on_notice)
        self._subscriptions.add(service)
        return service

    # -- other requests ------------------------------------------------------

    def get(self, type):
        """The retained event of ``type`` (an `Event` with ``retained`` true),
        or None (PROTOCOL.md "Retained events and history")."""
        with self._get_lock:
            with self._locked():
                self._ensure()
                reqs, frames = self._link.session.get_requests(type)
                self._wanted.update(reqs)
                self._wbuf.append(frames)
                self._collect = []
            try:
                self._send()
                with self._locked():
                    got = self._replies(reqs)
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

    def subscribe(self, *patterns, last=False, since=None, instance=None, group=None, on_notice=None):
        """A `Subscription` to ``patterns`` (default ``>``: everything) on a
        connection of its own. ``last``: first the retained event of every
        matching type; ``since``: first the events after that seq the broker's
        history still holds (``instance``: the broker run it belongs to).
        ``group`` (1.3): join that queue group, so that each event goes to
        one of its members (not with ``last`` or ``since``); leave it
        cleanly with `Subscription.leave`.
        Raises `errors.BadType` for a bad pattern, the broker's error when it
        refuses one (`errors.Forbidden`, `errors.LimitExceeded`), ValueError
        for a bad group or ``group`` with ``last``/``since``."""
        if self._closed:
            raise errors.Closed("the bus was closed")
        sub = Subscription(self, patterns or (">",), last=last, since=since, instance=instance, group=group,
                           on_notice=on_notice)
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
        self._send()
        with self._locked():
            self._wait(lambda: session.own_seq(seq) is not None)
            own = session.own_seq(seq)
        return bool(own)


class _Batch:
    def __init__(self, bus):
        self.bus = bus

    def __enter__(self):
        with self.bus._locked():
            self.bus._corked += 1
        return self.bus

    def __exit__(self, *exc):
        with self.bus._locked():
            self.bus._corked -= 1
            done = not self.bus._corked
        if done:
            self.bus._send()


class Subscription:
    """Events matching some patterns, on a connection of its own: iterate it
    (``for ev in sub:``) or call `get`. The socket is read only while the
    application iterates, one read (at most 256 KiB) at a time.

    After a lost connection it reconnects (``reconnect=True``, the default of
    `eventbus.connect`), resubscribes with ``since`` the newest seq it read,
    and the broker replays what was missed; what cannot be recovered comes as
    a ``gap`` `core.Notice` to ``on_notice`` (default: a warning on the
    ``eventbus`` logger), never as an exception. ``dropped`` counts the events
    the broker said it dropped for this subscription (and those this client
    could not decode), ``gaps`` the gap notices.

    In a queue group (``group=``, 1.3) each event goes to one member;
    `leave` takes this one out cleanly: the iteration goes on with every
    event that arrived before the broker's answer, then ends."""

    def __init__(self, bus, patterns, *, last=False, since=None, instance=None, group=None, on_notice=None):
        self.path = bus.path
        self.patterns = tuple(patterns)
        self.group = None if group is None else core.check_group(group)
        self._bus = bus
        self._filter_own = not bus.echo
        self._reconnect = bus._reconnect
        self._on_notice = on_notice or bus._on_notice
        self._link = _Link(bus.path, core.Session(**bus._options))
        self._link.session.group = self.group
        self._batch = []
        self._index = 0
        self._closed = False
        self._left = False
        self._leave_asked = False      # leave() was called (set from anywhere)
        self._leave_sent = False       # the iteration sent the unsubscribes
        self._stop = threading.Event()
        # Wakes an iteration waiting for the socket when leave() is called
        # (closed when the subscription is collected: leave() may still
        # write to it after close()).
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        weakref.finalize(self, os.close, self._wake)
        for pattern in self.patterns:
            core.check_pattern(pattern)
        if self.group is not None and (last or since is not None):
            raise ValueError("last and since cannot be combined with group (a queue group shares live events only)")
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
    def members(self):
        """(1.3) How many members the queue group had when this one joined
        (the ``members`` of the ``subscribe`` answer), or None."""
        return self._link.session.members

    def leave(self):
        """Leaves cleanly (a worker that shuts down): the iteration
        unsubscribes every pattern, then goes on with every event that
        arrived before the broker's answer (this member's share: PROTOCOL.md
        "Queue groups", leaving) and ends. Callable from any thread or a
        signal handler: it only asks (and wakes an iteration that waits), so
        keep iterating (``for ev in sub``) to send the unsubscribes and get
        the rest. The connection stays open until `close`."""
        self._leave_asked = True
        try:
            os.eventfd_write(self._wake, 1)
        except OSError:
            pass

    def _send_leave(self):
        # (the iterating thread) The unsubscribes of leave(), once.
        self._leave_sent = True
        link = self._link
        if link.sock is None or link.session.leaving is not None:
            self._left = True
            return
        _, frames = link.session.leave_requests()
        try:
            link.sock.sendall(frames)
        except OSError:
            self._left = True

    @property
    def info(self):
        """The ``hello`` reply of this subscription's connection (dict)."""
        return self._link.session.info

    def __iter__(self):
        return self

    def __next__(self):
        # The fast path: the next item of the last read is an event to hand out.
        i, batch = self._index, self._batch
        if i < len(batch) and not self._leave_asked:
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
            if self._leave_asked and not self._leave_sent:
                self._send_leave()      # (before handing out more: the share stops growing)
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
                if item is core.LEFT:
                    self._left = True
                else:
                    self._notice(item)
            self._batch, self._index = [], 0
            if self._closed or self._left:
                return None
            timeout = None
            if deadline is not None:
                timeout = deadline - _time.monotonic()
                if timeout <= 0:
                    return None
            try:
                self._batch = self._link.read(timeout, self._wake)
            except errors.EventBusError as exc:
                if self._closed or self._leave_asked:
                    self._left = True   # (leaving: nothing to reconnect for)
                    return None
                self._lost(exc)

    def _notice(self, item):
        if item.__class__ is core.Notice:       # (not a reply to nothing waited for)
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
