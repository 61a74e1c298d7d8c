// FrameEncoder output parsed back with Foundation's JSONSerialization
// (PROTOCOL.md "Requests", "Events", "Errors"): each call appends exactly one
// frame, one line ending in LF, that an ordinary JSON parser reads back to the
// values put in.
@_spi(Package) @testable import EventBusProtocol
import Foundation
import Testing

/// Parses one encoded frame: checks it is a single LF-terminated line, then
/// returns its object.
func parseFrame(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    #expect(bytes.last == 0x0A, sourceLocation: sourceLocation)
    #expect(bytes.dropLast().contains(0x0A) == false, "raw LF inside a frame", sourceLocation: sourceLocation)
    #expect(scannerAccepts(Array(bytes.dropLast())), sourceLocation: sourceLocation)
    let object = try JSONSerialization.jsonObject(with: Data(bytes.dropLast()))
    return try #require(object as? [String: Any], sourceLocation: sourceLocation)
}

@Suite("Frame encoder")
struct FrameEncoderTests {
    @Test("integers are written in decimal", arguments: [
        (UInt64(0), "0"), (9, "9"), (10, "10"), (99, "99"), (100, "100"), (1 << 53, "9007199254740992"),
        (UInt64.max, "18446744073709551615"),
    ])
    func unsignedIntegers(_ value: UInt64, _ text: String) {
        var out: [UInt8] = []
        FrameEncoder.appendInt(value, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == text)
    }

    @Test("signed integers are written in decimal", arguments: [
        (Int64(0), "0"), (-1, "-1"), (-10, "-10"), (Int64.max, "9223372036854775807"), (Int64.min, "-9223372036854775808"),
    ])
    func signedIntegers(_ value: Int64, _ text: String) {
        var out: [UInt8] = []
        FrameEncoder.appendInt(value, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == text)
    }

    @Test func okWithoutReqOrFields() throws {
        var out: [UInt8] = []
        FrameEncoder.appendOK(req: nil, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "{\"op\":\"ok\"}\n")
        _ = try parseFrame(out)
    }

    @Test func okEchoesReqAndCarriesFields() throws {
        var out: [UInt8] = []
        let req = utf8(#""r\"1""#)
        req.withByteView { $0.withSpan { raw in
            FrameEncoder.appendOK(req: raw, to: &out) { out in
                FrameEncoder.appendField("seq", int: 42, to: &out)
                FrameEncoder.appendField("type", string: "a.b", to: &out)
                FrameEncoder.appendField("removed", bool: false, to: &out)
                FrameEncoder.appendField("yes", bool: true, to: &out)
                FrameEncoder.appendField("raw", raw: utf8(#"{"x":[1,2]}"#).span.bytes, to: &out)
            }
        } }
        let object = try parseFrame(out)
        #expect(object["op"] as? String == "ok")
        #expect(object["req"] as? String == "r\"1")
        #expect(object["seq"] as? Int == 42)
        #expect(object["type"] as? String == "a.b")
        #expect(object["removed"] as? Bool == false)
        #expect(object["yes"] as? Bool == true)
        #expect((object["raw"] as? [String: Any])?["x"] as? [Int] == [1, 2])
    }

    @Test("error messages survive any text", arguments: [
        "plain", "quote \" and backslash \\", "line\nbreak\r\ttab", "control \u{0}\u{1}\u{1F}", "unicode é € 😀", "",
    ])
    func errorMessagesSurviveAnyText(_ message: String) throws {
        var out: [UInt8] = []
        FrameEncoder.appendError(req: utf8("7").span.bytes, ProtocolError(.badType, message), to: &out)
        let object = try parseFrame(out)
        #expect(object["op"] as? String == "error")
        #expect(object["req"] as? Int == 7)
        #expect(object["code"] as? String == "bad_type")
        #expect(object["message"] as? String == message)
    }

    @Test("every error code is written with its wire spelling", arguments: ErrorCode.allCases)
    func everyErrorCode(_ code: ErrorCode) throws {
        var out: [UInt8] = []
        FrameEncoder.appendError(req: nil, ProtocolError(code, "m"), to: &out)
        let object = try parseFrame(out)
        #expect(object["code"] as? String == code.rawValue)
        #expect(object["req"] == nil)
    }

    @Test func droppedNotice() throws {
        var out: [UInt8] = []
        FrameEncoder.appendDropped(count: 3, sinceSeq: 1234, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "{\"op\":\"dropped\",\"count\":3,\"since_seq\":1234}\n")
        _ = try parseFrame(out)
    }

    @Test func eventWithPublisherFieldsSplicesThemUnchanged() throws {
        var out: [UInt8] = []
        let time = utf8("2026-11-29T13:00:00.123Z")
        let source = utf8(#""bill\u0069ng""#)
        let id = utf8(#""3f9a1c07-42""#)
        let data = utf8(#"{ "n" : 1.50 , "s":"é" }"#)
        time.withByteView { t in source.withByteView { s in id.withByteView { i in data.withByteView { d in
            FrameEncoder.appendEvent(.init(seq: 42, type: "order.created", time: t, source: s, defaultSource: "unused",
                                           id: i, instance: "abc", pid: 1234, uid: 1000, gid: 100, data: d), to: &out)
        } } } }
        let text = String(decoding: out, as: UTF8.self)
        #expect(text.contains(#","data":{ "n" : 1.50 , "s":"é" }}"#))
        #expect(text.hasPrefix(#"{"op":"event","seq":42,"type":"order.created","time":"2026-11-29T13:00:00.123Z","source":"bill\u0069ng","id":"3f9a1c07-42","pid":1234,"uid":1000,"gid":100,"data":"#))
        let object = try parseFrame(out)
        #expect(object["source"] as? String == "billing")
        #expect(object["id"] as? String == "3f9a1c07-42")
        #expect((object["data"] as? [String: Any])?["s"] as? String == "é")
    }

    @Test func eventWithoutPublisherFieldsUsesDefaults() throws {
        var out: [UInt8] = []
        let time = utf8("1970-01-01T00:00:00.000Z")
        time.withByteView { t in
            FrameEncoder.appendEvent(.init(seq: 7, type: "a", time: t, source: nil, defaultSource: "pid/-5",
                                           id: nil, instance: "0123456789abcdef", pid: -5, uid: UInt32.max, gid: 0, data: nil), to: &out)
        }
        let object = try parseFrame(out)
        #expect(object["op"] as? String == "event")
        #expect(object["seq"] as? Int == 7)
        #expect(object["source"] as? String == "pid/-5")
        #expect(object["id"] as? String == "0123456789abcdef-7")
        #expect(object["pid"] as? Int == -5)
        #expect(object["uid"] as? Int == Int(UInt32.max))
        #expect(object["gid"] as? Int == 0)
        #expect(object["data"] is NSNull)
        #expect(object.count == 10)
    }

    @Test("writeEvent reports where it wrote the type, for any seq length", arguments: [UInt64(1), 99, 123_456_789, .max])
    func writeEventReportsTheTypesPlace(_ seq: UInt64) {
        let time = utf8("2026-11-29T13:00:00.123Z")
        let (frame, written) = time.withByteView { t in
            let parts = FrameEncoder.EventParts(
                seq: seq, type: "order.created.v2", time: t, source: nil, defaultSource: "pid/1",
                id: nil, instance: "0123456789abcdef", pid: 1, uid: 2, gid: 3, data: nil)
            var written = FrameEncoder.WrittenEvent()
            let frame = [UInt8](unsafeUninitializedCapacity: FrameEncoder.eventByteCountUpperBound(parts)) { buffer, count in
                written = FrameEncoder.writeEvent(parts, into: RawWriter(UnsafeMutableRawPointer(buffer.baseAddress!), capacity: buffer.count))
                count = written.count
            }
            return (frame, written)
        }
        #expect(written.count == frame.count)
        #expect(String(decoding: frame[written.typeOffset..<(written.typeOffset + written.typeCount)], as: UTF8.self) == "order.created.v2")
    }

    @Test("writeEvent stays within its upper bound and writes every field at its extremes", arguments: [
        (UInt64(1), Int32(1), UInt32(0), UInt32(0), true),
        (UInt64(9), Int32(-1), UInt32(1000), UInt32(1000), false),
        (UInt64(10), Int32.max, UInt32.max, UInt32.max, true),
        (UInt64.max, Int32.min, UInt32.max, UInt32(7), false),
        (UInt64(1) << 53, Int32(0), UInt32(0), UInt32.max, true),
    ])
    func writeEventStaysWithinItsBound(_ seq: UInt64, _ pid: Int32, _ uid: UInt32, _ gid: UInt32, _ withFields: Bool) throws {
        let time = utf8("2026-11-29T13:00:00.123Z")
        let source = utf8(#""s\"x""#), id = utf8(#""id-1""#), data = utf8(#"{"k":[1,2,{"é":null}]}"#)
        let (written, bound) = time.withByteView { t in source.withByteView { s in id.withByteView { i in data.withByteView { d in
            let parts = FrameEncoder.EventParts(
                seq: seq, type: "order.created.v2", time: t, source: withFields ? s : nil, defaultSource: "pid/\(pid)",
                id: withFields ? i : nil, instance: "0123456789abcdef", pid: pid, uid: uid, gid: gid, data: withFields ? d : nil)
            let bound = FrameEncoder.eventByteCountUpperBound(parts)
            let written = [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
                count = FrameEncoder.writeEvent(parts, into: RawWriter(UnsafeMutableRawPointer(buffer.baseAddress!), capacity: buffer.count)).count
            }
            return (written, bound)
        } } } }
        #expect(written.count <= bound)
        let object = try parseFrame(written)
        #expect((object["seq"] as? NSNumber)?.uint64Value == seq)
        #expect((object["pid"] as? NSNumber)?.int64Value == Int64(pid))
        #expect((object["uid"] as? NSNumber)?.uint64Value == UInt64(uid))
        #expect((object["gid"] as? NSNumber)?.uint64Value == UInt64(gid))
        #expect(object["source"] as? String == (withFields ? #"s"x"# : "pid/\(pid)"))
        #expect(object["id"] as? String == (withFields ? "id-1" : "0123456789abcdef-\(seq)"))
        #expect(withFields ? object["data"] is [String: Any] : object["data"] is NSNull)
    }

    @Test func framesAppendWithoutDisturbingWhatIsThere() throws {
        var out = utf8("{\"op\":\"ok\"}\n")
        FrameEncoder.appendDropped(count: 1, sinceSeq: 2, to: &out)
        FrameEncoder.appendError(req: nil, ProtocolError(.limit, "x"), to: &out)
        let lines = out.split(separator: 0x0A, omittingEmptySubsequences: false)
        #expect(lines.count == 4 && lines.last?.isEmpty == true)
        for line in lines.dropLast() { _ = try parseFrame(Array(line) + [0x0A]) }
    }

    @Test("the broker's EventBytes write what EventParts write", arguments: [
        (UInt64(1), Int32(1), UInt32(0), UInt32(0), "pid/1", true),
        (UInt64(123_456), Int32(-7), UInt32.max, UInt32(1000), "dashboard", false),
        (UInt64.max, Int32.min, UInt32(0), UInt32.max, "a.b-c:d_e", true),
    ])
    func eventBytesWriteWhatEventPartsWrite(_ seq: UInt64, _ pid: Int32, _ uid: UInt32, _ gid: UInt32, _ client: String, _ withFields: Bool) throws {
        let timeText = utf8("2026-11-29T13:00:00.123Z")
        let type = utf8("order.created"), source = utf8(#""s\"x""#), id = utf8(#""id-1""#), data = utf8(#"{"k":[1,{"é":null}]}"#)
        let instance = "0123456789abcdef"
        var expected: [UInt8] = []
        timeText.withByteView { t in source.withByteView { s in id.withByteView { i in data.withByteView { d in
            FrameEncoder.appendEvent(.init(seq: seq, type: "order.created", time: t, source: withFields ? s : nil, defaultSource: client,
                                           id: withFields ? i : nil, instance: instance, pid: pid, uid: uid, gid: gid, data: withFields ? d : nil), to: &expected)
        } } } }
        var formatter = TimestampFormatter()
        let time = formatter.bytes(nanosecondsSinceEpoch: 1_795_957_200_123_000_000)
        let defaultSource = EventStamp.source(client), identity = EventStamp.identity(pid: pid, uid: uid, gid: gid)
        let idPrefix = EventStamp.idPrefix(instance: instance)
        let written = type.withByteView { ty in source.withByteView { s in id.withByteView { i in data.withByteView { d in
            let parts = FrameEncoder.EventBytes(seq: seq, type: ty, time: time, source: withFields ? s : defaultSource.bytes, id: withFields ? i : nil,
                                                idPrefix: idPrefix.bytes, identity: identity.bytes, origin: nil, data: withFields ? d : nil)
            let bound = FrameEncoder.eventByteCountUpperBound(parts)
            return [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
                count = FrameEncoder.writeEvent(parts, into: RawWriter(UnsafeMutableRawPointer(buffer.baseAddress!), capacity: buffer.count)).count
                #expect(count <= bound)
            }
        } } } }
        #expect(String(decoding: written, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
        _ = try parseFrame(written)
    }

    @Test func anOriginGoesBeforeDataAndInsideTheBound() throws {
        let type = utf8("a"), origin = utf8(#"{"node":"n","seq":1}"#)
        var formatter = TimestampFormatter()
        let time = formatter.bytes(nanosecondsSinceEpoch: 0)
        let source = EventStamp.source("pid/1"), identity = EventStamp.identity(pid: 1, uid: 2, gid: 3), idPrefix = EventStamp.idPrefix(instance: "ab")
        let written = type.withByteView { ty in origin.withByteView { o in
            let parts = FrameEncoder.EventBytes(seq: 9, type: ty, time: time, source: source.bytes, id: nil,
                                                idPrefix: idPrefix.bytes, identity: identity.bytes, origin: o, data: nil)
            let bound = FrameEncoder.eventByteCountUpperBound(parts)
            return [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
                count = FrameEncoder.writeEvent(parts, into: RawWriter(UnsafeMutableRawPointer(buffer.baseAddress!), capacity: buffer.count)).count
                #expect(count <= bound)
            }
        } }
        #expect(String(decoding: written, as: UTF8.self)
            == #"{"op":"event","seq":9,"type":"a","time":"1970-01-01T00:00:00.000Z","source":"pid/1","id":"ab-9","pid":1,"uid":2,"gid":3,"origin":{"node":"n","seq":1},"data":null}"# + "\n")
        _ = try parseFrame(written)
    }

    @Test func seqDigitsAtEveryLength() {
        var rng = SeededGenerator(seed: 0xD161)
        var values: [UInt64] = [0, 1, 9, 10, 99, 100, 101, 999, 1000, UInt64.max, UInt64.max - 1]
        for digits in 1...20 { values.append(UInt64(String(repeating: "9", count: digits).prefix(20)) ?? UInt64.max) }
        values += (0..<2000).map { _ in rng.next() >> (rng.next() % 64) }
        var formatter = TimestampFormatter()
        let time = formatter.bytes(nanosecondsSinceEpoch: 0)
        let type = utf8("a"), source = EventStamp.source("s"), identity = EventStamp.identity(pid: 1, uid: 2, gid: 3), idPrefix = EventStamp.idPrefix(instance: "i")
        for value in values {
            let text = type.withByteView { ty in
                let parts = FrameEncoder.EventBytes(seq: value, type: ty, time: time, source: source.bytes, id: nil,
                                                    idPrefix: idPrefix.bytes, identity: identity.bytes, origin: nil, data: nil)
                let bytes = [UInt8](unsafeUninitializedCapacity: FrameEncoder.eventByteCountUpperBound(parts)) { buffer, count in
                    count = FrameEncoder.writeEvent(parts, into: RawWriter(UnsafeMutableRawPointer(buffer.baseAddress!), capacity: buffer.count)).count
                }
                return String(decoding: bytes, as: UTF8.self)
            }
            #expect(text.hasPrefix(#"{"op":"event","seq":\#(value),"type":"a""#) && text.contains(#""id":"i-\#(value)","#), "\(value): \(text)")
        }
    }
}
