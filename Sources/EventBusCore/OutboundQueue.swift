// Per-connection outbound queue: whole frames waiting to be written, with the
// byte accounting that the outbound limit and the drop rules work on
// (PROTOCOL.md "Semantics").
//
// Before editing: an event frame is built once per publish and shared by every
// subscriber's queue (reference counted), so fan-out copies no bytes. The head
// frame may be partly written (`headOffset`); it is never dropped.

/// An immutable, heap-allocated frame whose bytes stay put for its lifetime, so
/// a gathered write can point at them. Shared between queues.
///
/// `@unchecked Sendable`: the bytes are written once in `init` and only read
/// afterwards, and the buffer is freed only in `deinit`.
public final class OutboundFrame: @unchecked Sendable {
    public let bytes: UnsafeMutableRawBufferPointer

    /// Copies `source` (one whole frame, LF included).
    public init(copying source: UnsafeRawBufferPointer) {
        bytes = .allocate(byteCount: max(source.count, 1), alignment: 1)
        bytes.copyMemory(from: source)
        count = source.count
    }

    /// Allocates `capacity` bytes and lets `write` fill them; `write` returns
    /// how many it wrote (at most `capacity`).
    public init(capacity: Int, _ write: (UnsafeMutableRawPointer) -> Int) {
        bytes = .allocate(byteCount: max(capacity, 1), alignment: 1)
        count = write(bytes.baseAddress!)
        precondition(count <= capacity, "frame writer overran its buffer")
    }

    /// The frame's length in bytes.
    public let count: Int

    deinit { bytes.deallocate() }
}

/// A FIFO of frames with `seq` tags (0 = not an event: replies and notices,
/// which are never dropped).
public struct OutboundQueue {
    struct Entry {
        var frame: OutboundFrame
        var seq: UInt64
    }

    var entries: [Entry] = []
    var head = 0
    /// Bytes of the head frame already written.
    var headOffset = 0
    /// Bytes queued and not yet written.
    public private(set) var byteCount = 0

    public init() {}

    public var isEmpty: Bool { head == entries.count }

    /// Queues a frame. `seq` is the event's seq, or 0 for a reply or notice.
    mutating func append(_ frame: OutboundFrame, seq: UInt64) {
        entries.append(Entry(frame: frame, seq: seq))
        byteCount += frame.count
    }

    /// Calls `body(pointer, length)` for up to `maxChunks` unwritten chunks in
    /// order (the first may be the rest of a partly written frame).
    /// - Returns: how many chunks were handed out.
    public func forEachChunk(maxChunks: Int, _ body: (UnsafeRawPointer, Int) -> Void) -> Int {
        var n = 0
        var i = head
        while i < entries.count && n < maxChunks {
            let frame = entries[i].frame
            if i == head {
                body(UnsafeRawPointer(frame.bytes.baseAddress!) + headOffset, frame.count - headOffset)
            } else {
                body(UnsafeRawPointer(frame.bytes.baseAddress!), frame.count)
            }
            n += 1
            i += 1
        }
        return n
    }

    /// Marks `written` bytes as sent, releasing whole frames.
    mutating func consume(_ written: Int) {
        var left = written
        byteCount -= written
        while left > 0 {
            let remainingInHead = entries[head].frame.count - headOffset
            if left >= remainingInHead {
                left -= remainingInHead
                head += 1
                headOffset = 0
            } else {
                headOffset += left
                left = 0
            }
        }
        compactIfNeeded()
    }

    mutating func compactIfNeeded() {
        if head == entries.count {
            entries.removeAll(keepingCapacity: entries.count <= 1024)
            head = 0
        } else if head >= 1024 && head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// Drops the oldest whole, unwritten event frames until `byteCount <= target`
    /// or no droppable event is left. Replies and notices keep their order.
    /// - Returns: how many events were dropped, the seq of the first, and bytes freed.
    mutating func dropOldestEvents(untilAtMost target: Int) -> (count: UInt64, firstSeq: UInt64, bytes: Int) {
        var start = head
        if headOffset > 0 { start += 1 }  // never drop a partly written frame
        var i = start
        var kept: [Entry] = []
        var dropped: UInt64 = 0
        var firstSeq: UInt64 = 0
        var freed = 0
        while byteCount > target && i < entries.count {
            let entry = entries[i]
            if entry.seq != 0 {
                if dropped == 0 { firstSeq = entry.seq }
                dropped += 1
                byteCount -= entry.frame.count
                freed += entry.frame.count
            } else {
                kept.append(entry)
            }
            i += 1
        }
        guard dropped > 0 else { return (0, 0, 0) }
        // entries[start..<i] shrinks to `kept`, placed just before i; the partly
        // written head (if any) moves in front of them. O(dropped + kept).
        var w = i - kept.count
        for (k, entry) in kept.enumerated() { entries[w + k] = entry }
        if headOffset > 0 {
            w -= 1
            entries[w] = entries[head]
        }
        // Release dropped frames now rather than at the next compaction.
        let dead = OutboundQueue.placeholder
        for j in head..<w { entries[j].frame = dead }
        head = w
        compactIfNeeded()
        return (dropped, firstSeq, freed)
    }

    /// Stands in for released entries until the next compaction.
    static let placeholder = OutboundFrame(copying: UnsafeRawBufferPointer(start: nil, count: 0))

    /// Releases every queued frame.
    mutating func removeAll() {
        entries.removeAll()
        head = 0
        headOffset = 0
        byteCount = 0
    }
}
