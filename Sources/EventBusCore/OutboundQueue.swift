// Per-connection outbound queue: whole frames waiting to be written, with the
// byte accounting that the outbound limits, the fair share per publisher uid
// and the drop rules work on (PROTOCOL.md "Semantics", "Quotas (1.1)").
//
// Before editing: what is queued is what the broker holds, and the queue
// charges it so (`chargedBytes`: each frame not completely written at its
// full length, plus `entryOverheadBytes` per frame), so RSS follows the
// count: a partly written head frame keeps its chunk until its last byte is
// written, so it is charged whole until then (docs/PROTOCOL-NOTES.md
// "Quotas": memory counted as allocated). Small frames are
// copied into per-connection chunks (replies into one, events into another,
// so dropping events frees whole chunks and never leaves a chunk pinned by a
// reply); consecutive replies share one entry. What is held beyond the
// charge is bounded by the chunk sizes: only the oldest reply chunk and the
// oldest event chunk can hold written frames, and a tail's free room is part
// of the same chunk, so at most `chunkBytes + largeChunkBytes` (20 KiB) per
// queue. An event larger than `copyLimitBytes` is built once in a chunk of
// its own and shared by every subscriber's queue. The head frame may be
// partly written (`headOffset`); it is never dropped. drop-old leaves a
// dropped event's entry in place as a tombstone (`deadSeq`, no bytes, no
// chunk) and `eventScanFrom` marks where the oldest live event may be, so a
// drop costs O(1) however many replies are queued before it (issue 20);
// tombstones are squeezed out once they are half of what lies before that
// mark. Only `Broker.enqueue` grows a queue, so the broker's byte
// counts stay exact; every shrinking call returns the change of
// `chargedBytes` and hands back the fair-share charges it released.
//
// Raw memory (issue 35): this file owns the chunks' bytes, so pointers into
// them are made here only. The invariant: a pointer or span into a chunk is
// valid while a counted reference to the chunk is held (an entry, the
// broker's `builtChunk`, the caller's local); `EventFrame.bytes` lives no
// longer than the fan-out or the call it is made for. Everything outside
// gets bytes as `RawSpan`s (`withSpan`, `forEachReply`, `forEachEvent`,
// `forEachChunk`, `EventFrame.lending`) and gives bytes as spans (`appendReply`,
// `putNoticeInFront`, `OutboundChunk.copying`).
@_spi(Package) import EventBusProtocol

/// Bytes the broker keeps for writing: a chunk of frames copied back to back,
/// or one large event shared between queues. Its storage is inline (one heap
/// allocation) and stays put, so a gathered write can point into it; bytes
/// below `used` never change. The header keeps the capacity too, so asking
/// for the free space costs no `malloc_usable_size` (ManagedBuffer's
/// `capacity` asks the allocator each time).
package final class OutboundChunk: ManagedBuffer<ChunkHeader, UInt8> {
    /// An empty chunk of `capacity` bytes.
    static func make(capacity: Int) -> OutboundChunk {
        unsafeDowncast(OutboundChunk.create(minimumCapacity: max(capacity, 1)) { ChunkHeader(used: 0, capacity: $0.capacity) },
                       to: OutboundChunk.self)
    }

    /// A chunk that `write` fills with at most `capacity` bytes; `write`
    /// returns how many it wrote.
    static func make(capacity: Int, _ write: (UnsafeMutableRawPointer) -> Int) -> OutboundChunk {
        let chunk = make(capacity: capacity)
        let written = chunk.withUnsafeMutablePointerToElements { write(UnsafeMutableRawPointer($0)) }
        precondition(written <= capacity, "frame writer overran its buffer")
        chunk.header.used = written
        return chunk
    }

    /// Bytes in use, from the start.
    @inline(__always) var used: Int {
        get { header.used }
        set { header.used = newValue }
    }

    /// The first byte; valid for as long as the chunk is alive.
    @inline(__always) var baseAddress: UnsafeMutableRawPointer {
        withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0) }
    }

    /// Room left after `used`.
    @inline(__always) var freeBytes: Int { header.capacity - header.used }

    /// Appends `bytes` after `used` (the caller checked `freeBytes`).
    @inline(__always) func append(_ bytes: UnsafeRawBufferPointer) {
        if let source = bytes.baseAddress { (baseAddress + header.used).copyMemory(from: source, byteCount: bytes.count) }
        header.used += bytes.count
    }
}

/// An `OutboundChunk`'s header: bytes in use and the usable capacity.
package struct ChunkHeader {
    var used: Int
    var capacity: Int
}

extension OutboundChunk {
    /// A chunk holding a copy of `source` (one whole frame, LF included): a
    /// frame kept beyond its publish (retained events, the history ring) and
    /// queued by reference (`Broker.offer(_:seq:publisher:to:)` with a frame).
    package static func copying(_ source: UnsafeRawBufferPointer) -> OutboundChunk {
        let chunk = make(capacity: source.count)
        chunk.append(source)
        return chunk
    }

    /// `copying(_:)` of a span.
    package static func copying(_ source: RawSpan) -> OutboundChunk {
        source.withUnsafeBytes { copying($0) }
    }

    /// Calls `body` with its bytes in use as a span.
    @inline(__always)
    package func withSpan<R>(_ body: (RawSpan) -> R) -> R { body(bytes.bytes) }

    /// Its bytes in use (a whole frame for a chunk made by `copying`).
    package var count: Int { header.used }

    /// Its bytes, valid while the chunk is alive.
    package var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: baseAddress, count: header.used) }
}

/// An event frame as built once per publish: its bytes (valid during the
/// fan-out) and, for a large one, the chunk every queue shares.
///
/// A plain value: `shared` is not counted, so copying the frame through the
/// fan-out costs no retain or release. Whoever makes one keeps the chunk
/// alive while the frame is used (`EventWriter.builtChunk`, the caller's own
/// reference, `withExtendedLifetime`); a queue or the ring that keeps the
/// chunk takes its own reference.
struct EventFrame {
    let bytes: UnsafeRawBufferPointer
    /// The shared chunk, uncounted (Uncounted.swift; a null test is a pointer compare).
    let sharedChunk: Uncounted<OutboundChunk>?
    /// Where the type's bytes are in `bytes`, as the writer reported them
    /// (`FrameEncoder.WrittenEvent`); 0 and 0 for a frame offered as it is
    /// (a stored or flagged copy), which the history ring never records.
    let typeOffset: UInt8
    let typeCount: UInt8

    /// A frame that is a whole chunk (a retained or large event), queued by reference.
    init(chunk: OutboundChunk, typeOffset: Int = 0, typeCount: Int = 0) {
        self.init(bytes: chunk.bytes, shared: chunk, typeOffset: typeOffset, typeCount: typeCount)
    }

    /// Calls `body` with a frame of `bytes` (offered by copy, not shared), valid during the call.
    static func lending<R>(_ bytes: [UInt8], _ body: (EventFrame) -> R) -> R {
        bytes.withUnsafeBytes { body(EventFrame(bytes: $0, shared: nil)) }
    }

    /// Calls `body` with the frame's bytes as a span.
    @inline(__always)
    func withSpan<R>(_ body: (RawSpan) -> R) -> R { body(bytes.bytes) }

    init(bytes: UnsafeRawBufferPointer, shared: OutboundChunk?, typeOffset: Int = 0, typeCount: Int = 0) {
        self.bytes = bytes
        self.sharedChunk = shared.map { Uncounted($0) }
        // A type is at most 255 bytes, its offset at most 49 (`FrameEncoder.writeEvent`);
        // `HistoryEntry.typeBytes` stays within the frame whatever these say.
        self.typeOffset = UInt8(truncatingIfNeeded: typeOffset)
        self.typeCount = UInt8(truncatingIfNeeded: typeCount)
    }

    /// The shared chunk as a counted reference (for a queue or the ring that keeps it).
    var shared: OutboundChunk? { sharedChunk?.object }

    var count: Int { bytes.count }
}

/// A fair-share charge released from a queue: `bytes` (frame bytes plus the
/// entry overhead) that publisher uid `actor` held in it.
struct ActorCharge {
    var actor: UInt32
    var bytes: Int
}

/// A FIFO of frames with `seq` tags (0 = not an event: replies and notices,
/// which are never dropped).
package struct OutboundQueue {
    struct Entry {
        fileprivate(set) var chunk: OutboundChunk
        fileprivate(set) var start: UInt32
        fileprivate(set) var end: UInt32
        /// The event's seq; 0 for replies and notices; `frontNoticeSeq` for a
        /// drop-old `dropped` notice placed first in line.
        fileprivate(set) var seq: UInt64
        /// The publisher uid charged for the fair share, or `noActor`.
        fileprivate(set) var actor: UInt32
        /// The event's type in `TypeCounters` (in what was padding), or `TypeCounters.none`.
        fileprivate(set) var typeRef: TypeCounters.Ref = TypeCounters.none

        var length: Int { Int(end &- start) }
        var isEvent: Bool { seq != 0 && seq < OutboundQueue.deadSeq }
        var isDead: Bool { seq == OutboundQueue.deadSeq }

        /// A dropped event's place: no bytes, no chunk of its own.
        static var dead: Entry { Entry(chunk: OutboundQueue.deadChunk, start: 0, end: 0, seq: OutboundQueue.deadSeq, actor: OutboundQueue.noActor) }
    }

    /// Charged per queued frame on top of its bytes: its entry here (32 bytes)
    /// and its share of the chunk headers.
    package static let entryOverheadBytes = 32
    /// Events up to this size are copied into each queue's own chunk; larger
    /// ones are shared.
    static let copyLimitBytes = 2048
    /// Capacity of a chunk for small frames.
    static let chunkBytes = 4096
    /// Capacity of an event chunk once the queue holds at least this much:
    /// a busy queue allocates a quarter as often (case 2 at 1 KiB spent a
    /// third of its instructions in malloc and free), while a chunk is never
    /// more than the bytes already queued, so RSS still follows the charge.
    static let largeChunkBytes = 16_384
    /// `Entry.actor` of a charge outside every fair share (replies, notices,
    /// events of exempt publishers).
    static let noActor = UInt32.max
    static let frontNoticeSeq = UInt64.max
    /// `Entry.seq` of a dropped event's tombstone.
    static let deadSeq = UInt64.max - 1
    /// The chunk tombstones point at (so a dropped event holds no chunk).
    nonisolated(unsafe) static let deadChunk = OutboundChunk.make(capacity: 1)
    /// Largest `dropped` notice: `{"op":"dropped","count":<20 digits>,"since_seq":<20 digits>}\n`.
    static let dropNoticeMaxBytes = 80

    fileprivate(set) var entries: [Entry] = []
    fileprivate(set) var head = 0
    /// Bytes of the head frame already written.
    fileprivate(set) var headOffset = 0
    /// Bytes queued and not yet written.
    package private(set) var byteCount = 0
    /// The chunks small replies and small events are appended to.
    fileprivate(set) var replyTail: OutboundChunk?
    fileprivate(set) var eventTail: OutboundChunk?
    /// count and since_seq of the notice at `frontPosition` when its seq is `frontNoticeSeq`.
    fileprivate(set) var frontNoticeCount: UInt64 = 0
    fileprivate(set) var frontNoticeSince: UInt64 = 0
    /// Entries with an actor (so releases look for fair-share charges only then).
    fileprivate(set) var actorEntries = 0
    /// Tombstones of dropped events at or after `head` (all before `eventScanFrom`).
    fileprivate(set) var deadEntries = 0
    /// No live event lies before this index (from `head`): where drop-old
    /// starts looking.
    fileprivate(set) var eventScanFrom = 0
    /// No tombstone lies at or after this index.
    fileprivate(set) var deadEnd = 0
    /// Entries drop-old looked at or moved, in all (tests check it is
    /// O(1) per dropped event).
    fileprivate(set) var dropWork = 0

    package init() {}

    package var isEmpty: Bool { head &+ deadEntries == entries.count }

    /// Frames queued and not completely written.
    package var frameCount: Int { entries.count - head - deadEntries }

    /// What the queue holds as the broker counts it: the frames not
    /// completely written at their full length (a partly written head frame
    /// keeps its chunk, so its written bytes count too) plus
    /// `entryOverheadBytes` per frame (`queued_bytes`, and what the outbound
    /// limits compare).
    package var chargedBytes: Int { byteCount + headOffset + (entries.count - head - deadEntries) * OutboundQueue.entryOverheadBytes }

    // MARK: Growing (only `Broker.enqueue` calls these)

    /// Queues a reply or notice (seq 0): copied into the reply chunk, sharing
    /// the last entry when it ends where this one starts.
    /// - Returns: the change of `chargedBytes`.
    mutating func appendReply(_ bytes: RawSpan) -> Int {
        bytes.withUnsafeBytes { appendReply($0) }
    }

    private mutating func appendReply(_ bytes: UnsafeRawBufferPointer) -> Int {
        let n = bytes.count
        if n <= OutboundQueue.copyLimitBytes, let tail = replyTail, tail.freeBytes >= n,
           entries.count > head, entries[entries.count - 1].chunk === tail,
           Int(entries[entries.count - 1].end) == tail.used, entries[entries.count - 1].seq == 0 {
            tail.append(bytes)
            entries[entries.count - 1].end = UInt32(tail.used)
            byteCount += n
            return n
        }
        let chunk = appendCopy(bytes, tail: &replyTail)
        entries.append(Entry(chunk: chunk, start: UInt32(chunk.used - n), end: UInt32(chunk.used), seq: 0, actor: OutboundQueue.noActor))
        byteCount += n
        return n + OutboundQueue.entryOverheadBytes
    }

    /// Queues an event: copied into the event chunk, or the shared chunk of a large one.
    /// - Returns: the change of `chargedBytes`.
    @inline(__always)
    /// - Parameter typeRef: the event's type in `TypeCounters`, counted if it is dropped from here.
    mutating func appendEvent(_ frame: EventFrame, seq: UInt64, actor: UInt32, typeRef: TypeCounters.Ref = TypeCounters.none) -> Int {
        let n = frame.count
        if let shared = frame.sharedChunk {
            entries.append(Entry(chunk: shared.object, start: 0, end: UInt32(n), seq: seq, actor: actor, typeRef: typeRef))
        } else {
            if eventTail == nil || eventTail.unsafelyUnwrapped.freeBytes < n {
                let size = byteCount >= OutboundQueue.largeChunkBytes ? OutboundQueue.largeChunkBytes : OutboundQueue.chunkBytes
                eventTail = OutboundChunk.make(capacity: max(n, size))
            }
            // Uncounted while it is used here: `eventTail` keeps it; the entry takes the one count it needs.
            let start = Uncounted(eventTail.unsafelyUnwrapped).with { chunk in
                let start = chunk.used
                chunk.append(frame.bytes)
                return start
            }
            entries.append(Entry(chunk: eventTail.unsafelyUnwrapped, start: UInt32(start), end: UInt32(start &+ n), seq: seq, actor: actor, typeRef: typeRef))
        }
        if actor != OutboundQueue.noActor { actorEntries += 1 }
        byteCount += n
        return n + OutboundQueue.entryOverheadBytes
    }

    /// Copies `bytes` to the end of `tail`, starting a new chunk when it has
    /// no room (a frame over `copyLimitBytes` gets a chunk of its own).
    private func appendCopy(_ bytes: UnsafeRawBufferPointer, tail: inout OutboundChunk?) -> OutboundChunk {
        let n = bytes.count
        if n > OutboundQueue.copyLimitBytes {
            let own = OutboundChunk.make(capacity: n)
            own.append(bytes)
            return own
        }
        if tail == nil || tail!.freeBytes < n { tail = OutboundChunk.make(capacity: OutboundQueue.chunkBytes) }
        tail!.append(bytes)
        return tail!
    }

    // MARK: Writing

    /// Calls `body(bytes)` for up to `maxChunks` runs of unwritten bytes in
    /// order (the first may be the rest of a partly written frame; frames
    /// adjacent in one chunk come as one run). A run stays valid until the
    /// queue changes (its chunk is held by an entry): the server gathers the
    /// runs into one sendmsg(2) before it reports the write (`consume`).
    /// - Returns: how many runs were handed out.
    package func forEachChunk(maxChunks: Int, _ body: (RawSpan) -> Void) -> Int {
        var n = 0
        var i = head
        while i < entries.count && n < maxChunks {
            if entries[i].seq == OutboundQueue.deadSeq { i += 1; continue }
            let chunk = entries[i].chunk
            let start = Int(entries[i].start) + (i == head ? headOffset : 0)
            var end = Int(entries[i].end)
            i += 1
            while i < entries.count && entries[i].chunk === chunk && Int(entries[i].start) == end {
                end = Int(entries[i].end)
                i += 1
            }
            body(UnsafeRawBufferPointer(start: chunk.baseAddress + start, count: end - start).bytes)
            n += 1
        }
        return n
    }

    /// Marks `written` bytes as sent, releasing whole frames.
    /// - Parameter released: gets the fair-share charges of completed frames.
    /// - Returns: the change of `chargedBytes` (negative).
    mutating func consume(_ written: Int, released: inout [ActorCharge]) -> Int {
        let before = chargedBytes
        var left = written
        byteCount -= written
        while left > 0 || (deadEntries > 0 && head < entries.count && entries[head].seq == OutboundQueue.deadSeq) {
            let remainingInHead = entries[head].length - headOffset
            if left >= remainingInHead {
                left -= remainingInHead
                if deadEntries > 0 && entries[head].seq == OutboundQueue.deadSeq { deadEntries -= 1 }
                release(entries[head], into: &released)
                head += 1
                headOffset = 0
            } else {
                headOffset += left
                left = 0
            }
        }
        compactIfNeeded()
        return chargedBytes - before
    }

    @inline(__always)
    private mutating func release(_ entry: Entry, into released: inout [ActorCharge]) {
        guard entry.actor != OutboundQueue.noActor else { return }
        actorEntries -= 1
        released.append(ActorCharge(actor: entry.actor, bytes: entry.length + OutboundQueue.entryOverheadBytes))
    }

    mutating func compactIfNeeded() {
        if head &+ deadEntries == entries.count {
            entries.removeAll(keepingCapacity: entries.capacity <= 64)
            head = 0
            headOffset = 0
            deadEntries = 0
            eventScanFrom = 0
            deadEnd = 0
            // Nothing left to write: give the chunks back (an idle connection holds none).
            replyTail = nil
            eventTail = nil
        } else if head >= 1024 && head * 2 >= entries.count {
            entries.removeFirst(head)
            eventScanFrom = max(0, eventScanFrom - head)
            deadEnd = max(0, deadEnd - head)
            head = 0
        }
    }

    // MARK: Dropping

    /// `dropOldestEvents` without the types of the dropped events.
    mutating func dropOldestEvents(untilAtMost target: Int, actor: UInt32? = nil, scanLimit: Int = .max,
                                   released: inout [ActorCharge]) -> (count: UInt64, firstSeq: UInt64, delta: Int) {
        var types: [TypeCounters.Ref] = []
        return dropOldestEvents(untilAtMost: target, actor: actor, scanLimit: scanLimit, released: &released, droppedTypes: &types)
    }

    /// Drops the oldest whole, unwritten event frames (of publisher uid
    /// `actor` only, when given) until `chargedBytes <= target`, looking at
    /// no more than `scanLimit` entries. Replies and notices keep their order.
    /// - Parameters:
    ///   - released: gets the fair-share charges of dropped frames.
    ///   - droppedTypes: gets the `TypeCounters` slot of each dropped event that has one.
    /// - Returns: how many events were dropped, the seq of the first, and the
    ///   change of `chargedBytes` (negative or 0).
    mutating func dropOldestEvents(untilAtMost target: Int, actor: UInt32? = nil, scanLimit: Int = .max,
                                   released: inout [ActorCharge], droppedTypes: inout [TypeCounters.Ref]) -> (count: UInt64, firstSeq: UInt64, delta: Int) {
        let before = chargedBytes
        var charged = before
        let start = frontPosition  // never drop a partly written frame
        // Nothing before `eventScanFrom` is a live event: start there.
        var i = max(start, eventScanFrom)
        let scanStart = i
        var dropped: UInt64 = 0
        var firstSeq: UInt64 = 0
        var firstSkipped = -1  // the first live event left (of another actor)
        while charged > target && i < entries.count && i - scanStart < scanLimit {
            let entry = entries[i]
            if entry.isEvent {
                if actor == nil || entry.actor == actor {
                    if dropped == 0 { firstSeq = entry.seq }
                    dropped += 1
                    if entry.typeRef != TypeCounters.none { droppedTypes.append(entry.typeRef) }
                    byteCount -= entry.length
                    charged -= entry.length + OutboundQueue.entryOverheadBytes
                    release(entry, into: &released)
                    entries[i] = Entry.dead  // its chunk reference goes now
                    deadEntries += 1
                    deadEnd = max(deadEnd, i + 1)
                } else if firstSkipped < 0 {
                    firstSkipped = i
                }
            }
            i += 1
        }
        dropWork += i - scanStart
        if firstSkipped < 0 { eventScanFrom = max(eventScanFrom, i) } else { eventScanFrom = max(eventScanFrom, firstSkipped) }
        guard dropped > 0 else { return (0, 0, 0) }
        squeezeTombstones()
        compactIfNeeded()
        return (dropped, firstSeq, chargedBytes - before)
    }

    /// Once tombstones are half of the entries from the front to the last
    /// of them (and 64 or more), moves the live entries there (replies,
    /// notices, events of other actors, the partly written head) up against
    /// the last tombstone, in order, and frees the slots left in front:
    /// O(entries moved), at most twice the tombstones removed.
    mutating func squeezeTombstones() {
        let start = frontPosition
        guard deadEntries >= 64, deadEntries * 2 >= deadEnd - start else { return }
        dropWork += deadEnd - start
        var w = deadEnd, r = deadEnd
        var scanFrom = eventScanFrom >= deadEnd ? eventScanFrom : -1
        while r > start {
            r -= 1
            if !entries[r].isDead {
                w -= 1
                if w != r { entries[w] = entries[r] }
            }
            if r == eventScanFrom { scanFrom = w }
        }
        eventScanFrom = scanFrom < 0 ? w : scanFrom
        if headOffset > 0 {
            w -= 1
            entries[w] = entries[head]
        }
        for j in head..<w { entries[j] = Entry.dead }  // before `head`: not counted
        head = w
        deadEntries = 0
        deadEnd = 0
    }

    /// Where a `dropped` notice placed by drop-old stands: first in line,
    /// after a partly written frame.
    var frontPosition: Int { headOffset > 0 ? head + 1 : head }

    /// The unwritten `dropped` notice first in line, if one was placed there
    /// by `putNoticeInFront`: its count and since_seq (so a later drop can
    /// merge into it).
    var noticeInFront: (count: UInt64, since: UInt64)? {
        let position = frontPosition
        guard position < entries.count, entries[position].seq == OutboundQueue.frontNoticeSeq else { return nil }
        return (frontNoticeCount, frontNoticeSince)
    }

    /// Puts a `dropped` notice where the dropped events were: first in line
    /// after a partly written frame (PROTOCOL.md "Semantics": the notice comes
    /// before the next event), replacing the notice already there if
    /// `noticeInFront` is not nil. Call right after `dropOldestEvents`; only
    /// `Broker.enqueue` calls it.
    /// - Returns: the change of `chargedBytes`.
    mutating func putNoticeInFront(_ bytes: RawSpan, count: UInt64, since: UInt64) -> Int {
        bytes.withUnsafeBytes { putNoticeInFront($0, count: count, since: since) }
    }

    private mutating func putNoticeInFront(_ bytes: UnsafeRawBufferPointer, count: UInt64, since: UInt64) -> Int {
        let chunk = OutboundChunk.make(capacity: bytes.count)
        chunk.append(bytes)
        let notice = Entry(chunk: chunk, start: 0, end: UInt32(bytes.count), seq: OutboundQueue.frontNoticeSeq, actor: OutboundQueue.noActor)
        frontNoticeCount = count
        frontNoticeSince = since
        let position = frontPosition
        if position < entries.count, entries[position].seq == OutboundQueue.frontNoticeSeq {
            let delta = bytes.count - entries[position].length
            byteCount += delta
            entries[position] = notice
            return delta
        }
        if position < entries.count, entries[position].isDead {
            // The first dropped event's place.
            entries[position] = notice
            deadEntries -= 1
        } else if head > 0 {
            // Dropping freed the slots before `head`: step back into one.
            if headOffset > 0 {
                entries[head - 1] = entries[head]
                entries[head] = notice
            } else {
                entries[head - 1] = notice
            }
            head -= 1
        } else {
            entries.insert(notice, at: position)
            eventScanFrom += 1
            if deadEnd > position { deadEnd += 1 }
        }
        byteCount += bytes.count
        return bytes.count + OutboundQueue.entryOverheadBytes
    }

    /// Releases every queued frame.
    /// - Parameter released: gets the fair-share charges still held.
    /// - Returns: the change of `chargedBytes`.
    mutating func removeAll(released: inout [ActorCharge]) -> Int {
        let before = chargedBytes
        if actorEntries > 0 {
            for i in head..<entries.count { release(entries[i], into: &released) }
        }
        entries.removeAll()
        head = 0
        headOffset = 0
        byteCount = 0
        actorEntries = 0
        deadEntries = 0
        eventScanFrom = 0
        deadEnd = 0
        replyTail = nil
        eventTail = nil
        return -before
    }
}

extension OutboundChunk {
    /// A copy of this event frame whose `seq` is `seq` (every other byte
    /// kept). The frame starts `{"op":"event","seq":<digits>,` as
    /// `FrameEncoder.writeEvent` writes it.
    func withSeq(_ seq: UInt64) -> OutboundChunk {
        let head = eventSeqOffset
        var digitsEnd = head
        while digitsEnd < count && (baseAddress + digitsEnd).load(as: UInt8.self) != 0x2C { digitsEnd += 1 }
        var digits: [UInt8] = []
        FrameEncoder.appendInt(seq, to: &digits)
        let rest = count - digitsEnd
        return OutboundChunk.make(capacity: head + digits.count + rest) { destination in
            destination.copyMemory(from: baseAddress, byteCount: head)
            digits.withUnsafeBytes { (destination + head).copyMemory(from: $0.baseAddress!, byteCount: digits.count) }
            (destination + head + digits.count).copyMemory(from: baseAddress + digitsEnd, byteCount: rest)
            return head + digits.count + rest
        }
    }

    /// Where the digits of `seq` start in an event frame: after `{"op":"event","seq":`.
    var eventSeqOffset: Int { 20 }
}

extension OutboundQueue {
    /// Calls `body(bytes)` for each reply or notice queued (not an event),
    /// in order: every one not completely written, or (`unwrittenOnly`)
    /// every one of which no byte was written.
    func forEachReply(unwrittenOnly: Bool, _ body: (RawSpan) -> Void) {
        var i = unwrittenOnly ? frontPosition : head
        while i < entries.count {
            let entry = entries[i]
            i += 1
            guard entry.seq == 0 else { continue }
            body(UnsafeRawBufferPointer(start: entry.chunk.baseAddress + Int(entry.start), count: entry.length).bytes)
        }
    }

    /// Calls `body(seq, bytes, actor)` for each event queued, in order:
    /// every one not completely written, or (`unwrittenOnly`) every one of
    /// which no byte was written.
    func forEachEvent(unwrittenOnly: Bool, _ body: (UInt64, RawSpan, UInt32) -> Void) {
        var i = unwrittenOnly ? frontPosition : head
        while i < entries.count {
            let entry = entries[i]
            i += 1
            guard entry.isEvent else { continue }
            entry.withSpan { body(entry.seq, $0, entry.actor) }
        }
    }
}

extension OutboundQueue.Entry {
    /// Calls `body` with the entry's frame as a span (valid while `chunk` is, which the entry holds).
    @inline(__always)
    func withSpan<R>(_ body: (RawSpan) -> R) -> R {
        body(UnsafeRawBufferPointer(start: chunk.baseAddress + Int(start), count: length).bytes)
    }
}
