// CloudEvents 1.0 in binary mode over NATS headers, both ways: the `ce-*`
// attribute headers and eventbus's extensions (`ce-eb*`) for an exported
// event, plus `Nats-Msg-Id` for JetStream de-duplication; and the reverse,
// from an HMSG's headers to `origin` and the local publish fields.
//
// Before editing: header values are percent-encoded by EventBusNATS's
// `Headers.encoded()` and decoded by its parser, so a CR/LF in `source` or
// `id` travels intact and can never start a header line. Names here are the
// wire names: lower case, as the CloudEvents NATS binding writes them.
import EventBusNATS
import Glibc
import EventBusProtocol
import EventBusSession

/// The header names, as written.
public enum HeaderName {
    public static let specVersion = "ce-specversion"
    public static let id = "ce-id"
    public static let source = "ce-source"
    public static let type = "ce-type"
    public static let time = "ce-time"
    public static let dataContentType = "ce-datacontenttype"
    public static let node = "ce-ebnode"
    public static let instance = "ce-ebinstance"
    public static let seq = "ce-ebseq"
    public static let pid = "ce-ebpid"
    public static let uid = "ce-ebuid"
    public static let gid = "ce-ebgid"
    /// JetStream's de-duplication key: `NODE:INSTANCE:SEQ`.
    public static let messageID = "Nats-Msg-Id"
}

public enum CloudEventsHeaders {
    /// The lines of an export's block that are the same for every event of
    /// one node and broker run, encoded once (`BridgeCore` keeps one per
    /// broker instance): `ce-specversion`, then `ce-datacontenttype`,
    /// `ce-ebnode`, `ce-ebinstance`.
    public struct ExportLines: Equatable, Sendable {
        public let node: NodeName
        public let instance: String
        let head: HeaderBlockWriter.Lines
        let middle: HeaderBlockWriter.Lines

        /// - Parameter instance: the local broker's `instance` (its `seq` counts within it).
        public init(node: NodeName, instance: String) {
            self.node = node
            self.instance = instance
            head = HeaderBlockWriter.lines { $0.append(HeaderName.specVersion, "1.0") }
            middle = HeaderBlockWriter.lines { block in
                block.append(HeaderName.dataContentType, "application/json")
                block.append(HeaderName.node, node.text)
                block.append(HeaderName.instance, instance)
            }
        }
    }

    /// The header block of an exported event, in this order:
    /// `ce-specversion: 1.0`, `ce-id`, `ce-source`, `ce-type`, `ce-time`,
    /// `ce-datacontenttype: application/json`, `ce-ebnode`, `ce-ebinstance`,
    /// `ce-ebseq`, `ce-ebpid`, `ce-ebuid`, `ce-ebgid`, `Nats-Msg-Id: NODE:INSTANCE:SEQ`,
    /// written straight into bytes (`HeaderBlockWriter`: no `Headers` value,
    /// no String per field; about 370 bytes).
    /// - Parameter instance: the local broker's `instance` (its `seq` counts within it).
    public static func exportBlock(_ raw: RawEvent, node: NodeName, instance: String) -> [UInt8] {
        exportBlock(raw, lines: ExportLines(node: node, instance: instance))
    }

    /// `exportBlock(_:node:instance:)` with the constant lines encoded already.
    public static func exportBlock(_ raw: RawEvent, lines: ExportLines) -> [UInt8] {
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

    /// What an imported message's headers say.
    public struct Imported: Equatable, Sendable {
        public var origin: Origin
        public var source: String?
        public var id: String?
        /// `ce-ebnode` as sent (the subject's node is what counts; they must agree).
        public var assertedNode: String?
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
    ///   the subject's node, `ce-type` not the subject's type, or a value over 4096 bytes.
    public static func `import`(_ block: [UInt8]?, node: NodeName, type: EventType, problem: inout String?) -> Imported? {
        var result = Imported(origin: Origin(node: node.text))
        guard let block else { return result }
        var scratch: [UInt8] = []
        var failure: String?
        let walked = block.withUnsafeBytes { raw in
            Result { () throws(HeaderError) in
                try Headers.forEachField(raw) { name, encoded in
                    guard let field = importedField(name) else { return true }  // ce-specversion, Nats-Msg-Id, anything else
                    // The value as sent: percent-decoded only when it has a `%`.
                    guard !encoded.isEmpty, memchr(encoded.baseAddress!, 0x25, encoded.count) != nil else {
                        failure = take(field, encoded, into: &result, node: node, type: type)
                        return failure == nil
                    }
                    scratch.removeAll(keepingCapacity: true)
                    Headers.percentDecoded(encoded, into: &scratch)
                    failure = scratch.withUnsafeBytes { take(field, $0, into: &result, node: node, type: type) }
                    return failure == nil
                }
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

    /// Stores one known field. - Returns: the problem when the value is not acceptable.
    private static func take(_ field: ImportedField, _ value: UnsafeRawBufferPointer, into result: inout Imported, node: NodeName, type: EventType) -> String? {
        func text() -> String { String(decoding: value, as: UTF8.self) }
        func shown(_ limit: Int) -> String { String(decoding: value.prefix(limit), as: UTF8.self).debugDescription }
        guard value.count <= 4096 else { return "\(field.name) is longer than 4096 bytes" }
        switch field {
        case .id: result.id = text()
        case .source: result.source = text()
        case .time: result.origin.time = text()
        case .instance: result.origin.instance = text()
        case .type:
            guard same(value, type.name) else { return "ce-type \(shown(80)) is not the subject's type \(type.name)" }
        case .node:
            guard same(value, node.text) else { return "ce-ebnode \(shown(80)) is not the subject's node \(node.text)" }
            result.assertedNode = node.text
        case .seq:
            guard let seq = decimal(value, max: UInt64.max) else { return "ce-ebseq \(shown(40)) is not a number" }
            result.origin.seq = seq
        case .pid:
            guard let pid = decimal(value, max: UInt64(Int32.max)) else { return "ce-ebpid \(shown(40)) is not a pid" }
            result.origin.pid = Int64(pid)
        case .uid:
            guard let uid = decimal(value, max: UInt64(UInt32.max)) else { return "ce-ebuid \(shown(40)) is not a uid" }
            result.origin.uid = uid
        case .gid:
            guard let gid = decimal(value, max: UInt64(UInt32.max)) else { return "ce-ebgid \(shown(40)) is not a gid" }
            result.origin.gid = gid
        }
        return nil
    }

    /// Whether `value` holds exactly the bytes of `text` (one memcmp).
    private static func same(_ value: UnsafeRawBufferPointer, _ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            bytes.count == value.count && (bytes.isEmpty || memcmp(bytes.baseAddress!, value.baseAddress!, bytes.count) == 0)
        }
    }

    /// The headers `import` reads.
    private enum ImportedField {
        case id, source, time, instance, type, node, seq, pid, uid, gid

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
    private static func importedField(_ name: UnsafeRawBufferPointer) -> ImportedField? {
        // Every name read starts with `ce-`.
        guard name.count >= 5, lower(name[0]) == 0x63, lower(name[1]) == 0x65, name[2] == 0x2D else { return nil }
        let rest = UnsafeRawBufferPointer(rebasing: name[3...])
        func isRest(_ text: StaticString) -> Bool {
            text.utf8CodeUnitCount == rest.count && zip(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount), rest).allSatisfy { $0 == lower($1) }
        }
        switch rest.count {
        case 2: return isRest("id") ? .id : nil
        case 4: return isRest("time") ? .time : isRest("type") ? .type : nil
        case 5: return isRest("ebseq") ? .seq : isRest("ebpid") ? .pid : isRest("ebuid") ? .uid : isRest("ebgid") ? .gid : nil
        case 6: return isRest("source") ? .source : isRest("ebnode") ? .node : nil
        case 10: return isRest("ebinstance") ? .instance : nil
        default: return nil
        }
    }

    @inline(__always) private static func lower(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }

    /// Digits only (no sign, no spaces), at most `max`.
    static func decimal(_ bytes: UnsafeRawBufferPointer, max: UInt64) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
        var value: UInt64 = 0
        for b in bytes {
            guard b >= 0x30 && b <= 0x39 else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(b - 0x30))
            guard !o1, !o2 else { return nil }
            value = sum
        }
        return value <= max ? value : nil
    }
}
