"""The blocking client: `Bus` (requests, thread-safe), `Subscription`
(an iterator of events on a connection of its own) and `Service` (an
iterator of requests to answer, 1.3, on a connection of its own).

The protocol is `core.Session`'s; this module only moves bytes. A `Bus`
talks to the broker over one connection for requests; each `subscribe()`
opens another connection (as redis-py's pubsub does), read only while the
application iterates, so a subscriber that stops iterating stops reading
its socket and the broker's flow control (PROTOCOL.md 1.2 "Flow control")
holds the publisher instead of this process buffering events.

Before editing: a `Bus` and a `Service` are `_Shared` connections. Any
thread may write (frames are queued in req order under ``_lock`` and written
under ``_send_lock``, never under ``_lock``); the thread that needs
something read reads for everyone, with ``_lock`` released while it waits
in recv, and the other threads wait on ``_cond`` (no reader thread). Notices
are handed to ``on_notice`` after ``_lock`` is released (`_Shared._locked`),
so a callback may call the bus.
"""

import collections
import contextlib
import select
import socket as _socket
import threading
import time as _time
import weakref

from . import core, errors
from .core import Event

#: Seconds a request waits past its own timeout for the broker's answer
#: (the broker answers ``timeout`` itself at the deadline; this only guards
#: against a broker that answers nothing).
REQUEST_GRACE = 2.0
#: The broker's default request timeout (PROTOCOL.md "Request/reply"), for
#: the local guard of a request sent without ``timeout``.
DEFAULT_REQUEST_TIMEOUT = 25.0

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
            try:
                sock.shutdown(_socket.SHUT_RDWR)    # (wakes a thread blocked reading it)
            except OSError:
                pass
            sock.close()


class _Shared:
    """One connection that any thread may use (the base of `Bus` and
    `Service`): see the module's "Before editing". Subclasses call
    `_init_shared` and handle what `_dispatch` does not (``_item``)."""

    def _init_shared(self, link, on_notice):
        self._link = link
        self._on_notice = on_notice
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._send_lock = threading.Lock()
        self._reading = False       # a thread is in recv (without _lock)
        self._wbuf = []
        self._wbytes = 0
        self._wanted = set()        # reqs some thread waits for
        self._got = {}              # their Replies, as they come
        self._notices = []          # for on_notice, once _lock is released
        self._closed = False

    @contextlib.contextmanager
    def _locked(self):
        self._lock.acquire()
        try:
            yield
        finally:
            self._unlock()

    def _unlock(self):
        """Releases ``_lock``, then hands out the notices read meanwhile
        (the hot paths use this with ``acquire`` instead of `_locked`)."""
        if not self._notices:
            self._lock.release()
            return
        notices, self._notices = self._notices, []
        self._lock.release()
        for notice in notices:
            self._on_notice(notice)

    # -- writing -------------------------------------------------------------

    def _send(self):
        """Writes the queued frames (call without ``_lock``). A failed write
        loses the connection: the waiting requests get the error."""
        with self._send_lock:
            with self._lock:                # (nothing is read here: no notices)
                data = b"".join(self._wbuf)
                self._wbuf.clear()
                self._wbytes = 0
                sock = self._link.sock
            if data:
                self._write_now(data, sock)

    def _write_now(self, data, sock=None):
        # (under _send_lock, not _lock)
        sock = sock or self._link.sock
        if sock is None:
            return
        try:
            sock.sendall(data)
        except OSError as exc:
            with self._locked():
                if sock is self._link.sock:
                    self._fail(self._link.lost(exc))

    def _fail(self, error):
        """The connection is gone (under ``_lock``): every waited req gets
        ``error``."""
        for req in self._wanted:
            self._got.setdefault(req, core.Reply(req, {}, error))
        self._wanted.clear()
        self._cond.notify_all()

    # -- reading -------------------------------------------------------------

    def _wait(self, done, deadline=None, poll=False):
        """Reads (or lets another thread read) until ``done()``; called and
        returns with ``_lock`` held. False when ``deadline`` (monotonic)
        passed first, or the connection is gone, or (``poll``) after
        reading what had arrived without waiting."""
        while not done():
            if self._link.sock is None:
                return False
            timeout = None
            if poll:
                timeout = 0
            elif deadline is not None:
                timeout = deadline - _time.monotonic()
                if timeout <= 0:
                    return False
            if self._reading:
                if poll:
                    return False
                self._cond.wait(timeout)
                continue
            sock = self._link.sock
            self._reading = True
            self._lock.release()
            data = exc = None
            try:
                if timeout is None or select.select([sock], [], [], timeout)[0]:
                    data = sock.recv(core.READ_SIZE)
            except OSError as error:
                exc = error
            finally:
                self._lock.acquire()
                self._reading = False
                self._cond.notify_all()
            if sock is not self._link.sock:
                continue                    # closed or replaced meanwhile
            if exc is not None or data == b"":
                self._fail(self._link.lost(exc))
                continue
            if data:
                self._dispatch(self._link.session.receive(data))
            if poll:
                return done()
        return True

    def _dispatch(self, items):
        for item in items:
            cls = item.__class__
            if cls is core.Reply:
                if item.req in self._wanted:
                    self._wanted.discard(item.req)
                    self._got[item.req] = item
                else:
                    self._unwanted(item)
            elif cls is core.Notice:
                self._notices.append(item)
            else:
                self._item(item)

    def _unwanted(self, reply):
        pass

    def _item(self, item):
        pass

    def _replies(self, reqs, deadline=None):
        """Waits (``_lock`` held) for the answers of ``reqs`` (already in
        ``_wanted``); {req: Reply}, a lost connection's error as the Reply
        of each, or None at ``deadline`` (the reqs are then forgotten)."""
        got = self._got
        if len(reqs) == 1:
            one = reqs[0]
            done = lambda: one in got       # noqa: E731
        else:
            done = lambda: all(req in got for req in reqs)      # noqa: E731
        if not self._wait(done, deadline):
            if not all(req in got for req in reqs):
                if self._link.sock is not None:
                    for req in reqs:
                        self._wanted.discard(req)
                        got.pop(req, None)
                        self._link.session.abandon(req)
                    return None
                self._fail(self._lost_error())
        return {req: got.pop(req) for req in reqs}

    def _lost_error(self):
        return errors.ConnectionLost(f"the connection to the broker at {self._link.path} was lost", self._link.path)

    def _ask(self, op, frame_of, deadline=None):
        """Queues a request (``frame_of(session)`` gives ``(req, bytes)``),
        writes it and waits for its answer: the `core.Reply`, or None at the
        deadline. Call without ``_lock``; the connection must be open."""
        with self._lock:
            req, frame = frame_of(self._link.session)
            self._wanted.add(req)
            self._wbuf.append(frame)
        self._send()
        self._lock.acquire()
        try:
            got = self._replies((req,), deadline)
        finally:
            self._unlock()
        return None if got is None else got[req]


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
        wait = (DEFAULT_REQUEST_TIMEOUT if timeout is None else timeout) + REQUEST_GRACE
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
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
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
        """Leaves cleanly (a worker that shuts down): unsubscribes every
        pattern; the iteration then goes on with every event that arrived
        before the broker's answer (this member's share: PROTOCOL.md "Queue
        groups", leaving) and ends. Callable from any thread or a signal
        handler; ``for ev in sub`` after it hands out the rest. The
        connection stays open until `close`."""
        with self._write_lock:
            if self._left or self._link.session.leaving is not None or self._link.sock is None:
                self._left = self._left or self._link.sock is None
                return
            _, frames = self._link.session.leave_requests()
            try:
                self._link.sock.sendall(frames)
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
                self._batch = self._link.read(timeout)
            except errors.EventBusError as exc:
                if self._closed or self._link.session.leaving is not None:
                    self._left = True
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


class Service(_Shared):
    """Requests to answer (PROTOCOL.md "Request/reply (1.3)"), on a
    connection of its own (made by `Bus.serve`): iterate it (``for req in
    service:``) or call `get`, and answer each `core.Request` with
    ``req.reply(data)`` or ``req.fail(text)``, from this thread or any
    other (a pool of threads may answer while this one reads on).

    ``reply`` and ``fail`` wait for the broker's answer and return True when
    the reply was accepted, False when not: the request was already
    answered, its deadline passed, or the connection it came by was lost
    (a race that is normal, not an error: no exception). ``unaccepted``
    counts those. Requests are read only while someone iterates or waits
    for a reply's answer.

    ``group``: serve in a queue group (one member per request). `leave`
    takes the service out cleanly: the iteration ends (no request is handed
    out any more), and once every request handed out has been answered the
    service unsubscribes; requests that came meanwhile are not handed out,
    and their callers get `errors.NoReply` at once (the broker forgets a
    request whose serving subscription goes, PROTOCOL.md "Request/reply"),
    so they can ask again and reach another member. After a lost
    connection it reconnects and serves again (unless the bus said
    ``reconnect=False``); requests received before cannot be answered then."""

    def __init__(self, bus, patterns, *, group=None, on_notice=None):
        self.path = bus.path
        self.patterns = tuple(patterns)
        self.group = None if group is None else core.check_group(group)
        for pattern in self.patterns:
            core.check_pattern(pattern)
        self._reconnect = bus._reconnect
        session = core.Session(**bus._options)
        session.serve, session.group, session.answer = True, self.group, self._answer
        self._init_shared(_Link(bus.path, session), on_notice or bus._on_notice)
        self._inbox = collections.deque()
        self._left = False          # the unsubscribes of leave() were answered
        self._leaving = False       # leave() was called: nothing more is handed out
        self._outstanding = 0       # requests handed out and not answered yet
        self._stop = threading.Event()
        self.unaccepted = 0
        with self._locked():
            self._open(initial=True)

    def _open(self, initial):
        # (under _lock)
        link = self._link
        link.open()
        reqs, frames = link.session.open_subscription(self.patterns, initial=initial)
        self._wanted.update(reqs)
        link.send(frames)
        answered = self._replies(reqs)
        try:
            core.raise_first_error(reqs, answered)
        except errors.ProtocolError:
            link.close()
            raise

    def _item(self, item):
        if item is core.LEFT:
            self._left = True
        elif item.__class__ is core.Request:
            self._inbox.append(item)

    @property
    def dropped(self):
        """Requests the broker dropped for this service, and those this
        client could not decode (as `Subscription.dropped`)."""
        return self._link.session.dropped

    @property
    def members(self):
        """(1.3) Members of the queue group when this one joined, or None."""
        return self._link.session.members

    def __iter__(self):
        return self

    def __next__(self):
        request = self.get()
        if request is None:
            raise StopIteration
        return request

    def get(self, timeout=None):
        """The next request, or None when ``timeout`` seconds pass without one
        (or the service was closed, or has left)."""
        deadline = None if timeout is None else _time.monotonic() + timeout
        while True:
            with self._locked():
                inbox = self._inbox
                self._wait(lambda: inbox or self._leaving or self._closed, deadline)
                ended = self._leaving or self._closed
                if inbox and not ended:
                    self._outstanding += 1
                    return inbox.popleft()
                lost = self._link.sock is None
            if ended:
                self._unsubscribe_when_done()
                return None
            if not lost:
                return None             # the timeout
            if not self._reconnect:
                raise self._lost_error()
            self._reopen()

    def _reopen(self):
        self._on_notice(core.Notice("disconnected", error=self._lost_error()))
        backoff = core.Backoff()
        while not self._stop.wait(backoff.next()):
            try:
                with self._locked():
                    if self._closed:
                        return
                    self._open(initial=False)
            except (errors.Unavailable, errors.ConnectionLost):
                continue
            self._on_notice(core.Notice("reconnected", path=self.path))
            return

    def _answer(self, request, data, error):
        if request.answered:
            return False
        request.answered = True
        token = request.token
        reply = self._ask("reply", lambda session: session.reply_request(token, data, error)) \
            if self._link.sock is not None else None
        if reply is None or isinstance(reply.error, (errors.ConnectionLost, errors.Closed)):
            accepted = False
        elif reply.error is not None:
            raise reply.error
        else:
            accepted = reply.frame.get("accepted") is True
        with self._lock:
            self._outstanding -= 1
            if not accepted:
                self.unaccepted += 1
        self._unsubscribe_when_done()
        return accepted

    def leave(self):
        """Stops serving cleanly (a worker that shuts down): the iteration
        ends; the service unsubscribes once every request handed out has
        been answered (at once when none is held). Callable from any thread
        or a signal handler. Requests that came but were not handed out are
        answered `no_reply` by the broker then."""
        self._leaving = True
        # (A signal handler may run while this thread holds _lock: then the
        # iteration sends the unsubscribe when it sees _leaving.)
        if self._lock.acquire(timeout=1):
            self._cond.notify_all()
            self._lock.release()
            self._unsubscribe_when_done()

    def _unsubscribe_when_done(self):
        with self._locked():
            session = self._link.session
            if not self._leaving or self._outstanding > 0 or session.leaving is not None or self._link.sock is None:
                return
            _, frames = session.leave_requests()
            self._wbuf.append(frames)
        self._send()

    def close(self):
        """Stops serving and closes the connection (requests not answered
        yet get ``no_reply`` at their requesters). Callable from any thread."""
        with self._locked():
            self._closed = True
            self._stop.set()
            self._link.close()
            self._fail(errors.Closed("the service was closed"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
