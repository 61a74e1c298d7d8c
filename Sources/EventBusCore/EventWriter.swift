// The broker's event writer (PROTOCOL.md "Events"): where each event frame
// is written once per publish, from the publish frame's byte ranges
// (`EventContent`) and the publisher's ready-made parts (EventStamp.swift),
// with the kept seq digits, the cached timestamp and this run's id prefix;
// and the reused buffer replies and notices are written into.
//
// Before editing: the invariants. The writer owns `eventScratch`
// (`OutboundQueue.copyLimitBytes` bytes, freed with it: it is
// noncopyable, held by `Broker.writer` only) and never lets a frame of more
// than its `bound` be written anywhere: the bound is computed by
// `FrameEncoder.eventByteCountUpperBound` for the very parts written, and the
// writer checks each write against it. A frame written is valid until the
// next one is: in the history ring's arena (the ring keeps it), in
// `eventScratch`, or in a chunk of its own that `builtChunk` keeps alive until
// the fan-out ends (`EventFrame` does not count it). `scratch` holds one
// reply or notice at a time: whoever writes it queues it before anything
// else writes there (a reply's `fields` closure writes no event).
// Raw memory (issue 35): this is the frame writer, the one place in Core
// where an event is written through pointers (`FrameEncoder.EventBytes`,
// `EventParts`); `EventContent` points into a publish frame the broker
// lends as a span and is used only while that frame is handled. Other
// files give and get bytes as `RawSpan`s. It also owns the kept seq
// digits (`SeqText`, at the end of this file: 20 bytes freed with it).
@_spi(Package) import EventBusProtocol

/// Writes event frames and holds the broker's reused output buffers; held by
/// `Broker.writer` and used in place (invariants in this file's header).
struct EventWriter: ~Copyable {
    /// Reused buffer for a reply or notice, so a publish allocates only its shared frame.
    private(set) var scratch: [UInt8] = []
    /// Where a small event (up to `OutboundQueue.copyLimitBytes`) is built
    /// once per publish before it is copied into each queue; owned, freed in `deinit`.
    let eventScratch: UnsafeMutableRawBufferPointer
    /// The chunk of the event being routed when it has one of its own (a
    /// large or retained event): `EventFrame` does not count it, so the
    /// writer holds it until `fanOut` ends.
    private(set) var builtChunk: OutboundChunk? = nil
    /// The digits of the seq the last event was written with (`SeqText`, below).
    private(set) var seqText = SeqText()
    private(set) var timestamps = TimestampFormatter()
    /// `"<instance>-`, which opens a default event id.
    let eventIDPrefix: StampBytes

    /// - Parameter instance: this broker run's id (`Broker.instance`).
    init(instance: String) {
        eventScratch = UnsafeMutableRawBufferPointer.allocate(byteCount: OutboundQueue.copyLimitBytes, alignment: 16)
        eventIDPrefix = EventStamp.idPrefix(instance: instance)
        scratch.reserveCapacity(4096)
    }

    deinit { eventScratch.deallocate() }

    /// Writes a reply or notice into `scratch`, emptied first; the caller
    /// queues it from `scratch` before the next one is written.
    @inline(__always)
    mutating func writeReply(_ write: (inout [UInt8]) -> Void) {
        scratch.removeAll(keepingCapacity: true)
        write(&scratch)
    }

    /// Keeps the chunk of an event being routed alive through the fan-out.
    mutating func keepBuiltChunk(_ chunk: OutboundChunk) { builtChunk = chunk }

    /// The fan-out has ended: the queues that took the chunk hold it now.
    @inline(__always)
    mutating func releaseBuiltChunk() { builtChunk = nil }

    /// The `time` bytes of `wallNanoseconds` (the formatter's cache is the writer's).
    @inline(__always)
    mutating func timeBytes(nanosecondsSinceEpoch wallNanoseconds: Int64) -> TimestampBytes {
        timestamps.bytes(nanosecondsSinceEpoch: wallNanoseconds)
    }

    /// Writes a publish's event frame once (see `makeEvent`).
    /// - Parameters:
    ///   - type: the event's type, whose bytes are written when `content` has none.
    ///   - wallNanoseconds: the event's `time`, ns since the Unix epoch.
    ///   - history: the ring whose arena end takes the frame while it is on.
    ///   - identity: the publisher's `EventStamp.identity`, (1.3) with
    ///     `,"key":"k"` after it for a keyed publish.
    @inline(__always)
    mutating func buildEvent(seq: UInt64, _ content: EventContent, of type: EventType, publisher: Connection, identity: ByteView,
                             wallNanoseconds: Int64, history: inout HistoryRing) -> EventFrame {
        let time = timestamps.bytes(nanosecondsSinceEpoch: wallNanoseconds)
        let digits = seqText.text(for: seq)
        @inline(__always) func build(_ typeBytes: ByteView) -> EventFrame {
            makeEvent(FrameEncoder.EventBytes(
                seq: seq, type: typeBytes, time: time,
                source: content.source ?? publisher.session.eventSource.bytes, id: content.id,
                idPrefix: eventIDPrefix.bytes, identity: identity, origin: content.origin, data: content.data,
                seqText: ByteView(unsafe: digits)), history: &history)
        }
        if let typeBytes = content.type { return build(typeBytes) }
        return type.name.withByteView { build($0) }
    }

    /// (1.3) A request's event frame (`seq` the one it takes if it reaches
    /// anyone), as bytes of its own: spliced into each server's request
    /// frame. `identity` is `Broker.identity` (with a keyed request's key).
    mutating func requestEvent(seq: UInt64, _ content: EventContent, of type: EventType, publisher: Connection,
                               identity: [UInt8], wallNanoseconds: Int64) -> [UInt8] {
        let time = timestamps.bytes(nanosecondsSinceEpoch: wallNanoseconds)
        return type.name.withByteView { type in identity.withByteView { identity in
            let parts = FrameEncoder.EventBytes(
                seq: seq, type: type, time: time,
                source: content.source ?? publisher.session.eventSource.bytes, id: content.id,
                idPrefix: eventIDPrefix.bytes, identity: identity, origin: nil, data: content.data)
            let bound = FrameEncoder.eventByteCountUpperBound(parts)
            return [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
                count = FrameEncoder.writeEvent(parts, into: RawWriter(UnsafeMutableRawPointer(buffer.baseAddress!), capacity: bound)).count
            }
        } }
    }

    /// A copy of the event frame `bytes` with its final `}\n` replaced by
    /// `suffix` (a replay's `,"retained":true}\n`): in `eventScratch`, or
    /// when larger than `OutboundQueue.copyLimitBytes` in a chunk of its own,
    /// which the caller keeps alive while it uses the frame.
    func flaggedCopy(of bytes: RawSpan, suffix: StaticString) -> (frame: EventFrame, chunk: OutboundChunk?) {
        let keep = bytes.byteCount - 2
        let size = keep + suffix.utf8CodeUnitCount
        let scratch = eventScratch
        return bytes.withUnsafeBytes { bytes in
            func write(_ destination: UnsafeMutableRawPointer) -> Int {
                destination.copyMemory(from: bytes.baseAddress!, byteCount: keep)
                (destination + keep).copyMemory(from: suffix.utf8Start, byteCount: suffix.utf8CodeUnitCount)
                return size
            }
            if size <= scratch.count {
                return (EventFrame(bytes: UnsafeRawBufferPointer(start: scratch.baseAddress, count: write(scratch.baseAddress!)), shared: nil), nil)
            }
            let chunk = OutboundChunk.make(capacity: size, write)
            return (EventFrame(bytes: chunk.bytes, shared: chunk), chunk)
        }
    }

    /// Writes an event frame once per event: in place at the end of the
    /// history ring's arena while history is on (`HistoryRing.space(for:)`:
    /// the ring keeps it without a copy), else into `eventScratch`; copied
    /// from there into each subscriber's chunk. When it may exceed
    /// `OutboundQueue.copyLimitBytes`, into a chunk of its own that every
    /// subscriber's queue (and the ring) shares.
    /// - Returns: the frame (valid until the next event is made).
    @inline(__always)
    mutating func makeEvent(_ parts: FrameEncoder.EventBytes, history: inout HistoryRing) -> EventFrame {
        makeEvent(bound: FrameEncoder.eventByteCountUpperBound(parts), history: &history) { FrameEncoder.writeEvent(parts, into: RawWriter($0, capacity: $1)) }
    }

    /// `makeEvent` for the broker's own events, written from `EventParts`.
    mutating func makeEvent(_ parts: FrameEncoder.EventParts, history: inout HistoryRing) -> EventFrame {
        makeEvent(bound: FrameEncoder.eventByteCountUpperBound(parts), history: &history) { FrameEncoder.writeEvent(parts, into: RawWriter($0, capacity: $1)) }
    }

    /// One of the broker's own events (`eventbus.` types) once: `source`
    /// the server's name, a default id, the broker's `credentials`.
    /// - Parameter data: one valid JSON value.
    mutating func brokerEvent(seq: UInt64, type: EventType, data: [UInt8], source: String, instance: String, credentials own: Credentials,
                              wallNanoseconds: Int64, history: inout HistoryRing) -> EventFrame {
        timestamps.bytes(nanosecondsSinceEpoch: wallNanoseconds).withByteView { time in
            data.withByteView { data in
                makeEvent(FrameEncoder.EventParts(
                    seq: seq, type: type.name, time: time, source: nil, defaultSource: source,
                    id: nil, instance: instance, pid: own.pid, uid: own.uid, gid: own.gid, data: data), history: &history)
            }
        }
    }

    /// Where an event of at most `bound` bytes is written (see above), by
    /// `write`, given the place and the bytes it may fill there (`bound`:
    /// the writer checks each write against it), which returns what it wrote.
    @inline(__always)
    private mutating func makeEvent(bound: Int, history: inout HistoryRing,
                                    _ write: (UnsafeMutableRawPointer, Int) -> FrameEncoder.WrittenEvent) -> EventFrame {
        if bound > OutboundQueue.copyLimitBytes {
            var written = FrameEncoder.WrittenEvent()
            let chunk = OutboundChunk.make(capacity: bound) { written = write($0, bound); return written.count }
            builtChunk = chunk  // alive through the fan-out (EventFrame does not count it)
            return EventFrame(bytes: UnsafeRawBufferPointer(start: chunk.baseAddress, count: chunk.used), shared: chunk,
                              typeOffset: written.typeOffset, typeCount: written.typeCount)
        }
        // Both hold `bound` bytes: the ring's arena end (`space(for:)`), the scratch (`copyLimitBytes`).
        let destination = history.space(for: bound) ?? eventScratch.baseAddress.unsafelyUnwrapped
        let written = write(destination, bound)
        return EventFrame(bytes: UnsafeRawBufferPointer(start: destination, count: written.count), shared: nil,
                          typeOffset: written.typeOffset, typeCount: written.typeCount)
    }
}

/// What an event frame takes from its publish frame: the byte ranges of
/// its parts, as pointers into the frame (plain values: copying one counts
/// no references). Made from the frame's span where the publish is handled
/// and used only during that call (`Broker.publish`), while the span is
/// alive: the pointers never outlive the frame's handling.
struct EventContent {
    /// The type's bytes, when the frame spells it without escapes (else the
    /// event is written from `PublishRequest.type`).
    var type: ByteView?
    var source: ByteView?
    var id: ByteView?
    var data: ByteView?
    var origin: ByteView?

    /// - Parameter typeRange: where the type's bytes are in `frame`, when it spells them without escapes.
    @inline(__always)
    init(_ request: PublishRequest, frame: RawSpan, typeRange: Range<Int>?) {
        // The span's base: its memory is the frame's, alive for the whole
        // handling of the frame this content is used in (see above).
        @inline(__always) func start(_ raw: UnsafeRawBufferPointer) -> UnsafeRawPointer? { raw.baseAddress }
        let base = frame.withUnsafeBytes(start)
        @inline(__always) func slice(_ start: Int, _ end: Int) -> ByteView {
            ByteView(unsafeStart: base.unsafelyUnwrapped + start, count: end &- start)
        }
        type = typeRange.map { slice($0.lowerBound, $0.upperBound) }
        source = request.source.map { slice($0.start, $0.end) }
        id = request.id.map { slice($0.start, $0.end) }
        data = request.data.map { slice($0.start, $0.end) }
        origin = request.origin.map { slice($0.start, $0.end) }
    }
}

// The kept seq digits (issue 35: moved here from SeqText.swift, so the 20
// bytes are owned by the frame writer's file): the decimal text of the seq
// the broker last wrote an event with, kept so that the next event's seq
// (one more, nearly always) costs a carry over the last digit instead of
// formatting (`FrameEncoder.EventBytes.seqText`). Any other seq (a retained
// publish's, one after the broker's own events, the first after a restore)
// is formatted in full; the text is valid until the next call. The 20 bytes
// are allocated here and freed with the value (noncopyable), and the text
// handed out points into them: `buildEvent` reads it at once. An
// `InlineArray<20, UInt8>` in the value instead, a copy of it handed to
// `buildEvent`, cost 16 Ir per event there (callgrind, case 1: `buildEvent`
// 222 against 206 Ir per delivery).

/// Up to 20 decimal digits, right-aligned in storage the value owns.
struct SeqText: ~Copyable {
    private let storage: UnsafeMutableRawPointer
    /// The seq the text spells.
    private var value: UInt64 = 0
    /// Where the digits start; they end at byte 20.
    private var start = 19

    init() {
        storage = UnsafeMutableRawPointer.allocate(byteCount: 20, alignment: 8)
        storage.storeBytes(of: 0x30, toByteOffset: 19, as: UInt8.self)  // "0"
    }

    deinit { storage.deallocate() }

    /// The digits of `seq`, e.g. `1234` for 1234 (valid until the next call).
    @inline(__always)
    mutating func text(for seq: UInt64) -> UnsafeRawBufferPointer {
        if seq == value &+ 1 && value != UInt64.max {
            increment()
        } else if seq != value {
            set(seq)
        }
        value = seq
        return UnsafeRawBufferPointer(start: storage + start, count: 20 &- start)
    }

    /// Adds one to the digits (the caller checked they are below UInt64.max).
    @inline(__always)
    private mutating func increment() {
        var i = 19
        while true {
            let digit = storage.load(fromByteOffset: i, as: UInt8.self)
            if digit != 0x39 {
                storage.storeBytes(of: digit &+ 1, toByteOffset: i, as: UInt8.self)
                return
            }
            storage.storeBytes(of: 0x30, toByteOffset: i, as: UInt8.self)
            if i == start {
                start -= 1
                storage.storeBytes(of: 0x31, toByteOffset: start, as: UInt8.self)
                return
            }
            i -= 1
        }
    }

    private mutating func set(_ seq: UInt64) {
        var n = seq
        var i = 20
        repeat {
            i -= 1
            storage.storeBytes(of: 0x30 &+ UInt8(truncatingIfNeeded: n % 10), toByteOffset: i, as: UInt8.self)
            n /= 10
        } while n > 0
        start = i
    }
}
