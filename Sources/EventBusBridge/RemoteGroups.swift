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
// - In (`--import-group NAME:PATTERN`): the bridge watches the patterns of
//   NAME's members on its bus that overlap PATTERN (`subscribe` with
//   `servers` and `group`, Broker+ServerWatch.swift) and, for each S it is
//   told of, holds `SUB PREFIX.grp.NAME.*.M` (M: the types both PATTERN and S
//   match) in the NATS queue group `eventbus-group-NAME`, so NATS hands each
//   such event to one importing machine that has a member for it (none
//   subscribed: nobody takes it, as with no importing machine at all). The
//   bridge publishes it on its bus with `group: NAME` (and `key`), for one
//   local member of NAME only. A broker without the `group-servers`
//   feature: `SUB PREFIX.grp.NAME.*.PATTERN` for the whole pattern, as before.
//
// - (attacker6) `NAME:PATTERN@USER`: only USER's local group NAME is the
//   group across machines here: the fallback membership, the watch and the
//   group publishes carry `"uid":N` (USER's uid), so another local user's
//   group of that name neither holds back its events nor receives other
//   machines'. Without `@USER`, every uid's group of the name takes part
//   (the older meaning, kept; the bridge warns: `unqualifiedWarning`).
//
// Before editing: a group name that crosses is a NATS subject token (1-64
// of A-Z a-z 0-9 _ -), a stricter rule than the broker's for local groups
// (which also allows `.` and `:`): `GroupSpec` is the one place that checks it.
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession
import EventBusSystem

/// `NAME:PATTERN[@USER]`: the queue group NAME's events of PATTERN (of
/// local user USER's group NAME only, when given).
package struct GroupSpec: Hashable, Sendable, CustomStringConvertible {
    package let name: String
    package let pattern: Pattern
    /// (attacker6) USER as written (a name or a uid), and its uid.
    package let user: String?
    package let uid: UInt32?

    /// `NAME:PATTERN[@USER]`, NAME 1-64 of `A-Z a-z 0-9 _ -` (a NATS subject
    /// token), USER a local user's name or a uid. Nil: not that, or no such user.
    package init?(_ text: String, uidOfUser: (String) -> UInt32? = UserDatabase.uid(ofUser:)) {
        guard case .success(let spec) = GroupSpec.read(text, uidOfUser: uidOfUser) else { return nil }
        self = spec
    }

    private init(name: String, pattern: Pattern, user: String?, uid: UInt32?) {
        self.name = name
        self.pattern = pattern
        self.user = user
        self.uid = uid
    }

    /// Reads `NAME:PATTERN[@USER]`. - Returns: the spec, or why not (one line).
    package static func read(_ text: String, uidOfUser: (String) -> UInt32? = UserDatabase.uid(ofUser:)) -> Result<GroupSpec, SettingsError> {
        let shape = SettingsError("\(text.debugDescription) is not NAME:PATTERN[@USER] (NAME 1-64 of A-Z a-z 0-9 _ -, a queue group that crosses; PATTERN an eventbus pattern; USER the local user whose group NAME it is)")
        var body = Substring(text)
        var user: String? = nil
        if let at = text.lastIndex(of: "@") {  // never in a pattern
            user = String(text[text.index(after: at)...])
            body = text[..<at]
        }
        guard let colon = body.firstIndex(of: ":") else { return .failure(shape) }
        let name = String(body[..<colon])
        guard NodeName.isToken(name, maxBytes: 64), let pattern = Pattern(String(body[body.index(after: colon)...])) else { return .failure(shape) }
        guard let user else { return .success(GroupSpec(name: name, pattern: pattern, user: nil, uid: nil)) }
        guard !user.isEmpty else { return .failure(shape) }
        if let number = UInt32(user), number != UInt32.max { return .success(GroupSpec(name: name, pattern: pattern, user: user, uid: number)) }
        guard let uid = uidOfUser(user) else { return .failure(SettingsError("\(text.debugDescription): no local user named \(user.debugDescription)")) }
        return .success(GroupSpec(name: name, pattern: pattern, user: user, uid: uid))
    }

    package var description: String { "\(name):\(pattern.text)" + (user.map { "@" + $0 } ?? "") }

    // One group whether USER is written as a name or a uid.
    package static func == (a: GroupSpec, b: GroupSpec) -> Bool { a.name == b.name && a.pattern == b.pattern && a.uid == b.uid }
    package func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(pattern)
        hasher.combine(uid)
    }

    /// (attacker6) The one warning for specs without `@USER` (nil: none), and
    /// the refusal of a name given with two different users (a group crosses
    /// as one user's): for the start-up log and `--check-config`.
    package static func unqualifiedWarning(exports: [GroupSpec], imports: [GroupSpec]) -> String? {
        let open = exports.filter { $0.uid == nil }.map { "export-group \($0)" } + imports.filter { $0.uid == nil }.map { "import-group \($0)" }
        guard !open.isEmpty else { return nil }
        let names = Array(Set((exports + imports).filter { $0.uid == nil }.map(\.name))).sorted()
        return "\(open.joined(separator: ", ")): without @USER, every local user's group named \(names.joined(separator: ", ")) takes part (another user's group of that name holds back the events that would cross and receives other machines'); name the user whose group crosses: NAME:PATTERN@USER (docs/BRIDGE.md \"Queue groups across machines\")"
    }

    /// A name given with more than one user (or with and without one). - Returns: why, or nil.
    package static func conflict(exports: [GroupSpec], imports: [GroupSpec]) -> String? {
        var users: [String: Set<UInt32?>] = [:]
        for spec in exports + imports { users[spec.name, default: []].insert(spec.uid) }
        guard let name = users.keys.sorted().first(where: { users[$0]!.count > 1 }) else { return nil }
        let written = Array(Set((exports + imports).filter { $0.name == name }.map { $0.user.map { "@" + $0 } ?? "no @USER" })).sorted()
        return "group \(name) is given with \(written.joined(separator: " and ")): a group crosses machines as one local user's group (the same @USER on every export-group and import-group of it)"
    }
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
    /// (attacker6) For this uid's group only (`"uid":N`; the import's `@USER`).
    package var uid: UInt32? = nil

    /// Appends its `publish` frame, LF included, without `req`.
    package func appendFrame(to out: inout [UInt8]) {
        let start = out.count
        event.appendFrame(to: &out)
        guard out.count >= start + 2 else { return }
        out.removeLast(2)  // `}` and LF
        FrameEncoder.appendField("group", string: group, to: &out)
        if let key { FrameEncoder.appendField("key", string: key, to: &out) }
        if let uid { FrameEncoder.appendField("uid", int: UInt64(uid), to: &out) }
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
    /// The patterns of the local members of each import (what the last
    /// watch `ok` listed); the subscriptions they make, by subject.
    private var present: [GroupSpec: [Pattern]] = [:]
    private var importSubscriptions: [String: SubscriptionID] = [:]
    /// The sid before the first import subscription (the bridge's fixed
    /// ones are all at or below it): a larger one on a `PREFIX.grp.` subject
    /// is an import's, current or ended (an event in flight when it ended is
    /// still given to the bus).
    private var lastFixedSID: SubscriptionID?

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

    /// Whether a NATS message is for this table: an import subscription's
    /// (made after the bridge's fixed ones, on a group subject).
    package func owns(_ message: Message) -> Bool {
        guard let last = lastFixedSID, message.sid > last else { return false }
        return message.subject.hasPrefix(groupHead)
    }

    /// The import subscriptions now, by subject (for tests and the log).
    package var importSubjects: [String] { importSubscriptions.keys.sorted() }

    /// The imports whose members are known (to forget when the bus is lost).
    package var watchedImports: [GroupSpec] { Array(present.keys) }

    /// The patterns of the local members of import `spec`'s group that
    /// overlap its pattern changed (a watch's list; `[spec.pattern]` for a
    /// broker without the watch; `[]` when the bus is lost): the NATS
    /// subscriptions follow. `subscribe` makes one and gives its sid,
    /// `unsubscribe` ends one. - Returns: the subjects added and removed.
    @discardableResult
    package mutating func members(_ spec: GroupSpec, _ patterns: [Pattern], subscribe: (Subject, Subject?) -> SubscriptionID,
                                  unsubscribe: (SubscriptionID) -> Void) -> (added: [String], removed: [String]) {
        guard imports.contains(spec) else { return ([], []) }
        present[spec] = patterns.isEmpty ? nil : patterns
        var wanted: [String: [Pattern]] = [:]
        for (imported, list) in present {
            for pattern in list {
                if let both = RemoteRequests.intersection(imported.pattern, pattern) { wanted[imported.name, default: []].append(both) }
            }
        }
        var subjects: [String: String] = [:]  // subject -> group name
        for (name, list) in wanted {
            for pattern in BridgeCore.minimalPatterns(list) { subjects[groupHead + name + ".*." + pattern.text] = name }
        }
        var removed: [String] = []
        for (subject, sid) in importSubscriptions where subjects[subject] == nil {
            unsubscribe(sid)
            importSubscriptions[subject] = nil
            removed.append(subject)
        }
        var added: [String] = []
        for (subject, name) in subjects.filter({ importSubscriptions[$0.key] == nil }).sorted(by: { $0.key < $1.key }) {
            guard let natsSubject = Subject(pattern: subject) else { continue }
            let sid = subscribe(natsSubject, RemoteGroups.queueGroup(name))
            if lastFixedSID == nil { lastFixedSID = SubscriptionID(sid.rawValue - 1) }
            importSubscriptions[subject] = sid
            added.append(subject)
        }
        return (added, removed.sorted())
    }

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
        let name = message.subject.dropFirst(groupHead.count).prefix { $0 != "." }
        guard message.subject.hasPrefix(groupHead), let spec = imports.first(where: { $0.name == name }) else {
            counters.dropped += 1
            return .drop("\(message.subject) is not an imported group's subject")
        }
        let type: EventType, imported: CloudEventsHeaders.Imported
        let group = spec.name
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
        return .publish(GroupPublish(event: event, group: group, key: key, uid: spec.uid))
    }
}
