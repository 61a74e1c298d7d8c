// The reading and writing both line clients share (`LineClient` on an AF_UNIX
// socket, `TCPLineClient` to nats-server): a connected descriptor, bytes read
// but not yet taken, and reads of a line, a byte count or everything to EOF.
//
// Before editing: every read has a deadline (poll(2) through `waitReadable`);
// the descriptor belongs to the client holding this buffer, which closes it.
import EventBusSystem
import Glibc

/// The unread input of a connected stream socket `fd`, with bounded reads.
struct LineBuffer {
    /// The connected socket (owned by the client).
    let fd: Int32
    /// Bytes received and not yet returned.
    private(set) var bytes: [UInt8] = []

    init(fd: Int32) { self.fd = fd }

    var isEmpty: Bool { bytes.isEmpty }

    /// The buffered bytes as text for error messages (at most 500 bytes, escaped).
    private var pendingText: String { String(decoding: bytes.prefix(500), as: UTF8.self).debugDescription }

    /// Writes `data` in full (`MSG_NOSIGNAL`, `EINTR` retried).
    /// - Throws: `TestFailure` on a failed send.
    func send(_ data: [UInt8]) throws {
        var offset = 0
        while offset < data.count {
            let sent = data[offset...].withUnsafeBytes { bytes in systemCall { Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) } }
            guard case .success(let n) = sent, n > 0 else { throw TestFailure("send failed: errno \(errno)") }
            offset += n
        }
    }

    /// Reads one chunk into the buffer; false at EOF (or, when `resetIsEOF`,
    /// a reset: a peer that closes with our request unread resets the connection).
    /// - Throws: `TestFailure` when nothing arrives by `deadline` or read(2) fails.
    mutating func fill(until deadline: ContinuousClock.Instant, resetIsEOF: Bool = true) throws -> Bool {
        while true {
            guard try waitReadable(fd, until: deadline) else { throw TestFailure("nothing arrived in time; have \(pendingText)") }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count: Int
            switch chunk.withUnsafeMutableBytes({ buffer in systemCall { read(fd, buffer.baseAddress, buffer.count) } }) {
            case .success(let n): count = n
            case .failure(let e) where e.rawValue == ECONNRESET && resetIsEOF: return false
            case .failure(let e): throw TestFailure("read failed: errno \(e.rawValue)")
            }
            bytes += chunk[..<count]
            return count > 0
        }
    }

    /// The next line without its LF (and without a CR before it when `droppingCR`).
    /// - Throws: `TestFailure` on EOF or at `deadline`.
    mutating func line(until deadline: ContinuousClock.Instant, droppingCR: Bool) throws -> String {
        while true {
            if let lf = bytes.firstIndex(of: 0x0A) {
                var end = lf
                if droppingCR && end > 0 && bytes[end - 1] == 0x0D { end -= 1 }
                defer { bytes.removeSubrange(...lf) }
                return String(decoding: bytes[..<end], as: UTF8.self)
            }
            guard try fill(until: deadline) else { throw TestFailure("EOF before a line; have \(pendingText)") }
        }
    }

    /// Exactly `count` bytes.
    /// - Throws: `TestFailure` on EOF or at `deadline`.
    mutating func take(_ count: Int, until deadline: ContinuousClock.Instant) throws -> [UInt8] {
        while bytes.count < count {
            guard try fill(until: deadline) else { throw TestFailure("EOF after \(bytes.count) of \(count) bytes") }
        }
        defer { bytes.removeSubrange(..<count) }
        return Array(bytes[..<count])
    }

    /// Everything until the peer closes.
    /// - Throws: `TestFailure` at `deadline` or on a read error (a reset too, unless `resetIsEOF`).
    mutating func readToEnd(until deadline: ContinuousClock.Instant, resetIsEOF: Bool) throws -> String {
        while try fill(until: deadline, resetIsEOF: resetIsEOF) {}
        defer { bytes.removeAll() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
