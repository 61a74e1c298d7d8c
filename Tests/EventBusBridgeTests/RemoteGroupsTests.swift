// Queue groups across machines, the decisions without I/O (issue 36;
// RemoteGroups.swift): `NAME:PATTERN` and which names cross, the NATS
// message a group event becomes (subject, headers, `eb-key`), the queue
// subscriptions of an imported group (following the patterns of the local
// members), a group event from another node read into a group publish (and
// the ones refused), and that publish's frame.
import EventBusBridge
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession
import Testing

@Suite struct RemoteGroupsTests {
    static func table(_ name: String = "host-a") -> (RemoteGroups, [(Subject, Subject?)]) {
        var table = RemoteGroups(mapping: SubjectMapping(node: node(name)), exports: [GroupSpec("work:job.>")!],
                                 imports: [GroupSpec("work:job.>")!, GroupSpec("work:job.>")!])
        var made: [(Subject, Subject?)] = []
        // A broker without the watch: the whole pattern, as a watch's list.
        table.members(GroupSpec("work:job.>")!, [Pattern("job.>")!], subscribe: { subject, queue in
            made.append((subject, queue))
            return SubscriptionID(UInt64(made.count))
        }, unsubscribe: { _ in })
        return (table, made)
    }

    static func event(key: String?) -> RawEvent {
        RawEvent(metadata: EventMetadata(type: "job.run", seq: 9, time: "2026-12-05T10:00:00.000Z", source: "cli", id: "j-1",
                                         pid: 42, uid: 1000, gid: 1000, key: key), data: bytes(#"{"i":1}"#))
    }

    @Test(arguments: [("work:job.>", true), ("w-1_x:a.b", true), ("work", false), (":job.>", false), ("a.b:job.>", false),
                      ("a:b:c", true), ("work:job..x", false), ("\(String(repeating: "g", count: 65)):x", false)])
    func aGroupThatCrossesIsANATSTokenAndAPattern(text: String, valid: Bool) {
        #expect((GroupSpec(text) != nil) == valid, "\(text)")
    }

    @Test func aGroupEventBecomesOneMessageOnTheGroupSubjectWithItsKey() throws {
        var (table, made) = Self.table()
        #expect(made.count == 1, "one queue subscription per imported group and pattern: \(made.map(\.0.text))")
        #expect(made.first?.0.text == "eventbus.grp.work.*.job.>" && made.first?.1?.text == "eventbus-group-work")
        let sent = table.send(Self.event(key: "k 1\r\nX: y"), group: "work", instance: "broker-9")
        let message = try #require(sent)
        #expect(message.subject.text == "eventbus.grp.work.host-a.job.run" && message.payload == bytes(#"{"i":1}"#))
        let headers = try #require(message.headers)
        #expect(headers.first("eb-key") == "k 1\r\nX: y" && headers.first("X") == nil, "percent-encoded, one line")
        #expect(headers.first("ce-id") == "j-1" && headers.first("ce-ebnode") == "host-a" && headers.first("ce-ebseq") == "9")
        let plain = table.send(Self.event(key: nil), group: "work", instance: "broker-9")
        let unkeyed = try #require(plain)
        #expect(unkeyed.headers?.first("eb-key") == nil)
        #expect(table.send(Self.event(key: nil), group: "other", instance: "i") == nil, "not an exported group")
        var reserved = Self.event(key: nil)
        reserved.metadata.type = "eventbus.client.connected"
        #expect(table.send(reserved, group: "work", instance: "i") == nil, "the broker's own types never leave")
        #expect(table.counters.sent == 2)
    }

    @Test func aGroupEventFromAnotherNodeBecomesAGroupPublish() throws {
        var (sender, _) = Self.table("host-b")
        var (table, _) = Self.table()
        let out = sender.send(Self.event(key: "k1"), group: "work", instance: "i-b")
        let sent = try #require(out)
        let message = Message(subject: sent.subject.text, sid: SubscriptionID(1), headerBlock: sent.headerBlock, payload: sent.payload)
        guard case .publish(let publish) = table.receive(message) else { Issue.record("not a publish"); return }
        #expect(publish.group == "work" && publish.key == "k1" && publish.event.origin.node == "host-b" && publish.event.id == "j-1")
        var frame: [UInt8] = []
        publish.appendFrame(to: &frame)
        let text = String(decoding: frame, as: UTF8.self)
        #expect(text.hasPrefix(#"{"op":"publish","type":"job.run""#) && text.hasSuffix(#","group":"work","key":"k1"}"# + "\n"), "\(text)")
        // Our own node, a bad subject, a payload that is not JSON: dropped and counted.
        let own = Message(subject: "eventbus.grp.work.host-a.job.run", sid: SubscriptionID(1), headerBlock: sent.headerBlock, payload: sent.payload)
        let bad = Message(subject: "eventbus.grp.work.host-b", sid: SubscriptionID(1), headerBlock: nil, payload: [])
        let notJSON = Message(subject: "eventbus.grp.work.host-b.job.run", sid: SubscriptionID(1), headerBlock: nil, payload: bytes("{"))
        for message in [own, bad, notJSON] {
            guard case .drop = table.receive(message) else { Issue.record("\(message.subject) taken"); continue }
        }
        #expect(table.counters.received == 1 && table.counters.dropped == 3)
        #expect(table.owns(message) && !table.owns(Message(subject: "eventbus.evt.host-b.job.run", sid: SubscriptionID(1), payload: []))
                && !table.owns(Message(subject: message.subject, sid: SubscriptionID(0), payload: [])), "by sid and subject")
    }

    /// The import subscriptions follow the patterns of the local members
    /// (the watch's lists): the types both the import and a member match,
    /// none inside another, one queue group per name; none without members.
    @Test func theImportSubscriptionsFollowTheMembers() {
        var table = RemoteGroups(mapping: SubjectMapping(node: node("host-a")), exports: [],
                                 imports: [GroupSpec("work:job.>")!, GroupSpec("work:task.*")!, GroupSpec("mail:mail.>")!])
        var next: UInt64 = 5  // sids 1-4: the bridge's fixed subscriptions
        var live: [UInt64: (String, String)] = [:]
        func members(_ spec: String, _ patterns: [String]) -> (added: [String], removed: [String]) {
            table.members(GroupSpec(spec)!, patterns.map { Pattern($0)! }, subscribe: { subject, queue in
                defer { next += 1 }
                live[next] = (subject.text, queue?.text ?? "")
                return SubscriptionID(next)
            }, unsubscribe: { live[$0.rawValue] = nil })
        }
        let fixed = Message(subject: "eventbus.grp.work.host-b.job.x", sid: SubscriptionID(4), payload: [])
        #expect(table.importSubjects.isEmpty && !table.owns(fixed))
        #expect(members("work:job.>", ["job.a", "*.run"]) == (["eventbus.grp.work.*.job.a", "eventbus.grp.work.*.job.run"], []))
        #expect(!table.owns(fixed) && table.owns(Message(subject: "eventbus.grp.work.host-b.job.a", sid: SubscriptionID(5), payload: [])))
        // A wider member covers the narrower ones: one subscription.
        #expect(members("work:job.>", ["job.a", "*.run", ">"]) == (["eventbus.grp.work.*.job.>"], ["eventbus.grp.work.*.job.a", "eventbus.grp.work.*.job.run"]))
        #expect(members("work:task.*", ["task.x", "other.>"]) == (["eventbus.grp.work.*.task.x"], []))
        #expect(members("mail:mail.>", ["mail.>"]) == (["eventbus.grp.mail.*.mail.>"], []))
        #expect(members("work:other.>", ["other.x"]) == ([], []))  // not an import
        #expect(Set(live.values.map { "\($0.0) \($0.1)" }) == ["eventbus.grp.work.*.job.> eventbus-group-work", "eventbus.grp.work.*.task.x eventbus-group-work",
                                                             "eventbus.grp.mail.*.mail.> eventbus-group-mail"])
        // Members gone, or the bus lost: no subscription; an ended sid on a group subject is still the table's.
        #expect(members("work:job.>", []) == ([], ["eventbus.grp.work.*.job.>"]))
        for spec in table.watchedImports { _ = members(spec.description, []) }
        #expect(live.isEmpty && table.importSubjects.isEmpty && table.watchedImports.isEmpty)
        #expect(table.owns(Message(subject: "eventbus.grp.work.host-b.job.a", sid: SubscriptionID(6), payload: [])))
    }
}
