// Builds outgoing frames (PROTOCOL.md "Requests", "Events", "Errors") by
// appending bytes to a buffer: no Foundation, no re-serialisation of spliced
// JSON. Every function appends one whole frame including its final LF.
//
// Before editing: spliced values (`req`, `source`, `id`, `data`) must be
// tokens the scanner validated; this file does not validate them again.

/// Appends protocol frames to a byte buffer.
@_spi(Package) public enum FrameEncoder {
    /// Appends an unsigned decimal integer.
    @inlinable @_spi(Package) public static func appendInt(_ value: UInt64, to out: inout [UInt8]) {
        if value < 10 { out.append(0x30 + UInt8(value)); return }
        var digits = 2
        var limit: UInt64 = 100
        while digits < 20 && value >= limit {
            digits &+= 1
            limit = limit &* 10
        }
        // Room for the digits, then each from the last (the broker's event
        // seqs take `RawWriter.put(int:)` and SeqText, not this).
        var i = out.count &+ digits
        out.append(contentsOf: repeatElement(0x30, count: digits))
        var n = value
        while n > 0 {
            i &-= 1
            out[i] = 0x30 &+ UInt8(truncatingIfNeeded: n % 10)
            n /= 10
        }
    }

    /// Appends a signed decimal integer.
    @inlinable @_spi(Package) public static func appendInt(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 {
            out.append(0x2D)
            appendInt(UInt64(bitPattern: 0 &- value), to: &out)
        } else {
            appendInt(UInt64(value), to: &out)
        }
    }

    @inlinable @_spi(Package) public static func appendASCII(_ text: StaticString, to out: inout [UInt8]) {
        out.append(copying: ByteView(text))
    }

    /// Starts a reply: `{"op":"ok"` or `{"op":"error"` plus `,"req":<req>` when given.
    static func appendReplyHead(_ op: StaticString, req: RawSpan?, to out: inout [UInt8]) {
        appendASCII("{\"op\":\"", to: &out)
        appendASCII(op, to: &out)
        out.append(0x22)
        if let req {
            appendASCII(",\"req\":", to: &out)
            out.append(copying: req)
        }
    }

    /// Appends `{"op":"ok"[,"req":R]<fields>}\n`.
    /// - Parameters:
    ///   - req: the raw `req` token to echo, or nil.
    ///   - fields: appends `,"key":value` pairs (each starting with a comma).
    @_spi(Package) public static func appendOK(req: RawSpan?, to out: inout [UInt8], fields: (inout [UInt8]) -> Void = { _ in }) {
        appendReplyHead("ok", req: req, to: &out)
        fields(&out)
        out.append(0x7D)
        out.append(0x0A)
    }

    /// Appends `{"op":"error"[,"req":R],"code":"bad_type","message":"..."}\n`.
    @_spi(Package) public static func appendError(req: RawSpan?, _ error: ProtocolError, to out: inout [UInt8]) {
        appendReplyHead("error", req: req, to: &out)
        appendASCII(",\"code\":\"", to: &out)
        out.append(contentsOf: error.code.rawValue.utf8)
        appendASCII("\",\"message\":", to: &out)
        JSONString.appendQuoted(error.message, to: &out)
        out.append(0x7D)
        out.append(0x0A)
    }

    /// Appends the notice of a subscription a policy reload removed
    /// (PROTOCOL.md "Access policy (1.1)"), an `error` without `req`:
    /// `{"op":"error","code":"forbidden","type":"secret.>","message":"..."}\n`.
    /// (1.3) A serving subscription's carries `"serve":true` after `type`.
    @_spi(Package) public static func appendRevocation(pattern: String, serve: Bool = false, group: String? = nil, message: String, to out: inout [UInt8]) {
        appendASCII("{\"op\":\"error\",\"code\":\"forbidden\",\"type\":", to: &out)
        JSONString.appendQuoted(pattern, to: &out)
        if serve { appendASCII(",\"serve\":true", to: &out) }
        if let group { appendField("group", string: group, to: &out) }
        appendASCII(",\"message\":", to: &out)
        JSONString.appendQuoted(message, to: &out)
        out.append(0x7D)
        out.append(0x0A)
    }

    /// Appends `{"op":"dropped","count":N,"since_seq":S}\n` (PROTOCOL.md "Semantics").
    @_spi(Package) public static func appendDropped(count: UInt64, sinceSeq: UInt64, to out: inout [UInt8]) {
        appendASCII("{\"op\":\"dropped\",\"count\":", to: &out)
        appendInt(count, to: &out)
        appendASCII(",\"since_seq\":", to: &out)
        appendInt(sinceSeq, to: &out)
        out.append(0x7D)
        out.append(0x0A)
    }

    /// Appends `,"key":<integer>`.
    @_spi(Package) public static func appendField(_ key: StaticString, int value: UInt64, to out: inout [UInt8]) {
        out.append(0x2C); out.append(0x22)
        appendASCII(key, to: &out)
        out.append(0x22); out.append(0x3A)
        appendInt(value, to: &out)
    }

    /// Appends `,"key":"<escaped string>"`.
    @_spi(Package) public static func appendField(_ key: StaticString, string value: String, to out: inout [UInt8]) {
        out.append(0x2C); out.append(0x22)
        appendASCII(key, to: &out)
        out.append(0x22); out.append(0x3A)
        JSONString.appendQuoted(value, to: &out)
    }

    /// Appends `,"key":true|false`.
    @_spi(Package) public static func appendField(_ key: StaticString, bool value: Bool, to out: inout [UInt8]) {
        out.append(0x2C); out.append(0x22)
        appendASCII(key, to: &out)
        out.append(0x22); out.append(0x3A)
        if value { appendASCII("true", to: &out) } else { appendASCII("false", to: &out) }
    }

    /// Appends `,"key":<raw JSON>` (the raw bytes must be valid JSON).
    @_spi(Package) public static func appendField(_ key: StaticString, raw value: RawSpan, to out: inout [UInt8]) {
        out.append(0x2C); out.append(0x22)
        appendASCII(key, to: &out)
        out.append(0x22); out.append(0x3A)
        out.append(copying: value)
    }

    /// The parts of an event frame (PROTOCOL.md "Events").
    @_spi(Package) public struct EventParts {
        @_spi(Package) public var seq: UInt64
        /// The event type (validated; needs no escaping).
        @_spi(Package) public var type: String
        /// 24 bytes `2026-11-29T13:00:00.123Z`.
        @_spi(Package) public var time: ByteView
        /// The publisher's raw `source` token, or nil to use `defaultSource`.
        @_spi(Package) public var source: ByteView?
        /// Used when `source` is nil: the client name or `pid/<pid>` (no escaping needed).
        @_spi(Package) public var defaultSource: String
        /// The publisher's raw `id` token, or nil for `"<instance>-<seq>"`.
        @_spi(Package) public var id: ByteView?
        /// The broker run's instance id (hex, no escaping needed).
        @_spi(Package) public var instance: String
        @_spi(Package) public var pid: Int32
        @_spi(Package) public var uid: UInt32
        @_spi(Package) public var gid: UInt32
        /// The raw `data` token, or nil for `null`.
        @_spi(Package) public var data: ByteView?
        /// (1.1) A bridge's raw `origin` object, forwarded unchanged
        /// (PROTOCOL.md "Bridged events"); nil: no `origin` member. Set it
        /// after `init` (the initialiser keeps its 1.0 shape, which the
        /// optimiser inlines into the broker's publish path).
        @_spi(Package) public var origin: ByteView? = nil

        @_spi(Package) public init(seq: UInt64, type: String, time: ByteView, source: ByteView?, defaultSource: String, id: ByteView?, instance: String, pid: Int32, uid: UInt32, gid: UInt32, data: ByteView?) {
            self.seq = seq
            self.type = type
            self.time = time
            self.source = source
            self.defaultSource = defaultSource
            self.id = id
            self.instance = instance
            self.pid = pid
            self.uid = uid
            self.gid = gid
            self.data = data
        }
    }

    /// Appends one event frame:
    /// `{"op":"event","seq":42,"type":"t","time":"...","source":"s","id":"i","pid":1,"uid":0,"gid":0,"data":...}\n`,
    /// with `"origin":{...}` before `data` when the event has one.
    @_spi(Package) public static func appendEvent(_ e: EventParts, to out: inout [UInt8]) {
        out.appendWritten(bound: eventByteCountUpperBound(e)) { w in w.skip(writeEvent(e, into: w).count) }
    }

    /// The bytes of an event frame (PROTOCOL.md "Events"), the broker's form
    /// of `EventParts`: the parts that depend only on the publisher or the
    /// broker run come ready-made (`EventStamp`), the rest are spliced from
    /// the publish frame.
    @_spi(Package) public struct EventBytes {
        @_spi(Package) public var seq: UInt64
        /// The event type (validated; needs no escaping).
        @_spi(Package) public var type: ByteView
        /// 24 bytes `2026-11-29T13:00:00.123Z`.
        @_spi(Package) public var time: TimestampBytes
        /// The publisher's raw `source` token, or its default (`EventStamp.source`).
        @_spi(Package) public var source: ByteView
        /// The publisher's raw `id` token, or nil for `idPrefix`, the seq and a quote.
        @_spi(Package) public var id: ByteView?
        /// `"<instance>-` (`EventStamp.idPrefix`).
        @_spi(Package) public var idPrefix: ByteView
        /// `,"pid":1,"uid":0,"gid":0` (`EventStamp.identity`); (1.3) for an
        /// event published with `key` (PROTOCOL.md "Queue groups": events
        /// that had one carry it), `,"key":"k"` follows in the same bytes, so
        /// an event without one pays nothing for it.
        @_spi(Package) public var identity: ByteView
        /// (1.1) A bridge's raw `origin` object, or nil for none.
        @_spi(Package) public var origin: ByteView?
        /// The raw `data` token, or nil for `null`.
        @_spi(Package) public var data: ByteView?
        /// `seq`'s decimal digits when the caller has them already (the
        /// broker keeps its newest), else nil: `seq` is formatted.
        @_spi(Package) public var seqText: ByteView?

        @inlinable
        @_spi(Package) public init(seq: UInt64, type: ByteView, time: TimestampBytes, source: ByteView, id: ByteView?,
                    idPrefix: ByteView, identity: ByteView, origin: ByteView?, data: ByteView?,
                    seqText: ByteView? = nil) {
            self.seq = seq
            self.seqText = seqText
            self.type = type
            self.time = time
            self.source = source
            self.id = id
            self.idPrefix = idPrefix
            self.identity = identity
            self.origin = origin
            self.data = data
        }
    }
}

extension FrameEncoder {
    /// What `writeEvent` wrote: the frame's length, and where in it the
    /// type's bytes are (the history ring finds a stored event's type with
    /// it, without parsing the frame).
    @_spi(Package) public struct WrittenEvent {
        @_spi(Package) public var count = 0
        @_spi(Package) public var typeOffset = 0
        @_spi(Package) public var typeCount = 0
        @_spi(Package) public init() {}
    }

    /// An upper bound of the size of the event frame `appendEvent` would write
    /// (what to give `writeEvent` as its capacity).
    @_spi(Package) public static func eventByteCountUpperBound(_ e: EventParts) -> Int {
        RawWriter.slack + 128 + 5 * 20 + e.type.utf8.count + e.time.count
            + (e.source?.count ?? e.defaultSource.utf8.count + 2)
            + (e.id?.count ?? e.instance.utf8.count + 24)
            + (e.data?.count ?? 4)
            + (e.origin?.count ?? -10) + 10
    }

    /// Writes the event frame of `appendEvent` with `w`, a writer of at
    /// least `eventByteCountUpperBound(e)` bytes (a write past its capacity
    /// stops the process, never overruns).
    /// - Returns: what it wrote.
    @_spi(Package) public static func writeEvent(_ e: EventParts, into w: RawWriter) -> WrittenEvent {
        precondition(e.time.count == 24, "an event's time is 24 bytes")
        let time = TimestampBytes(e.time)
        let source = EventStamp.source(e.defaultSource)
        let identity = EventStamp.identity(pid: e.pid, uid: e.uid, gid: e.gid)
        let idPrefix = EventStamp.idPrefix(instance: e.instance)
        return e.type.withByteView { type in
            writeEvent(EventBytes(seq: e.seq, type: type, time: time, source: e.source ?? source.bytes, id: e.id,
                                  idPrefix: idPrefix.bytes, identity: identity.bytes, origin: e.origin, data: e.data), into: w)
        }
    }

    /// An upper bound of the size of the event frame `writeEvent` writes
    /// (what to give it as its capacity).
    @inlinable @inline(__always)
    @_spi(Package) public static func eventByteCountUpperBound(_ e: EventBytes) -> Int {
        // 91 bytes of fixed text and time, two seqs of at most 20 digits,
        // and the writer's slack (`RawWriter.slack`).
        RawWriter.slack + 131 + e.type.count + e.source.count + (e.id?.count ?? e.idPrefix.count + 21) + e.identity.count
            + (e.origin.map { $0.count + 10 } ?? 0) + (e.data?.count ?? 4)
    }

    /// Writes one event frame with `w`, a writer of at least
    /// `eventByteCountUpperBound(e)` bytes (every write is checked against
    /// its capacity, and one past it stops the process): the broker
    /// builds each event once, in place, with this.
    /// `{"op":"event","seq":42,"type":"t","time":"...","source":"s","id":"i","pid":1,"uid":0,"gid":0,"data":...}\n`,
    /// with (1.3) `"key":"k"` after `gid` (in `identity`) and `"origin":{...}` before `data` when the event has them.
    /// - Returns: what it wrote (length, where the type is).
    @_spi(Package) public static func writeEvent(_ e: EventBytes, into writer: RawWriter) -> WrittenEvent {
        // A local copy: its fields stay in registers (an `inout` writer
        // outlined `RawWriter.put`: +157 Ir a delivery in c1-64).
        var w = writer
        var written = WrittenEvent()
        w.put("{\"op\":\"event\",\"seq\":")
        let seqStart = w.count
        if let text = e.seqText { w.put(text) } else { w.put(int: e.seq) }
        let seqDigits = w.written(from: seqStart)
        w.put(",\"type\":\"")
        written.typeOffset = w.count
        written.typeCount = e.type.count
        w.put(e.type)
        w.put("\",\"time\":\"")
        w.put(e.time)
        w.put("\",\"source\":")
        w.put(e.source)
        w.put(",\"id\":")
        if let id = e.id {
            w.put(id)
        } else {
            w.put(e.idPrefix)
            w.put(seqDigits)
            w.put(0x22)
        }
        w.put(e.identity)
        if let origin = e.origin {
            w.put(",\"origin\":")
            w.put(origin)
        }
        w.put(",\"data\":")
        if let data = e.data { w.put(data) } else { w.put("null") }
        w.put(0x7D)
        w.put(0x0A)
        written.count = w.count
        return written
    }
}
