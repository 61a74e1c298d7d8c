"""Exceptions of the eventbus client: one class per protocol error code.

Every exception derives from `EventBusError`. The broker's ``error`` frames
become a `ProtocolError` subclass chosen by their ``code`` (PROTOCOL.md
"Errors"); failing to reach the broker is `Unavailable` (also a
`ConnectionError`), losing it after a request was written is
`ConnectionLost` (the request may or may not have been handled).
"""


class EventBusError(Exception):
    """Base class of every error this package raises."""


class Unavailable(EventBusError, ConnectionError):
    """The broker cannot be reached. ``path`` is the socket path tried; the
    message says how to start the broker or where to look (as the CLI does)."""

    def __init__(self, message, path=None):
        Exception.__init__(self, message)
        self.path = path

    def __str__(self):
        return self.args[0]


class ConnectionLost(EventBusError, ConnectionError):
    """The connection broke after a request was written: it may or may not
    have been handled (delivery is at-most-once; nothing is resent)."""

    def __init__(self, message, path=None):
        Exception.__init__(self, message)
        self.path = path

    def __str__(self):
        return self.args[0]


class Closed(EventBusError):
    """The bus or subscription was closed with ``close()``."""


class MalformedFrame(EventBusError):
    """The broker sent a line this client cannot read (not JSON, no ``op``,
    or longer than the client's frame limit)."""


class ProtocolError(EventBusError):
    """The broker answered with an ``error`` frame.

    ``code`` is the wire code (``"forbidden"``), ``message`` the broker's text,
    ``frame`` the whole error frame (a dict, extra fields as they came)."""

    code = None

    def __init__(self, code, message, frame=None):
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.frame = frame if frame is not None else {}


class BadFrame(ProtocolError):
    """``bad_frame``: the request was not valid JSON / not an object."""


class FrameTooLarge(ProtocolError):
    """``frame_too_large``: the request was over the broker's ``--max-frame``."""


class UnknownOp(ProtocolError):
    """``unknown_op``: the broker does not know the op (e.g. ``types`` on a
    1.1 broker)."""


class BadType(ProtocolError, ValueError):
    """``bad_type``: a malformed event type or pattern (also raised locally,
    before anything is sent)."""


class BadRequest(ProtocolError):
    """``bad_request``: a missing or ill-typed field."""


class Forbidden(ProtocolError, PermissionError):
    """``forbidden``: a reserved ``eventbus.`` type or the access policy."""


class LimitExceeded(ProtocolError):
    """``limit``: a limit or quota was reached (the message names it)."""


class SlowConsumer(ProtocolError):
    """``slow_consumer``: the connection was closed under ``overflow: disconnect``."""


class FrameTimeout(ProtocolError):
    """``timeout``: an incomplete frame made no progress; the broker closed
    the connection."""


class RequestError(ProtocolError):
    """Base of the errors that answer a ``request`` (PROTOCOL.md
    "Request/reply (1.3)") with no reply data: catch it to handle every
    way a question can go unanswered."""


class NoResponders(RequestError):
    """``no_responders``: nothing serves the type (no serving subscription
    matches it, the policy hides it from all of them, or all would have to
    drop it). Told at once, without waiting for the timeout."""


class NoReply(RequestError):
    """``no_reply``: every server the request reached closed, stopped
    serving or fell behind without replying (the message says which)."""


class RequestTimeout(RequestError, TimeoutError):
    """``timeout`` answering a request: its deadline passed first (the
    broker forgot it; a late reply is refused). Also raised by the client
    when the broker has not answered a second past the deadline."""


class ServiceError(RequestError):
    """``service_error``: the service answered with a failure. ``message``
    is the service's own text; ``reply`` the reply's fields (``pid``,
    ``uid``, ``gid`` of the server, ``time``)."""

    def __init__(self, code, message, frame=None):
        super().__init__(code, message, frame)
        reply = self.frame.get("reply")
        self.reply = reply if isinstance(reply, dict) else {}

    def __str__(self):
        return f"the service failed: {self.message}"


#: Wire code -> exception class (PROTOCOL.md "Errors").
ERROR_CLASSES = {
    "bad_frame": BadFrame,
    "frame_too_large": FrameTooLarge,
    "unknown_op": UnknownOp,
    "bad_type": BadType,
    "bad_request": BadRequest,
    "forbidden": Forbidden,
    "limit": LimitExceeded,
    "slow_consumer": SlowConsumer,
    "timeout": FrameTimeout,
    "no_responders": NoResponders,
    "no_reply": NoReply,
    "service_error": ServiceError,
}


def error_from_frame(frame, request=False):
    """The exception for a broker ``error`` frame (a dict); an unknown code
    gives a plain `ProtocolError`. ``request``: the frame answers a
    ``request``, where ``timeout`` is its deadline (`RequestTimeout`), not
    an incomplete frame's."""
    code = frame.get("code")
    code = code if isinstance(code, str) else "unknown"
    message = frame.get("message")
    message = message if isinstance(message, str) else "no message"
    if request and code == "timeout":
        return RequestTimeout(code, message, frame)
    return ERROR_CLASSES.get(code, ProtocolError)(code, message, frame)
