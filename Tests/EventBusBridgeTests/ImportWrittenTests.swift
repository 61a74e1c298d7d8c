// (issue 36, third pass) The usual import is written straight into the bus
// output (`BridgeCore.handle(_:frame:)`): for every message it must answer
// what `handle(_:)` answers, and when it writes, the bytes must be the
// `publish` frame `LocalPublish.appendFrame` writes for `handle`'s
// `LocalPublish`; every refusal must leave nothing written and count alike.
import EventBusBridge
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession
import Testing

@Suite struct ImportWrittenTests {
    static func event(type: String = "order.created", source: String = "billing", id: String = "3f9a1c07-42", pid: Int32 = 1234,
                      seq: UInt64 = 42, data: String = #"{"n":1,"s":"caf\u00e9"}"#) -> RawEvent {
        RawEvent(metadata: EventMetadata(type: type, seq: seq, time: "2026-11-29T13:00:00.123Z", source: source, id: id,
                                         pid: pid, uid: 1000, gid: 1001), data: bytes(data))
    }

    /// host-a's export of `raw` as host-b receives it: the block exactly as written.
    static func message(_ raw: RawEvent, edit: (String) -> String = { $0 }, payload: [UInt8]? = nil, sid: UInt64 = 1) -> Message {
        let block = CloudEventsHeaders.exportBlock(raw, node: node("host-a"), instance: "broker-9")
        let edited = Array(edit(String(decoding: block, as: UTF8.self)).utf8)
        return Message(subject: "eventbus.evt.host-a.\(raw.metadata.type)", sid: SubscriptionID(sid), headerBlock: edited,
                       payload: payload ?? raw.data)
    }

    /// Both ways on fresh cores of host-b: the same answer and counters, and
    /// the frame written is the one `appendFrame` writes for `handle`'s publish.
    /// - Returns: whether it was written (the fast way).
    @discardableResult
    static func agree(_ message: Message, imports: [String] = [">"]) -> Bool {
        var plain = core(node: "host-b", imports: imports)
        var writing = core(node: "host-b", imports: imports)
        let expected = plain.handle(message)
        var frame: [UInt8] = [0x41]  // something already queued stays
        let answer = writing.handle(message, frame: &frame)
        #expect(plain.counters == writing.counters)
        guard case .written(let type) = answer else {
            #expect(answer == expected)
            #expect(frame == [0x41], "a message not written leaves the output alone")
            return false
        }
        guard case .publishLocally(let event) = expected else {
            Issue.record("written, where handle answers \(expected)")
            return true
        }
        #expect(type == event.type)
        var want: [UInt8] = [0x41]
        event.appendFrame(to: &want)
        #expect(String(decoding: frame, as: UTF8.self) == String(decoding: want, as: UTF8.self))
        return true
    }

    @Test(arguments: [
        event(), event(id: "back\\slash"), event(source: "\\"), event(seq: 0), event(pid: 0),
        event(data: "7"), event(data: #"  {"spaced": true}  "#), event(type: "a.b.c", source: String(repeating: "s", count: 300)),
        event(id: "12345678"), event(source: "x"),
    ])
    func theUsualImportIsWrittenAsHandleWouldPublishIt(_ raw: RawEvent) {
        #expect(Self.agree(Self.message(raw)))
    }

    /// (linkimp2) The plain frame is written in one pass into room sized from
    /// its pieces: the longest values `exportBlockValues` takes, the widest
    /// numbers, the narrowest, and a payload far past any one buffer's growth.
    @Test func theOnePassFramesRoomHoldsTheLongestAndShortestPieces() {
        let long = Self.event(source: String(repeating: "s", count: 4096), id: String(repeating: "i", count: 4096), pid: Int32.max,
                              seq: UInt64.max, data: "[" + String(repeating: "1,", count: 35_000) + "1]")
        #expect(Self.agree(Self.message(long, edit: {
            $0.replacing("ce-ebinstance: broker-9", with: "ce-ebinstance: " + String(repeating: "n", count: 4096))
                .replacing("ce-ebuid: 1000", with: "ce-ebuid: 4294967295").replacing("ce-ebgid: 1001", with: "ce-ebgid: 4294967295")
        })))
        let short = Self.event(source: "s", id: "i", pid: 0, seq: 0, data: "0")
        #expect(Self.agree(Self.message(short, edit: {
            $0.replacing("ce-ebinstance: broker-9", with: "ce-ebinstance: n")
                .replacing("ce-ebuid: 1000", with: "ce-ebuid: 0").replacing("ce-ebgid: 1001", with: "ce-ebgid: 0")
        })))
        #expect(Self.agree(Self.message(short, payload: [])))
    }

    @Test func quotesAndBackslashesInValuesAreEscaped() {
        // The exporter percent-encodes `"`; another bridge may send it raw (printable ASCII: still this shape).
        let message = Self.message(Self.event(), edit: { $0.replacing("ce-source: billing", with: #"ce-source: say "hi" \o/"#)
            .replacing("ce-ebinstance: broker-9", with: #"ce-ebinstance: "q""#) })
        #expect(Self.agree(message))
    }

    @Test func anEmptyPayloadIsWrittenWithoutData() {
        #expect(Self.agree(Self.message(Self.event(), payload: [])))
    }

    @Test func numbersWithLeadingZerosAreWrittenAsNumbers() {
        let message = Self.message(Self.event(), edit: { $0.replacing("ce-ebseq: 42", with: "ce-ebseq: 0042").replacing("ce-ebuid: 1000", with: "ce-ebuid: 01000") })
        #expect(Self.agree(message))
    }

    @Test func otherBlocksAndEveryRefusalAreHandlesAndWriteNothing() {
        let raw = Self.event()
        let cases: [Message] = [
            // Percent-encoded and non-ASCII values, another header order: the general walk.
            Self.message(Self.event(source: "100%")), Self.message(Self.event(id: "line\r\nbreak")), Self.message(Self.event(id: "caf\u{E9}")),
            Self.message(Self.event(source: "a b")), Self.message(Self.event(source: "say \"hi\"")),
            Self.message(raw, edit: { $0.replacing("\r\nce-id:", with: "\r\nCE-ID:") }),
            // Refusals: ce-type, ce-ebnode, numbers, a value too long, bad data.
            Self.message(raw, edit: { $0.replacing("ce-type: order.created", with: "ce-type: order.deleted") }),
            Self.message(raw, edit: { $0.replacing("ce-ebnode: host-a", with: "ce-ebnode: host-c") }),
            Self.message(raw, edit: { $0.replacing("ce-ebseq: 42", with: "ce-ebseq: 4x") }),
            Self.message(raw, edit: { $0.replacing("ce-ebpid: 1234", with: "ce-ebpid: 99999999999") }),
            Self.message(raw, edit: { $0.replacing("ce-ebgid: 1001", with: "ce-ebgid: 4294967296") }),
            Self.message(Self.event(id: String(repeating: "i", count: 4097))),
            Self.message(raw, payload: bytes("{not json")),
            // A MSG without headers, our own node (a loop), a reserved type, a bad subject, a hello.
            Message(subject: "eventbus.evt.host-a.order.created", sid: SubscriptionID(1), payload: bytes("1")),
            Message(subject: "eventbus.evt.host-b.order.created", sid: SubscriptionID(1), headerBlock: Self.message(raw).headerBlock, payload: bytes("1")),
            Self.message(Self.event(type: "eventbus.x")),
            Message(subject: "eventbus.evt.host-a", sid: SubscriptionID(1), payload: bytes("1")),
            Message(subject: "eventbus.ctl.host-b.hello", sid: SubscriptionID(1), payload: bytes(#"{"node":"host-b","instance":"other","reply":false}"#)),
        ]
        for message in cases {
            #expect(!Self.agree(message), "\(message.subject) \(String(decoding: message.headerBlock ?? [], as: UTF8.self).prefix(120))")
        }
    }

    @Test func aSecondCopyForAnOverlappingPatternIsIgnoredBothWays() {
        let raw = Self.event()
        // Neither pattern covers the other: both subscribed (sids 1 and 2), both match.
        #expect(Self.agree(Self.message(raw, sid: 1), imports: ["order.*", "*.created"]))
        #expect(!Self.agree(Self.message(raw, sid: 2), imports: ["order.*", "*.created"]))
    }

    @Test func aRunOfSubjectsKeepsEachFramesTypeAndNode() {
        // The fixed parts are kept per subject: changing subjects must not mix them.
        var writing = core(node: "host-b")
        var plain = core(node: "host-b")
        for type in ["a.b", "a.c", "a.c", "a.b", "x.y.z"] {
            let message = Self.message(Self.event(type: type))
            var frame: [UInt8] = []
            guard case .written = writing.handle(message, frame: &frame), case .publishLocally(let event) = plain.handle(message) else {
                Issue.record("\(type) not imported")
                continue
            }
            var want: [UInt8] = []
            event.appendFrame(to: &want)
            #expect(frame == want)
        }
    }
}
