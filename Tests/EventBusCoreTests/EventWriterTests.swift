// EventWriter (where the broker writes each event frame, EventWriter.swift):
// a publish's frame with consecutive seq digits, this run's id prefix and the
// cached time; a small frame in the event scratch while history is off and
// at the ring's arena end while it is on; a large one in a chunk of its own
// that the writer keeps for the fan-out.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("EventWriter")
struct EventWriterTests {
    static let instance = "0123456789abcdef"

    /// The broker's own event of `dataBytes` bytes of JSON string data, seq `seq`.
    static func ownEvent(_ writer: inout EventWriter, seq: UInt64, dataBytes: Int, history: inout HistoryRing) -> (EventFrame, String) {
        let data = Array(("\"" + String(repeating: "d", count: dataBytes - 2) + "\"").utf8)
        let time = writer.timeBytes(nanosecondsSinceEpoch: 1_700_000_001_234_000_000)
        let frame = time.withByteView { time in
            data.withByteView { data in
                writer.makeEvent(FrameEncoder.EventParts(
                    seq: seq, type: "eventbus.test", time: time, source: nil, defaultSource: "eventbusd", id: nil,
                    instance: instance, pid: 1, uid: 2, gid: 3, data: data), history: &history)
            }
        }
        return (frame, String(decoding: frame.bytes, as: UTF8.self))
    }

    @Test func aSmallEventIsWrittenIntoTheScratchWhileHistoryIsOff() {
        var writer = EventWriter(instance: Self.instance)
        var history = HistoryRing(maxEvents: 0, maxBytes: 0)
        let (frame, text) = Self.ownEvent(&writer, seq: 7, dataBytes: 10, history: &history)
        #expect(text == #"{"op":"event","seq":7,"type":"eventbus.test","time":"2023-11-14T22:13:21.234Z","source":"eventbusd","id":"0123456789abcdef-7","pid":1,"uid":2,"gid":3,"data":"dddddddd"}"# + "\n")
        #expect(frame.bytes.baseAddress == UnsafeRawPointer(writer.eventScratch.baseAddress) && frame.shared == nil && writer.builtChunk == nil)
        let type = frame.bytes[Int(frame.typeOffset)..<Int(frame.typeOffset) + Int(frame.typeCount)]
        #expect(String(decoding: UnsafeRawBufferPointer(rebasing: type), as: UTF8.self) == "eventbus.test", "the type where the writer says")
    }

    @Test func aSmallEventIsWrittenAtTheRingsArenaEndWhileHistoryIsOn() {
        var writer = EventWriter(instance: Self.instance)
        var history = HistoryRing(maxEvents: 100, maxBytes: 1 << 20)
        let (frame, text) = Self.ownEvent(&writer, seq: 1, dataBytes: 10, history: &history)
        #expect(text.hasPrefix(#"{"op":"event","seq":1,"#))
        #expect(frame.bytes.baseAddress != UnsafeRawPointer(writer.eventScratch.baseAddress) && frame.shared == nil)
        #expect(history.space(for: 16) == UnsafeMutableRawPointer(mutating: frame.bytes.baseAddress), "not recorded: the next event is written at the same place")
    }

    @Test func aLargeEventGetsAChunkOfItsOwnThatTheWriterKeeps() {
        var writer = EventWriter(instance: Self.instance)
        var history = HistoryRing(maxEvents: 100, maxBytes: 1 << 20)
        let (frame, text) = Self.ownEvent(&writer, seq: 3, dataBytes: OutboundQueue.copyLimitBytes, history: &history)
        #expect(frame.count > OutboundQueue.copyLimitBytes && text.hasSuffix("ddd\"}\n"))
        #expect(frame.shared != nil && frame.shared === writer.builtChunk)
        #expect(frame.bytes.baseAddress == UnsafeRawPointer(writer.builtChunk!.baseAddress))
    }

    @Test func aPublishsEventsCarryConsecutiveSeqsAndTheRunsIDPrefix() {
        let h = BrokerHarness()
        let publisher = h.connect(pid: 4242, uid: 1000, gid: 1000)
        var writer = EventWriter(instance: Self.instance)
        var history = HistoryRing(maxEvents: 0, maxBytes: 0)
        let publish = Array(#"{"op":"publish","type":"a.b","data":{"x":1}}"#.utf8)
        publish.withUnsafeBytes { raw in
            guard case .success(.publish(let request)) = RequestDecoder.decode(raw.bytes).request else {
                Issue.record("not a publish")
                return
            }
            let content = EventContent(request, frame: raw.bytes, typeRange: nil)
            for seq: UInt64 in [8, 9, 10, 11, 99, 100, 5] {
                let frame = writer.buildEvent(seq: seq, content, of: request.type, publisher: publisher, identity: publisher.identity.eventIdentity.bytes,
                                              wallNanoseconds: 1_700_000_001_234_000_000, history: &history)
                #expect(String(decoding: frame.bytes, as: UTF8.self)
                    == #"{"op":"event","seq":\#(seq),"type":"a.b","time":"2023-11-14T22:13:21.234Z","source":"pid/4242","id":"0123456789abcdef-\#(seq)","pid":4242,"uid":1000,"gid":1000,"data":{"x":1}}"# + "\n")
            }
        }
        h.closeAll()
    }
}
