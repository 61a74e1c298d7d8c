// Splits a byte stream into LF-terminated frames (PROTOCOL.md "Framing"):
// a CR before the LF is dropped, blank lines are skipped, a frame longer than
// the limit is discarded up to its LF and reported once, and at EOF a last
// frame without its LF is handled as if it had one.
//
// Before editing: complete frames inside a chunk are handed out in place (no
// copy); only an incomplete tail is copied into `pending`, and, when the
// callback stops early, the unread rest of the chunk (the backlog, handed out
// first by the next `feed`). Frames handed to the callback are valid only
// during the call. `heldBytes` is what the splitter holds in memory (the
// broker charges it to the connection's uid). Chunks come in and frames go
// out as `RawSpan`s; inside, `split` reads a `ByteView` of the chunk
// (ByteView.swift), each piece a checked range of it ending at the LF found.

/// One unit of input found by `FrameSplitter`.
/// One unit of input found by `FrameSplitter`. A span borrowed from the
/// chunk (or the splitter's buffer): it cannot outlive the callback.
@_spi(Package) public enum SplitFrame: ~Escapable {
    /// A frame's bytes, without LF and without a CR before it. Valid only during the callback.
    case frame(RawSpan)
    /// A frame longer than the limit was discarded; `bytes` is its length before the LF
    /// (at least `maxFrameBytes + 1`).
    case tooLarge(bytes: Int)
}

/// Per-connection framing state. Memory held: at most `maxFrameBytes + 1`
/// bytes of one incomplete frame, or the rest of one chunk after an early
/// stop (`hasBacklog`); nothing while idle.
@_spi(Package) public struct FrameSplitter {
    /// Largest frame accepted, in bytes before the LF/CRLF.
    @_spi(Package) public let maxFrameBytes: Int
    /// Bytes carried over from earlier chunks: an incomplete frame, or with
    /// `hasBacklog` unread input from `backlogStart` on (which may hold
    /// complete frames and end in an incomplete one).
    @_spi(Package) public private(set) var pending: [UInt8] = []
    /// A callback stopped early: `pending[backlogStart...]` is input not yet split.
    @_spi(Package) public private(set) var hasBacklog = false
    var backlogStart = 0
    /// Inside an oversized frame: dropping bytes until its LF.
    @_spi(Package) public private(set) var discarding = false
    var discardedBytes = 0
    /// The last byte dropped while discarding was a CR (it may precede the LF,
    /// and is then not counted in the reported size, whatever the chunking).
    var discardedEndsWithCR = false

    /// - Parameter maxFrameBytes: the frame limit in bytes (PROTOCOL.md default 1 MiB).
    @_spi(Package) public init(maxFrameBytes: Int = ProtocolConstants.defaultMaxFrameBytes) {
        precondition(maxFrameBytes > 0)
        self.maxFrameBytes = maxFrameBytes
    }

    /// Whether input is buffered: an incomplete frame (or one being
    /// discarded), or a backlog.
    @_spi(Package) public var hasPartialFrame: Bool { !pending.isEmpty || discarding }

    /// Bytes of memory the splitter holds (the capacity of its buffer), 0 when idle.
    @_spi(Package) public var heldBytes: Int { pending.capacity }

    /// Feeds `chunk` and calls `body` for every complete frame, in order: the
    /// backlog's first, then the chunk's. `body` returns false to stop: the
    /// input not yet split is kept as the backlog (`hasBacklog`), and the next
    /// call (an empty chunk will do) goes on from there.
    /// - Parameter limit: stop the same way once frames of this many bytes
    ///   (LFs included) were split in this call and more input is left (a
    ///   bounded piece of work per call; issue 20).
    /// - Returns: false when `body` or `limit` stopped it early.
    @discardableResult
    @_spi(Package) public mutating func feed(_ chunk: RawSpan, stopAfter limit: Int = .max, _ body: (SplitFrame) -> Bool) -> Bool {
        chunk.withByteView { feed($0, stopAfter: limit, body) }
    }

    @inline(__always)
    private mutating func feed(_ chunk: ByteView, stopAfter limit: Int, _ body: (SplitFrame) -> Bool) -> Bool {
        if hasBacklog {
            if chunk.count > 0 { pending.append(copying: chunk) }
            return splitBacklog(limit, body)
        }
        guard chunk.count > 0 else { return true }
        guard let stop = split(chunk, limit, body) else { return true }
        // `pending` is empty here: a frame was just completed.
        if stop < chunk.count {
            pending.append(copying: chunk.extracting(from: stop))
            backlogStart = 0
            hasBacklog = true
        }
        return false
    }

    /// Keeps `chunk` unread, behind whatever the splitter holds: the next
    /// `feed` splits it (the broker's held publisher, PROTOCOL.md "Flow control (1.2)").
    @_spi(Package) public mutating func keepUnread(_ chunk: RawSpan) {
        guard chunk.byteCount > 0 else { return }
        if !hasBacklog {
            // An incomplete frame in `pending` is the backlog's beginning.
            backlogStart = 0
            hasBacklog = true
        }
        pending.append(copying: chunk)
    }

    /// Splits `chunk`; the tail without LF goes into `pending`.
    /// - Returns: nil when all of it was used, or the offset after the frame
    ///   whose callback stopped (`chunk.count` when that frame was the last).
    @inline(__always)
    private mutating func split(_ chunk: ByteView, _ limit: Int, _ body: (SplitFrame) -> Bool) -> Int? {
        // Two loops, so the unbounded one (every read of a uid alone) tests nothing more per frame.
        limit < chunk.count ? splitBounded(chunk, limit, body) : split(chunk, body)
    }

    private mutating func split(_ chunk: ByteView, _ body: (SplitFrame) -> Bool) -> Int? {
        var offset = 0
        let count = chunk.count
        while offset < count {
            guard let lf = chunk.firstOffset(of: 0x0A, in: offset..<count) else {
                absorbTail(chunk.extracting(offset..<count))
                return nil
            }
            let piece = chunk.extracting(offset..<lf)
            offset = lf + 1
            // The common case, a whole frame in this chunk, without the call.
            let handled = !discarding && pending.isEmpty ? deliver(piece, body) : completeFrame(with: piece, body)
            if !handled { return offset }
        }
        return nil
    }

    /// `split`, stopping after the frame that reaches `limit` bytes when more is left.
    private mutating func splitBounded(_ chunk: ByteView, _ limit: Int, _ body: (SplitFrame) -> Bool) -> Int? {
        var offset = 0
        let count = chunk.count
        while offset < count {
            guard let lf = chunk.firstOffset(of: 0x0A, in: offset..<count) else {
                absorbTail(chunk.extracting(offset..<count))
                return nil
            }
            let piece = chunk.extracting(offset..<lf)
            offset = lf + 1
            let handled = !discarding && pending.isEmpty ? deliver(piece, body) : completeFrame(with: piece, body)
            if !handled || (offset >= limit && offset < count) { return offset }
        }
        return nil
    }

    /// Splits the backlog; a stop leaves the rest in place (no copy).
    private mutating func splitBacklog(_ limit: Int, _ body: (SplitFrame) -> Bool) -> Bool {
        let backlog = pending, start = backlogStart
        pending = []
        backlogStart = 0
        hasBacklog = false
        let stop = backlog.withByteView { raw in split(raw.extracting(from: start), limit, body) }
        guard let stop else { return true }
        if start + stop < backlog.count {
            pending = backlog
            backlogStart = start + stop
            hasBacklog = true
        }
        return false
    }

    /// Handles end of input: the backlog, then a buffered last frame without
    /// LF as if it had one. The splitter is empty afterwards unless `body`
    /// stopped in the backlog.
    @_spi(Package) public mutating func finish(_ body: (SplitFrame) -> Bool) {
        if hasBacklog && !splitBacklog(.max, body) { return }
        guard hasPartialFrame else { return }
        _ = completeFrame(with: ByteView(), body)
    }

    /// Appends bytes that have no LF yet, switching to discard mode past the limit
    /// (one byte of slack for a CR that may precede the LF).
    mutating func absorbTail(_ tail: ByteView) {
        if discarding {
            discardedBytes += tail.count
            if tail.count > 0 { discardedEndsWithCR = tail[tail.count - 1] == 0x0D }
            return
        }
        if pending.count + tail.count > maxFrameBytes + 1 {
            discarding = true
            discardedBytes = pending.count + tail.count
            discardedEndsWithCR = tail.count > 0 ? tail[tail.count - 1] == 0x0D : pending.last == 0x0D
            pending = []
            return
        }
        pending.append(copying: tail)
    }

    /// Completes the current frame with `piece` (the bytes up to, not including, its LF).
    mutating func completeFrame(with piece: ByteView, _ body: (SplitFrame) -> Bool) -> Bool {
        if discarding {
            var total = discardedBytes + piece.count
            let endsWithCR = piece.count > 0 ? piece[piece.count - 1] == 0x0D : discardedEndsWithCR
            if endsWithCR { total -= 1 }
            discarding = false
            discardedBytes = 0
            discardedEndsWithCR = false
            return body(.tooLarge(bytes: total))
        }
        if pending.isEmpty {
            return deliver(piece, body)
        }
        if pending.count + piece.count > maxFrameBytes + 1 {
            let total = pending.count + piece.count
            let last = piece.count > 0 ? piece[piece.count - 1] : pending[pending.count - 1]
            pending = []
            return body(.tooLarge(bytes: last == 0x0D ? total - 1 : total))
        }
        pending.append(copying: piece)
        let whole = pending
        pending = []
        return whole.withByteView { deliver($0, body) }
    }

    /// Strips a trailing CR, skips blank lines, enforces the limit, calls `body`.
    @inline(__always)
    private func deliver(_ line: ByteView, _ body: (SplitFrame) -> Bool) -> Bool {
        var length = line.count
        if length > 0 && line[length - 1] == 0x0D { length -= 1 }
        if length > maxFrameBytes { return body(.tooLarge(bytes: length)) }
        var blank = true
        for i in 0..<length {
            let b = line[i]
            if b != 0x20 && b != 0x09 && b != 0x0D { blank = false; break }
        }
        if blank { return true }
        return line.extracting(0..<length).withSpan { body(.frame($0)) }
    }
}
