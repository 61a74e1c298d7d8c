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
import EventBusProtocol

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
    /// The headers of an exported event, in this order:
    /// `ce-specversion: 1.0`, `ce-id`, `ce-source`, `ce-type`, `ce-time`,
    /// `ce-datacontenttype: application/json`, `ce-ebnode`, `ce-ebinstance`,
    /// `ce-ebseq`, `ce-ebpid`, `ce-ebuid`, `ce-ebgid`, `Nats-Msg-Id: NODE:INSTANCE:SEQ`.
    /// - Parameter instance: the local broker's `instance` (its `seq` counts within it).
    public static func export(_ event: LocalEvent, node: NodeName, instance: String) -> Headers {
        var headers = Headers(capacity: 13)
        headers.append(HeaderName.specVersion, "1.0")
        headers.append(HeaderName.id, event.id)
        headers.append(HeaderName.source, event.source)
        headers.append(HeaderName.type, event.type.name)
        headers.append(HeaderName.time, event.time)
        headers.append(HeaderName.dataContentType, "application/json")
        headers.append(HeaderName.node, node.text)
        headers.append(HeaderName.instance, instance)
        headers.append(HeaderName.seq, String(event.seq))
        headers.append(HeaderName.pid, String(event.pid))
        headers.append(HeaderName.uid, String(event.uid))
        headers.append(HeaderName.gid, String(event.gid))
        headers.append(HeaderName.messageID, "\(node.text):\(instance):\(event.seq)")
        return headers
    }

    /// What an imported message's headers say.
    public struct Imported: Equatable, Sendable {
        public var origin: Origin
        public var source: String?
        public var id: String?
        /// `ce-ebnode` as sent (the subject's node is what counts; they must agree).
        public var assertedNode: String?
    }

    /// Reads the headers of a message on `PREFIX.evt.NODE.TYPE` in one pass.
    /// Absent headers leave their field nil (a plain NATS publisher sends none).
    /// - Returns: nil, with `problem` set, when a present header is malformed:
    ///   `ce-ebseq`/`ce-ebpid`/`ce-ebuid`/`ce-ebgid` not a decimal integer in
    ///   range, `ce-ebnode` not the subject's node, `ce-type` not the subject's
    ///   type, or a value over 4096 bytes.
    public static func `import`(_ headers: Headers?, node: NodeName, type: EventType, problem: inout String?) -> Imported? {
        var result = Imported(origin: Origin(node: node.text))
        guard let headers else { return result }
        for (name, value) in headers.fields {
            guard value.utf8.count <= 4096 else {
                problem = "\(name) is longer than 4096 bytes"
                return nil
            }
            // Names are matched case-insensitively (lower-casing only what needs it), by one hash lookup.
            let key = name.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) ? name.lowercased() : name
            switch importedFields[key] {
            case .id?: result.id = value
            case .source?: result.source = value
            case .time?: result.origin.time = value
            case .instance?: result.origin.instance = value
            case .type?:
                guard value == type.name else { problem = "ce-type \(value.prefix(80).debugDescription) is not the subject's type \(type.name)"; return nil }
            case .node?:
                guard value == node.text else { problem = "ce-ebnode \(value.prefix(80).debugDescription) is not the subject's node \(node.text)"; return nil }
                result.assertedNode = value
            case .seq?:
                guard let seq = decimal(value, max: UInt64.max) else { problem = "ce-ebseq \(value.prefix(40).debugDescription) is not a number"; return nil }
                result.origin.seq = seq
            case .pid?:
                guard let pid = decimal(value, max: UInt64(Int32.max)) else { problem = "ce-ebpid \(value.prefix(40).debugDescription) is not a pid"; return nil }
                result.origin.pid = Int64(pid)
            case .uid?:
                guard let uid = decimal(value, max: UInt64(UInt32.max)) else { problem = "ce-ebuid \(value.prefix(40).debugDescription) is not a uid"; return nil }
                result.origin.uid = uid
            case .gid?:
                guard let gid = decimal(value, max: UInt64(UInt32.max)) else { problem = "ce-ebgid \(value.prefix(40).debugDescription) is not a gid"; return nil }
                result.origin.gid = gid
            case nil:
                break  // ce-specversion, ce-datacontenttype, Nats-Msg-Id, anything else
            }
        }
        return result
    }

    /// The headers `import` reads, by wire name.
    private enum ImportedField {
        case id, source, time, instance, type, node, seq, pid, uid, gid
    }

    private static let importedFields: [String: ImportedField] = [
        HeaderName.id: .id, HeaderName.source: .source, HeaderName.time: .time, HeaderName.instance: .instance,
        HeaderName.type: .type, HeaderName.node: .node, HeaderName.seq: .seq, HeaderName.pid: .pid,
        HeaderName.uid: .uid, HeaderName.gid: .gid,
    ]

    /// Digits only (no sign, no spaces), at most `max`.
    static func decimal(_ text: String, max: UInt64) -> UInt64? {
        guard !text.isEmpty, text.utf8.count <= 20, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let value = UInt64(text), value <= max else { return nil }
        return value
    }
}
