// The bridge's decisions: the exported message (subject, the CloudEvents
// headers exactly as issue 13 lists them, data unchanged), the way back to a
// local publish with `origin`, header injection attempts, the loop rules,
// the duplicate-node hello, drop reports, malformed imports, and counters.
import EventBusBridge
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession
import Testing

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

func core(node name: String = "host-a", exports: [String] = [">"], imports: [String] = [">"], instance: String = "bridge-1") -> BridgeCore {
    var core = BridgeCore(mapping: SubjectMapping(node: node(name)), exports: exports.map(pattern), imports: imports.map(pattern), bridgeInstance: instance)
    core.localBusConnected(instance: "broker-9")
    for (i, subject) in core.natsSubscriptions.enumerated() { core.subscribed(SubscriptionID(UInt64(i + 1)), to: subject) }
    return core
}

let sample = RawEvent(metadata: EventMetadata(
    type: "order.created", seq: 42, time: "2026-11-29T13:00:00.123Z", source: "billing", id: "3f9a1c07-42",
    pid: 1234, uid: 1000, gid: 1001), data: bytes(#"{"n":1,"s":"caf\u00e9"}"#)
)

/// An exported message as another node's bridge receives it: header block
/// encoded and parsed again (the wire in between), subject moved to `sid`.
func received(_ message: OutgoingMessage, sid: UInt64 = 1) throws -> Message {
    let block = message.headers!.encoded()
    let headers = try Headers.parse(block.span.bytes)
    return Message(subject: message.subject.text, sid: SubscriptionID(sid), headers: headers, payload: message.payload)
}

@Suite struct BridgeCoreTests {
    @Test func anExportCarriesTheCloudEventsHeadersInOrderAndTheDataUnchanged() throws {
        var bridge = core()
        guard case .publish(let message) = bridge.export(sample) else { Issue.record("not exported"); return }
        #expect(message.subject.text == "eventbus.evt.host-a.order.created")
        #expect(message.payload == sample.data)
        #expect(message.tag == 42)
        let fields = try #require(message.headers).fields
        #expect(fields.map(\.name) == [
            "ce-specversion", "ce-id", "ce-source", "ce-type", "ce-time", "ce-datacontenttype",
            "ce-ebnode", "ce-ebinstance", "ce-ebseq", "ce-ebpid", "ce-ebuid", "ce-ebgid", "Nats-Msg-Id",
        ])
        #expect(fields.map(\.value) == [
            "1.0", "3f9a1c07-42", "billing", "order.created", "2026-11-29T13:00:00.123Z", "application/json",
            "host-a", "broker-9", "42", "1234", "1000", "1001", "host-a:broker-9:42",
        ])
        bridge.exported(.queued)
        bridge.exported(.held)
        bridge.exported(.dropped)
        bridge.exported(.tooLarge(size: 2, limit: 1))
        #expect(bridge.counters.exported == 2, "refusals are the NATS client's counts")
    }

    @Test func theOtherNodeRebuildsTypeDataSourceIdAndOrigin() throws {
        var a = core(node: "host-a")
        var b = core(node: "host-b")
        guard case .publish(let message) = a.export(sample) else { Issue.record("not exported"); return }
        let inbound = b.handle(try received(message))
        let expected = LocalPublish(
            type: type("order.created"), data: try JSONText(validating: sample.data), source: "billing", id: "3f9a1c07-42",
            origin: Origin(node: "host-a", instance: "broker-9", seq: 42, time: "2026-11-29T13:00:00.123Z", pid: 1234, uid: 1000, gid: 1001)
        )
        #expect(inbound == .publishLocally(expected))
        #expect(expected.origin.json.description
            == #"{"node":"host-a","instance":"broker-9","seq":42,"time":"2026-11-29T13:00:00.123Z","pid":1234,"uid":1000,"gid":1001}"#)
        b.imported(.accepted)
        b.imported(.denied)
        #expect(b.counters.imported == 1 && b.counters.dropped[.denied] == 1)
    }

    @Test(arguments: ["line\r\nInjected: yes", "\r\n\r\nPUB evil 1\r\nx", "a\nb", "tab\tand \"quote\" 100%", "caf\u{E9}"])
    func sourceAndIdWithControlCharactersArriveIntactAndNeverBreakALine(value: String) throws {
        var a = core(node: "host-a")
        var b = core(node: "host-b")
        var event = sample
        event.metadata.source = value
        event.metadata.id = value
        guard case .publish(let message) = a.export(event) else { Issue.record("not exported"); return }
        let block = message.headers!.encoded()
        #expect(block.filter { $0 == 0x0A }.count == 15, "version line, 13 fields, empty line")
        guard case .publishLocally(let local) = b.handle(try received(message)) else { Issue.record("not imported"); return }
        #expect(local.source == value && local.id == value)
    }

    @Test func onlyEventsWithoutOriginMatchingAnExportPatternAreExported() {
        var bridge = core(exports: ["order.>"])
        var bridged = sample
        bridged.metadata.isBridged = true
        #expect(bridge.export(bridged) == .skip(.bridged))
        var other = sample
        other.metadata.type = "audit.login"
        #expect(bridge.export(other) == .skip(.notExported))
        var reserved = sample
        reserved.metadata.type = "eventbus.bridge.host-a.status"
        var everything = core(exports: [">"])
        #expect(everything.export(reserved) == .skip(.reserved))
        #expect(bridge.counters.skippedBridged == 1)
    }

    @Test func importsFromOurOwnNodeAreDroppedAsLoops() throws {
        var a = core(node: "host-a")
        guard case .publish(let message) = a.export(sample) else { Issue.record("not exported"); return }
        guard case .dropped(.loop, _) = a.handle(try received(message)) else { Issue.record("not dropped"); return }
        #expect(a.counters.dropped[.loop] == 1)
    }

    @Test func anotherInstanceUnderOurNodeIdStopsExportingAndIsAnsweredOnce() {
        var first = core(node: "host-a", instance: "one")
        var second = core(node: "host-a", instance: "two")
        let hello = second.hello
        #expect(hello.subject.text == "eventbus.ctl.host-a.hello")
        #expect(String(decoding: hello.payload, as: UTF8.self) == #"{"node":"host-a","instance":"two","reply":false}"#)
        let helloMessage = Message(subject: hello.subject.text, sid: SubscriptionID(2), payload: hello.payload)
        guard case .duplicateNode("two", let reply?) = first.handle(helloMessage) else { Issue.record("no duplicate"); return }
        #expect(!first.exporting && first.duplicateInstance == "two")
        #expect(first.export(sample) == .skip(.suspended) && first.counters.suspended == 1)
        // The reply tells the second one; it does not answer a reply.
        #expect(String(decoding: reply.payload, as: UTF8.self) == #"{"node":"host-a","instance":"one","reply":true}"#)
        let replyMessage = Message(subject: reply.subject.text, sid: SubscriptionID(2), payload: reply.payload)
        #expect(second.handle(replyMessage) == .duplicateNode(otherInstance: "one", reply: nil))
        #expect(!second.exporting)
        // Our own hello (should it ever come back) and garbage change nothing.
        var third = core(node: "host-a", instance: "three")
        #expect(third.handle(Message(subject: hello.subject.text, sid: SubscriptionID(2), payload: third.hello.payload)) == .ignored)
        #expect(third.handle(Message(subject: hello.subject.text, sid: SubscriptionID(2), payload: bytes("not json"))) == .ignored)
        #expect(third.exporting)
    }

    @Test func dropReportsNameNodeBridgeInstanceCountAndFirstSeq() {
        let mapping = SubjectMapping(node: node("host-a"))
        let report = BridgeCore.droppedReport(DropSummary(count: 30, firstTag: 51), mapping: mapping, bridgeInstance: "one", brokerInstance: "broker-9")
        #expect(report.subject.text == "eventbus.ctl.host-a.dropped")
        #expect(String(decoding: report.payload, as: UTF8.self) == #"{"node":"host-a","bridge":"one","instance":"broker-9","count":30,"since_seq":51}"#)
        var b = core(node: "host-b")
        let message = Message(subject: report.subject.text, sid: SubscriptionID(3), payload: report.payload)
        #expect(b.handle(message) == .remoteGap(node: node("host-a"), count: 30, sinceSeq: 51, instance: "broker-9"))
        #expect(b.counters.remoteReports == 1 && b.counters.remoteLost == 30)
        var a = core(node: "host-a")
        #expect(a.handle(message) == .ignored, "our own report")
    }

    @Test func subscriptionsCoverImportsHelloAndDropReports() {
        let bridge = core(imports: ["order.>", "order.created", "audit.*"])
        #expect(bridge.natsSubscriptions.map(\.text) == [
            "eventbus.evt.*.order.>", "eventbus.evt.*.audit.*", "eventbus.ctl.host-a.hello", "eventbus.ctl.*.dropped",
        ])
        #expect(core(imports: []).natsSubscriptions.map(\.text) == ["eventbus.ctl.host-a.hello"], "export only: no drop reports")
    }

    @Test func aMessageDeliveredForTwoOverlappingPatternsIsImportedOnce() throws {
        var b = core(node: "host-b", imports: ["a.*.c", "a.b.*"])
        var a = core(node: "host-a")
        var event = sample
        event.metadata.type = "a.b.c"
        guard case .publish(let message) = a.export(event) else { Issue.record("not exported"); return }
        guard case .publishLocally = b.handle(try received(message, sid: 1)) else { Issue.record("first copy not imported"); return }
        #expect(b.handle(try received(message, sid: 2)) == .ignored)
    }

    @Test(arguments: [
        ("eventbus.evt.host-b.bad$type", DropReason.badType),
        ("eventbus.evt.host-b.eventbus.secret", .badType),
        ("eventbus.evt.host-a.x", .loop),
    ])
    func importsWithBadSubjectsAreDroppedAndCounted(subject: String, reason: DropReason) {
        var bridge = core()
        guard case .dropped(let got, _) = bridge.handle(Message(subject: subject, sid: SubscriptionID(1), payload: bytes("1"))) else {
            Issue.record("not dropped")
            return
        }
        #expect(got == reason && bridge.counters.dropped[reason] == 1)
    }

    @Test(arguments: [
        [("ce-ebseq", "-1")], [("ce-ebseq", "12x")], [("ce-ebpid", "99999999999")], [("ce-ebuid", "4294967296")],
        [("ce-ebnode", "host-c")], [("ce-type", "other.type")], [("ce-id", String(repeating: "i", count: 4097))],
    ])
    func malformedEventbusHeadersAreBadHeaders(fields: [(String, String)]) {
        var headers = Headers()
        for (name, value) in fields { headers.append(name, value) }
        var bridge = core()
        let message = Message(subject: "eventbus.evt.host-b.x", sid: SubscriptionID(1), headers: headers, payload: bytes("1"))
        guard case .dropped(.badHeader, _) = bridge.handle(message) else { Issue.record("not dropped"); return }
    }

    /// (issue 37) Header blocks refused as `bad_header` and counted: a
    /// duplicate `ce-` header (known or not, any case), a value whose
    /// percent-encoding decodes to a control character (but TAB, LF, CR,
    /// which a local `source` may hold and the export carries) or invalid UTF-8, and
    /// more than `CloudEventsHeaders.maxImportedHeaders` fields.
    @Test(arguments: [
        "ce-source: a\r\nce-source: b\r\n",
        "ce-id: a\r\nCE-ID: b\r\n",
        "ce-foo: a\r\nce-FOO: b\r\n",
        "ce-source: %C0%AF%00\r\n",
        "ce-source: a%00b\r\n",
        "ce-id: a%1Bb\r\n",
        "ce-id: %7F\r\n",
        "ce-id: %C2%85\r\n",
        "ce-time: %FF\r\n",
        "ce-source: %E2%82\r\n",
        String(repeating: "x-pad: 1\r\n", count: 65),
    ])
    func hostileHeaderBlocksAreBadHeaders(fields: String) {
        var bridge = core()
        let block = bytes("NATS/1.0\r\n" + fields + "\r\n")
        let message = Message(subject: "eventbus.evt.host-b.x", sid: SubscriptionID(1), headerBlock: block, payload: bytes("1"))
        guard case .dropped(.badHeader, let detail) = bridge.handle(message) else { Issue.record("not dropped: \(fields.prefix(60))"); return }
        #expect(bridge.counters.dropped[.badHeader] == 1, "\(detail)")
    }

    @Test(arguments: [
        "ce-source: caf%C3%A9 %E2%82%AC\r\n",
        "ce-id: a%25b\r\nce-foo: 1\r\nce-bar: 2\r\n",
        String(repeating: "x-pad: 1\r\n", count: 64),
    ])
    func saneHeaderBlocksAreImported(fields: String) {
        var bridge = core()
        let block = bytes("NATS/1.0\r\n" + fields + "\r\n")
        let message = Message(subject: "eventbus.evt.host-b.x", sid: SubscriptionID(1), headerBlock: block, payload: bytes("1"))
        guard case .publishLocally = bridge.handle(message) else { Issue.record("not imported: \(fields.prefix(60))"); return }
    }

    @Test func aMessageWithAnUnreadableHeaderBlockIsABadHeader() {
        var bridge = core()
        let message = Message(subject: "eventbus.evt.host-b.x", sid: SubscriptionID(1), headerBlock: bytes("NATS/1.0\r\n"), payload: bytes("1"))
        guard case .dropped(.badHeader, _) = bridge.handle(message) else { Issue.record("not dropped"); return }
    }

    @Test func aPlainNATSPublisherIsImportedWithTheNodeFromItsSubject() {
        var bridge = core()
        let message = Message(subject: "eventbus.evt.sensor-7.temp.c", sid: SubscriptionID(1), payload: bytes("21.5"))
        #expect(bridge.handle(message) == .publishLocally(LocalPublish(type: type("temp.c"), data: try! JSONText(validating: bytes("21.5")), source: nil, id: nil, origin: Origin(node: "sensor-7"))))
        let empty = Message(subject: "eventbus.evt.sensor-7.ping", sid: SubscriptionID(1), payload: [])
        #expect(bridge.handle(empty) == .publishLocally(LocalPublish(type: type("ping"), data: nil, source: nil, id: nil, origin: Origin(node: "sensor-7"))))
        #expect(Origin(node: "sensor-7").json.description == #"{"node":"sensor-7"}"#)
    }

    @Test(arguments: [("{\"a\":\n 1}", "{\"a\":1}"), ("[1,\r\n2]", "[1,2]"), ("\"x\"", "\"x\""), ("{\"k\" : \"v w\"}", "{\"k\" : \"v w\"}"), ("  {\"k\" : \"v w\"}  ", "{\"k\":\"v w\"}")])
    func jsonPayloadsOnOneLineAreKeptAsTheyAreOthersCompacted(payload: String, data: String) {
        var bridge = core()
        guard case .publishLocally(let local) = bridge.handle(Message(subject: "eventbus.evt.n.x", sid: SubscriptionID(1), payload: bytes(payload))) else {
            Issue.record("not imported")
            return
        }
        #expect(local.data?.bytes == bytes(data))
    }

    @Test(arguments: ["not json", "{\"a\":", "1 2", "\u{FF}"])
    func payloadsThatAreNotOneJSONValueAreBadData(payload: String) {
        var bridge = core()
        guard case .dropped(.badData, _) = bridge.handle(Message(subject: "eventbus.evt.n.x", sid: SubscriptionID(1), payload: bytes(payload))) else {
            Issue.record("not dropped")
            return
        }
        #expect(bridge.counters.dropped[.badData] == 1)
    }

    @Test func theStatusMergesTheNATSClientsCounts() {
        var bridge = core()
        bridge.exported(.queued)
        _ = bridge.handle(Message(subject: "eventbus.evt.host-a.x", sid: SubscriptionID(1), payload: []))
        var nats = ClientStatistics()
        nats.linkUp = true
        nats.server = ServerAddress(url: "127.0.0.1:4222")
        nats.bufferedMessages = 3
        nats.bufferedBytes = 300
        nats.droppedBufferFull = 7
        nats.refusedTooLarge = 2
        nats.reconnects = 4
        _ = bridge.localOverflow(count: 5, sinceSeq: 40)
        var status = bridge.status(nats: nats, bus: BusStatus(up: true, path: "/run/eventbus/bus.sock", reconnects: 2))
        #expect(status.json == #"{"node":"host-a","bus":"up","bus_path":"/run/eventbus/bus.sock","bus_reconnects":2,"bus_replayed":0,"bus_gaps":0,"link":"up","server":"nats://127.0.0.1:4222","buffered":3,"buffered_bytes":300,"exported":1,"imported":0,"dropped":{"buffer":7,"too_large":2,"bad_type":0,"loop":1,"denied":0,"bad_header":0,"bad_data":0,"local_bus":0,"local_overflow":5},"reconnects":4,"exporting":true,"remote_reports":0,"remote_lost":0}"#)
        status.pid = 812
        status.updated = "2026-11-29T13:00:00.123Z"
        #expect(status.json.hasPrefix(#"{"node":"host-a","pid":812,"updated":"2026-11-29T13:00:00.123Z","bus":"up","#))
    }
}
