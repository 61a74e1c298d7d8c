// CloudEvents 1.0 in binary mode over NATS headers, both ways: the `ce-*`
// attribute headers and eventbus's extensions (`ce-eb*`) for an exported
// event, plus `Nats-Msg-Id` for JetStream de-duplication; and the reverse,
// from an HMSG's headers to `origin` and the local publish fields.
//
// Before editing: header values are percent-encoded by EventBusNATS's
// `Headers.encoded()` and decoded by its parser, so a CR/LF in `source` or
// `id` travels intact and can never start a header line. (issue 36) The
// export written in place (`writeExport`) copies its values from the
// broker's frame unencoded: `ExportFrame` takes only values made of bytes
// the encoder writes as themselves, and ExportFrameTests check that both
// writers give the same bytes. Names here are the
// wire names: lower case, as the CloudEvents NATS binding writes them.
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession

/// The header names, as written.
package enum HeaderName {
    package static let specVersion = "ce-specversion"
    package static let id = "ce-id"
    package static let source = "ce-source"
    package static let type = "ce-type"
    package static let time = "ce-time"
    package static let dataContentType = "ce-datacontenttype"
    package static let node = "ce-ebnode"
    package static let instance = "ce-ebinstance"
    package static let seq = "ce-ebseq"
    package static let pid = "ce-ebpid"
    package static let uid = "ce-ebuid"
    package static let gid = "ce-ebgid"
    /// JetStream's de-duplication key: `NODE:INSTANCE:SEQ`.
    package static let messageID = "Nats-Msg-Id"
}

package enum CloudEventsHeaders {
    /// The lines of an export's block that are the same for every event of
    /// one node and broker run, encoded once (`BridgeCore` keeps one per
    /// broker instance): `ce-specversion`, then `ce-datacontenttype`,
    /// `ce-ebnode`, `ce-ebinstance`.
    package struct ExportLines: Equatable, Sendable {
        package let node: NodeName
        package let instance: String
        let head: HeaderBlockWriter.Lines
        let middle: HeaderBlockWriter.Lines
        /// (issue 36) The block's text between its values, for
        /// `writeExport`: `NATS/1.0\r\nce-specversion: 1.0\r\nce-id: `, then
        /// `\r\nce-source: `, `\r\nce-type: `, `\r\nce-time: `, the
        /// constant lines up to `ce-ebseq: `, `\r\nce-ebpid: `, `\r\nce-ebuid: `,
        /// `\r\nce-ebgid: `, `\r\nNats-Msg-Id: NODE:INSTANCE:`, the empty
        /// line: one after another in `cuts`, each piece's range in `cutRanges`.
        let cuts: [UInt8]
        let cutRanges: [Range<Int>]

        static let specVersion = "1.0"
        static let dataContentType = "application/json"

        /// - Parameter instance: the local broker's `instance` (its `seq` counts within it).
        package init(node: NodeName, instance: String) {
            self.node = node
            self.instance = instance
            head = HeaderBlockWriter.lines { $0.append(HeaderName.specVersion, ExportLines.specVersion) }
            middle = HeaderBlockWriter.lines { block in
                block.append(HeaderName.dataContentType, ExportLines.dataContentType)
                block.append(HeaderName.node, node.text)
                block.append(HeaderName.instance, instance)
            }
            func name(_ text: String) -> String { "\r\n" + text + ": " }
            let (nodeText, instanceText) = (Headers.percentEncoded(node.text), Headers.percentEncoded(instance))
            let pieces = [
                "NATS/1.0" + name(HeaderName.specVersion) + ExportLines.specVersion + name(HeaderName.id),
                name(HeaderName.source), name(HeaderName.type), name(HeaderName.time),
                name(HeaderName.dataContentType) + ExportLines.dataContentType + name(HeaderName.node) + nodeText
                    + name(HeaderName.instance) + instanceText + name(HeaderName.seq),
                name(HeaderName.pid), name(HeaderName.uid), name(HeaderName.gid),
                name(HeaderName.messageID) + nodeText + ":" + instanceText + ":",
                "\r\n\r\n",
            ]
            var cuts: [UInt8] = []
            var ranges: [Range<Int>] = []
            for piece in pieces {
                let start = cuts.count
                cuts.append(contentsOf: piece.utf8)
                ranges.append(start..<cuts.count)
            }
            self.cuts = cuts
            cutRanges = ranges
        }
    }

    /// The header block of an exported event, in this order:
    /// `ce-specversion: 1.0`, `ce-id`, `ce-source`, `ce-type`, `ce-time`,
    /// `ce-datacontenttype: application/json`, `ce-ebnode`, `ce-ebinstance`,
    /// `ce-ebseq`, `ce-ebpid`, `ce-ebuid`, `ce-ebgid`, `Nats-Msg-Id: NODE:INSTANCE:SEQ`,
    /// written straight into bytes (`HeaderBlockWriter`: no `Headers` value,
    /// no String per field; about 370 bytes).
    /// - Parameter instance: the local broker's `instance` (its `seq` counts within it).
    package static func exportBlock(_ raw: RawEvent, node: NodeName, instance: String) -> [UInt8] {
        exportBlock(raw, lines: ExportLines(node: node, instance: instance))
    }

    /// `exportBlock(_:node:instance:)` with the constant lines encoded already.
    package static func exportBlock(_ raw: RawEvent, lines: ExportLines) -> [UInt8] {
        let event = raw.metadata
        var block = HeaderBlockWriter(capacity: 384 + event.id.utf8.count + event.source.utf8.count + event.type.utf8.count)
        block.append(lines.head)
        block.append(HeaderName.id, event.id)
        block.append(HeaderName.source, event.source)
        block.append(HeaderName.type, event.type)
        block.append(HeaderName.time, event.time)
        block.append(lines.middle)
        block.append(HeaderName.seq, event.seq)
        // pid: a kernel pid is never negative; a negative one is written as the broker sent it.
        if event.pid >= 0 { block.append(HeaderName.pid, UInt64(event.pid)) } else { block.append(HeaderName.pid, String(event.pid)) }
        block.append(HeaderName.uid, UInt64(event.uid))
        block.append(HeaderName.gid, UInt64(event.gid))
        block.append(HeaderName.messageID, joining: lines.node.text, lines.instance, last: event.seq)
        return block.finish()
    }

    /// (issue 36) The length of the block `writeExport` writes for `frame`.
    static func exportBlockCount(_ frame: ExportFrame, lines: ExportLines) -> Int {
        lines.cuts.count + frame.id.count + frame.source.count + frame.type.count + frame.time.count + 2 * frame.seqDigits.count
            + frame.pid.count + frame.uid.count + frame.gid.count
    }

    /// (issue 36) The block `exportBlock` writes for the event of `frame`,
    /// byte for byte, written with `w` from the frame's bytes (`ExportFrame`
    /// takes only values a header carries as themselves, so nothing is
    /// encoded): `exportBlockCount` bytes.
    static func writeExport(_ frame: ExportFrame, lines: ExportLines, into w: inout RawWriter) {
        lines.cuts.withByteView { cuts in
            let at = lines.cutRanges
            w.put(cuts.extracting(at[0]))
            w.put(frame.id)
            w.put(cuts.extracting(at[1]))
            w.put(frame.source)
            w.put(cuts.extracting(at[2]))
            w.put(frame.type)
            w.put(cuts.extracting(at[3]))
            w.put(frame.time)
            w.put(cuts.extracting(at[4]))
            w.put(frame.seqDigits)
            w.put(cuts.extracting(at[5]))
            w.put(frame.pid)
            w.put(cuts.extracting(at[6]))
            w.put(frame.uid)
            w.put(cuts.extracting(at[7]))
            w.put(frame.gid)
            w.put(cuts.extracting(at[8]))
            w.put(frame.seqDigits)
            w.put(cuts.extracting(at[9]))
        }
    }

    /// What an imported message's headers say.
    package struct Imported: Equatable, Sendable {
        package var origin: Origin
        package var source: String?
        package var id: String?
        /// `ce-ebnode` as sent (the subject's node is what counts; they must agree).
        package var assertedNode: String?
    }

    /// Reads the header block of a message on `PREFIX.evt.NODE.TYPE` in one
    /// pass over its bytes: names are matched as bytes (ASCII
    /// case-insensitively), numbers read from the bytes, and Strings made
    /// only for the four values kept (`ce-id`, `ce-source`, `ce-time`,
    /// `ce-ebinstance`). Absent headers leave their field nil (a plain NATS
    /// publisher sends none).
    /// - Parameter block: the HMSG's raw header block (`Message.headerBlock`), nil for a MSG.
    /// - Returns: nil, with `problem` set, when the block is malformed
    ///   (`HeaderError`) or a present header is: `ce-ebseq`/`ce-ebpid`/
    ///   `ce-ebuid`/`ce-ebgid` not a decimal integer in range, `ce-ebnode` not
    ///   the subject's node, `ce-type` not the subject's type, or a value over 4096 bytes;
    ///   (issue 37) also when a `ce-` header appears twice, a value read
    ///   decodes to invalid UTF-8 or a control character other than TAB, LF,
    ///   CR, or the block has
    ///   more than `maxImportedHeaders` fields.
    package static func `import`(_ block: [UInt8]?, node: NodeName, type: EventType, problem: inout String?) -> Imported? {
        var recent = RecentValues()
        return `import`(block, node: node, type: type, recent: &recent, problem: &problem)
    }

    /// The `ce-ebinstance` and `ce-source` values of the last import: the
    /// next one from the same broker run and publisher shares their Strings
    /// (a compare of the bytes instead of an allocation and a UTF-8 check).
    package struct RecentValues: Sendable {
        var instance = ""
        var source = ""
        package init() {}
    }

    /// `import(_:node:type:problem:)`, reusing `recent`'s Strings when a value is the same.
    package static func `import`(_ block: [UInt8]?, node: NodeName, type: EventType, recent: inout RecentValues, problem: inout String?) -> Imported? {
        var result = Imported(origin: Origin(node: node.text))
        guard let block else { return result }
        // An eventbus bridge's block, as `exportBlock` writes it: read by position.
        switch importExportBlock(block.span.bytes, node: node, type: type, recent: &recent, into: &result) {
        case .taken: return result
        case .refused(let text):
            problem = text
            return nil
        case .other:
            result = Imported(origin: Origin(node: node.text))
        }
        var scratch: [UInt8] = []
        var failure: String?
        // (issue 37) At most `maxImportedHeaders` fields, each `ce-` name once.
        var fields = 0
        var seen: UInt16 = 0
        var otherNames: [[UInt8]] = []
        let walked = Result { () throws(HeaderError) in
                try Headers.forEachField(block.span.bytes) { name, encoded in
                    fields += 1
                    guard fields <= maxImportedHeaders else {
                        failure = "more than \(maxImportedHeaders) headers"
                        return false
                    }
                    guard let field = importedField(name) else {
                        if isCloudEventsName(name) {
                            let lowered = Array(copying: name).map(lower)
                            guard !otherNames.contains(lowered) else {
                                failure = "header \(String(decoding: lowered, as: UTF8.self)) appears twice"
                                return false
                            }
                            otherNames.append(lowered)
                        }
                        return true  // ce-specversion, Nats-Msg-Id, anything else
                    }
                    guard seen & field.bit == 0 else {
                        failure = "header \(field.name) appears twice"
                        return false
                    }
                    seen |= field.bit
                    // The value as sent: percent-decoded only when it has a `%`.
                    guard encoded.firstOffset(of: 0x25) != nil else {
                        failure = checkedText(field, encoded) ?? take(field, encoded, into: &result, recent: &recent, node: node, type: type)
                        return failure == nil
                    }
                    scratch.removeAll(keepingCapacity: true)
                    Headers.percentDecoded(encoded, into: &scratch)
                    let decoded = scratch.span.bytes
                    failure = checkedText(field, decoded) ?? take(field, decoded, into: &result, recent: &recent, node: node, type: type)
                    return failure == nil
                }
        }
        if case .failure(let error) = walked {
            problem = error.description
            return nil
        }
        if let failure {
            problem = failure
            return nil
        }
        return result
    }

    /// What `importExportBlock` made of a block.
    private enum ExportBlockMatch {
        /// Not exactly the shape `exportBlock` writes: the general walk reads it.
        case other
        /// Read into the result.
        case taken
        /// The shape, but a value is refused (the general walk would refuse it the same way).
        case refused(String)
    }

    /// (issue 36) Reads a block of exactly the shape `exportBlock` writes
    /// (`exportBlockRanges`). Every field is then stored by `take`, in the
    /// block's order, as the general walk would store it; anything else, a
    /// peer's block or one with percent-encoded values, is `.other` and goes
    /// the general way. The block's name and value scanning is then one pass
    /// with no name matching, duplicate or count checks: those cannot fail
    /// for this shape.
    private static func importExportBlock(_ block: RawSpan, node: NodeName, type: EventType, recent: inout RecentValues,
                                          into result: inout Imported) -> ExportBlockMatch {
        guard let r = exportBlockRanges(block) else { return .other }
        // In the block's order, as the general walk stores them; the first problem refuses it.
        var problem = take(.id, block.extracting(r.id), into: &result, recent: &recent, node: node, type: type)
        if problem == nil { problem = take(.source, block.extracting(r.source), into: &result, recent: &recent, node: node, type: type) }
        if problem == nil { problem = take(.type, block.extracting(r.type), into: &result, recent: &recent, node: node, type: type) }
        if problem == nil { problem = take(.time, block.extracting(r.time), into: &result, recent: &recent, node: node, type: type) }
        if problem == nil { problem = take(.node, block.extracting(r.node), into: &result, recent: &recent, node: node, type: type) }
        if problem == nil { problem = take(.instance, block.extracting(r.instance), into: &result, recent: &recent, node: node, type: type) }
        if problem == nil { problem = take(.seq, block.extracting(r.seq), into: &result, recent: &recent, node: node, type: type) }
        if problem == nil { problem = take(.pid, block.extracting(r.pid), into: &result, recent: &recent, node: node, type: type) }
        if problem == nil { problem = take(.uid, block.extracting(r.uid), into: &result, recent: &recent, node: node, type: type) }
        if problem == nil { problem = take(.gid, block.extracting(r.gid), into: &result, recent: &recent, node: node, type: type) }
        if let problem { return .refused(problem) }
        return .taken
    }

    /// Where the values of an export block are (`exportBlockRanges`): byte
    /// ranges of the block, each a value of printable ASCII without `%`.
    struct ExportBlockRanges {
        var id, source, type, time, node, instance, seq, pid, uid, gid: Range<Int>
        /// No value holds a `"` or `\` (nothing to escape in JSON).
        var plain: Bool
    }

    /// The values of a block of exactly the shape `exportBlock` writes:
    /// `NATS/1.0`, its thirteen lines in its order, names as it writes them,
    /// each `name: value` with one space and a value of printable ASCII
    /// without `%` (so nothing to decode, trim or check for control
    /// characters) that neither starts nor ends with a space, then the empty
    /// line. Nil for any other block.
    static func exportBlockRanges(_ block: RawSpan) -> ExportBlockRanges? {
        var p = 0
        var plain = true
        guard expect("NATS/1.0\r\nce-specversion: ", block, &p), value(block, &p, &plain) != nil,
              expect("ce-id: ", block, &p), let id = value(block, &p, &plain),
              expect("ce-source: ", block, &p), let source = value(block, &p, &plain),
              expect("ce-type: ", block, &p), let typeValue = value(block, &p, &plain),
              expect("ce-time: ", block, &p), let time = value(block, &p, &plain),
              expect("ce-datacontenttype: ", block, &p), value(block, &p, &plain) != nil,
              expect("ce-ebnode: ", block, &p), let nodeValue = value(block, &p, &plain),
              expect("ce-ebinstance: ", block, &p), let instance = value(block, &p, &plain),
              expect("ce-ebseq: ", block, &p), let seq = value(block, &p, &plain),
              expect("ce-ebpid: ", block, &p), let pid = value(block, &p, &plain),
              expect("ce-ebuid: ", block, &p), let uid = value(block, &p, &plain),
              expect("ce-ebgid: ", block, &p), let gid = value(block, &p, &plain),
              expect("Nats-Msg-Id: ", block, &p), value(block, &p, &plain) != nil,
              expect("\r\n", block, &p), p == block.byteCount else { return nil }
        return ExportBlockRanges(id: id, source: source, type: typeValue, time: time, node: nodeValue, instance: instance,
                                 seq: seq, pid: pid, uid: uid, gid: gid, plain: plain)
    }

    /// (issue 36, third pass) What an export block asserts, read without a
    /// String: its text values as ranges of the block, its numbers read.
    package struct ExportBlockValues {
        package var id, source, time, instance: Range<Int>
        /// The numbers' digits, as sent (`decimal` read them; see `canonical`).
        package var seqDigits, pidDigits, uidDigits, gidDigits: Range<Int>
        package var seq: UInt64
        package var pid: Int64
        package var uid, gid: UInt64
        /// No text value holds a `"` or `\`, and no number a leading zero:
        /// every value is copied into JSON as it is.
        package var plain: Bool
    }

    /// (issue 36, third pass) The values of an export block of a message on
    /// `PREFIX.evt.NODE.TYPE` when `import` would take every one of them as
    /// they are: the block of `exportBlockRanges`'s shape, each value at most
    /// 4096 bytes, `ce-type` and `ce-ebnode` the subject's, the numbers
    /// within `take`'s ranges. Nil otherwise (another shape, or a value
    /// `import` refuses): `import` then reads it and says why.
    package static func exportBlockValues(_ block: RawSpan, node: NodeName, type: EventType) -> ExportBlockValues? {
        guard let r = exportBlockRanges(block),
              r.id.count <= 4096, r.source.count <= 4096, r.time.count <= 4096, r.instance.count <= 4096,
              same(block.extracting(r.type), type.name), same(block.extracting(r.node), node.text),
              let seq = decimal(block.extracting(r.seq), max: UInt64.max),
              let pid = decimal(block.extracting(r.pid), max: UInt64(Int32.max)),
              let uid = decimal(block.extracting(r.uid), max: UInt64(UInt32.max)),
              let gid = decimal(block.extracting(r.gid), max: UInt64(UInt32.max)) else { return nil }
        let canonical = canonicalDigits(block, r.seq) && canonicalDigits(block, r.pid) && canonicalDigits(block, r.uid) && canonicalDigits(block, r.gid)
        return ExportBlockValues(id: r.id, source: r.source, time: r.time, instance: r.instance,
                                 seqDigits: r.seq, pidDigits: r.pid, uidDigits: r.uid, gidDigits: r.gid,
                                 seq: seq, pid: Int64(pid), uid: uid, gid: gid, plain: r.plain && canonical)
    }

    /// Whether decimal digits at `range` are written as JSON writes their number (no leading zero).
    private static func canonicalDigits(_ block: RawSpan, _ range: Range<Int>) -> Bool {
        range.count == 1 || block.unsafeLoad(fromByteOffset: range.lowerBound, as: UInt8.self) != 0x30
    }

    /// `importExportBlock`: whether `text` comes next at `p` (then past it).
    @inline(__always)
    private static func expect(_ text: StaticString, _ block: RawSpan, _ p: inout Int) -> Bool {
        guard block.hasBytes(text, at: p) else { return false }
        p += text.utf8CodeUnitCount
        return true
    }

    /// `exportBlockRanges`: the value at `p`, up to its CRLF (then past it),
    /// when it is printable ASCII without `%` and neither starts nor ends
    /// with a space; `plain` turns false when it holds a `"` or `\`.
    /// (issue 36, third pass) Eight bytes at a time while none is outside
    /// 0x20-0x7E or one of `%`, `"`, `\` (the CR ending the value is below
    /// 0x20) up to the first byte that is, then byte by byte from there: the
    /// ~250 value bytes of a block took about 3,000 instructions per import
    /// byte by byte.
    @inline(__always)
    private static func value(_ block: RawSpan, _ p: inout Int, _ plain: inout Bool) -> Range<Int>? {
        let start = p
        let n = block.byteCount
        var i = start
        while i &+ 8 <= n {
            let w = UInt64(littleEndian: block.unsafeLoadUnaligned(fromByteOffset: i, as: UInt64.self))
            let below = (w &- 0x2020_2020_2020_2020) & ~w  // a byte under 0x20 (or over 0x7F: `w & high`)
            let special = zeroByte(w ^ 0x7F7F_7F7F_7F7F_7F7F) | zeroByte(w ^ 0x2525_2525_2525_2525)
                | zeroByte(w ^ 0x2222_2222_2222_2222) | zeroByte(w ^ 0x5C5C_5C5C_5C5C_5C5C)
            let stop = (below | w | special) & 0x8080_8080_8080_8080
            if stop != 0 {
                // The lowest flagged byte is exact (a borrow only runs upward):
                // the bytes before it pass; it (the CR, usually) is read below.
                i &+= stop.trailingZeroBitCount &>> 3
                break
            }
            i &+= 8
        }
        let bytes = Span<UInt8>(_bytes: block)
        while i < n {
            let b = bytes[unchecked: i]
            if b == 0x0D { break }
            guard b >= 0x20 && b < 0x7F && b != 0x25 else { return nil }
            if b == 0x22 || b == 0x5C { plain = false }
            i &+= 1
        }
        guard i > start, i + 1 < n, bytes[i + 1] == 0x0A, bytes[start] != 0x20, bytes[i - 1] != 0x20 else { return nil }
        p = i + 2
        return start..<i
    }

    /// The high bit of each byte of `w` that is zero (and maybe of some
    /// bytes above such a byte: enough for "is there one").
    @inline(__always) private static func zeroByte(_ w: UInt64) -> UInt64 {
        (w &- 0x0101_0101_0101_0101) & ~w & 0x8080_8080_8080_8080
    }

    /// (issue 37) Header fields an imported message may have at most (a
    /// bridge's export has 13; more is refused as `bad_header`).
    package static let maxImportedHeaders = 64

    /// Whether a header name starts with `ce-` (ASCII case-insensitive).
    private static func isCloudEventsName(_ span: RawSpan) -> Bool {
        let name = Span<UInt8>(_bytes: span)
        return name.count >= 3 && lower(name[0]) == 0x63 && lower(name[1]) == 0x65 && name[2] == 0x2D
    }

    /// (issue 37) The problem when a decoded value is not UTF-8 text free of
    /// control characters (C0 but TAB, LF and CR; DEL; C1): nil when it is.
    /// TAB, LF and CR stay: the local bus takes them in `source` and `id`,
    /// the exporter percent-encodes them, and they round-trip intact.
    private static func checkedText(_ field: ImportedField, _ span: RawSpan) -> String? {
        // Printable ASCII, the usual case: one pass, no decoding.
        let value = Span<UInt8>(_bytes: span)
        if value.indices.allSatisfy({ value[$0] >= 0x20 && value[$0] < 0x7F }) { return nil }
        var bytes = Array(copying: span).makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&bytes) {
            case .scalarValue(let scalar):
                let v = scalar.value
                if (v < 0x20 && v != 0x09 && v != 0x0A && v != 0x0D) || (v >= 0x7F && v <= 0x9F) {
                    return "\(field.name) holds the control character U+\(String(scalar.value, radix: 16, uppercase: true))"
                }
            case .emptyInput: return nil
            case .error: return "\(field.name) is not UTF-8"
            }
        }
    }

    /// Stores one known field. - Returns: the problem when the value is not acceptable.
    @inline(__always)
    private static func take(_ field: ImportedField, _ value: RawSpan, into result: inout Imported, recent: inout RecentValues,
                             node: NodeName, type: EventType) -> String? {
        guard value.byteCount <= 4096 else { return "\(field.name) is longer than 4096 bytes" }
        switch field {
        case .id: result.id = String(decodingUTF8: value)
        case .source: reuse(value, &recent.source); result.source = recent.source
        case .time: result.origin.time = String(decodingUTF8: value)
        case .instance: reuse(value, &recent.instance); result.origin.instance = recent.instance
        case .type:
            guard same(value, type.name) else { return "ce-type \(shown(value, 80)) is not the subject's type \(type.name)" }
        case .node:
            guard same(value, node.text) else { return "ce-ebnode \(shown(value, 80)) is not the subject's node \(node.text)" }
            result.assertedNode = node.text
        case .seq:
            guard let seq = decimal(value, max: UInt64.max) else { return "ce-ebseq \(shown(value, 40)) is not a number" }
            result.origin.seq = seq
        case .pid:
            guard let pid = decimal(value, max: UInt64(Int32.max)) else { return "ce-ebpid \(shown(value, 40)) is not a pid" }
            result.origin.pid = Int64(pid)
        case .uid:
            guard let uid = decimal(value, max: UInt64(UInt32.max)) else { return "ce-ebuid \(shown(value, 40)) is not a uid" }
            result.origin.uid = uid
        case .gid:
            guard let gid = decimal(value, max: UInt64(UInt32.max)) else { return "ce-ebgid \(shown(value, 40)) is not a gid" }
            result.origin.gid = gid
        }
        return nil
    }

    /// `last`, made again from `value` only when its bytes differ (the same source and instance come over and over).
    @inline(__always) private static func reuse(_ value: RawSpan, _ last: inout String) {
        if !same(value, last) { last = String(decodingUTF8: value) }
    }

    /// The first `limit` bytes of `value`, quoted for a message.
    private static func shown(_ value: RawSpan, _ limit: Int) -> String {
        String(decodingUTF8: value.extracting(first: limit)).debugDescription
    }

    /// Whether `value` holds exactly the bytes of `text` (one memcmp).
    private static func same(_ value: RawSpan, _ text: String) -> Bool {
        text.withUTF8Bytes { value.sameBytes(as: $0) }
    }

    /// The headers `import` reads.
    private enum ImportedField {
        case id, source, time, instance, type, node, seq, pid, uid, gid

        /// Its bit in a set of the fields seen.
        var bit: UInt16 {
            switch self {
            case .id: 1
            case .source: 2
            case .time: 4
            case .instance: 8
            case .type: 16
            case .node: 32
            case .seq: 64
            case .pid: 128
            case .uid: 256
            case .gid: 512
            }
        }

        var name: String {
            switch self {
            case .id: HeaderName.id
            case .source: HeaderName.source
            case .time: HeaderName.time
            case .instance: HeaderName.instance
            case .type: HeaderName.type
            case .node: HeaderName.node
            case .seq: HeaderName.seq
            case .pid: HeaderName.pid
            case .uid: HeaderName.uid
            case .gid: HeaderName.gid
            }
        }
    }

    /// The field a header name is (ASCII case-insensitive), by its length and bytes; nil for one `import` skips.
    private static func importedField(_ span: RawSpan) -> ImportedField? {
        // Every name read starts with `ce-`.
        let name = Span<UInt8>(_bytes: span)
        guard name.count >= 5, lower(name[0]) == 0x63, lower(name[1]) == 0x65, name[2] == 0x2D else { return nil }
        switch name.count - 3 {
        case 2: return isRest(name, "id") ? .id : nil
        case 4: return isRest(name, "time") ? .time : isRest(name, "type") ? .type : nil
        case 5: return isRest(name, "ebseq") ? .seq : isRest(name, "ebpid") ? .pid : isRest(name, "ebuid") ? .uid : isRest(name, "ebgid") ? .gid : nil
        case 6: return isRest(name, "source") ? .source : isRest(name, "ebnode") ? .node : nil
        case 10: return isRest(name, "ebinstance") ? .instance : nil
        default: return nil
        }
    }

    /// Whether `name` after its `ce-` is `text` (lower case), ASCII case-insensitive.
    @inline(__always) private static func isRest(_ name: Span<UInt8>, _ text: StaticString) -> Bool {
        let k = text.utf8CodeUnitCount
        guard name.count - 3 == k else { return false }
        for i in 0..<k where lower(name[3 + i]) != text.utf8Start[i] { return false }
        return true
    }

    @inline(__always) private static func lower(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }

    /// Digits only (no sign, no spaces), at most `max`.
    static func decimal(_ span: RawSpan, max: UInt64) -> UInt64? {
        let bytes = Span<UInt8>(_bytes: span)
        guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
        var value: UInt64 = 0
        for i in bytes.indices {
            let b = bytes[i]
            guard b >= 0x30 && b <= 0x39 else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(b - 0x30))
            guard !o1, !o2 else { return nil }
            value = sum
        }
        return value <= max ? value : nil
    }
}
