// An ordered session's events held back while the replays of one
// connection run (SessionOptions.ordered, `eventbus listen --resume`): a
// replay for one pattern may bring events older than live events already
// received for another, so nothing but retained events is handed on until
// the sentinel `stats` answers; then the held events go out sorted by seq,
// duplicates removed, and from then on events arrive live, in seq order.
//
// Before editing: the frames are copied (the driver's read buffer is
// reused); `EventFields` index into the copies.
@_spi(Package) import EventBusProtocol

struct ReplayOrder {
    /// Events held back (nil: not holding).
    private var held: [(frame: [UInt8], fields: EventFields)]?
    /// Events released by the sentinel, not taken yet.
    private var released: [(frame: [UInt8], fields: EventFields)] = []
    private var releasedHead = 0
    /// The sentinel's seq, reached once every released event is taken.
    private var reached: UInt64?
    /// The position this connection's subscribes asked for.
    private(set) var asked: StreamPosition?

    init(holding: Bool = false, asked: StreamPosition? = nil) {
        held = holding ? [] : nil
        self.asked = asked
    }

    /// No replay is under way (or the session is not ordered).
    var settled: Bool { held == nil }

    var hasReleased: Bool { releasedHead < released.count }

    /// Holds `frame` (copied) when holding. - Returns: whether it was held.
    mutating func hold(_ frame: RawSpan, _ fields: EventFields) -> Bool {
        guard held != nil else { return false }
        held!.append(([UInt8](copying: frame), fields))
        return true
    }

    /// The sentinel answered: release the held events, in order.
    mutating func release(reaching seq: UInt64) {
        var events = held ?? []
        held = nil
        events.sort { $0.fields.seq < $1.fields.seq }
        released = []
        releasedHead = 0
        var last: UInt64? = nil
        for event in events where event.fields.seq != last {
            released.append(event)
            last = event.fields.seq
        }
        reached = seq
    }

    mutating func next() -> (frame: [UInt8], fields: EventFields)? {
        guard hasReleased else { return nil }
        defer { releasedHead += 1 }
        return released[releasedHead]
    }

    mutating func takeReached() -> UInt64? {
        defer { reached = nil }
        return reached
    }

    mutating func connectionLost() {
        held = nil
        released = []
        releasedHead = 0
        reached = nil
    }
}
