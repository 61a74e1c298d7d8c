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
// into 64 KiB chunks of the ring's own (arenas; a large event's shared chunk
// is kept as it is), so recording costs no allocation, and no copy when the
// broker wrote the event in place (`space(for:)`, then `record` finds it at
// the arena's end). Entries are plain values (a pointer, no reference
// count per event): the ring keeps its chunks in two FIFOs of their own,
// arenas with the newest seq in each and shared chunks with their seq, and
// lets a chunk go once the oldest held seq is past it, so memory stays
// within the byte bound plus two arenas. A replay adds its `replayed` flag
// to a copy. This is on every publish's path: keep `record` free of
// hashing, reference counts and String work (an entry keeps where its writer
// put the type, `FrameEncoder.WrittenEvent`, and only a replay asks).
//
// Raw memory (issue 35): this file owns the arenas, and an entry's `start`
// points into one of the ring's chunks: valid while the entry is in the
// ring (the chunk is released only once the oldest seq is past it). Other
// files read an entry's bytes as spans (`withFrame`, `withTypeBytes`), only
// during the call.

/// One recorded event: a plain value, its bytes kept by the ring's chunks.
struct HistoryEntry {
    let seq: UInt64
    /// The event frame as delivered live (`{"op":"event","seq":...}\n`).
    let start: UnsafeRawPointer
    let count: Int32
    /// Where the type's bytes are in the frame, as its writer reported them
    /// (`EventFrame.typeOffset`, from `FrameEncoder.WrittenEvent`).
    let typeOffset: UInt8
    let typeCount: UInt8
    /// The connection that published it (for the no-echo rule; 0: the broker).
    let publisher: ConnectionID

    /// The frame's bytes (valid while the entry is in the ring, or a copy of the ring is alive).
    @inline(__always)
    var frame: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: start, count: Int(count)) }

    /// The type's bytes (valid as `frame`), where the writer put them.
    var typeBytes: UnsafeRawBufferPointer {
        let offset = min(Int(typeOffset), Int(count))
        return UnsafeRawBufferPointer(start: start + offset, count: min(Int(typeCount), Int(count) - offset))
    }

    /// Calls `body` with the type's bytes (`typeBytes`) as a span.
    @inline(__always)
    func withTypeBytes<R>(_ body: (RawSpan) -> R) -> R { body(typeBytes.bytes) }

    /// Calls `body` with the frame's bytes as a span.
    @inline(__always)
    func withFrame<R>(_ body: (RawSpan) -> R) -> R { body(frame.bytes) }
}

/// A chunk the ring keeps, and the newest seq whose frame is in it.
private struct HeldChunk {
    /// nil once released (until the FIFO is compacted).
    var chunk: OutboundChunk?
    var lastSeq: UInt64
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
    /// The arenas frames are copied (or written) into, oldest first; the
    /// last one is the one in use (`arena`). From `arenaHead` on.
    private var arenas: [HeldChunk] = []
    private var arenaHead = 0
    /// Shared chunks of large events, in seq order. From `sharedHead` on.
    private var shared: [HeldChunk] = []
    private var sharedHead = 0
    /// The arena in use (also the last of `arenas`, which keeps it), uncounted (Uncounted.swift).
    private var arena: Uncounted<OutboundChunk>? = nil
    static let arenaBytes = 64 << 10

    /// Whether events are kept at all (both bounds above 0).
    let isEnabled: Bool

    init(maxEvents: Int, maxBytes: Int) {
        self.maxEvents = max(0, maxEvents)
        self.maxBytes = max(0, maxBytes)
        isEnabled = maxEvents > 0 && maxBytes > 0
    }

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
        if arena == nil || arena.unsafelyUnwrapped.with({ $0.freeBytes < bound }) { newArena(bound) }
        return arena.unsafelyUnwrapped.with { $0.baseAddress + $0.used }
    }

    /// Starts a new arena of at least `bytes`.
    private mutating func newArena(_ bytes: Int) {
        let chunk = OutboundChunk.make(capacity: max(HistoryRing.arenaBytes, bytes))
        arenas.append(HeldChunk(chunk: chunk, lastSeq: 0))
        arena = Uncounted(chunk)
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
            if count > 0 || !arenas.isEmpty || !shared.isEmpty { removeAll() }
            lostThrough = seq
            return
        }
        let size = event.count
        let at = event.bytes.baseAddress.unsafelyUnwrapped
        if let tail = arena, tail.with({ tail in
            guard UnsafeRawPointer(tail.baseAddress + tail.used) == at else { return false }
            tail.used += size  // written in place by the broker (`space(for:)`)
            return true
        }) {
            arenas[arenas.count - 1].lastSeq = seq
        } else if let chunk = event.sharedChunk, chunk.with({ UnsafeRawPointer($0.baseAddress) == at }) {
            shared.append(HeldChunk(chunk: chunk.object, lastSeq: seq))
        } else {
            if arena == nil || arena.unsafelyUnwrapped.with({ $0.freeBytes < size }) { newArena(size) }
            arena.unsafelyUnwrapped.with { $0.append(event.bytes) }
            arenas[arenas.count - 1].lastSeq = seq
            return finishRecord(HistoryEntry(seq: seq, start: arena.unsafelyUnwrapped.with { UnsafeRawPointer($0.baseAddress + $0.used - size) },
                                             count: Int32(size), typeOffset: event.typeOffset, typeCount: event.typeCount, publisher: publisher))
        }
        finishRecord(HistoryEntry(seq: seq, start: at, count: Int32(size), typeOffset: event.typeOffset, typeCount: event.typeCount, publisher: publisher))
    }

    @inline(__always)
    private mutating func finishRecord(_ entry: HistoryEntry) {
        let size = Int(entry.count)
        if count == maxEvents && byteCount - Int(storage[head].count) + size <= maxBytes {
            // Full by count (the steady state): the new entry takes the oldest's slot.
            let old = storage[head].seq
            byteCount += size - Int(storage[head].count)
            lostThrough = old
            storage[head] = entry
            head += 1
            if head == storage.count { head = 0 }
            releaseChunks(through: old)
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

    /// Chunks the ring keeps alive now (arenas and shared chunks; for the tests' bound).
    var heldChunks: Int {
        arenas[arenaHead...].filter { $0.chunk != nil }.count + shared[sharedHead...].filter { $0.chunk != nil }.count
    }

    /// The index of the first entry with a seq above `seq` (`count` when none).
    func index(after seq: UInt64) -> Int {
        guard let first = firstSeq else { return 0 }
        if seq < first { return 0 }
        return Int(min(UInt64(count), seq - first + 1))
    }

    private mutating func evictOldest() {
        let old = storage[head].seq
        byteCount -= Int(storage[head].count)
        lostThrough = old
        head += 1
        if head == storage.count { head = 0 }
        count -= 1
        if count == 0 { head = 0 }
        releaseChunks(through: old)
    }

    /// Lets go of the chunks that hold no frame after seq `old` (the arena
    /// in use stays).
    @inline(__always)
    private mutating func releaseChunks(through old: UInt64) {
        if sharedHead < shared.count && shared[sharedHead].lastSeq <= old { releaseShared(through: old) }
        if arenaHead < arenas.count - 1 && arenas[arenaHead].lastSeq <= old { releaseArenas(through: old) }
    }

    private mutating func releaseShared(through old: UInt64) {
        while sharedHead < shared.count && shared[sharedHead].lastSeq <= old {
            shared[sharedHead].chunk = nil
            sharedHead += 1
        }
        if sharedHead == shared.count {
            shared.removeAll(keepingCapacity: true)
            sharedHead = 0
        } else if sharedHead >= 64 && sharedHead * 2 >= shared.count {
            shared.removeFirst(sharedHead)
            sharedHead = 0
        }
    }

    private mutating func releaseArenas(through old: UInt64) {
        while arenaHead < arenas.count - 1 && arenas[arenaHead].lastSeq <= old {
            arenas[arenaHead].chunk = nil
            arenaHead += 1
        }
        if arenaHead >= 16 && arenaHead * 2 >= arenas.count {
            arenas.removeFirst(arenaHead)
            arenaHead = 0
        }
    }

    /// Rotates the slots so the oldest is at index 0 (before growing).
    private mutating func linearize() {
        storage = Array(storage[head...] + storage[..<head])
        head = 0
    }

    private mutating func removeAll() {
        storage.removeAll()
        arenas.removeAll()
        arenaHead = 0
        shared.removeAll()
        sharedHead = 0
        arena = nil
        head = 0
        count = 0
        byteCount = 0
    }
}
