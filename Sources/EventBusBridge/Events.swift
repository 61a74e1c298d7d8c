// What the bridge moves from NATS to the bus: a publish for the local bus
// (an import, with `origin`, PROTOCOL.md "Bridged events (1.1)"), and the
// remote identity it carries. The other way, an event read from the local
// bus to export, is the `RawEvent` every client of the bus shares
// (EventBusSession: `metadata.isBridged` says it carries `origin`).
//
// Before editing: these are plain values so the bridge's logic stays pure;
// the bridge's bus connection turns `LocalPublish` into a publish request.
// (issue 36, third pass) The usual import skips the value: its frame is
// written from the NATS header block's bytes (`appendFrame(heads:...)`),
// and must stay byte for byte what `appendFrame(to:)` writes for the
// `LocalPublish` `BridgeCore.handle` makes (ImportWrittenTests).
@_spi(Package) import EventBusProtocol

/// What a remote bridge asserted about an event: PROTOCOL.md's `origin`.
/// Fields the remote side did not send are nil and left out of the JSON.
/// Trust: an assertion by the remote bridge, authenticated only by NATS
/// credentials; never compare `uid` with local uids.
package struct Origin: Equatable, Sendable {
    package var node: String
    /// The remote broker's instance (its `seq` counts within it).
    package var instance: String?
    package var seq: UInt64?
    package var time: String?
    package var pid: Int64?
    package var uid: UInt64?
    package var gid: UInt64?

    package init(node: String, instance: String? = nil, seq: UInt64? = nil, time: String? = nil, pid: Int64? = nil, uid: UInt64? = nil, gid: UInt64? = nil) {
        self.node = node
        self.instance = instance
        self.seq = seq
        self.time = time
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// `{"node":"host-b","instance":"…","seq":9123,"time":"…","pid":811,"uid":1000,"gid":1000}`,
    /// in that order, absent fields left out.
    package var json: JSONText {
        var object = JSONText.ObjectWriter()
        object.add("node", node)
        if let instance { object.add("instance", instance) }
        if let seq { object.add("seq", seq) }
        if let time { object.add("time", time) }
        if let pid { object.add("pid", pid) }
        if let uid { object.add("uid", uid) }
        if let gid { object.add("gid", gid) }
        return object.text
    }
}

/// A publish for the local bus, made from a NATS message.
package struct LocalPublish: Equatable, Sendable {
    package var type: EventType
    /// One line of valid JSON, or nil for none (an empty NATS payload).
    package var data: JSONText?
    /// `ce-source` and `ce-id` as the remote side sent them (nil: absent; the broker fills in its defaults).
    package var source: String?
    package var id: String?
    package var origin: Origin

    package init(type: EventType, data: JSONText?, source: String?, id: String?, origin: Origin) {
        self.type = type
        self.data = data
        self.source = source
        self.id = id
        self.origin = origin
    }
}

extension LocalPublish {
    /// Appends this import's `publish` frame, LF included, without `req`:
    /// `{"op":"publish","type":"…","source":"…","id":"…","origin":{"node":"…",…},"data":…}`
    /// (absent members left out), the same members in the same order as
    /// `ClientRequest.publish(…).encode(req: nil, to:)` with `origin.json`,
    /// written straight into `out`: no String and no intermediate array per
    /// import (the import path's JSON encoding was a quarter of an importing
    /// bridge's instructions under callgrind).
    package func appendFrame(to out: inout [UInt8]) {
        FrameEncoder.appendASCII("{\"op\":\"publish\",\"type\":", to: &out)
        JSONString.appendQuoted(type.name, to: &out)
        if let source {
            FrameEncoder.appendASCII(",\"source\":", to: &out)
            JSONString.appendQuoted(source, to: &out)
        }
        if let id {
            FrameEncoder.appendASCII(",\"id\":", to: &out)
            JSONString.appendQuoted(id, to: &out)
        }
        FrameEncoder.appendASCII(",\"origin\":{\"node\":", to: &out)
        JSONString.appendQuoted(origin.node, to: &out)
        if let instance = origin.instance {
            FrameEncoder.appendASCII(",\"instance\":", to: &out)
            JSONString.appendQuoted(instance, to: &out)
        }
        if let seq = origin.seq { FrameEncoder.appendField("seq", int: seq, to: &out) }
        if let time = origin.time {
            FrameEncoder.appendASCII(",\"time\":", to: &out)
            JSONString.appendQuoted(time, to: &out)
        }
        if let pid = origin.pid {
            FrameEncoder.appendASCII(",\"pid\":", to: &out)
            FrameEncoder.appendInt(pid, to: &out)
        }
        if let uid = origin.uid { FrameEncoder.appendField("uid", int: uid, to: &out) }
        if let gid = origin.gid { FrameEncoder.appendField("gid", int: gid, to: &out) }
        out.append(0x7D)
        if let data {
            FrameEncoder.appendASCII(",\"data\":", to: &out)
            out.append(contentsOf: data.bytes)
        }
        out.append(0x7D)
        out.append(0x0A)
    }
}

extension LocalPublish {
    /// (issue 36, third pass) The two fixed parts of the `publish` frames of
    /// one subject's imports, encoded once per subject (`BridgeCore` keeps
    /// the last one): `{"op":"publish","type":"TYPE","source":"` and
    /// `","origin":{"node":"NODE","instance":"`.
    package struct FrameHeads {
        /// The subject they are for (compared by the parser's shared String).
        package let subject: String
        /// Both parts, one after the other (one buffer to borrow per frame).
        let both: [UInt8]
        /// Where the origin's part starts in `both`.
        let originStart: Int
        var type: ArraySlice<UInt8> { both[..<originStart] }
        var origin: ArraySlice<UInt8> { both[originStart...] }

        package init(subject: String, type: EventType, node: NodeName) {
            self.subject = subject
            var head: [UInt8] = []
            FrameEncoder.appendASCII("{\"op\":\"publish\",\"type\":", to: &head)
            JSONString.appendQuoted(type.name, to: &head)
            FrameEncoder.appendASCII(",\"source\":\"", to: &head)
            originStart = head.count
            FrameEncoder.appendASCII("\",\"origin\":{\"node\":", to: &head)
            JSONString.appendQuoted(node.text, to: &head)
            FrameEncoder.appendASCII(",\"instance\":\"", to: &head)
            both = head
        }
    }

    /// (issue 36, third pass) Appends the `publish` frame of an import whose
    /// header block is an eventbus bridge's export block, straight from the
    /// block's bytes (`CloudEventsHeaders.exportBlockValues`): the same bytes
    /// `appendFrame` writes for the `LocalPublish` that `BridgeCore.handle`
    /// makes of the message (`source`, `id`, then `origin` with every member,
    /// then `data`), with no String, `Imported` or `LocalPublish` made (those
    /// were about half an import's instructions). A `plain` block's values are
    /// copied as they are; others are escaped and numbers written anew.
    /// - Parameters:
    ///   - heads: the subject's (its type and node).
    ///   - block: the message's header block; `values` are ranges of it.
    ///   - data: the payload as `BridgeCore.localData` took it (nil: empty).
    static func appendFrame(heads: FrameHeads, block: RawSpan, values v: CloudEventsHeaders.ExportBlockValues,
                            data: JSONText?, to out: inout [UInt8]) {
        if v.plain {
            appendPlainFrame(heads: heads, block: block, values: v, data: data, to: &out)
            return
        }
        out.append(contentsOf: heads.type)
        appendString(block, v.source, plain: v.plain, to: &out)
        FrameEncoder.appendASCII("\",\"id\":\"", to: &out)
        appendString(block, v.id, plain: v.plain, to: &out)
        out.append(contentsOf: heads.origin)
        appendString(block, v.instance, plain: v.plain, to: &out)
        FrameEncoder.appendASCII("\",\"seq\":", to: &out)
        if v.plain { out.append(copying: block.extracting(v.seqDigits)) } else { FrameEncoder.appendInt(v.seq, to: &out) }
        FrameEncoder.appendASCII(",\"time\":\"", to: &out)
        appendString(block, v.time, plain: v.plain, to: &out)
        FrameEncoder.appendASCII("\",\"pid\":", to: &out)
        if v.plain { out.append(copying: block.extracting(v.pidDigits)) } else { FrameEncoder.appendInt(v.pid, to: &out) }
        FrameEncoder.appendASCII(",\"uid\":", to: &out)
        if v.plain { out.append(copying: block.extracting(v.uidDigits)) } else { FrameEncoder.appendInt(v.uid, to: &out) }
        FrameEncoder.appendASCII(",\"gid\":", to: &out)
        if v.plain { out.append(copying: block.extracting(v.gidDigits)) } else { FrameEncoder.appendInt(v.gid, to: &out) }
        if let data {
            FrameEncoder.appendASCII("},\"data\":", to: &out)
            out.append(contentsOf: data.bytes)
            FrameEncoder.appendASCII("}\n", to: &out)
        } else {
            FrameEncoder.appendASCII("}}\n", to: &out)
        }
    }

    /// (issue 36, linkimp2) `appendFrame(heads:...)` of a `plain` block: every
    /// piece is copied as it is, so the frame is written in one pass through
    /// a `RawWriter` into the output's free capacity, sized exactly (plus the
    /// writer's slack) from the pieces' lengths: no array append per piece
    /// (about twenty, most of the frame's 2.2k instructions an import).
    private static func appendPlainFrame(heads: FrameHeads, block: RawSpan, values v: CloudEventsHeaders.ExportBlockValues,
                                         data: JSONText?, to out: inout [UInt8]) {
        let literals = 8 + 8 + 9 + 8 + 7 + 7 + 9 + 2  // the fixed text below, the longer ending
        let dataCount = data?.bytes.count ?? 0
        let bound = heads.both.count + v.source.count + v.id.count + v.instance.count + v.time.count
            + v.seqDigits.count + v.pidDigits.count + v.uidDigits.count + v.gidDigits.count
            + dataCount + literals + RawWriter.slack
        heads.both.withByteView { both in
            block.withByteView { b in
                let type = both.extracting(0..<heads.originStart), origin = both.extracting(from: heads.originStart)
                if let data {
                    data.bytes.withByteView { d in
                        out.appendWritten(bound: bound) { w in
                            writePlain(type, origin, b, v, &w)
                            w.put("},\"data\":")
                            w.put(d)
                            w.put("}\n")
                        }
                    }
                } else {
                    out.appendWritten(bound: bound) { w in
                        writePlain(type, origin, b, v, &w)
                        w.put("}}\n")
                    }
                }
            }
        }
    }

    /// `appendPlainFrame`'s frame up to the end of `gid`'s digits.
    @inline(__always)
    private static func writePlain(_ type: ByteView, _ origin: ByteView, _ b: ByteView,
                                   _ v: CloudEventsHeaders.ExportBlockValues, _ w: inout RawWriter) {
        w.put(type)
        w.put(b.extracting(v.source))
        w.put("\",\"id\":\"")
        w.put(b.extracting(v.id))
        w.put(origin)
        w.put(b.extracting(v.instance))
        w.put("\",\"seq\":")
        w.put(b.extracting(v.seqDigits))
        w.put(",\"time\":\"")
        w.put(b.extracting(v.time))
        w.put("\",\"pid\":")
        w.put(b.extracting(v.pidDigits))
        w.put(",\"uid\":")
        w.put(b.extracting(v.uidDigits))
        w.put(",\"gid\":")
        w.put(b.extracting(v.gidDigits))
    }

    /// The inside of a JSON string literal for a value of printable ASCII
    /// (0x20-0x7E: what an export block's values are): copied when `plain`,
    /// else with `"` and `\` escaped; what `JSONString.appendQuoted` writes
    /// between the quotes for the same text.
    private static func appendString(_ block: RawSpan, _ range: Range<Int>, plain: Bool, to out: inout [UInt8]) {
        let value = block.extracting(range)
        guard !plain else {
            out.append(copying: value)
            return
        }
        let bytes = Span<UInt8>(_bytes: value)
        var run = 0
        for i in bytes.indices where bytes[i] == 0x22 || bytes[i] == 0x5C {
            if run < i { out.append(copying: value.extracting(run..<i)) }
            out.append(0x5C)
            run = i
        }
        out.append(copying: value.extracting(run..<bytes.count))
    }
}
