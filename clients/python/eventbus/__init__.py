"""eventbus: the Python client of the eventbus broker (standard library only).

    import eventbus
    with eventbus.connect() as bus:            # $EVENTBUS_SOCKET, else the user or system bus
        bus.publish("app.started", {"pid": 42})
        for ev in bus.subscribe("order.>"):
            print(ev.seq, ev.type, ev.data)

`connect` gives a blocking `Bus`; `eventbus.aio.connect` an asyncio one with
the same calls. docs/PYTHON.md in the source tree has the whole story.
"""

from . import core, errors
from .client import Bus, Subscription
from .core import Event, Notice, resolve_socket
from .errors import (
    BadFrame, BadRequest, BadType, Closed, ConnectionLost, EventBusError, Forbidden, FrameTimeout,
    FrameTooLarge, LimitExceeded, MalformedFrame, ProtocolError, SlowConsumer, Unavailable, UnknownOp,
)

__version__ = "1.3.0"  # EventBusRelease.version (Sources/EventBusProtocol/Version.swift); VersionTests checks it

__all__ = [
    "connect", "Bus", "Subscription", "Event", "Notice", "resolve_socket",
    "EventBusError", "Unavailable", "ConnectionLost", "Closed", "MalformedFrame", "ProtocolError",
    "BadFrame", "FrameTooLarge", "UnknownOp", "BadType", "BadRequest", "Forbidden", "LimitExceeded",
    "SlowConsumer", "FrameTimeout",
]


def connect(socket=None, *, system=False, user=False, client=None, echo=False, overflow=None,
            reconnect=True, on_notice=None):
    """Connects to the broker and says ``hello``; returns a `Bus`.

    Socket path as the CLI's (PROTOCOL.md "Transport"): ``socket``;
    ``system=True`` (/run/eventbus/bus.sock) or ``user=True``
    ($XDG_RUNTIME_DIR/eventbus/bus.sock); ``$EVENTBUS_SOCKET``; the user bus
    when XDG_RUNTIME_DIR is set and the process is not root; the system bus.

    ``client``: a name for the connection (1-64 bytes of A-Z a-z 0-9 _ . - :).
    ``echo``: also receive what this bus publishes (default: its own
    subscriptions skip it). ``overflow``: what the broker does when this
    process reads too slowly (``"wait"``, ``"drop-new"``, ``"drop-old"``,
    ``"disconnect"``); sent only when given, so the broker's default applies
    (``wait`` from PROTOCOL 1.2, ``drop-new`` before). ``reconnect``:
    reconnect (and resume subscriptions) after losing the broker.
    ``on_notice``: called with each `Notice` (default: logged).

    Raises `Unavailable` (the message names the socket path and how to start
    the broker), ValueError for bad options."""
    path = resolve_socket(socket, system=system, user=user)
    return Bus(path, client=client, echo=echo, overflow=overflow, reconnect=reconnect, on_notice=on_notice)
