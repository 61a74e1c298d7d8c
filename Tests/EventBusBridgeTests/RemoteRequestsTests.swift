// Requests across machines, the decisions without I/O (issue 36;
// RemoteRequests.swift): the NATS request a local request becomes (subject,
// reply subject, headers with the deadline), each answer mapped back to the
// bus's `reply` (data, service error, relayed codes, NATS's 503), a request
// from another node read into a bus `request` (and the ones refused), and the
// answer sent back; late answers after the deadline are ignored.
import EventBusBridge
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession
import Testing

@Suite struct RemoteRequestsTests {
    static func table(_ name: String = "host-a") -> RemoteRequests {
        var table = RemoteRequests(mapping: SubjectMapping(node: node(name)), bridgeInstance: "00ab", exports: [pattern("svc.>")], imports: [pattern("svc.>")])
        var next: UInt64 = 1
        table.subscribe { _, _ in defer { next += 1 }; return SubscriptionID(next) }
        return table
    }

    static let request = OutgoingRequest(event: RawEvent(metadata: EventMetadata(
        type: "svc.echo", seq: 7, time: "2026-12-05T10:00:00.000Z", source: "cli", id: "r-1", pid: 42, uid: 1000, gid: 1000),
        data: bytes(#"{"q":1}"#)), token: "0123456789abcdef0123456789abcdef", timeoutMilliseconds: 1500)

    /// The bus's reply frame read as the session reads it.
    static func reply(_ json: String) throws -> Reply {
        let frame = bytes(json)
        switch try BrokerFrame.read(frame.span.bytes) {
        case .ok(let reply), .error(let reply): return reply
        default: throw TestFailure("not a reply: \(json)")
        }
    }

    struct TestFailure: Error { let text: String; init(_ text: String) { self.text = text } }

    @Test func aLocalRequestBecomesANATSRequestWithItsDeadline() throws {
        var table = Self.table()
        let sent = table.send(Self.request, instance: "broker-9", now: 0)
        let message = try #require(sent)
        #expect(message.subject.text == "eventbus.req.host-a.svc.echo")
        #expect(message.replyTo?.text == "eventbus.rpl.host-a.00ab.1")
        #expect(message.payload == bytes(#"{"q":1}"#))
        let headers = try #require(message.headers)
        #expect(headers.first("eb-timeout") == "1500" && headers.first("ce-id") == "r-1" && headers.first("ce-source") == "cli")
        #expect(headers.first("ce-ebnode") == "host-a" && headers.first("ce-ebuid") == "1000" && headers.first("ce-type") == "svc.echo")
        #expect(table.counters.sent == 1 && table.outstandingCount == 1)
    }

    @Test func eachAnswerBecomesTheRightReply() throws {
        var table = Self.table()
        let token = Self.request.token
        func answer(_ block: String?, _ payload: String = "", number: Int) -> ClientRequest? {
            _ = table.send(Self.request, instance: "i", now: 0)
            return table.answer(Message(subject: "eventbus.rpl.host-a.00ab.\(number)", sid: SubscriptionID(1),
                                        headerBlock: block.map(bytes), payload: bytes(payload)))
        }
        #expect(answer("NATS/1.0\r\neb-status: ok\r\n\r\n", #"{"by":"b"}"#, number: 1) == .reply(to: token, data: try JSONText(validating: bytes(#"{"by":"b"}"#))))
        #expect(answer("NATS/1.0\r\neb-status: service_error\r\neb-message: disk%20full\r\n\r\n", number: 2) == .reply(to: token, error: "disk full"))
        #expect(answer("NATS/1.0\r\neb-status: no_responders\r\neb-message: none\r\nce-ebnode: host-b\r\n\r\n", number: 3)
                == .reply(to: token, error: "on node host-b: none", code: "no_responders"))
        #expect(answer("NATS/1.0 503\r\n\r\n", number: 4) == .reply(to: token, error: "no machine on NATS takes requests of this type (none both imports and serves it: NATS no responders)", code: "no_responders"))
        #expect(answer("NATS/1.0\r\neb-status: forbidden\r\neb-message: no\r\nce-ebnode: host-b\r\n\r\n", number: 5)
                == .reply(to: token, error: "node host-b could not ask its bus: no (forbidden)"))
        // An answer twice, or to a number never sent, is ignored.
        let got1 = table.answer(Message(subject: "eventbus.rpl.host-a.00ab.1", sid: SubscriptionID(1), payload: []))
        #expect(got1 == nil)
        let got2 = table.answer(Message(subject: "eventbus.rpl.host-a.00ab.99", sid: SubscriptionID(1), payload: []))
        #expect(got2 == nil)
        #expect(table.counters.noResponders == 1 && table.counters.answered == 5)
    }

    @Test func anAnswerAfterTheDeadlineIsIgnored() throws {
        var table = Self.table()
        _ = table.send(Self.request, instance: "i", now: 0)
        table.expire(now: 1_499_000_000)
        #expect(table.outstandingCount == 1)
        table.expire(now: 1_500_000_001)
        #expect(table.outstandingCount == 0)
        let got3 = table.answer(Message(subject: "eventbus.rpl.host-a.00ab.1", sid: SubscriptionID(1), payload: bytes("1")))
        #expect(got3 == nil)
    }

    @Test func aRequestFromAnotherNodeIsAskedOnTheBusAndItsAnswerGoesBack() throws {
        var sender = Self.table("host-b")
        var table = Self.table()
        let sent = sender.send(Self.request, instance: "i", now: 0)
        let out = try #require(sent)
        let incoming = Message(subject: out.subject.text, sid: SubscriptionID(2), replyTo: out.replyTo?.text, headerBlock: out.headerBlock, payload: out.payload)
        guard case .ask(let request, let tag) = table.receive(incoming) else { Issue.record("not asked"); return }
        #expect(request == .request(type: "svc.echo", source: "cli", id: "r-1", timeout: 1500, data: try JSONText(validating: bytes(#"{"q":1}"#))))
        let okReply = try Self.reply(#"{"op":"ok","req":3,"seq":9,"reply":{"time":"t","pid":5,"uid":1001,"gid":1001,"data":{"ok":true}}}"#)
        let replied = table.replied(tag: tag, okReply)
        let answer = try #require(replied)
        #expect(answer.subject.text == "eventbus.rpl.host-b.00ab.1" && answer.payload == bytes(#"{"ok":true}"#))
        let headers = try #require(answer.headers)
        #expect(headers.first("eb-status") == "ok" && headers.first("ce-ebnode") == "host-a" && headers.first("ce-ebuid") == "1001")
        // Its answer read back on host-b: the data for the requester.
        let back = Message(subject: answer.subject.text, sid: SubscriptionID(1), headerBlock: answer.headerBlock, payload: answer.payload)
        let got4 = sender.answer(back)
        #expect(got4 == .reply(to: Self.request.token, data: try JSONText(validating: bytes(#"{"ok":true}"#))))
        // no_responders on this bus goes back as such.
        guard case .ask(_, let second) = table.receive(incoming) else { Issue.record("not asked"); return }
        let noneReply = try Self.reply(#"{"op":"error","req":4,"code":"no_responders","message":"no connection serves svc.echo"}"#)
        let repliedNone = table.replied(tag: second, noneReply)
        let none = try #require(repliedNone)
        #expect(none.headers?.first("eb-status") == "no_responders" && none.headers?.first("eb-message") == "no connection serves svc.echo")
        let again = try Self.reply(#"{"op":"ok","req":4}"#)
        let got5 = table.replied(tag: second, again)
        #expect(got5 == nil)  // answered once
    }

    /// (attacker7) One origin (node and uid) holds at most its fair share of
    /// the requests asked on the bus; past it `limit` at once, and another
    /// origin still finds room; an answered or forgotten one frees its place.
    @Test func eachOriginHoldsAtMostItsFairShareOfTheAskedRequests() throws {
        var table = Self.table()
        func incoming(from node: String) throws -> Message {
            var sender = Self.table(node)
            let sent = sender.send(Self.request, instance: "i", now: 0)
            let out = try #require(sent)
            return Message(subject: out.subject.text, sid: SubscriptionID(2), replyTo: out.replyTo?.text, headerBlock: out.headerBlock, payload: out.payload)
        }
        let fromB = try incoming(from: "host-b"), fromC = try incoming(from: "host-c")
        var tags: [UInt64] = []
        while case .ask(_, let tag) = table.receive(fromB) { tags.append(tag) }
        #expect(tags.count == 512, "alone, about half of \(RequestShares.places)")
        guard case .refuse(let refusal) = table.receive(fromB) else { Issue.record("not refused"); return }
        #expect(refusal.subject.text == fromB.replyTo && refusal.headers?.first("eb-status") == "limit")
        #expect(refusal.headers?.first("eb-message")?.contains("node host-b its fair share") == true, "\(String(describing: refusal.headers?.first("eb-message")))")
        #expect(table.counters.limited == 2 && table.counters.received == 512)
        guard case .ask(_, let other) = table.receive(fromC) else { Issue.record("another origin refused"); return }
        // With host-c holding one, host-b's share is smaller: not even an answer makes room.
        _ = table.replied(tag: tags.removeLast(), try Self.reply(#"{"op":"ok","req":1,"reply":{"data":1}}"#))
        if case .ask = table.receive(fromB) { Issue.record("over its share beside another origin") }
        table.forget(tag: other)
        // Alone again: the answered request's place is free, and a forgotten one's.
        guard case .ask(_, let again) = table.receive(fromB) else { Issue.record("no place after an answer"); return }
        if case .ask = table.receive(fromB) { Issue.record("two places after one answer") }
        table.forget(tag: again)
        guard case .ask = table.receive(fromB) else { Issue.record("no place after a forget"); return }
        table.busLost()
        var afterLoss = 0
        while case .ask = table.receive(fromB) { afterLoss += 1 }
        #expect(afterLoss == 512, "the bus lost: every place free")
    }

    @Test func requestsThatCannotBeAskedAreDropped() throws {
        var table = Self.table()
        func receive(_ subject: String, reply: String? = "r.1", block: String? = nil, payload: String = "") -> Bool {
            if case .drop = table.receive(Message(subject: subject, sid: SubscriptionID(2), replyTo: reply, headerBlock: block.map(bytes), payload: bytes(payload))) { return true }
            return false
        }
        #expect(receive("eventbus.req.host-a.svc.echo"))                    // our own node
        #expect(receive("eventbus.req.host-b.svc.echo", reply: nil))        // nowhere to answer
        #expect(receive("eventbus.req.host-b.eventbus.stats"))               // a reserved type
        #expect(receive("eventbus.req.bad$node.svc.echo"))
        #expect(receive("eventbus.req.host-b.svc.echo", payload: "{not json"))
        #expect(receive("eventbus.req.host-b.svc.echo", block: "NATS/1.0\r\neb-timeout: soon\r\n\r\n"))
        #expect(receive("eventbus.req.host-b.svc.echo", block: "NATS/1.0\r\nce-type: other.type\r\n\r\n"))
        #expect(table.counters.dropped == 7 && table.counters.received == 0)
        // A plain NATS request (no headers) is asked, with the broker's default deadline; a long one is cut to 300 s.
        guard case .ask(let plain, _) = table.receive(Message(subject: "eventbus.req.host-b.svc.x", sid: SubscriptionID(2), replyTo: "r.2", payload: [])) else {
            Issue.record("not asked"); return
        }
        #expect(plain == .request(type: "svc.x", timeout: nil))
        guard case .ask(let long, _) = table.receive(Message(subject: "eventbus.req.host-b.svc.x", sid: SubscriptionID(2), replyTo: "r.3",
                                                             headerBlock: bytes("NATS/1.0\r\neb-timeout: 9999999\r\n\r\n"), payload: [])) else {
            Issue.record("not asked"); return
        }
        #expect(long == .request(type: "svc.x", timeout: 300_000))
    }

    @Test("the types two patterns both match, as one pattern", arguments: [
        ("svc.>", "*.echo", "svc.echo"), ("svc.>", "svc.>", "svc.>"), ("a.>", "a.*.c", "a.*.c"), ("a.*", "a.>", "a.*"),
        (">", "x", "x"), ("a.*.>", "*.b.c", "a.b.c"), ("a.>", "*.*.>", "a.*.>"), ("*", "*", "*"),
        ("a.b", "a.c", nil), ("a.>", "a", nil), ("a.*", "a.b.c", nil), ("svc.>", "other.>", nil),
    ] as [(String, String, String?)])
    func intersection(_ p: String, _ q: String, _ both: String?) {
        #expect(RemoteRequests.intersection(pattern(p), pattern(q))?.text == both)
        #expect(RemoteRequests.intersection(pattern(q), pattern(p))?.text == both)
    }

    /// What the bus serves decides the request import subscriptions: one per
    /// overlap, none contained in another, none while nothing is served.
    @Test func theImportSubscriptionsFollowTheServers() {
        var table = RemoteRequests(mapping: SubjectMapping(node: node("host-a")), bridgeInstance: "00ab", exports: [pattern("svc.>")],
                                   imports: [pattern("svc.>"), pattern("job.*")])
        var next: UInt64 = 1
        var live: [UInt64: String] = [:]
        table.subscribe { _, _ in defer { next += 1 }; return SubscriptionID(next) }  // the reply subscription: sid 1
        func serving(_ imported: String, _ servers: [String]) -> (added: [String], removed: [String]) {
            table.serving(pattern(imported), servers.map(pattern), subscribe: { subject, queue in
                #expect(queue?.text == "eventbus-requests")
                defer { next += 1 }
                live[next] = subject.text
                return SubscriptionID(next)
            }, unsubscribe: { live[$0.rawValue] = nil })
        }
        #expect(table.importSubjects.isEmpty && !table.owns(SubscriptionID(2)))
        #expect(serving("svc.>", ["svc.echo"]) == (["eventbus.req.*.svc.echo"], []))
        #expect(table.owns(SubscriptionID(2)) && table.owns(SubscriptionID(1)))
        // A wider server covers the narrower one: one subscription.
        #expect(serving("svc.>", ["svc.echo", "*.>"]) == (["eventbus.req.*.svc.>"], ["eventbus.req.*.svc.echo"]))
        #expect(serving("job.*", ["*.>", "job.x"]) == (["eventbus.req.*.job.*"], []))
        #expect(serving("other.>", ["other.x"]) == ([], []))  // not an import pattern
        #expect(Set(live.values) == ["eventbus.req.*.svc.>", "eventbus.req.*.job.*"] && table.importSubjects == ["eventbus.req.*.job.*", "eventbus.req.*.svc.>"])
        // Servers gone, or the bus lost: no subscription; an ended sid is still the table's (a request in flight).
        #expect(serving("svc.>", []) == ([], ["eventbus.req.*.svc.>"]))
        for imported in table.watchedImports { _ = serving(imported.text, []) }
        #expect(live.isEmpty && table.importSubjects.isEmpty && table.owns(SubscriptionID(3)))
    }
}
