// MQTT 3.1.1 as the load generator speaks it to mosquitto 2.0 (OASIS MQTT
// 3.1.1, sections 2 and 3): CONNECT/CONNACK, SUBSCRIBE/SUBACK, PUBLISH at
// QoS 0, PINGREQ/PINGRESP as the sync marker, and the PUBLISH scanner.
//
// Before editing: packets are binary (a type byte, a variable-length
// "remaining length", the body); our dotted types become topics with `/`
// levels through `MQTT.topic`, so patterns keep their meaning.
import Glibc

/// MQTT control packets.
enum MQTT {
    /// `PINGREQ`: answered `PINGRESP` (0xD0 0x00) once every earlier packet is handled.
    static let pingRequest: [UInt8] = [0xC0, 0x00]

    /// Our type or pattern as an MQTT topic or filter: `bench.t` → `bench/t`,
    /// `other.n9.*` → `other/n9/+`, `other.n9.>` → `other/n9/#`.
    static func topic(_ type: String) -> String {
        String(type.map { c -> Character in
            switch c {
            case ".": return "/"
            case "*": return "+"
            case ">": return "#"
            default: return c
            }
        })
    }

    /// The remaining-length field (1 to 4 bytes, 7 bits each, low first; section 2.2.3).
    static func remainingLength(_ value: Int) -> [UInt8] {
        var out: [UInt8] = []
        var v = value
        repeat {
            var byte = UInt8(v % 128)
            v /= 128
            if v > 0 { byte |= 0x80 }
            out.append(byte)
        } while v > 0
        return out
    }

    /// A UTF-8 string with its two-byte big-endian length (section 1.5.3).
    static func string(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        return [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
    }

    /// `CONNECT`, protocol level 4 (3.1.1), clean session, keep-alive 0 (the
    /// broker never drops a quiet connection, such as a stalled subscriber).
    static func connect(clientID: String) -> [UInt8] {
        let body = string("MQTT") + [0x04, 0x02, 0x00, 0x00] + string(clientID)
        return [0x10] + remainingLength(body.count) + body
    }

    /// `SUBSCRIBE` with packet identifier `packetID` and every filter at QoS 0.
    static func subscribe(packetID: UInt16, filters: [String]) -> [UInt8] {
        var body: [UInt8] = [UInt8(packetID >> 8), UInt8(packetID & 0xFF)]
        for filter in filters { body += string(filter) + [0x00] }
        return [0x82] + remainingLength(body.count) + body
    }

    /// A QoS 0 `PUBLISH` (no packet identifier), and where the stamp digits sit.
    static func publish(topic: String, payload: [UInt8]) -> (bytes: [UInt8], stampOffset: Int) {
        let variable = string(topic)
        let head = [0x30] + remainingLength(variable.count + payload.count) + variable
        return (head + payload, head.count + Payload.prefix.count)
    }
}

/// Where one complete MQTT packet starting at `start` lies in `p[0..<count]`.
struct MQTTPacket {
    /// The first byte: type in the high nibble, flags in the low one.
    var first: UInt8
    /// Offset of the body (after the remaining-length field).
    var body: Int
    /// Offset just past the packet.
    var end: Int
}

/// Parses the fixed header of the packet at `start`.
/// - Returns: nil when the packet is not complete in `count` bytes.
@inline(__always)
func parseMQTT(_ p: UnsafePointer<UInt8>, _ start: Int, _ count: Int) -> MQTTPacket? {
    var i = start + 1
    var length = 0
    var shift = 0
    while true {
        guard i < count, shift <= 21 else { return nil }
        let byte = p[i]
        length |= Int(byte & 0x7F) << shift
        i += 1
        if byte & 0x80 == 0 { break }
        shift += 7
    }
    guard i + length <= count else { return nil }
    return MQTTPacket(first: p[start], body: i, end: i + length)
}

/// Scans what mosquitto sends a subscriber and counts the PUBLISH packets.
struct MQTTScanner {
    /// Tallies every complete packet in `base[0..<count]`.
    /// - Returns: bytes consumed, up to the end of the last complete packet.
    @inline(__always)
    func scan(_ base: UnsafeMutablePointer<UInt8>, _ count: Int, into tally: inout Tally, latency: Bool) -> Int {
        let p = UnsafePointer(base)
        var pos = 0
        while let packet = parseMQTT(p, pos, count) {
            if packet.first & 0xF0 == 0x30 {
                tally.events &+= 1
                if latency && packet.end - packet.body >= 2 {
                    // Topic length, topic, [packet id at QoS > 0], payload.
                    var payload = packet.body + 2 + (Int(p[packet.body]) << 8 | Int(p[packet.body + 1]))
                    if packet.first & 0x06 != 0 { payload += 2 }
                    if payload + Payload.prefix.count + Payload.digits <= packet.end {
                        tally.record(stampAt: p + payload + Payload.prefix.count)
                    }
                }
            } else if packet.first != 0xD0 {  // PINGRESP needs nothing
                tally.noteOther(p + pos, packet.end - pos)
            }
            pos = packet.end
        }
        return pos
    }
}
