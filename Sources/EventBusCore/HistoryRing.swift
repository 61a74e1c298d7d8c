// The history ring (PROTOCOL.md "Retained events and history (1.1)"): the
// newest events the broker accepted, whether or not anyone received them,
// bounded in count (`--history-events`, 10,000) and bytes
// (`--history-bytes`, 16 MiB), for `subscribe` with `since`.
//
// Before editing: the ring holds consecutive seqs, always: every event that
// takes a seq is recorded (`record`), or, when history is off or the event
// alone is larger than the byte bound, the whole ring is emptied and the seq
// counted lost (`lostThrough`). So the entry of seq S is at index
// `S - firstSeq` and no search is needed. Entries share the event frame the
// subscribers' queues hold (no copy); a replay adds its `replayed` flag to a
// copy. This is on every publish's path: keep `record` free of hashing and
// of String retains (the type is located inside the frame instead).

/// One recorded event.
struct HistoryEntry {
    let seq: UInt64
    /// The event frame as delivered live (`{"op":"event","seq":...}\n`).
    let frame: OutboundFrame
    /// The connection that published it (for the no-echo rule).
    let publisher: ConnectionID
    /// Where the type's bytes sit inside `frame`.
    let typeStart: Int32
    let typeCount: Int32

    /// The type's bytes (valid while the entry's frame lives).
    @inline(__always)
    var typeBytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: frame.baseAddress + Int(typeStart), count: Int(typeCount))
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
    /// What an emptied slot holds, so the evicted frame is released at once.
    private let placeholder = OutboundFrame.make(capacity: 1) { _ in 0 }

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
    /// held); `entry` is nil when history is off. Evicts the oldest entries
    /// to stay within both bounds.
    @inline(__always)
    mutating func record(_ entry: HistoryEntry?, seq: UInt64) {
        guard let entry, isEnabled, entry.frame.count <= maxBytes else {
            if count > 0 { removeAll() }
            lostThrough = seq
            return
        }
        let size = entry.frame.count
        if count == maxEvents && byteCount - storage[head].frame.count + size <= maxBytes {
            // Full by count (the steady state): the new entry takes the oldest's slot.
            byteCount += size - storage[head].frame.count
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
        byteCount -= old.frame.count
        lostThrough = old.seq
        storage[head] = HistoryEntry(seq: 0, frame: placeholder, publisher: 0, typeStart: 0, typeCount: 0)
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
        head = 0
        count = 0
        byteCount = 0
    }
}
