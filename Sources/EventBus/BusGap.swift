// `BusGap`: what a reconnect could not recover (the broker's `gap` frame),
// defined by the session all clients share.
import EventBusSession

/// (1.1) What a reconnect could not recover (EventBusSession's `BusGap`;
/// PROTOCOL.md "Retained events and history": the `gap` frame).
public typealias BusGap = EventBusSession.BusGap
