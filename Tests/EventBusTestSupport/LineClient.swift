// Small AF_UNIX sockets for a test's side of a conversation: a stream client
// speaking LF-terminated text lines, and a bound datagram socket standing in for
// systemd's NOTIFY_SOCKET (sd_notify(3)); plus bounded async polling.
//
// Before editing: every read has a deadline, and a descriptor is closed exactly
// once (closing it twice could close a parallel test's descriptor that reused the
// number).
import EventBusSystem
import Foundation
import Glibc

/// A connected `AF_UNIX` stream client speaking LF-terminated lines (PROTOCOL.md
/// framing, without parsing), closed on deinit. For frame-level checks use `RawClient`.
package final class LineClient {
    /// The connected socket (close-on-exec).
    package let fd: Int32
    private var input: LineBuffer

    /// Connects to the socket at `path`.
    /// - Throws: `TestFailure` when socket(2) or connect(2) fails.
    package init(_ path: String) throws {
        fd = try unixSocket(Int32(SOCK_STREAM.rawValue), "connect", path, connect)
        input = LineBuffer(fd: fd)
    }

    deinit { Glibc.close(fd) }

    /// Sends `line` plus LF in full (`MSG_NOSIGNAL`).
    /// - Throws: `TestFailure` on a failed send.
    package func send(_ line: String) throws {
        try input.send(Array((line + "\n").utf8))
    }

    /// Whether input is buffered or arrives within `timeout`.
    package func hasInput(within timeout: Duration) throws -> Bool {
        try !input.isEmpty || waitReadable(fd, until: ContinuousClock.now + timeout)
    }

    /// The next line without its LF (a CR before it is kept).
    /// - Throws: `TestFailure` on EOF or after `timeout`.
    package func readLine(timeout: Duration = .seconds(10)) throws -> String {
        try input.line(until: ContinuousClock.now + timeout, droppingCR: false)
    }

    /// Everything until the peer closes, waiting at most `timeout` in all.
    /// - Parameter resetIsEOF: whether `ECONNRESET` counts as the close (else it throws).
    /// - Throws: `TestFailure` after `timeout` or on a read error.
    package func readToEnd(timeout: Duration = .seconds(10), resetIsEOF: Bool = true) throws -> String {
        try input.readToEnd(until: ContinuousClock.now + timeout, resetIsEOF: resetIsEOF)
    }

    /// Sends `frame` and returns the fields of the next `ok` reply, skipping other
    /// frames (events); PROTOCOL.md "Requests and replies".
    /// - Throws: `TestFailure` on an `error` reply, EOF, or no line within `timeout` each;
    ///   `RawClientError.invalidFrame` for a line that is not a JSON object.
    package func request(_ frame: String, timeout: Duration = .seconds(5)) throws -> [String: Any] {
        try send(frame)
        while true {
            let frame = try Frame(line: Array(readLine(timeout: timeout).utf8))
            if frame.op == "ok" { return frame.fields }
            if frame.op == "error" { throw TestFailure("broker error: \(frame.raw)") }
        }
    }
}

/// An `AF_UNIX` datagram socket bound to a path: the test's own `NOTIFY_SOCKET`
/// (sd_notify(3)). Closed on deinit; the path is left to the directory's removal.
package final class DatagramReceiver {
    /// The bound socket (close-on-exec).
    package let fd: Int32
    /// The path it is bound to.
    package let path: String

    /// Binds a new datagram socket to `path`.
    /// - Throws: `TestFailure` when socket(2) or bind(2) fails.
    package init(path: String) throws {
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
    package func receive(timeout: Duration = .seconds(10), ignoringStatus: Bool = false) throws -> String? {
        let deadline = ContinuousClock.now + timeout
        while let message = try next(until: deadline) {
            if !(ignoringStatus && message.hasPrefix("STATUS=")) { return message }
        }
        return nil
    }

    /// Every datagram arriving within `duration`, with its arrival time.
    package func receiveStamped(for duration: Duration) throws -> [(text: String, at: ContinuousClock.Instant)] {
        let deadline = ContinuousClock.now + duration
        var messages: [(text: String, at: ContinuousClock.Instant)] = []
        while let message = try next(until: deadline) { messages.append((message, ContinuousClock.now)) }
        return messages
    }

    /// Every datagram arriving within `duration`.
    package func receiveAll(for duration: Duration) throws -> [String] {
        try receiveStamped(for: duration).map(\.text)
    }

    /// Datagrams up to and including the first for which `stop` holds (at most `timeout`).
    package func receiveAll(until stop: (String) -> Bool, timeout: Duration = .seconds(10)) throws -> [String] {
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
/// to `path` (`openSocket`).
/// - Throws: `TestFailure` naming the failed call and errno;
///   `RawClientError.system` for a path too long for `sun_path`.
private func unixSocket(
    _ type: Int32, _ name: String, _ path: String,
    _ operation: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32
) throws -> Int32 {
    try openSocket(AF_UNIX, type, try unixAddress(path), name, path, operation)
}

/// A new close-on-exec socket of `domain` and `type`, connected or bound
/// (`operation`, called `name` in errors) to `address` (a `sockaddr_un` or
/// `sockaddr_in`; `target` says it in errors); closed again when that fails,
/// so it is never closed twice.
/// - Throws: `TestFailure("connect 127.0.0.1:4222 failed: errno 111")`, or for socket(2).
func openSocket<Address>(
    _ domain: Int32, _ type: Int32, _ address: Address, _ name: String, _ target: String,
    _ operation: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32
) throws -> Int32 {
    let fd = socket(domain, type | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
    var address = address
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { operation(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
    }
    guard result == 0 else {
        let code = errno
        Glibc.close(fd)
        throw TestFailure("\(name) \(target) failed: errno \(code)")
    }
    return fd
}

/// poll(2) for input on `fd` until `deadline` (an interrupted poll waits
/// again for what is left: `systemCall(.returnZero)`).
/// - Returns: false when the deadline passes first.
/// - Throws: `TestFailure` when poll fails.
package func waitReadable(_ fd: Int32, until deadline: ContinuousClock.Instant) throws -> Bool {
    while true {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        switch systemCall(.returnZero, { poll(&entry, 1, (deadline - ContinuousClock.now).pollMilliseconds) }) {
        case .failure(let e): throw TestFailure("poll failed: errno \(e.rawValue)")
        case .success(let ready):
            if ready > 0 { return true }
            if ContinuousClock.now >= deadline { return false }
        }
    }
}

/// Polls `condition` every 10 ms, sleeping the task in between, until it holds:
/// the async counterpart of `waitUntil`.
/// - Throws: `TestFailure("<what> did not happen within <timeout>")`, or what `condition` throws.
package func pollUntil(_ what: @autoclosure () -> String, timeout: Duration = .seconds(10), _ condition: () throws -> Bool) async throws {
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
package func waitForListeningSocket(_ path: String, timeout: Duration = .seconds(10)) async throws {
    try await pollUntil("a socket listening on \(path)", timeout: timeout) { isListeningUnixSocket(path) }
}

/// Whether /proc/net/unix lists a listening socket bound to `path`.
package func isListeningUnixSocket(_ path: String) -> Bool {
    guard let table = readProcFile("/proc/net/unix") else { return false }
    for line in table.split(separator: "\n").dropFirst() {
        let columns = line.split(separator: " ", omittingEmptySubsequences: true)
        guard columns.count >= 8, columns[7] == path, let flags = UInt32(columns[3], radix: 16) else { continue }
        if flags & 0x10000 != 0 { return true }
    }
    return false
}
