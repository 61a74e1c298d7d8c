// What `eventbus listen` sends on each connection and where it has got to
// in the broker's sequence (PROTOCOL.md "Retained events and history
// (1.1)"), for `--resume FILE` and `--reconnect`: every (re)connection
// subscribes with `since` the position reached, and the position moves only
// once it is known to be complete.
//
// Before editing: a replay for one pattern may bring events older than live
// events already received for another, so events are not printed as they
// come until the replays are over. Each connection ends its subscribes with
// a `stats` request (the sentinel): the broker answers it after every
// replay, and its `history_first_seq + history_events - 1` is the broker's
// seq at that moment, up to which everything matching has now been
// received. Until then events are held back (retained ones excepted: they
// are current values, not part of the sequence, and print at once); the
// sentinel's answer releases them sorted by seq, duplicates removed. From
// then on events arrive live, in seq order. So the position is always the
// seq of the last event printed, or the sentinel's seq once every held-back
// event is printed, and `--count N` stopping anywhere leaves a position
// from which the next run continues without skipping or repeating.
import EventBusProtocol

struct ListenSession {
    let patterns: [String]
    /// `--last`: the first connection asks for the retained events too.
    let last: Bool
    /// Whether the position is followed at all (`--resume`, `--reconnect`).
    let tracking: Bool
    /// Where the listener has got to (what `--resume` saves).
    private(set) var position: StreamPosition?
    /// The position the current connection's subscribes asked for.
    private(set) var asked: StreamPosition?
    /// The broker run of the current connection, from its `hello` reply.
    private(set) var instance: String?
    private var settled = false
    private var changed = false
    private var connections = 0
    /// Events held back until the sentinel answers (nil: none are); the
    /// fields index into the copied frame.
    private var heldBack: [(frame: [UInt8], fields: EventFields)]? = nil
    /// The sentinel's seq, reached once the held-back events are printed.
    private var reached: UInt64? = nil
    /// A plain `--since SEQ` (no broker run named) beyond the broker's
    /// newest seq, found by the first connection's sentinel; taken once.
    private var sinceAhead: (asked: UInt64, newest: UInt64)? = nil

    init(patterns: [String], last: Bool, position: StreamPosition?, tracking: Bool) {
        self.patterns = patterns
        self.last = last
        self.position = position
        self.tracking = tracking
    }

    /// The `req` of the sentinel `stats`; subscribes are 1...N, `hello` 0.
    private var sentinelReq: Int64 { Int64(patterns.count + 1) }

    /// The frames for a new connection, after the `hello` (req 0) that
    /// `BrokerConnection.connect` sends: a subscribe per pattern (req 1...N,
    /// with `since` the position), and the sentinel `stats` (req N+1) when tracking.
    mutating func frames() -> [UInt8] {
        connections += 1
        settled = false
        instance = nil
        asked = position
        heldBack = tracking ? [] : nil
        var out: [UInt8] = []
        out += subscribeFrames(patterns, last: last && connections == 1, since: position)
        if tracking { ClientRequest.stats.encode(req: sentinelReq, to: &out) }
        return out
    }

    /// Whether to hold `frame`, an event, back (it is copied) rather than print it now.
    mutating func holdBack(_ frame: UnsafeRawBufferPointer, _ fields: EventFields) -> Bool {
        guard heldBack != nil, !fields.retained else { return false }
        heldBack!.append((Array(frame), fields))
        return true
    }

    /// The event of `seq` was printed.
    mutating func printed(seq: UInt64) {
        guard tracking, settled, seq > position?.seq ?? 0 else { return }
        position = StreamPosition(instance: instance, seq: seq)
        changed = true
    }

    /// Every event released by the sentinel was printed: the position is the sentinel's seq.
    mutating func releasedAll() {
        guard let reached else { return }
        self.reached = nil
        if reached > position?.seq ?? 0 || position?.instance != instance {
            position = StreamPosition(instance: instance, seq: reached)
            changed = true
        }
    }

    /// What a reply answered.
    enum ReplyRole {
        /// One of ours, nothing more to do.
        case handled
        /// The sentinel: print these events (in this order, up to `--count`),
        /// then call `releasedAll` if all of them were printed.
        case release([(frame: [UInt8], fields: EventFields)])
        /// The subscribe of this pattern was refused.
        case subscribeFailed(String)
        /// Not an answer to this session's requests.
        case other
    }

    mutating func handle(_ reply: Reply) -> ReplyRole {
        guard let req = reply.req else { return .other }
        if req >= 1 && req <= Int64(patterns.count) {
            return reply.isOK ? .handled : .subscribeFailed(patterns[Int(req) - 1])
        }
        guard tracking, req == 0 || req == sentinelReq else { return .other }
        guard reply.isOK else { return .other }
        if req == 0 {
            instance = reply.string("instance")
            return .handled
        }
        var seq = position?.instance == instance ? position?.seq ?? 0 : 0
        if let first = reply.unsigned("history_first_seq"), let count = reply.unsigned("history_events"), first + count > 0 {
            seq = first + count - 1
            if connections == 1, let asked, asked.instance == nil, asked.seq > seq { sinceAhead = (asked.seq, seq) }
        }
        if position?.instance != instance {
            // A new broker run: the old seq means nothing here.
            position = StreamPosition(instance: instance, seq: 0)
            changed = true
        }
        settled = true
        reached = seq
        var held = heldBack ?? []
        heldBack = nil
        held.sort { $0.fields.seq < $1.fields.seq }
        var released: [(frame: [UInt8], fields: EventFields)] = []
        var last: UInt64? = nil
        for event in held where event.fields.seq != last {
            released.append(event)
            last = event.fields.seq
        }
        return .release(released)
    }

    /// `--since SEQ` was ahead of the broker's newest seq (the newest in its
    /// history, `history_first_seq + history_events - 1` of the sentinel's
    /// `stats`; with an empty history that is the seq of the broker's last
    /// event): `(SEQ, newest)`, once.
    mutating func takeSinceAhead() -> (asked: UInt64, newest: UInt64)? {
        defer { sinceAhead = nil }
        return sinceAhead
    }

    /// The connection ended: the position waits for the next sentinel.
    mutating func connectionLost() {
        settled = false
        heldBack = nil
        reached = nil
    }

    /// The position to save, when it moved since the last call.
    mutating func positionToSave() -> StreamPosition? {
        guard changed, settled else { return nil }
        changed = false
        return position
    }
}
