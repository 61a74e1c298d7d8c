// The history ring (PROTOCOL.md "Retained events and history (1.1)"): the
// newest events the broker accepted, whether or not anyone received them,
// bounded in count (`--history-events`, 10,000) and bytes
// (`--history-bytes`, 16 MiB), for `subscribe` with `since`.
//
// Before editing: the ring holds consecutive seqs, always: every event that
// takes a seq is recorded (`record`), or, when history is off or the event
// alone is larger than the byte bound, the whole ring is emptied and the seq
// counted lost (`lostThrough`). So the entry of seq S is at index
// `S - firstSeq` and no search is needed. The frames are copied back to back
// into 64 KiB chunks of the ring's own (`arena`; a large event's shared chunk
// is kept as it is), so recording costs no allocation, and no copy when the
// broker wrote the event in place (`space(for:)`, then `record` finds it at
// the arena's end); a chunk is freed with the last entry in it, so memory
// stays within the byte bound plus two chunks. A replay adds its `replayed`
// flag to a copy. This is on every publish's path: keep `record` free of
// hashing and of String work (an entry finds its type inside the frame, and
// only a replay asks).

/// One recorded event.
struct HistoryEntry {
    let seq: UInt64
    /// The chunk holding the event frame as delivered live
    /// (`{"op":"event","seq":...}\n`), at `start`, `count` bytes.
    let chunk: OutboundChunk
    let start: Int32
    let count: Int32
    /// The connection that published it (for the no-echo rule; 0: the broker).
    let publisher: ConnectionID

    /// The frame's bytes (valid while the entry lives).
    @inline(__always)
    var frame: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: chunk.baseAddress + Int(start), count: Int(count))
    }

    /// The type's bytes (valid while the entry lives), found in the frame:
    /// after `{"op":"event","seq":<digits>,"type":"` up to the next quote
    /// (`FrameEncoder.writeEvent`; a valid type has no quote or escape).
    var typeBytes: UnsafeRawBufferPointer {
        let frame = self.frame
        var i = 20  // {"op":"event","seq":
        while i < frame.count && frame[i] != 0x2C { i += 1 }
        i += 9  // ,"type":"
        var end = i
        while end < frame.count && frame[end] != 0x22 { end += 1 }
        return UnsafeRawBufferPointer(rebasing: frame[min(i, end)..<end])
    }
}

/// A FIFO of the newest events, bounded in count and bytes.
struct HistoryRing {
    let maxEvents: Int
    let maxBytes: Int
    /// Slots; grows up to `maxEvents`, then wraps.
    private var storage: [HistoryEntry] = []
    private var head = 0
    private(set) var count = 0
    /// Bytes of the frames held.
    private(set) var byteCount = 0
    /// The highest seq accepted in this run that the ring no longer holds
    /// (0: nothing lost yet). A replay since S has a gap when this is > S.
    private(set) var lostThrough: UInt64 = 0
    /// What an emptied slot holds, so the evicted frame's chunk is released.
    private let placeholder = OutboundChunk.make(capacity: 1)
    /// The chunk frames are copied into now.
    private var arena: OutboundChunk? = nil
    static let arenaBytes = 64 << 10

    init(maxEvents: Int, maxBytes: Int) {
        self.maxEvents = max(0, maxEvents)
        self.maxBytes = max(0, maxBytes)
    }

    /// Whether events are kept at all (both bounds above 0).
    var isEnabled: Bool { maxEvents > 0 && maxBytes > 0 }

    /// The oldest seq held, nil when empty.
    var firstSeq: UInt64? { count > 0 ? storage[head].seq : nil }

    /// The newest seq held, nil when empty.
    var lastSeq: UInt64? { count > 0 ? self[count - 1].seq : nil }

    /// The entry `i` places after the oldest.
    @inline(__always)
    subscript(i: Int) -> HistoryEntry {
        var slot = head + i
        if slot >= storage.count { slot -= storage.count }
        return storage[slot]
    }

    /// Where the broker may write the next event of at most `bound` bytes
    /// in place, at the arena's end (nil when history is off or the event
    /// may exceed the byte bound): `record` then keeps it without a copy.
    /// What is written there counts only once recorded.
    @inline(__always)
    mutating func space(for bound: Int) -> UnsafeMutableRawPointer? {
        guard isEnabled, bound <= maxBytes else { return nil }
        if arena == nil || arena.unsafelyUnwrapped.freeBytes < bound {
            arena = OutboundChunk.make(capacity: max(HistoryRing.arenaBytes, bound))
        }
        let chunk = arena.unsafelyUnwrapped
        return chunk.baseAddress + chunk.used
    }

    /// Records the event that just took `seq` (the next after the newest
    /// held): kept where it is when written in place (`space(for:)`) or in a
    /// chunk of its own (`shared`, from offset 0), else copied into the
    /// arena; nil when history is off. Evicts the oldest entries to stay
    /// within both bounds.
    /// - Parameter publisher: the publishing connection, 0 for the broker's own events.
    @inline(__always)
    mutating func record(_ event: EventFrame?, seq: UInt64, publisher: ConnectionID) {
        guard let event, isEnabled, event.count <= maxBytes else {
            if count > 0 { removeAll() }
            lostThrough = seq
            return
        }
        let size = event.count
        let chunk: OutboundChunk
        let start: Int
        let at = UnsafeMutableRawPointer(mutating: event.bytes.baseAddress.unsafelyUnwrapped)
        if arena != nil, let placed = Unmanaged.passUnretained(arena.unsafelyUnwrapped)._withUnsafeGuaranteedRef({ tail -> Int? in
            guard tail.baseAddress + tail.used == at else { return nil }
            tail.used += size
            return tail.used - size
        }) {
            // Written in place by the broker (`space(for:)`).
            chunk = arena.unsafelyUnwrapped
            start = placed
        } else if let shared = event.sharedChunk, shared._withUnsafeGuaranteedRef({ $0.baseAddress == at }) {
            chunk = shared.takeUnretainedValue()
            start = 0
        } else {
            if arena == nil || arena.unsafelyUnwrapped.freeBytes < size { arena = OutboundChunk.make(capacity: max(HistoryRing.arenaBytes, size)) }
            chunk = arena.unsafelyUnwrapped
            start = chunk.used
            chunk.append(event.bytes)
        }
        let entry = HistoryEntry(seq: seq, chunk: chunk, start: Int32(start), count: Int32(size), publisher: publisher)
        if count == maxEvents && byteCount - Int(storage[head].count) + size <= maxBytes {
            // Full by count (the steady state): the new entry takes the oldest's slot.
            byteCount += size - Int(storage[head].count)
            lostThrough = storage[head].seq
            storage[head] = entry
            head += 1
            if head == storage.count { head = 0 }
            return
        }
        while count > 0 && (count >= maxEvents || byteCount + size > maxBytes) { evictOldest() }
        if count == storage.count {
            if head != 0 { linearize() }
            storage.append(entry)
        } else {
            var slot = head + count
            if slot >= storage.count { slot -= storage.count }
            storage[slot] = entry
        }
        count += 1
        byteCount += size
    }

    /// The index of the first entry with a seq above `seq` (`count` when none).
    func index(after seq: UInt64) -> Int {
        guard let first = firstSeq else { return 0 }
        if seq < first { return 0 }
        return Int(min(UInt64(count), seq - first + 1))
    }

    private mutating func evictOldest() {
        let old = storage[head]
        byteCount -= Int(old.count)
        lostThrough = old.seq
        storage[head] = HistoryEntry(seq: 0, chunk: placeholder, start: 0, count: 0, publisher: 0)
        head += 1
        if head == storage.count { head = 0 }
        count -= 1
        if count == 0 { head = 0 }
    }

    /// Rotates the slots so the oldest is at index 0 (before growing).
    private mutating func linearize() {
        storage = Array(storage[head...] + storage[..<head])
        head = 0
    }

    private mutating func removeAll() {
        storage.removeAll()
        arena = nil
        head = 0
        count = 0
        byteCount = 0
    }
}
