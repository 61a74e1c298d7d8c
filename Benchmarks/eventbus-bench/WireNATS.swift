// The NATS client protocol as the load generator speaks it to nats-server
// 2.9.10 (DESIGN-NOTES-1.1.md A.1, checked on this machine): the CONNECT
// line, SUB, PUB and HPUB, and the scanner that counts MSG and HMSG deliveries.
//
// Before editing: CONNECT must say "verbose":false and "pedantic":false, or
// the server acknowledges every line with +OK (its defaults are true); a
// connection that sends HPUB, or wants HMSG with the headers, must also say
// "headers":true (`connectWithHeaders`: without it nats-server refuses HPUB
// and strips the headers off what it delivers); the
// server PINGs its clients (first about 2 s after CONNECT), and a reader
// answers with PONG only between whole frames of its own.
import Glibc

/// NATS frames; lines end in CR LF.
enum NATS {
    /// `CONNECT {...}` CR LF, the client's answer to the server's `INFO` line.
    /// `echo:false`: a connection never gets its own publishes back.
    static let connect = Array(
        (#"CONNECT {"verbose":false,"pedantic":false,"echo":false,"name":"eventbus-bench","lang":"swift","version":"1.0"}"#
            + "\r\n").utf8)
    /// `connect` with `"headers":true` (case 9's rows that carry the link's
    /// header block, WireCloudEvents.swift); the other cases keep `connect`.
    static let connectWithHeaders = Array(
        (#"CONNECT {"verbose":false,"pedantic":false,"echo":false,"headers":true,"name":"eventbus-bench","lang":"swift","version":"1.0"}"#
            + "\r\n").utf8)
    /// `PING` CR LF: answered `PONG` once every earlier line is handled.
    static let ping = Array("PING\r\n".utf8)
    /// `PONG` CR LF: the answer to a server `PING`.
    static let pong = Array("PONG\r\n".utf8)

    /// `PUB bench.t 64` CR LF PAYLOAD CR LF, and where the stamp digits sit.
    static func publish(subject: String, payload: [UInt8]) -> (bytes: [UInt8], stampOffset: Int) {
        let head = Array("PUB \(subject) \(payload.count)\r\n".utf8)
        return (head + payload + [0x0D, 0x0A], head.count + Payload.prefix.count)
    }

    /// `HPUB subject HEADER_BYTES TOTAL_BYTES` CR LF HEADERS PAYLOAD CR LF
    /// (`headers`: a whole block, `NATS/1.0` CR LF ... CR LF CR LF), and
    /// where the stamp digits sit.
    static func publish(subject: String, headers: [UInt8], payload: [UInt8]) -> (bytes: [UInt8], stampOffset: Int) {
        let head = Array("HPUB \(subject) \(headers.count) \(headers.count + payload.count)\r\n".utf8)
        return (head + headers + payload + [0x0D, 0x0A], head.count + headers.count + Payload.prefix.count)
    }

    /// `SUB bench.t 1` CR LF. NATS wildcards (`*` one token, `>` the rest) are
    /// spelled as eventbus patterns are, so patterns pass unchanged.
    static func subscribe(subject: String, sid: Int) -> [UInt8] {
        Array("SUB \(subject) \(sid)\r\n".utf8)
    }
}

/// Scans what nats-server sends a subscriber: `MSG <subject> <sid> [reply]
/// <#bytes>` CR LF, the payload, CR LF, or `HMSG <subject> <sid> [reply]
/// <#header bytes> <#total bytes>` CR LF, headers and payload, CR LF; counts
/// the messages and the server's PINGs. An HMSG's latency stamp is not read
/// (the headers come first; no latency case sends them).
struct NATSScanner {
    /// Tallies every complete frame in `base[0..<count]`.
    /// - Returns: bytes consumed, up to the end of the last complete frame.
    @inline(__always)
    func scan(_ base: UnsafeMutablePointer<UInt8>, _ count: Int, into tally: inout Tally, latency: Bool) -> Int {
        let raw = UnsafeMutableRawPointer(base)
        var pos = 0
        while pos < count {
            guard let lf = memchr(raw + pos, 0x0A, count - pos) else { break }
            let lineEnd = raw.distance(to: lf)
            let line = base + pos
            let length = lineEnd - pos
            let isMSG = length >= 4 && line[0] == 0x4D && line[1] == 0x53 && line[2] == 0x47 && line[3] == 0x20  // "MSG "
            let isHMSG = !isMSG && length >= 5 && line[0] == 0x48 && line[1] == 0x4D && line[2] == 0x53 && line[3] == 0x47
                && line[4] == 0x20  // "HMSG "
            if isMSG || isHMSG {
                // The (total) byte count is the last token of the line.
                var i = length - 1
                if i >= 0 && line[i] == 0x0D { i -= 1 }
                var bytes = 0
                var scale = 1
                while i > 3 && line[i] >= 0x30 && line[i] <= 0x39 {
                    bytes &+= Int(line[i] &- 0x30) &* scale
                    scale &*= 10
                    i -= 1
                }
                let payload = lineEnd + 1
                let end = payload + bytes + 2
                guard end <= count else { break }  // the payload is not all here yet
                tally.events &+= 1
                if latency && isMSG && bytes >= Payload.prefix.count + Payload.digits {
                    tally.record(stampAt: base + payload + Payload.prefix.count)
                }
                pos = end
                continue
            }
            if length >= 4 && line[0] == 0x50 && line[1] == 0x49 {  // "PING"
                tally.pings &+= 1
            } else if length >= 4 && line[0] == 0x50 && line[1] == 0x4F {  // "PONG"
            } else if length >= 4 && line[0] == 0x49 && line[1] == 0x4E {  // "INFO" (asynchronous updates)
            } else if length > 0 && !(length == 1 && line[0] == 0x0D) {
                tally.noteOther(line, length)
            }
            pos = lineEnd + 1
        }
        return pos
    }
}
