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
// is kept as it is), so recording costs a copy and no allocation; a chunk is
// freed with the last entry in it, so memory stays within the byte bound
// plus two chunks. A replay adds its `replayed` flag to a copy. This is on
// every publish's path: keep `record` free of hashing and of String retains
// (the type is located inside the frame instead).

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
    /// Where the type's bytes sit inside the frame.
    let typeStart: Int32
    let typeCount: Int32

    /// The frame's bytes (valid while the entry lives).
    @inline(__always)
    var frame: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: chunk.baseAddress + Int(start), count: Int(count))
    }

    /// The type's bytes (valid while the entry lives).
    @inline(__always)
    var typeBytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: chunk.baseAddress + Int(start) + Int(typeStart), count: Int(typeCount))
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

    /// Records the event that just took `seq` (the next after the newest
    /// held), its frame copied into the arena unless it comes in a chunk of
    /// its own (`shared`, from offset 0); nil when history is off. Evicts
    /// the oldest entries to stay within both bounds.
    /// - Parameters:
    ///   - publisher: the publishing connection, 0 for the broker's own events.
    ///   - typeStart: where the type's bytes start in the frame; `typeCount` their length.
    @inline(__always)
    mutating func record(_ event: EventFrame?, seq: UInt64, publisher: ConnectionID, typeStart: Int, typeCount: Int) {
        guard let event, isEnabled, event.count <= maxBytes else {
            if count > 0 { removeAll() }
            lostThrough = seq
            return
        }
        let size = event.count
        let chunk: OutboundChunk
        let start: Int
        if let shared = event.shared, shared.baseAddress == UnsafeMutableRawPointer(mutating: event.bytes.baseAddress!) {
            chunk = shared
            start = 0
        } else {
            if arena == nil || arena!.freeBytes < size { arena = OutboundChunk.make(capacity: max(HistoryRing.arenaBytes, size)) }
            chunk = arena!
            start = chunk.used
            chunk.append(event.bytes)
        }
        let entry = HistoryEntry(seq: seq, chunk: chunk, start: Int32(start), count: Int32(size), publisher: publisher,
                                 typeStart: Int32(typeStart), typeCount: Int32(typeCount))
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
        storage[head] = HistoryEntry(seq: 0, chunk: placeholder, start: 0, count: 0, publisher: 0, typeStart: 0, typeCount: 0)
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
