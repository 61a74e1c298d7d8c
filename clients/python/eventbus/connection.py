"""One connection to the broker for the blocking client: `open_socket`,
`_Link` (a socket and its `core.Session`) and `_Shared`, the model of a
connection that any thread may use (`client.Bus` and `service.Service`).

Before editing: in a `_Shared` connection any thread may write (frames are
queued in req order under ``_lock`` and written under ``_send_lock``, never
under ``_lock``, so a write the broker does not read yet cannot stop the
reader); the thread that needs something read reads for everyone, with
``_lock`` released while it waits in recv, and the other threads wait on
``_cond`` (no reader thread). Notices are handed to ``on_notice`` after
``_lock`` is released (`_Shared._locked`, `_Shared._unlock`), so a callback
may call the bus. ``_send_lock`` is never waited for under ``_lock``.
"""

import contextlib
import os
import select
import socket as _socket
import threading
import time as _time

from . import core, errors

#: Longest wait for the socket on the main thread, in seconds. A signal that
#: arrives after the interpreter's last check and before the wait starts
#: (poll(2) is not interrupted by a signal delivered before it) has its
#: Python handler run only when the wait returns: without a bound, a
#: SIGTERM handler calling ``leave()`` could wait for the next event for
#: ever (issue 38). Only the main thread runs signal handlers.
SIGNAL_CHECK = 0.5


def _wait_bound(timeout):
    """``timeout`` (seconds or None) bounded by `SIGNAL_CHECK` on the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return timeout
    return SIGNAL_CHECK if timeout is None else min(timeout, SIGNAL_CHECK)


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

    def read(self, timeout=None, wake=None):
        """The items of one read (blocking, or up to ``timeout`` seconds: []
        when nothing came). ``wake``: an eventfd that ends the wait early
        (its count is taken; [] is returned) when written to. Raises the
        error for a closed connection."""
        sock = self.sock
        if sock is None:
            raise self.lost(None)
        try:
            if wake is not None:
                # What has come first, without waiting (the busy path: one
                # syscall); else wait for the socket or the wake-up.
                try:
                    data = sock.recv(core.READ_SIZE, _socket.MSG_DONTWAIT)
                except BlockingIOError:
                    poller = select.poll()      # (not select(): any fd number)
                    poller.register(sock, select.POLLIN)
                    poller.register(wake, select.POLLIN)
                    bound = _wait_bound(timeout)
                    ready = {fd for fd, _ in poller.poll(None if bound is None else max(bound, 0) * 1000)}
                    if wake in ready:
                        try:
                            os.eventfd_read(wake)
                        except BlockingIOError:
                            pass
                    if sock.fileno() not in ready:
                        return []
                    data = sock.recv(core.READ_SIZE)
            else:
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
        self._wake = None           # an eventfd that ends a wait for the socket (Service.leave)

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
                if self._wake is not None:
                    if self._ready(sock, timeout):
                        data = sock.recv(core.READ_SIZE)
                elif timeout is None or select.select([sock], [], [], timeout)[0]:
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

    def _ready(self, sock, timeout):
        """Waits (without ``_lock``) for ``sock`` or the wake-up eventfd;
        whether ``sock`` can be read (a wake-up's count is taken)."""
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        poller.register(self._wake, select.POLLIN)
        bound = _wait_bound(timeout)
        ready = {fd for fd, _ in poller.poll(None if bound is None else max(bound, 0) * 1000)}
        if self._wake in ready:
            try:
                os.eventfd_read(self._wake)
            except BlockingIOError:
                pass
        return sock.fileno() in ready

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
