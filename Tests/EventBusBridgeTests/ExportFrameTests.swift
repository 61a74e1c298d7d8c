// (issue 36) The export reads the broker's event frame by position when it
// has the broker's plain shape (`ExportFrame`) and writes its NATS message
// straight into the outbox (`BridgeCore.export(_:)` of the frame,
// `writeExport`, `ClientState.publish(_:writing:)`); every other frame goes
// the general way (`BrokerFrame.read`, `RawEvent`, `export(_:)` of it,
// `publish(_:)`). Both must put the same bytes on the wire, on a ready
// connection and held while there is none. The frames are the broker's own
// (`FrameEncoder.appendEvent`, what eventbusd writes), with `source` and
// `id` given or not, every kind of `data`, the ends of each number's range;
// frames the positional reader leaves to the general one are checked to be
// left (and the general one still exports what it should).
@testable import EventBusBridge
@testable import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession
import Testing

@Suite struct ExportFrameTests {
    static let instance = "0123456789abcdef"

    /// An event frame as the broker writes it (without its LF). `source`,
    /// `id`, `data` are raw JSON tokens; nil: the broker's default.
    static func frame(seq: UInt64 = 42, type: String = "order.created", source: String? = #""billing""#, id: String? = #""3f9a1c07-42""#,
                      pid: Int32 = 1234, uid: UInt32 = 1000, gid: UInt32 = 1001, data: String? = #"{"n":1}"#, origin: String? = nil) -> [UInt8] {
        var out: [UInt8] = []
        Array("2026-11-29T13:00:00.123Z".utf8).withByteView { time in
            view(source) { source in
                view(id) { id in
                    view(data) { data in
                        view(origin) { origin in
                            var parts = FrameEncoder.EventParts(seq: seq, type: type, time: time, source: source, defaultSource: "pid/77", id: id,
                                                                instance: instance, pid: pid, uid: uid, gid: gid, data: data)
                            parts.origin = origin
                            FrameEncoder.appendEvent(parts, to: &out)
                        }
                    }
                }
            }
        }
        #expect(out.last == 0x0A)
        out.removeLast()
        return out
    }

    static func view(_ text: String?, _ body: (ByteView?) -> Void) {
        guard let text else { return body(nil) }
        Array(text.utf8).withByteView { body($0) }
    }

    static func core() -> BridgeCore {
        var core = BridgeCore(mapping: SubjectMapping(node: node("host-a")), exports: [pattern("order.>")], imports: [], bridgeInstance: "bridge-1")
        core.localBusConnected(instance: instance)
        return core
    }

    static let info = #"INFO {"server_id":"S","version":"2.10.0","proto":1,"headers":true,"max_payload":1048576}"# + "\r\n"

    /// A NATS client state; `ready`: its link is up (else it holds what is published until `connect`).
    static func client(ready: Bool) -> ClientState {
        var configuration = ClientConfiguration(servers: [ServerAddress(url: "127.0.0.1:4222")!], connect: ConnectOptions(name: "test"))
        configuration.randomize = false
        var state = ClientState(configuration: configuration)
        if ready { connect(&state) }
        return state
    }

    static func connect(_ state: inout ClientState) {
        let now: Int64 = 1_000_000_000_000
        _ = state.start(now: now)
        _ = state.connectionEstablished(now: now)
        _ = state.received(Array(info.utf8).span.bytes, now: now)
        #expect(written(&state).starts(with: Array("CONNECT ".utf8)))
        _ = state.received(Array("PONG\r\n".utf8).span.bytes, now: now)
        #expect(state.isConnected)
    }

    /// Everything the state has to write, marked written.
    static func written(_ state: inout ClientState) -> [UInt8] {
        var out: [UInt8] = []
        while state.hasWritableBytes {
            let chunk = state.writable(limit: 100)  // pieces across message boundaries
            state.didWrite(chunk.count)
            out += chunk
        }
        return out
    }

    /// The general way: the frame read by `BrokerFrame.read`, its `RawEvent` exported.
    static func general(_ frame: [UInt8], ready: Bool) throws -> (outcome: PublishOutcome?, wire: [UInt8]) {
        guard case .event(let fields) = try BrokerFrame.read(frame.span.bytes) else {
            Issue.record("not an event frame")
            return (nil, [])
        }
        var core = core()
        var state = client(ready: ready)
        guard case .publish(let message) = core.export(RawEvent(fields, in: frame.span.bytes)) else { return (nil, []) }
        let outcome = state.publish(message)
        if !ready { connect(&state) }
        return (outcome, written(&state))
    }

    /// The frame read in place and written straight into the outbox; nil when
    /// the positional reader leaves it to the general one.
    static func inPlace(_ frame: [UInt8], ready: Bool) -> (outcome: PublishOutcome?, wire: [UInt8])? {
        var core = core()
        var state = client(ready: ready)
        let outcome = frame.withByteView { view -> PublishOutcome?? in
            guard let event = ExportFrame(view) else { return nil }
            guard let message = core.export(event) else { return .some(nil) }
            return state.publish(message) { core.writeExport(event, into: &$0) }
        }
        guard let outcome else { return nil }
        if !ready { connect(&state) }
        return (outcome, written(&state))
    }

    /// A frame named for the test's report (a long one printed whole buries the report).
    struct Named: CustomTestStringConvertible, Sendable {
        let name: String
        let bytes: [UInt8]
        init(_ name: String, _ bytes: [UInt8]) {
            self.name = name
            self.bytes = bytes
        }
        var testDescription: String { name }
    }

    static let plain: [Named] = [
        Named("source and id given", frame()),
        Named("the broker's default source and id", frame(source: nil, id: nil)),
        Named("default source", frame(source: nil)), Named("default id", frame(id: nil)),
        Named("empty source and id", frame(source: #""""#, id: #""""#)),
        Named("every plain punctuation", frame(source: #""svc/billing:eu-1_~!*+'()[]{}|^`$&#;,=?@<>""#)),
        Named("unicode and escapes in data", frame(data: #"{"s":"café ☕","e":"\u00e9\n\"q\"","a":[1,-2.5e3,true,false,null,{"b":{}}]}"#)),
        Named("data null", frame(data: nil)), Named("data a string", frame(data: #""text""#)), Named("data 0", frame(data: "0")),
        Named("data -1.5E-7", frame(data: "-1.5E-7")), Named("data []", frame(data: "[]")), Named("data true", frame(data: "true")),
        Named("data 100 deep", frame(data: String(repeating: "[", count: 100) + String(repeating: "]", count: 100))),
        Named("data of 70,000 bytes", frame(data: "\"" + String(repeating: "x", count: 70_000) + "\"")),
        Named("seq 0", frame(seq: 0)), Named("seq 1", frame(seq: 1)), Named("seq max", frame(seq: UInt64.max)),
        Named("pid uid gid 0", frame(pid: 0, uid: 0, gid: 0)), Named("pid uid gid 1", frame(pid: 1, uid: 1, gid: 1)),
        Named("pid uid gid max", frame(pid: Int32.max, uid: UInt32.max, gid: UInt32.max)),
        Named("type with - _ digits", frame(type: "order.x-y_z.9")),
    ]

    @Test(arguments: plain, [true, false])
    func aPlainFrameIsWrittenInPlaceAsTheGeneralWayWritesIt(_ named: Named, ready: Bool) throws {
        let frame = named.bytes
        let fast = try #require(Self.inPlace(frame, ready: ready), "left to the general reader: \(String(decoding: frame.prefix(200), as: UTF8.self))")
        let general = try Self.general(frame, ready: ready)
        #expect(fast.outcome == (ready ? .queued : .held) && general.outcome == fast.outcome)
        #expect(!fast.wire.isEmpty)
        #expect(String(decoding: fast.wire, as: UTF8.self) == String(decoding: general.wire, as: UTF8.self))
        #expect(fast.wire == general.wire)
    }

    /// Frames the positional reader leaves to the general one.
    static let other: [Named] = {
        let base = String(decoding: frame(), as: UTF8.self)
        func edited(_ from: String, _ to: String) -> Named {
            let text = base.replacing(from, with: to)
            #expect(text != base)
            return Named(text, Array(text.utf8))
        }
        func named(_ bytes: [UInt8]) -> Named { Named(String(decoding: bytes, as: UTF8.self), bytes) }
        return [
            named(frame(source: #""caf\u00e9""#)), named(frame(source: #""a\"b""#)), named(frame(id: #""line\r\nbreak""#)),  // escapes
            named(frame(source: #""a b""#)), named(frame(id: #""100%""#)), named(frame(source: #""café""#)),  // percent-encoded in the header
            named(frame(pid: -5)), named(frame(pid: Int32.min)),
            named(frame(origin: #"{"node":"host-b","instance":"x","seq":7}"#)),  // bridged
            edited(#","data":"#, #","key":"k","data":"#),  // (1.3) a key
            edited(#"{"n":1}}"#, #"{"n":1},"replayed":true}"#), edited(#"{"n":1}}"#, #"{"n":1},"retained":true}"#),
            edited(#"{"n":1}}"#, #"{"n":1},"redelivered":true}"#), edited(#"{"n":1}}"#, #"{"n":1},"group":"work"}"#),
            edited(#"{"n":1}}"#, #"{"n":1},"later":1}"#), edited(#"{"n":1}}"#, #"{"n":1} }"#),  // a member from a newer broker; a blank
            edited(#""pid":1234"#, #""pid":2147483648"#), edited(#""uid":1000"#, #""uid":4294967296"#),  // out of range: 0 in the header
            edited(#""gid":1001"#, #""gid":01001"#), edited(#""seq":42"#, #""seq":99999999999999999999"#),
            edited(#""time":"#, #""time" :"#),
        ]
    }()

    @Test(arguments: other)
    func anyOtherFrameIsLeftToTheGeneralReader(_ named: Named) throws {
        #expect(Self.inPlace(named.bytes, ready: true) == nil, "read in place")
    }

    @Test func aStringIsReadInPlaceExactlyWhenEachOfItsBytesIsCarriedAsItself() throws {
        // Every byte value at every place of a 20-byte source (the word-at-a-time scan's
        // eight-byte steps and the byte loop after them), and as the whole of a short one.
        let placeholder = Array("SOURCE-PLACEHOLDER-1".utf8)
        let base = Self.frame(source: "\"" + String(decoding: placeholder, as: UTF8.self) + "\"")
        let at = try #require(base.indices.first { base[$0...].starts(with: placeholder) })
        for byte in UInt8.min...UInt8.max {
            let expected = Headers.isPlain(byte) && byte != 0x5C
            for place in 0..<placeholder.count {
                var frame = base
                frame[at + place] = byte
                let read = frame.withByteView { view in ExportFrame(view).map { $0.source.array } }
                #expect((read != nil) == expected, "byte \(byte) at \(place)")
                if let read { #expect(read == Array(frame[at..<(at + placeholder.count)])) }
            }
            let short = Self.frame(source: "\"a\"")
            let a = try #require(short.indices.first { short[$0...].starts(with: Array(#""source":"a""#.utf8)) }) + 10
            var one = short
            one[a] = byte
            #expect(one.withByteView { ExportFrame($0) != nil } == expected, "byte \(byte) alone")
        }
    }

    @Test func theGeneralWayStillExportsWhatThePositionalReaderLeaves() throws {
        // Percent-encoded values, out-of-range numbers (0), a key: exported as before.
        let encoded = try Self.general(Self.frame(source: #""a b""#, id: #""caf\u00e9""#), ready: true)
        #expect(String(decoding: encoded.wire, as: UTF8.self).contains("\r\nce-id: caf%C3%A9\r\nce-source: a%20b\r\n"))
        let outOfRange = Array(String(decoding: Self.frame(), as: UTF8.self).replacing(#""pid":1234"#, with: #""pid":2147483648"#).utf8)
        #expect(String(decoding: try Self.general(outOfRange, ready: true).wire, as: UTF8.self).contains("\r\nce-ebpid: 0\r\n"))
        // Bridged: not exported either way.
        #expect(try Self.general(Self.frame(origin: #"{"node":"host-b"}"#), ready: true).outcome == nil)
    }

    @Test func aTypeNotExportedIsSkippedInPlaceAsInTheGeneralWay() throws {
        let frame = Self.frame(type: "invoice.paid")
        let fast = try #require(Self.inPlace(frame, ready: true))
        #expect(fast.outcome == nil && fast.wire.isEmpty)
        #expect(try Self.general(frame, ready: true).outcome == nil)
        // The reserved eventbus. types stay local too.
        var core = BridgeCore(mapping: SubjectMapping(node: node("host-a")), exports: [pattern(">")], imports: [], bridgeInstance: "bridge-1")
        let reserved = Self.frame(type: "eventbus.client.connected")
        #expect(reserved.withByteView { view in ExportFrame(view).map { core.export($0) == nil } } == true)
    }

    @Test func anotherBridgeUnderOurNodeStopsTheExportInPlaceToo() throws {
        var core = Self.core()
        let hello = Message(subject: core.mapping.helloSubject.text, sid: SubscriptionID(9), headers: nil,
                            payload: bytes(#"{"node":"host-a","instance":"bridge-2","reply":false}"#))
        guard case .duplicateNode = core.handle(hello) else { Issue.record("no duplicate node"); return }
        let frame = Self.frame()
        #expect(frame.withByteView { view in ExportFrame(view).map { core.export($0) == nil } } == true)
        #expect(core.counters.suspended == 1)
        guard case .event(let fields) = try BrokerFrame.read(frame.span.bytes) else { return }
        #expect(core.export(RawEvent(fields, in: frame.span.bytes)) == .skip(.suspended))
        #expect(core.counters.suspended == 2)
    }

    @Test func theLastTypesDecisionFollowsTheType() throws {
        // Alternating exported and not exported types through one core: each decided by its own bytes.
        var core = Self.core()
        var state = Self.client(ready: true)
        var subjects: [String] = []
        for type in ["order.a", "invoice.b", "order.a", "order.c", "invoice.b", "order.c"] {
            let frame = Self.frame(type: type)
            frame.withByteView { view in
                guard let event = ExportFrame(view) else { Issue.record("left to the general reader"); return }
                guard let message = core.export(event) else { subjects.append("-"); return }
                subjects.append(message.subject.text)
                _ = state.publish(message) { core.writeExport(event, into: &$0) }
            }
        }
        #expect(subjects == ["eventbus.evt.host-a.order.a", "-", "eventbus.evt.host-a.order.a", "eventbus.evt.host-a.order.c", "-", "eventbus.evt.host-a.order.c"])
    }
}
