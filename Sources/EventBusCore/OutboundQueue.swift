// Per-connection outbound queue: whole frames waiting to be written, with the
// byte accounting that the outbound limit and the drop rules work on
// (PROTOCOL.md "Semantics").
//
// Before editing: an event frame is built once per publish and shared by every
// subscriber's queue (reference counted), so fan-out copies no bytes. The head
// frame may be partly written (`headOffset`); it is never dropped. Only
// `Broker.enqueue` grows a queue (`append`, `putNoticeInFront`), so the
// broker's byte counts stay exact.

import EventBusProtocol

/// An immutable frame whose bytes live inline in the object (one heap
/// allocation per frame) and stay put for its lifetime, so a gathered write
/// can point at them. Shared between the queues of every subscriber.
public final class OutboundFrame: ManagedBuffer<Int, UInt8> {
    /// Creates a frame of at most `capacity` bytes that `write` fills; `write`
    /// returns how many bytes it wrote.
    public static func make(capacity: Int, _ write: (UnsafeMutableRawPointer) -> Int) -> OutboundFrame {
        let frame = unsafeDowncast(OutboundFrame.create(minimumCapacity: max(capacity, 1)) { _ in 0 }, to: OutboundFrame.self)
        let written = frame.withUnsafeMutablePointerToElements { write(UnsafeMutableRawPointer($0)) }
        precondition(written <= capacity, "frame writer overran its buffer")
        frame.header = written
        return frame
    }

    /// A frame holding a copy of `source` (one whole frame, LF included).
    public static func copying(_ source: UnsafeRawBufferPointer) -> OutboundFrame {
        make(capacity: source.count) { destination in
            if let base = source.baseAddress { destination.copyMemory(from: base, byteCount: source.count) }
            return source.count
        }
    }

    /// The frame's length in bytes.
    @inline(__always) public var count: Int { header }

    /// The first byte. The storage is inline in this object, so the pointer
    /// stays valid for as long as the frame is alive (held by a queue).
    @inline(__always) public var baseAddress: UnsafeRawPointer {
        withUnsafeMutablePointerToElements { UnsafeRawPointer($0) }
    }
}

/// A FIFO of frames with `seq` tags (0 = not an event: replies and notices,
/// which are never dropped).
public struct OutboundQueue {
    struct Entry {
        var frame: OutboundFrame
        var seq: UInt64
        /// For a `dropped` notice placed by `putNoticeInFront`: its count and
        /// since_seq, so a later drop can merge into it. 0 otherwise.
        var noticeCount: UInt64 = 0
        var noticeSince: UInt64 = 0
    }

    var entries: [Entry] = []
    var head = 0
    /// Bytes of the head frame already written.
    var headOffset = 0
    /// Bytes queued and not yet written.
    public private(set) var byteCount = 0

    public init() {}

    public var isEmpty: Bool { head == entries.count }

    /// Queues a frame at the back. `seq` is the event's seq, or 0 for a reply
    /// or notice. Only `Broker.enqueue` calls it.
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
                body(frame.baseAddress + headOffset, frame.count - headOffset)
            } else {
                body(frame.baseAddress, frame.count)
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
        // Release dropped frames now rather than at the next compaction: the
        // dead slots borrow a live frame (or vanish below when none is left).
        if w < entries.count {
            let live = entries[w].frame
            for j in head..<w { entries[j].frame = live }
        }
        head = w
        compactIfNeeded()
        return (dropped, firstSeq, freed)
    }


    /// Where a `dropped` notice placed by drop-old stands: first in line,
    /// after a partly written frame.
    var frontPosition: Int { headOffset > 0 ? head + 1 : head }

    /// The unwritten `dropped` notice first in line, if one was placed there
    /// by `putNoticeInFront`: its count and since_seq (so a later drop can
    /// merge into it).
    var noticeInFront: (count: UInt64, since: UInt64)? {
        let position = frontPosition
        guard position < entries.count, entries[position].noticeCount > 0 else { return nil }
        return (entries[position].noticeCount, entries[position].noticeSince)
    }

    /// Puts a `dropped` notice where the dropped events were: first in line
    /// after a partly written frame (PROTOCOL.md "Semantics": the notice comes
    /// before the next event), replacing the notice already there if
    /// `noticeInFront` is not nil. Call right after `dropOldestEvents`; only
    /// `Broker.enqueue` calls it.
    mutating func putNoticeInFront(_ frame: OutboundFrame, count: UInt64, since: UInt64) {
        let position = frontPosition
        let notice = Entry(frame: frame, seq: 0, noticeCount: count, noticeSince: since)
        if position < entries.count, entries[position].noticeCount > 0 {
            byteCount += frame.count - entries[position].frame.count
            entries[position] = notice
            return
        }
        if head > 0 {
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
        }
        byteCount += frame.count
    }

    /// Largest `dropped` notice: `{"op":"dropped","count":<20 digits>,"since_seq":<20 digits>}\n`.
    static let dropNoticeMaxBytes = 80

    /// Releases every queued frame.
    mutating func removeAll() {
        entries.removeAll()
        head = 0
        headOffset = 0
        byteCount = 0
    }
}
