// The bytes the load generator sends and the frames it recognises, for our
// NDJSON protocol (PROTOCOL.md), for RESP (Redis SUBSCRIBE/PUBLISH) and for
// the C relay's bare lines; NATS and MQTT have files of their own
// (WireNATS.swift, WireMQTT.swift; case 9's CloudEvents header blocks:
// WireCloudEvents.swift), the set-up exchanges are in Session.swift.
//
// Before editing: the scanners run once per delivered message; they compare
// fixed prefixes and count, they never parse JSON and never allocate.
import Glibc

/// The protocols the generator speaks, by the name `--proto` takes.
enum Wire: String, CaseIterable {
    /// Our NDJSON protocol, PROTOCOL.md version 1.
    case eventbus
    /// RESP2 as spoken by redis-server 7 (`SUBSCRIBE`, `PSUBSCRIBE`, `PUBLISH`, `PING`).
    case redis
    /// The NATS client protocol of nats-server 2.9 (`CONNECT`, `SUB`, `PUB`,
    /// `MSG`, `PING`/`PONG`; DESIGN-NOTES-1.1.md A.1), over loopback TCP.
    case nats
    /// MQTT 3.1.1 at QoS 0 as spoken by mosquitto 2.0 (`CONNECT`, `SUBSCRIBE`,
    /// `PUBLISH`, `PINGREQ`/`PINGRESP`).
    case mqtt
    /// scripts/bench-relay.c: a subscriber's first line is `SUB` (answered
    /// `OK`); every other LF-terminated line is forwarded unparsed.
    case relay
}

/// The benchmark payload: a JSON object of exactly `size` bytes carrying a
/// send timestamp as 19 zero-padded decimal digits of CLOCK_MONOTONIC
/// nanoseconds, e.g. `{"ts":"0000001234567890123","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxx"}`
/// (64 bytes). The stamp is a JSON string: a number may not have leading zeros.
enum Payload {
    /// Bytes before the digits: `{"ts":"`.
    static let prefix: [UInt8] = Array(#"{"ts":""#.utf8)
    /// Number of timestamp digits.
    static let digits = 19
    /// Smallest payload `make(size:)` can build, in bytes.
    static let minimumSize = 37

    /// Builds a payload of exactly `size` bytes (at least `minimumSize`) with a zero stamp.
    static func make(size: Int) -> [UInt8] {
        precondition(size >= minimumSize, "payload must be at least \(minimumSize) bytes")
        let head = #"{"ts":""# + String(repeating: "0", count: digits) + #"","pad":""#
        let pad = String(repeating: "x", count: size - minimumSize)
        let bytes = Array((head + pad + #""}"#).utf8)
        precondition(bytes.count == size)
        return bytes
    }
}

/// Writes `value` (>= 0) as exactly 19 zero-padded decimal digits at `at`.
@inline(__always)
func writeStamp(_ value: Int64, at: UnsafeMutablePointer<UInt8>) {
    var v = UInt64(max(value, 0))
    var i = Payload.digits - 1
    while i >= 0 {
        at[i] = UInt8(truncatingIfNeeded: 0x30 &+ v % 10)
        v /= 10
        i -= 1
    }
}

/// Reads 19 decimal digits at `at`; -1 if any byte is not a digit.
@inline(__always)
func readStamp(_ at: UnsafePointer<UInt8>) -> Int64 {
    var v: Int64 = 0
    for i in 0..<Payload.digits {
        let d = Int64(at[i]) &- 0x30
        if d < 0 || d > 9 { return -1 }
        v = v &* 10 &+ d
    }
    return v
}

/// A RESP2 command: an array of bulk strings.
func respCommand(_ parts: [String]) -> [UInt8] {
    var out = Array("*\(parts.count)\r\n".utf8)
    for part in parts {
        let bytes = Array(part.utf8)
        out += Array("$\(bytes.count)\r\n".utf8) + bytes + [0x0D, 0x0A]
    }
    return out
}

/// One publish frame and where the payload's stamp digits sit inside it.
/// - eventbus: `{"op":"publish","type":"bench.t","data":PAYLOAD}` + LF, no
///   `req` (pipelined; success is silent, PROTOCOL.md "Requests").
/// - relay: the same line, which the relay forwards as it is.
/// - redis: `PUBLISH bench.t PAYLOAD` as a RESP array.
/// - nats: `PUB bench.t 64` CR LF PAYLOAD CR LF.
/// - mqtt: a QoS 0 PUBLISH to `bench/t` (`MQTT.topic`).
func publishFrame(_ wire: Wire, type: String, payload: [UInt8]) -> (bytes: [UInt8], stampOffset: Int) {
    switch wire {
    case .eventbus, .relay:
        let head = Array(#"{"op":"publish","type":""#.utf8) + Array(type.utf8) + Array(#"","data":"#.utf8)
        return (head + payload + Array("}\n".utf8), head.count + Payload.prefix.count)
    case .redis:
        let head = Array("*3\r\n$7\r\nPUBLISH\r\n$\(type.utf8.count)\r\n\(type)\r\n$\(payload.count)\r\n".utf8)
        return (head + payload + [0x0D, 0x0A], head.count + Payload.prefix.count)
    case .nats:
        return NATS.publish(subject: type, payload: payload)
    case .mqtt:
        return MQTT.publish(topic: MQTT.topic(type), payload: payload)
    }
}

/// Counts of what one connection received, plus optional latency samples.
struct Tally {
    /// Event frames (eventbus `{"op":"event"...`, redis `message`/`pmessage`,
    /// nats `MSG`, mqtt `PUBLISH`, relay any line).
    var events = 0
    /// NATS `PING`s from the server, which the reader must answer with `PONG`.
    var pings = 0
    /// Sum of the `count` fields of eventbus `{"op":"dropped",...}` notices.
    var dropped = 0
    /// Number of `dropped` notices.
    var dropNotices = 0
    /// Any other frame (errors, replies); the first is kept for diagnostics.
    var other = 0
    var firstOther: String?
    /// Latency samples in nanoseconds (receipt time minus payload stamp), when recording.
    var samples: UnsafeMutablePointer<Int64>?
    var sampleCount = 0
    var sampleCapacity = 0
    /// Receipt time of the bytes being scanned (CLOCK_MONOTONIC ns).
    var now: Int64 = 0

    @inline(__always)
    mutating func record(stampAt: UnsafePointer<UInt8>) {
        guard let samples, sampleCount < sampleCapacity else { return }
        let stamp = readStamp(stampAt)
        guard stamp > 0 else { return }
        samples[sampleCount] = now &- stamp
        sampleCount += 1
    }

    /// Records the stamp of a delivered line (`base[0..<count]`, a JSON
    /// frame) whose payload carries one: found by `Payload.prefix`.
    @inline(__always)
    mutating func recordStamp(inLine base: UnsafePointer<UInt8>, _ count: Int) {
        if let at = find(Payload.prefix, in: base, count: count), at + Payload.prefix.count + Payload.digits <= count {
            record(stampAt: base + at + Payload.prefix.count)
        }
    }

    mutating func noteOther(_ base: UnsafePointer<UInt8>, _ count: Int) {
        other += 1
        if firstOther == nil {
            firstOther = String(decoding: UnsafeBufferPointer(start: base, count: min(count, 300)), as: UTF8.self)
        }
    }
}

/// Loads 8 bytes from an unaligned address.
@inline(__always)
private func load8(_ p: UnsafePointer<UInt8>) -> UInt64 {
    UnsafeRawPointer(p).loadUnaligned(as: UInt64.self)
}

/// The first 8 bytes of `text` as a little-endian word, for prefix tests.
private func word(_ text: String) -> UInt64 {
    let bytes = Array(text.utf8)
    precondition(bytes.count == 8)
    return bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
}

/// Index of the first occurrence of `needle` in `base[0..<count]`, or nil.
func find(_ needle: [UInt8], in base: UnsafePointer<UInt8>, count: Int) -> Int? {
    guard needle.count <= count, let first = needle.first else { return nil }
    var i = 0
    while i + needle.count <= count {
        if base[i] == first {
            var j = 1
            while j < needle.count && base[i + j] == needle[j] { j += 1 }
            if j == needle.count { return i }
        }
        i += 1
    }
    return nil
}

/// Scans LF-terminated eventbus frames and tallies them without parsing JSON.
struct EventBusScanner {
    private let opE = word(#"{"op":"e"#)
    private let opEvent = word(#":"event""#)  // bytes 5..<13 of {"op":"event"
    private let opD = word(#"{"op":"d"#)
    private let countKey = Array(#""count":"#.utf8)

    /// Tallies every complete line in `base[0..<count]`.
    /// - Returns: bytes consumed, up to and including the last LF.
    @inline(__always)
    func scan(_ base: UnsafeMutablePointer<UInt8>, _ count: Int, into tally: inout Tally, latency: Bool) -> Int {
        let raw = UnsafeMutableRawPointer(base)
        var pos = 0
        while pos < count {
            guard let lf = memchr(raw + pos, 0x0A, count - pos) else { break }
            let end = raw.distance(to: lf)
            let line = UnsafePointer(base + pos)
            let length = end - pos
            if length >= 13 && load8(line) == opE && load8(line + 5) == opEvent {
                tally.events &+= 1
                if latency { tally.recordStamp(inLine: line, length) }
            } else if length >= 8 && load8(line) == opD {
                tally.dropNotices += 1
                if let at = find(countKey, in: line, count: length) {
                    var i = at + countKey.count
                    var n = 0
                    while i < length && line[i] >= 0x30 && line[i] <= 0x39 {
                        n = n &* 10 &+ Int(line[i] &- 0x30)
                        i += 1
                    }
                    tally.dropped &+= n
                }
            } else if length > 0 && !(length == 1 && line[0] == 0x0D) {
                tally.noteOther(line, length)
            }
            pos = end + 1
        }
        return pos
    }
}

/// Counts the C relay's deliveries: every LF-terminated line is one
/// forwarded publish frame (the relay sends nothing else after `OK`).
struct RelayScanner {
    /// Tallies every complete line in `base[0..<count]`.
    /// - Returns: bytes consumed, up to and including the last LF.
    @inline(__always)
    func scan(_ base: UnsafeMutablePointer<UInt8>, _ count: Int, into tally: inout Tally, latency: Bool) -> Int {
        let raw = UnsafeMutableRawPointer(base)
        var pos = 0
        while pos < count {
            guard let lf = memchr(raw + pos, 0x0A, count - pos) else { break }
            let end = raw.distance(to: lf)
            tally.events &+= 1
            if latency { tally.recordStamp(inLine: UnsafePointer(base + pos), end - pos) }
            pos = end + 1
        }
        return pos
    }
}

/// Where one complete RESP frame ends and what its first and last elements are.
struct RespFrame {
    /// Offset just past the frame.
    var end = 0
    /// `*` for an array, else the type byte of a one-line reply (`+`, `-`, `:`).
    var kind: UInt8 = 0
    /// Offset and length of the first element's bytes (the line itself for a one-line reply).
    var firstStart = 0
    var firstLength = 0
    /// Offset and length of the last element's bytes.
    var lastStart = 0
    var lastLength = 0
}

/// Parses one RESP2 frame starting at `start`: a one-line reply or an array
/// of bulk strings, integers and simple strings (nested arrays are not used
/// by pub/sub). Returns nil when the frame is not complete in `count` bytes.
@inline(__always)
func parseResp(_ p: UnsafePointer<UInt8>, _ start: Int, _ count: Int) -> RespFrame? {
    guard start < count else { return nil }
    var frame = RespFrame()
    frame.kind = p[start]
    if frame.kind != 0x2A {  // not '*': one line
        guard let end = respLineEnd(p, start, count) else { return nil }
        frame.end = end
        frame.firstStart = start
        frame.firstLength = end - start - 2
        frame.lastStart = frame.firstStart
        frame.lastLength = frame.firstLength
        return frame
    }
    guard let (elements, afterHeader) = respNumber(p, start, count) else { return nil }
    var at = afterHeader
    for index in 0..<max(elements, 0) {
        guard at < count, let element = respElement(p, at, count) else { return nil }
        if index == 0 {
            frame.firstStart = element.start
            frame.firstLength = element.length
        }
        frame.lastStart = element.start
        frame.lastLength = element.length
        at = element.end
    }
    frame.end = at
    return frame
}

/// The decimal number (maybe negative) after a type byte at `at`, up to CR
/// LF: the value and the offset after the LF; nil when cut short.
@inline(__always)
private func respNumber(_ p: UnsafePointer<UInt8>, _ at: Int, _ count: Int) -> (Int, Int)? {
    var i = at + 1
    var negative = false
    if i < count && p[i] == 0x2D { negative = true; i += 1 }
    var n = 0
    while i < count && p[i] != 0x0D {
        n = n &* 10 &+ Int(p[i] &- 0x30)
        i += 1
    }
    guard i + 1 < count else { return nil }
    return (negative ? -n : n, i + 2)
}

/// The offset after the LF of the line at `at`; nil when cut short.
@inline(__always)
private func respLineEnd(_ p: UnsafePointer<UInt8>, _ at: Int, _ count: Int) -> Int? {
    guard let lf = memchr(p + at, 0x0A, count - at) else { return nil }
    return UnsafeRawPointer(p).distance(to: UnsafeRawPointer(lf)) + 1
}

/// One element of a RESP array at `at` (a bulk string, or a one-line
/// integer or simple string): its bytes and the offset after it; nil when cut short.
@inline(__always)
private func respElement(_ p: UnsafePointer<UInt8>, _ at: Int, _ count: Int) -> (start: Int, length: Int, end: Int)? {
    if p[at] == 0x24 {  // '$' bulk string
        guard let (length, dataStart) = respNumber(p, at, count) else { return nil }
        let len = max(length, 0)
        guard dataStart + len + 2 <= count else { return nil }
        return (dataStart, len, length < 0 ? dataStart : dataStart + len + 2)
    }
    guard let end = respLineEnd(p, at, count) else { return nil }
    return (at + 1, end - at - 3, end)
}

/// Scans RESP push frames and tallies `message`/`pmessage` as events.
struct RedisScanner {
    private let message = Array("message".utf8)
    /// `*3` CR LF `$7` CR LF and `message` CR: the opening of every `SUBSCRIBE` delivery.
    private let messageHead0 = word("*3\r\n$7\r\n")
    private let messageHead1 = word("message\r")

    /// Counts the `message` push at `pos` by its two lengths alone.
    /// - Returns: the offset after it; nil for any other frame or one cut short.
    @inline(__always)
    private func messagePush(_ p: UnsafePointer<UInt8>, _ pos: Int, _ count: Int, into tally: inout Tally, latency: Bool) -> Int? {
        guard count - pos >= 18 && load8(p + pos) == messageHead0 && load8(p + pos + 8) == messageHead1
            && p[pos + 16] == 0x0A && p[pos + 17] == 0x24 else { return nil }
        let (channelLength, channelStart) = respLength(p, pos + 18, count)
        let payloadHead = channelStart + channelLength + 2
        guard channelLength >= 0 && payloadHead < count && p[payloadHead] == 0x24 else { return nil }
        let (payloadLength, payloadStart) = respLength(p, payloadHead + 1, count)
        let end = payloadStart + payloadLength + 2
        guard payloadLength >= 0 && end <= count else { return nil }
        tally.events &+= 1
        if latency && payloadLength >= Payload.prefix.count + Payload.digits {
            tally.record(stampAt: p + payloadStart + Payload.prefix.count)
        }
        return end
    }

    /// Tallies every complete frame in `base[0..<count]`.
    /// - Returns: bytes consumed, up to the end of the last complete frame.
    @inline(__always)
    func scan(_ base: UnsafeMutablePointer<UInt8>, _ count: Int, into tally: inout Tally, latency: Bool) -> Int {
        let p = UnsafePointer(base)
        var pos = 0
        while true {
            // A `message` push, counted by its two lengths alone; anything
            // else (and a frame cut short) goes to parseResp below.
            if let end = messagePush(p, pos, count, into: &tally, latency: latency) {
                pos = end
                continue
            }
            guard let frame = parseResp(p, pos, count) else { break }
            let first = p + frame.firstStart
            // "message" (7 bytes) or "pmessage" (8 bytes, skip the 'p').
            let isMessage = frame.kind == 0x2A
                && ((frame.firstLength == 7 && memcmp(first, message, 7) == 0)
                    || (frame.firstLength == 8 && first[0] == 0x70 && memcmp(first + 1, message, 7) == 0))
            if isMessage {
                tally.events &+= 1
                if latency && frame.lastLength >= Payload.prefix.count + Payload.digits {
                    tally.record(stampAt: p + frame.lastStart + Payload.prefix.count)
                }
            } else {
                tally.noteOther(p + pos, frame.end - pos)
            }
            pos = frame.end
        }
        return pos
    }
}

/// The decimal digits at `at` up to CR LF: the length and the offset after
/// the LF, or (-1, 0) when they are not all in `p[0..<count]` (or are not digits).
@inline(__always)
private func respLength(_ p: UnsafePointer<UInt8>, _ at: Int, _ count: Int) -> (Int, Int) {
    var i = at
    var n = 0
    while i < count && p[i] &- 0x30 < 10 {
        n = n &* 10 &+ Int(p[i] &- 0x30)
        i += 1
    }
    guard i > at && i + 1 < count && p[i] == 0x0D else { return (-1, 0) }
    return (n, i + 2)
}

