// The retained events (PROTOCOL.md "Retained events and history (1.1)"): at
// most one per event type, the newest published with `retain: true`, with
// the totals the limits are checked against (PROTOCOL.md "Quotas (1.1)":
// 65,536 events and 64 MiB in all).
//
// Before editing: this is storage only; who may retain how much (the per-uid
// share, the `limit` error) is decided in Broker+Retention.swift, and every
// change goes through it so `generation` (what the state file writer
// watches) moves with each one.

/// One retained event.
struct RetainedEvent {
    /// Its seq in this run (a restored event gets a new one).
    let seq: UInt64
    let type: String
    /// The event frame as delivered live, without the `retained` flag.
    let frame: OutboundChunk
    /// The publisher's uid, charged for `frame.count` bytes.
    let uid: UInt32
}

/// A change of the retained events, kept until the state file writer takes
/// it (it appends changes rather than rewriting the whole file).
enum RetainedChange {
    case put(RetainedEvent)
    /// `seq`: the broker's seq when it was cleared (every earlier event of
    /// the type is gone, every later one is newer).
    case clear(type: String, seq: UInt64)
}

/// The retained events by type.
struct RetainedStore {
    private(set) var events: [String: RetainedEvent] = [:]
    /// Bytes of all retained frames.
    private(set) var byteCount = 0
    /// Goes up by one with every change (set, replace, clear, restore).
    private(set) var generation: UInt64 = 0

    /// The changes since the last `takeChanges`, unless they outgrew what a
    /// whole rewrite costs (then nil: the writer rewrites everything).
    private var changes: [RetainedChange]? = []
    private var changeBytes = 0

    var count: Int { events.count }

    /// The changes since the last call (nil: too many, write everything);
    /// starts a new list.
    mutating func takeChanges() -> [RetainedChange]? {
        defer {
            changes = []
            changeBytes = 0
        }
        return changes
    }

    private mutating func note(_ change: RetainedChange, bytes: Int) {
        guard changes != nil else { return }
        changeBytes += bytes
        if changeBytes > byteCount + (1 << 20) {
            changes = nil  // a whole rewrite is cheaper now
        } else {
            changes!.append(change)
        }
    }

    subscript(type: String) -> RetainedEvent? { events[type] }

    /// Stores `event`, replacing the one of its type.
    /// - Returns: the event replaced, if any.
    @discardableResult
    mutating func put(_ event: RetainedEvent) -> RetainedEvent? {
        let old = events.updateValue(event, forKey: event.type)
        byteCount += event.frame.count - (old?.frame.count ?? 0)
        generation &+= 1
        note(.put(event), bytes: event.frame.count)
        return old
    }

    /// Removes the event of `type`.
    /// - Returns: the event removed, if any.
    /// - Parameter seq: the broker's seq now (recorded for the state file).
    mutating func remove(_ type: String, seq: UInt64) -> RetainedEvent? {
        guard let old = events.removeValue(forKey: type) else { return nil }
        byteCount -= old.frame.count
        generation &+= 1
        note(.clear(type: type, seq: seq), bytes: type.utf8.count + 64)
        return old
    }
}
