// `ConnectionInfo`: what the broker said in its `hello` reply, defined by
// the session all clients share.
import EventBusSession

/// What the broker said in its `hello` reply (EventBusSession's
/// `ConnectionInfo`; PROTOCOL.md "Requests").
public typealias ConnectionInfo = EventBusSession.ConnectionInfo
