"""The blocking `Service` (PROTOCOL.md "Request/reply (1.3)"): requests to
answer, on a connection of its own, made by `client.Bus.serve`.

Before editing: it is a `connection._Shared` (see that module's header):
the iterating thread and the threads that answer share its one socket;
a request is handed out only by `get`, and `leave` unsubscribes only once
every request handed out has been answered (``_outstanding``), because the
broker forgets the requests of a serving subscription that goes. `leave`
(any thread, or a signal handler that may interrupt a thread holding
``_lock`` or ``_send_lock``) only sets ``_leaving`` and writes the eventfd
``_wake``, which ends a wait for the socket (`_Shared._ready`); the
iteration or the last answer sends the unsubscribes.
"""

import collections
import os
import threading
import time as _time
import weakref

from . import core, errors
from .connection import _Link, _Shared


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
        # leave() wakes a wait for the socket with it (closed when the
        # service is collected: leave() may come after close()).
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        weakref.finalize(self, os.close, self._wake)
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
        # Only a flag and a wake-up: a signal handler may run while this
        # thread holds _lock or _send_lock, or is inside the session. The
        # iteration (get) sees the flag and unsubscribes, or the answer of
        # the last request held does.
        self._leaving = True
        try:
            os.eventfd_write(self._wake, 1)
        except OSError:
            pass

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
