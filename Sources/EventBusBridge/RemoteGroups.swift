// (issue 36) Queue groups across machines, the bridge's side, with no I/O
// (docs/BRIDGE.md "Queue groups across machines", PROTOCOL-NOTES.md "Queue
// groups across machines (issue 36)"):
//
// - Out (`--export-group NAME:PATTERN`): the bridge is a *fallback member*
//   of the local groups named NAME on PATTERN (`subscribe` with `group`,
//   `fallback: true`), so the broker hands it an event only when no local
//   member of NAME may receive it, marked `"group":"NAME"` as its last
//   member. It goes out as HPUB `PREFIX.grp.NAME.NODE.TYPE` with the
//   export's CloudEvents headers and, for a keyed event, `eb-key`.
// - In (`--import-group NAME:PATTERN`): `SUB PREFIX.grp.NAME.*.PATTERN` in
//   the NATS queue group `eventbus-group-NAME`, so NATS hands each such
//   event to one importing machine; the bridge publishes it on its bus with
//   `group: NAME` (and `key`), for one local member of NAME only.
//
// Before editing: a group name that crosses is a NATS subject token (1-64
// of A-Z a-z 0-9 _ -), a stricter rule than the broker's for local groups
// (which also allows `.` and `:`): `GroupSpec` is the one place that checks it.
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession

/// `NAME:PATTERN`: the queue group NAME's events of PATTERN.
package struct GroupSpec: Hashable, Sendable, CustomStringConvertible {
    package let name: String
    package let pattern: Pattern

    /// `NAME:PATTERN`, NAME 1-64 of `A-Z a-z 0-9 _ -` (a NATS subject token).
    package init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let name = String(text[..<colon])
        guard NodeName.isToken(name, maxBytes: 64), let pattern = Pattern(String(text[text.index(after: colon)...])) else { return nil }
        self.name = name
        self.pattern = pattern
    }

    package var description: String { "\(name):\(pattern.text)" }
}

/// The header names of group events across machines (besides the `ce-` ones).
package enum GroupHeaderName {
    /// On a keyed event: its `key`.
    package static let key = "eb-key"
}

/// A group event from another machine, for the local members of `group`:
/// `{"op":"publish",...,"origin":{...},"data":...,"group":"G","key":"k"}`.
package struct GroupPublish: Equatable, Sendable {
    package var event: LocalPublish
    package var group: String
    package var key: String?

    /// Appends its `publish` frame, LF included, without `req`.
    package func appendFrame(to out: inout [UInt8]) {
        let start = out.count
        event.appendFrame(to: &out)
        guard out.count >= start + 2 else { return }
        out.removeLast(2)  // `}` and LF
        FrameEncoder.appendField("group", string: group, to: &out)
        if let key { FrameEncoder.appendField("key", string: key, to: &out) }
        out.append(contentsOf: [0x7D, 0x0A])
    }
}

package struct RemoteGroups {
    package let mapping: SubjectMapping
    /// Groups whose events may leave (the fallback memberships).
    package let exports: [GroupSpec]
    /// Groups whose events other machines may hand to local members.
    package let imports: [GroupSpec]
    private let groupHead: String
    /// Import subscriptions: sid -> group name.
    private var importSIDs: [SubscriptionID: String] = [:]

    package private(set) var counters = Counters()

    package struct Counters: Equatable, Sendable {
        /// Group events sent to NATS (no local member took them).
        package var sent = 0
        /// Group events from other machines published to local members.
        package var received = 0
        /// Incoming group events dropped (a bad subject, header or payload, our own node).
        package var dropped = 0
    }

    package init(mapping: SubjectMapping, exports: [GroupSpec], imports: [GroupSpec]) {
        self.mapping = mapping
        self.exports = Array(Set(exports)).sorted { ($0.name, $0.pattern.text) < ($1.name, $1.pattern.text) }
        self.imports = Array(Set(imports)).sorted { ($0.name, $0.pattern.text) < ($1.name, $1.pattern.text) }
        groupHead = "\(mapping.prefix.text).grp."
    }

    package var isEmpty: Bool { exports.isEmpty && imports.isEmpty }

    /// The NATS queue group of the machines importing group `name`.
    package static func queueGroup(_ name: String) -> Subject { Subject("eventbus-group-" + name)! }

    /// The names of the exported groups (the frames' `"group"` marks).
    package var exportedNames: [String] { Array(Set(exports.map(\.name))).sorted() }

    /// The NATS subscriptions to make (once; the client renews them at every reconnect).
    package mutating func subscribe(_ subscribe: (Subject, Subject?) -> SubscriptionID) {
        for spec in imports {
            let sid = subscribe(Subject(pattern: groupHead + spec.name + ".*." + spec.pattern.text)!, RemoteGroups.queueGroup(spec.name))
            importSIDs[sid] = spec.name
        }
    }

    /// Whether a NATS message is for this table (its subscription's sid).
    package func owns(_ sid: SubscriptionID) -> Bool { importSIDs[sid] != nil }

    // MARK: Out

    /// `PREFIX.grp.NAME.NODE.TYPE`.
    package func subject(group: String, type: String) -> Subject? { Subject(groupHead + group + "." + mapping.node.text + "." + type) }

    /// The NATS message for a group event no local member took (nil: its
    /// type is not a subject, or its group is not one we export).
    package mutating func send(_ event: RawEvent, group: String, instance: String) -> OutgoingMessage? {
        guard exports.contains(where: { $0.name == group }), let type = EventType(event.metadata.type), !type.isReserved,
              let subject = subject(group: group, type: type.name) else { return nil }
        var block = CloudEventsHeaders.exportBlock(event, node: mapping.node, instance: instance)
        if let key = event.metadata.key {
            var extra = HeaderBlockWriter(capacity: 32 + key.utf8.count)
            extra.append(GroupHeaderName.key, key)
            block.removeLast(2)  // the block's closing CRLF
            block.append(contentsOf: extra.finish().dropFirst(RemoteGroups.blockHead))
        }
        counters.sent += 1
        return OutgoingMessage(subject: subject, headerBlock: block, payload: event.data, tag: event.metadata.seq)
    }

    /// `NATS/1.0\r\n`.
    private static let blockHead = 10

    // MARK: In

    package enum Incoming: Equatable {
        case publish(GroupPublish)
        /// Not an event we can take (`reason` for the log).
        case drop(String)
    }

    /// Reads a group event from another machine.
    package mutating func receive(_ message: Message) -> Incoming {
        guard let group = importSIDs[message.sid] else { return .drop("no group subscription \(message.sid)") }
        let type: EventType, imported: CloudEventsHeaders.Imported
        switch RemoteSubject.read(message, head: groupHead + group + ".", ownNode: mapping.node, what: "group event") {
        case .success(let read): (type, imported) = (read.type, read.imported)
        case .failure(let refusal): counters.dropped += 1; return .drop(refusal.text)
        }
        var key: String? = nil
        if let text = message.headers?.first(GroupHeaderName.key) {
            guard !text.isEmpty, text.utf8.count <= 255 else { counters.dropped += 1; return .drop("bad \(GroupHeaderName.key) on \(message.subject)") }
            key = text
        }
        let data: JSONText?
        switch BridgeCore.localData(message.payload) {
        case .absent: data = nil
        case .value(let value): data = value
        case .invalid: counters.dropped += 1; return .drop("the data of a group event on \(message.subject) is not one JSON value")
        }
        counters.received += 1
        let event = LocalPublish(type: type, data: data, source: imported.source, id: imported.id, origin: imported.origin)
        return .publish(GroupPublish(event: event, group: group, key: key))
    }
}
