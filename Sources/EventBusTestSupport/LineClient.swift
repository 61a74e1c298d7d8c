// Small AF_UNIX sockets for a test's side of a conversation: a stream client
// speaking LF-terminated text lines, and a bound datagram socket standing in for
// systemd's NOTIFY_SOCKET (sd_notify(3)); plus bounded async polling.
//
// Before editing: every read has a deadline, and a descriptor is closed exactly
// once (closing it twice could close a parallel test's descriptor that reused the
// number).
import Foundation
import Glibc

/// A connected `AF_UNIX` stream client speaking LF-terminated lines (PROTOCOL.md
/// framing, without parsing), closed on deinit. For frame-level checks use `RawClient`.
public final class LineClient {
    /// The connected socket (close-on-exec).
    public let fd: Int32
    private var buffer: [UInt8] = []

    /// Connects to the socket at `path`.
    /// - Throws: `TestFailure` when socket(2) or connect(2) fails.
    public init(_ path: String) throws {
        fd = try unixSocket(Int32(SOCK_STREAM.rawValue), "connect", path, connect)
    }

    deinit { Glibc.close(fd) }

    /// Sends `line` plus LF in one send(2) (`MSG_NOSIGNAL`).
    /// - Throws: `TestFailure` on a failed or short send.
    public func send(_ line: String) throws {
        let bytes = Array((line + "\n").utf8)
        let written = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard written == bytes.count else { throw TestFailure("send returned \(written), errno \(errno)") }
    }

    /// Whether input is buffered or arrives within `timeout`.
    public func hasInput(within timeout: Duration) throws -> Bool {
        try !buffer.isEmpty || waitReadable(fd, until: ContinuousClock.now + timeout)
    }

    /// Reads one chunk into the buffer; false at EOF (or, when `resetIsEOF`, a reset).
    private func fill(until deadline: ContinuousClock.Instant, resetIsEOF: Bool) throws -> Bool {
        while true {
            guard try waitReadable(fd, until: deadline) else {
                throw TestFailure("nothing arrived in time; have \(String(decoding: buffer, as: UTF8.self))")
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            // A peer that closes with our request unread resets the connection.
            if count < 0 && errno == ECONNRESET && resetIsEOF { return false }
            guard count >= 0 else { throw TestFailure("read failed: errno \(errno)") }
            buffer += chunk[..<count]
            return count > 0
        }
    }

    /// The next line without its LF.
    /// - Throws: `TestFailure` on EOF or after `timeout`.
    public func readLine(timeout: Duration = .seconds(10)) throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                defer { buffer.removeSubrange(...newline) }
                return String(decoding: buffer[..<newline], as: UTF8.self)
            }
            guard try fill(until: deadline, resetIsEOF: true) else {
                throw TestFailure("EOF before a line; have \(String(decoding: buffer, as: UTF8.self))")
            }
        }
    }

    /// Everything until the peer closes, waiting at most `timeout` in all.
    /// - Parameter resetIsEOF: whether `ECONNRESET` counts as the close (else it throws).
    /// - Throws: `TestFailure` after `timeout` or on a read error.
    public func readToEnd(timeout: Duration = .seconds(10), resetIsEOF: Bool = true) throws -> String {
        let deadline = ContinuousClock.now + timeout
        while try fill(until: deadline, resetIsEOF: resetIsEOF) {}
        defer { buffer.removeAll() }
        return String(decoding: buffer, as: UTF8.self)
    }

    /// Sends `frame` and returns the fields of the next `ok` reply, skipping other
    /// frames (events); PROTOCOL.md "Requests and replies".
    /// - Throws: `TestFailure` on an `error` reply, EOF, or no line within `timeout` each.
    public func request(_ frame: String, timeout: Duration = .seconds(5)) throws -> [String: Any] {
        try send(frame)
        while true {
            let line = try readLine(timeout: timeout)
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
            if object["op"] as? String == "ok" { return object }
            if object["op"] as? String == "error" { throw TestFailure("broker error: \(line)") }
        }
    }
}

/// An `AF_UNIX` datagram socket bound to a path: the test's own `NOTIFY_SOCKET`
/// (sd_notify(3)). Closed on deinit; the path is left to the directory's removal.
public final class DatagramReceiver {
    /// The bound socket (close-on-exec).
    public let fd: Int32
    /// The path it is bound to.
    public let path: String

    /// Binds a new datagram socket to `path`.
    /// - Throws: `TestFailure` when socket(2) or bind(2) fails.
    public init(path: String) throws {
        self.path = path
        fd = try unixSocket(Int32(SOCK_DGRAM.rawValue), "bind", path, bind)
    }

    deinit { Glibc.close(fd) }

    private func next(until deadline: ContinuousClock.Instant) throws -> String? {
        guard try waitReadable(fd, until: deadline) else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count >= 0 else { throw TestFailure("recv failed: errno \(errno)") }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// The next datagram, or nil when none arrives within `timeout`.
    /// - Parameter ignoringStatus: skip `STATUS=` datagrams (a broker sends them on a timer).
    public func receive(timeout: Duration = .seconds(10), ignoringStatus: Bool = false) throws -> String? {
        let deadline = ContinuousClock.now + timeout
        while let message = try next(until: deadline) {
            if !(ignoringStatus && message.hasPrefix("STATUS=")) { return message }
        }
        return nil
    }

    /// Every datagram arriving within `duration`, with its arrival time.
    public func receiveStamped(for duration: Duration) throws -> [(text: String, at: ContinuousClock.Instant)] {
        let deadline = ContinuousClock.now + duration
        var messages: [(text: String, at: ContinuousClock.Instant)] = []
        while let message = try next(until: deadline) { messages.append((message, ContinuousClock.now)) }
        return messages
    }

    /// Every datagram arriving within `duration`.
    public func receiveAll(for duration: Duration) throws -> [String] {
        try receiveStamped(for: duration).map(\.text)
    }

    /// Datagrams up to and including the first for which `stop` holds (at most `timeout`).
    public func receiveAll(until stop: (String) -> Bool, timeout: Duration = .seconds(10)) throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        var messages: [String] = []
        while let message = try next(until: deadline) {
            messages.append(message)
            if stop(message) { break }
        }
        return messages
    }
}

/// A new close-on-exec `AF_UNIX` socket of `type`, connected or bound (`operation`)
/// to `path`; closed again when that fails, so it is never closed twice.
/// - Throws: `TestFailure` naming the failed call and errno.
private func unixSocket(
    _ type: Int32, _ name: String, _ path: String,
    _ operation: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32
) throws -> Int32 {
    let fd = socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
    var address: sockaddr_un
    do { address = try unixAddress(path) } catch { Glibc.close(fd); throw error }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { operation(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard result == 0 else {
        let code = errno
        Glibc.close(fd)
        throw TestFailure("\(name) \(path) failed: errno \(code)")
    }
    return fd
}

/// poll(2) for input on `fd` until `deadline`, retrying on `EINTR`.
/// - Returns: false when the deadline passes first.
/// - Throws: `TestFailure` when poll fails.
public func waitReadable(_ fd: Int32, until deadline: ContinuousClock.Instant) throws -> Bool {
    while true {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&entry, 1, (deadline - ContinuousClock.now).pollMilliseconds)
        if ready < 0 && errno == EINTR { continue }
        guard ready >= 0 else { throw TestFailure("poll failed: errno \(errno)") }
        return ready > 0
    }
}

/// Polls `condition` every 10 ms, sleeping the task in between, until it holds:
/// the async counterpart of `waitUntil`.
/// - Throws: `TestFailure("<what> did not happen within <timeout>")`, or what `condition` throws.
public func pollUntil(_ what: @autoclosure () -> String, timeout: Duration = .seconds(10), _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while try !condition() {
        if ContinuousClock.now > deadline { throw TestFailure("\(what()) did not happen within \(timeout)") }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// Waits until a Unix socket bound to `path` is listening, without connecting
/// to it (a probe connection would count as a client, e.g. start a
/// socket-activated service). Reads /proc/net/unix (proc(5)): a listening
/// socket has `__SO_ACCEPTCON` (0x10000) in its Flags column. The socket file
/// appears at bind(2), before listen(2): waiting for the file alone races.
public func waitForListeningSocket(_ path: String, timeout: Duration = .seconds(10)) async throws {
    try await pollUntil("a socket listening on \(path)", timeout: timeout) { isListeningUnixSocket(path) }
}

/// Whether /proc/net/unix lists a listening socket bound to `path`.
public func isListeningUnixSocket(_ path: String) -> Bool {
    guard let table = readProcFile("/proc/net/unix") else { return false }
    for line in table.split(separator: "\n").dropFirst() {
        let columns = line.split(separator: " ", omittingEmptySubsequences: true)
        guard columns.count >= 8, columns[7] == path, let flags = UInt32(columns[3], radix: 16) else { continue }
        if flags & 0x10000 != 0 { return true }
    }
    return false
}

/// The whole text of a proc(5) file, read(2) until EOF. Not Foundation's
/// `String(contentsOfFile:)`: it stops after the first read of a file whose
/// size is 0, and /proc/net/unix gives about 4 KiB (58 sockets) per read, so
/// a socket further down was never found on a machine with more sockets.
public func readProcFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        guard n >= 0 else { return nil }
        if n == 0 { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(contentsOf: chunk[0..<n])
    }
}
