"""The asyncio client: the same calls as `eventbus.client`, awaited.

    import eventbus.aio
    async with await eventbus.aio.connect() as bus:
        await bus.publish("app.started")
        async with bus.subscribe("order.>") as sub:     # subscribed here
            async for ev in sub:
                ...

The protocol is `core.Session`'s; this module only moves bytes, through
`asyncio.Protocol` objects (no StreamReader line limit: frames are split by
the core, up to `core.MAX_INCOMING_FRAME`). A subscription's events wait in
a bounded queue (``maxsize`` events, plus at most one read); when it is full
the transport stops reading the socket until the application has taken half
of them, so the broker's flow control (PROTOCOL.md 1.2) holds the publisher
instead of this process's memory growing.

Before editing: everything here runs on the event loop's thread; the only
waiting is on futures resolved by ``data_received``/``connection_lost``.
"""

import asyncio
import collections
import weakref

from . import core, errors
from .core import Event


async def connect(socket=None, *, system=False, user=False, client=None, echo=False, overflow=None,
                  reconnect=True, on_notice=None):
    """Connects and says ``hello``; returns an `AsyncBus`. Arguments and
    errors as `eventbus.connect`."""
    path = core.resolve_socket(socket, system=system, user=user)
    bus = AsyncBus(path, client=client, echo=echo, overflow=overflow, reconnect=reconnect, on_notice=on_notice)
    await bus._open()
    return bus


class _Link(asyncio.Protocol):
    """One connection: a transport and its `core.Session`; received items go
    to ``sink(items)``, the end of the connection to ``on_lost(error)``."""

    def __init__(self, path, session, sink, on_lost):
        self.path, self.session, self.sink, self.on_lost = path, session, sink, on_lost
        self.transport = None
        self._drained = None

    async def open(self):
        loop = asyncio.get_running_loop()
        try:
            await loop.create_unix_connection(lambda: self, self.path)
        except OSError as exc:
            raise core.connect_error(self.path, exc) from None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.sink(self.session.receive(data))

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        heard, reason = self.session.heard, self.session.last_error
        self.transport = None
        self.session.lost()
        if exc is not None and not isinstance(exc, (ConnectionResetError, BrokenPipeError)):
            error = errors.ConnectionLost(f"connection to the broker at {self.path} lost: {exc}", self.path)
        else:
            error = core.closed_error(self.path, heard, reason)
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self.on_lost(error)

    def pause_writing(self):
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self):
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    def write(self, data):
        if self.transport is None:
            raise core.closed_error(self.path, True, None)
        self.transport.write(data)

    async def drain(self):
        if self._drained is not None:
            await self._drained

    def close(self):
        if self.transport is not None:
            self.transport.close()


class AsyncBus:
    """A connection to the broker for requests (made by `connect`). Calls as
    `eventbus.Bus`'s, as coroutines."""

    def __init__(self, path, *, client=None, echo=False, overflow=None, reconnect=True, on_notice=None):
        self.path = path
        self.echo = echo
        self._options = {"client": client, "echo": echo, "overflow": overflow}
        self._reconnect = reconnect
        self._on_notice = on_notice or core.log_notice
        self._link = _Link(path, core.Session(**self._options), self._items, self._lost)
        self._link.session.record_own = not echo   # (its subscriptions skip what it published)
        self._futures = {}
        self._deferred = []
        self._collect = None
        self._progress = None      # set when replies to publishes arrive (flush, echo checks)
        self._closed = False
        self._lock = asyncio.Lock()
        self._subscriptions = weakref.WeakSet()

    @property
    def info(self):
        """The broker's ``hello`` reply (dict), as `eventbus.Bus.info`."""
        return self._link.session.info

    async def _open(self):
        self._link = _Link(self.path, self._link.session, self._items, self._lost)
        await self._link.open()
        req, hello = self._link.session.start()
        reply = await self._send(req, hello)
        if reply.error is not None:
            self._link.close()
            raise reply.error

    async def _ensure(self):
        if self._closed:
            raise errors.Closed("the bus was closed")
        if self._link.transport is not None:
            return
        if not self._reconnect:
            raise errors.ConnectionLost(f"the connection to the broker at {self.path} was lost (reconnect=False)", self.path)
        async with self._lock:
            if self._link.transport is not None:
                return
            backoff, deadline = core.Backoff(), asyncio.get_running_loop().time() + 5
            while True:
                try:
                    await self._open()
                    self._on_notice(core.Notice("reconnected", path=self.path))
                    return
                except errors.Unavailable:
                    if asyncio.get_running_loop().time() >= deadline:
                        raise
                await asyncio.sleep(backoff.next())

    def _items(self, items):
        for item in items:
            cls = item.__class__
            if cls is core.Reply:
                future = self._futures.pop(item.req, None)
                if future is not None:
                    if not future.done():
                        future.set_result(item)
                elif item.error is not None:
                    self._deferred.append(item.error)
            elif cls is Event:
                if self._collect is not None:
                    self._collect.append(item)
            else:
                self._on_notice(item)
        if self._progress is not None:      # flush() and echo checks wait on replies
            self._progress.set()

    def _lost(self, error):
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(error)
        if self._progress is not None:
            self._progress.set()

    async def _send(self, req, frame):
        future = asyncio.get_running_loop().create_future()
        self._futures[req] = future
        try:
            self._link.write(frame)
        except errors.EventBusError:
            self._futures.pop(req, None)
            raise
        return await future

    async def _call(self, op, **fields):
        await self._ensure()
        req, frame = self._link.session.request(op, **fields)
        reply = await self._send(req, frame)
        if reply.error is not None:
            raise reply.error
        return reply.frame

    async def close(self):
        """Closes the connection (what was written is handled by the broker)
        and the bus's subscriptions."""
        self._closed = True
        self._link.close()
        for sub in list(self._subscriptions):
            await sub.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    # -- publishing ----------------------------------------------------------

    async def publish(self, type, data=None, *, retain=False, source=None, id=None, key=None, wait=True):
        """As `eventbus.Bus.publish`: the seq, or None with ``wait=False``
        (then `flush` raises the first error)."""
        await self._ensure()
        session = self._link.session
        req, frame = session.publish(type, data, retain, source, id, wait, key)
        if wait:
            reply = await self._send(req, frame)
            if reply.error is not None:
                raise reply.error
            return reply.frame.get("seq")
        self._link.write(frame)
        await self._link.drain()
        if session.publishes_pending >= core.WAIT_AT:
            await self._wait_pending(core.WAIT_AT // 2)
        return None

    async def _wait_pending(self, at_most):
        session = self._link.session
        self._progress = self._progress or asyncio.Event()
        while session.publishes_pending > at_most and self._link.transport is not None:
            self._progress.clear()
            await self._progress.wait()

    async def flush(self):
        """Waits until every ``publish(wait=False)`` is answered; raises the
        first error among them (``failed``: how many)."""
        await self._wait_pending(0)
        found = core.take_flush_errors(self._link.session, self._deferred, self.path)
        if found:
            raise found[0]

    # -- request/reply (1.3) -------------------------------------------------

    async def request(self, type, data=None, *, timeout=None, key=None, source=None, id=None):
        """As `eventbus.Bus.request`: the `core.Response`, or
        `errors.NoResponders`, `errors.NoReply`, `errors.RequestTimeout`,
        `errors.ServiceError`. Any number of tasks may ask at once; answers
        come in any order. A cancelled request stops waiting (its answer,
        if it comes, is ignored)."""
        await self._ensure()
        session = self._link.session
        req, frame = session.ask(type, data, timeout=timeout, key=key, source=source, id=id)
        future = asyncio.get_running_loop().create_future()
        self._futures[req] = future
        wait = (core.DEFAULT_REQUEST_TIMEOUT if timeout is None else timeout) + core.REQUEST_GRACE
        try:
            self._link.write(frame)
            reply = await asyncio.wait_for(future, wait)
        except asyncio.TimeoutError:
            raise errors.RequestTimeout("timeout", f"the broker at {self.path} did not answer the request within {wait:g} s") from None
        finally:
            if self._futures.pop(req, None) is not None:
                session.abandon(req)
        if reply.error is not None:
            raise reply.error
        return core.Response(reply.frame)

    def serve(self, *patterns, group=None, on_notice=None, maxsize=1024):
        """An `AsyncService` (as `eventbus.Bus.serve`): ``await`` it or
        ``async with`` it to be serving, then ``async for req in service``
        and ``await req.reply(data)`` / ``await req.fail(text)`` (True when
        the broker accepted the reply). ``maxsize``: requests queued before
        the socket is no longer read."""
        if self._closed:
            raise errors.Closed("the bus was closed")
        if not patterns:
            raise TypeError("serve() needs at least one pattern")
        service = AsyncService(self, patterns, on_notice=on_notice, maxsize=maxsize, group=group)
        self._subscriptions.add(service)
        return service

    # -- other requests ------------------------------------------------------

    async def get(self, type):
        """As `eventbus.Bus.get`: the retained `Event` of ``type`` or None."""
        await self._ensure()
        async with self._lock:
            reqs, frames = self._link.session.get_requests(type)
            loop = asyncio.get_running_loop()
            futures = [loop.create_future() for _ in reqs]
            self._futures.update(zip(reqs, futures))
            self._collect = []
            try:
                self._link.write(frames)
                replies = [await future for future in futures]
                events = self._collect
            finally:
                self._collect = None
        return core.Session.retained_result(type, replies, events)

    async def clear(self, type):
        """As `eventbus.Bus.clear`."""
        core.check_type(type)
        return (await self._call("clear", type=type)).get("removed") is True

    async def ping(self):
        await self._call("ping")

    async def stats(self):
        """As `eventbus.Bus.stats` (dict, every field as it came)."""
        return core.reply_fields(await self._call("stats"))

    async def clients(self):
        return (await self._call("clients")).get("clients", [])

    async def types(self, limit=None):
        """As `eventbus.Bus.types`; `errors.UnknownOp` from a broker without it."""
        return (await self._call("types", limit=limit)).get("types", [])

    # -- subscribing ---------------------------------------------------------

    def subscribe(self, *patterns, last=False, since=None, instance=None, group=None, on_notice=None, maxsize=1024):
        """An `AsyncSubscription`; arguments as `eventbus.Bus.subscribe`
        (``group``: a queue group, left cleanly with ``await sub.leave()``),
        ``maxsize``: events queued before the socket is no longer read.
        ``await`` it (or ``async with`` it) to be subscribed before going on;
        ``async for ev in bus.subscribe(...)`` subscribes at the first step.
        Raises (when it subscribes) as `eventbus.Bus.subscribe`."""
        if self._closed:
            raise errors.Closed("the bus was closed")
        sub = AsyncSubscription(self, patterns or (">",), on_notice=on_notice, maxsize=maxsize, group=group,
                                options={"last": last, "since": since, "instance": instance})
        self._subscriptions.add(sub)
        return sub

    async def wait(self, pattern, timeout=None):
        """The next event matching ``pattern``, or None after ``timeout`` seconds."""
        async with await self.subscribe(pattern) as sub:
            return await sub.get(timeout)

    async def _is_own(self, seq):
        session = self._link.session
        self._progress = self._progress or asyncio.Event()
        while (own := session.own_seq(seq)) is None and self._link.transport is not None:
            self._progress.clear()
            await self._progress.wait()
        return bool(own)


class AsyncSubscription:
    """Events matching some patterns on a connection of its own: ``async for
    ev in sub`` or ``await sub.get(timeout)``. Reconnects and notices as
    `eventbus.Subscription`; ``group`` and ``leave`` as there."""

    _kind = Event

    def __init__(self, bus, patterns, *, on_notice=None, maxsize=1024, options=None, group=None):
        self.path = bus.path
        self._options = options or {}
        self.patterns = tuple(patterns)
        for pattern in self.patterns:
            core.check_pattern(pattern)
        self.group = None if group is None else core.check_group(group)
        if self.group is not None and (self._options.get("last") or self._options.get("since") is not None):
            raise ValueError("last and since cannot be combined with group (a queue group shares live events only)")
        self._bus = bus
        self._filter_own = not bus.echo and self._kind is Event
        self._reconnect = bus._reconnect
        self._on_notice = on_notice or bus._on_notice
        self._session = core.Session(**bus._options)
        self._session.group = self.group
        self._futures = {}         # req -> future of replies asked after opening (leave, reply)
        self._left = False
        self._queue = collections.deque()
        self._maxsize = max(1, maxsize)
        self._paused = False
        self._wakeup = None
        self._error = None
        self._closed = False
        self._replies = None       # req -> Reply while opening
        self._opened = None
        self._link = None

    async def _open(self, last=False, since=None, instance=None, initial=True):
        loop = asyncio.get_running_loop()
        self._link = _Link(self.path, self._session, self._items, self._lost)
        self._error = None
        await self._link.open()
        reqs, frames = self._session.open_subscription(self.patterns, last=last, since=since,
                                                       instance=instance, initial=initial)
        self._replies = {}
        self._opened = loop.create_future()
        self._wanted = set(reqs)
        self._link.write(frames)
        try:
            await self._opened
        finally:
            self._opened = None
        answered, self._replies = self._replies, None
        try:
            core.raise_first_error(reqs, answered)
        except errors.ProtocolError:
            self._link.close()
            raise

    @property
    def dropped(self):
        """As `eventbus.Subscription.dropped`."""
        return self._session.dropped

    @property
    def gaps(self):
        return self._session.gaps

    @property
    def members(self):
        """(1.3) Members of the queue group when this one joined, or None."""
        return self._session.members

    async def leave(self):
        """As `eventbus.Subscription.leave`: unsubscribes; the iteration goes
        on with what arrived before the broker's answer, then ends."""
        if self._left or self._session.leaving is not None or self._link is None or self._link.transport is None:
            self._left = True
            self._wake()
            return
        _, frames = self._session.leave_requests()
        self._link.write(frames)

    @property
    def info(self):
        return self._session.info

    def _items(self, items):
        replies = self._replies
        if replies is not None:
            kept = []
            for item in items:
                if item.__class__ is core.Reply and item.req in self._wanted:
                    replies[item.req] = item
                else:
                    kept.append(item)
            items = kept
            if len(replies) == len(self._wanted) and self._opened is not None and not self._opened.done():
                self._opened.set_result(None)
        if self._futures:
            kept = []
            for item in items:
                future = self._futures.pop(item.req, None) if item.__class__ is core.Reply else None
                if future is None:
                    kept.append(item)
                elif not future.done():
                    future.set_result(item)
            items = kept
        self._queue.extend(items)
        if len(self._queue) >= self._maxsize and not self._paused and self._link.transport is not None:
            self._link.transport.pause_reading()
            self._paused = True
        self._wake()

    def _wake(self):
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _lost(self, error):
        self._error = error
        self._paused = False
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(error)
        if self._opened is not None and not self._opened.done():
            self._opened.set_exception(error)
        self._wake()

    async def _subscribed(self):
        if self._link is None:
            await self._open(**self._options)
        return self

    def __await__(self):
        return self._subscribed().__await__()

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._link is None and not self._closed:
            await self._open(**self._options)
        event = await self._next()
        if event is None:
            raise StopAsyncIteration
        return event

    async def get(self, timeout=None):
        """The next event, or None after ``timeout`` seconds without one (or
        once closed)."""
        if self._link is None:
            await self._open(**self._options)
        if timeout is None:
            return await self._next()
        try:
            return await asyncio.wait_for(self._next(), timeout)
        except asyncio.TimeoutError:
            return None

    async def _next(self):
        queue = self._queue
        while True:
            while queue:
                item = self._popleft()
                if item is core.LEFT:
                    self._left = True
                    return None
                if item.__class__ is self._kind:
                    if self._filter_own and core.may_be_own(item.frame):
                        try:
                            own = await self._bus._is_own(item.frame["seq"])
                        except asyncio.CancelledError:
                            queue.appendleft(item)      # (get's timeout): not lost, looked at again next time
                            raise
                        if own:
                            continue
                    return item
                if item.__class__ is core.Notice:
                    self._on_notice(item)
            if self._closed or self._left:
                return None
            if not await self._wait_more():
                return None

    def _popleft(self):
        item = self._queue.popleft()
        if self._paused and len(self._queue) <= self._maxsize // 2:
            self._paused = False
            if self._link.transport is not None:
                self._link.transport.resume_reading()
        return item

    async def _wait_more(self):
        """Waits for the next items; False when the iteration must end."""
        if self._error is not None:
            if self._session.leaving is not None:
                self._left = True
                return False
            await self._lost_wait()
            return True
        self._wakeup = asyncio.get_running_loop().create_future()
        try:
            await self._wakeup
        finally:
            self._wakeup = None
        return True

    async def _lost_wait(self):
        error = self._error
        if not self._reconnect or self._closed:
            raise error
        self._on_notice(core.Notice("disconnected", error=error))
        backoff = core.Backoff()
        while not self._closed:
            await asyncio.sleep(backoff.next())
            try:
                await self._open(initial=False)
            except (errors.Unavailable, errors.ConnectionLost):
                continue
            self._on_notice(core.Notice("reconnected", path=self.path))
            return

    async def close(self):
        """Ends the subscription (iteration stops) and closes its connection."""
        self._closed = True
        if self._link is not None:
            self._link.close()
        self._wake()

    async def __aenter__(self):
        return await self._subscribed()

    async def __aexit__(self, *exc):
        await self.close()


class AsyncService(AsyncSubscription):
    """Requests to answer, as `eventbus.Service`, for asyncio: ``async for
    req in service`` or ``await service.get(timeout)``, then ``await
    req.reply(data)`` or ``await req.fail(text)`` (True when the broker
    accepted the reply, False when not, counted in ``unaccepted``; no
    exception). Answer in other tasks to serve several requests at once.
    ``await service.leave()`` as `eventbus.Service.leave`: the iteration
    ends, and the service unsubscribes once every request handed out has
    been answered."""

    _kind = core.Request

    def __init__(self, bus, patterns, *, on_notice=None, maxsize=1024, group=None):
        super().__init__(bus, patterns, on_notice=on_notice, maxsize=maxsize, group=group)
        self._session.serve = True
        self._session.answer = self._answer
        self._leaving = False
        self._outstanding = 0
        self.unaccepted = 0

    async def _next(self):
        queue = self._queue
        while True:
            if self._leaving or self._closed:
                self._unsubscribe_when_done()
                return None
            while queue:
                item = self._popleft()
                if item.__class__ is core.Request:
                    self._outstanding += 1
                    return item
                if item.__class__ is core.Notice:
                    self._on_notice(item)
            if not await self._wait_more():
                return None

    async def leave(self):
        """Stops serving cleanly (see `eventbus.Service.leave`)."""
        self._leaving = True
        self._unsubscribe_when_done()
        self._wake()

    def _unsubscribe_when_done(self):
        if self._outstanding > 0 or self._session.leaving is not None or self._link is None \
                or self._link.transport is None:
            return
        _, frames = self._session.leave_requests()
        self._link.write(frames)

    async def _answer(self, request, data, error):
        if request.answered:
            return False
        request.answered = True
        accepted = False
        if self._link is not None and self._link.transport is not None:
            req, frame = self._session.reply_request(request.token, data, error)
            future = asyncio.get_running_loop().create_future()
            self._futures[req] = future
            try:
                self._link.write(frame)
                reply = await future
            except (errors.ConnectionLost, errors.Unavailable, errors.Closed):
                reply = None
            finally:
                if self._futures.pop(req, None) is not None:
                    self._session.abandon(req)
            if reply is not None:
                if reply.error is not None:
                    raise reply.error
                accepted = reply.frame.get("accepted") is True
        self._outstanding -= 1
        if not accepted:
            self.unaccepted += 1
        if self._leaving:
            self._unsubscribe_when_done()
        return accepted
