// A raw NDJSON client over a real AF_UNIX stream socket, for integration tests.
//
// Before editing: every wait is bounded by a deadline (poll(2) on a
// non-blocking socket), writes never raise SIGPIPE (MSG_NOSIGNAL), and while a
// write waits for room the client keeps reading into its receive buffer, so a
// test that pipes megabytes at the broker cannot deadlock on the replies.
// Absence checks settle with a ping round trip first (STYLE.md, Testing).
import EventBusSystem
import Foundation
import Glibc

/// Errors from `RawClient`; each says what the client was waiting for.
package enum RawClientError: Error, CustomStringConvertible {
    /// A libc call failed (`call` names it and the path), e.g. `connect`, `ECONNREFUSED`.
    case system(call: String, errno: Int32)
    /// Nothing (or not enough) arrived before the deadline.
    case timedOut(waitingFor: String, seconds: Double, pending: String)
    /// The broker closed the connection while a frame was expected.
    case endOfStream(waitingFor: String)
    /// The connection ended in the middle of a line.
    case truncatedAtEOF(pending: String)
    /// A line that is not a JSON object.
    case invalidFrame(raw: String, reason: String)
    /// A frame arrived where another was expected.
    case unexpectedFrame(raw: String, expecting: String)

    package var description: String {
        switch self {
        case .system(let call, let errno):
            "failed to \(call): \(String(cString: strerror(errno))) (errno \(errno))"
        case .timedOut(let what, let seconds, let pending):
            "timed out after \(seconds) s waiting for \(what); unread bytes: \(pending.prefix(300))"
        case .endOfStream(let what):
            "connection closed by the broker while waiting for \(what)"
        case .truncatedAtEOF(let pending):
            "connection closed in the middle of a line: \(pending.prefix(300))"
        case .invalidFrame(let raw, let reason):
            "broker sent a line that is not a JSON object (\(reason)): \(raw.prefix(300))"
        case .unexpectedFrame(let raw, let expecting):
            "expected \(expecting), got: \(raw.prefix(500))"
        }
    }

    /// The errno of a `.system` error, else nil.
    package var errno: Int32? {
        if case .system(_, let e) = self { return e }
        return nil
    }
}

/// A client that speaks raw NDJSON to the broker (PROTOCOL.md, Framing).
///
/// Owns its socket descriptor (close-on-exec, non-blocking) and closes it in
/// `close()` or deinit. Not thread-safe: one test uses it from one thread.
package final class RawClient {
    /// Default bound for waiting on an expected frame: 10 s.
    package static let defaultTimeout: Duration = .seconds(10)

    /// The socket path this client connected to.
    package let path: String
    /// The socket descriptor, or -1 once closed.
    package private(set) var fd: Int32
    /// True if the connection ended with `ECONNRESET` rather than a clean EOF.
    package private(set) var endedWithReset = false
    /// The cut-off last line left by `readUntilEOF(allowingPartialLastLine: true)`, if any.
    package private(set) var partialLastLine: [UInt8]?

    private var rx: [UInt8] = []
    private var rxStart = 0
    private var scanFrom = 0
    private var sawEOF = false
    private var settleCount = 0
    private var statsCount = 0
    private var scratch = [UInt8](repeating: 0, count: 256 * 1024)

    /// Connects to the broker listening at `path`.
    ///
    /// Retries while the listen backlog is full (`EAGAIN`), up to `timeout`.
    /// - Throws: `RawClientError.system(call: "connect PATH", errno:)` on any
    ///   other failure (`ENOENT`, `ECONNREFUSED`, ...), `.timedOut` when the backlog stays full.
    package init(path: String, timeout: Duration = RawClient.defaultTimeout) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw RawClientError.system(call: "socket", errno: Glibc.errno) }
        var address = try unixAddress(path)
        let deadline = ContinuousClock.now + timeout
        while true {
            let result = withUnsafePointer(to: &address) { address in
                address.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    systemCall { Glibc.connect(fd, address, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
            }
            guard case .failure(let error) = result else { return }
            let e = error.rawValue
            if e == EISCONN { return }
            if e == EAGAIN && ContinuousClock.now < deadline {
                usleep(5_000)
                continue
            }
            Glibc.close(fd)
            fd = -1
            if e == EAGAIN {
                throw RawClientError.timedOut(waitingFor: "room in the listen backlog of \(path)", seconds: timeout.seconds, pending: "")
            }
            throw RawClientError.system(call: "connect \(path)", errno: e)
        }
    }

    /// Takes over a connected socket (e.g. one made by a process of another
    /// uid, `connectAs`): made non-blocking and close-on-exec, owned from now on.
    package init(adopting descriptor: Int32, path: String) {
        self.path = path
        fd = descriptor
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
    }

    deinit { close() }

    // MARK: Writing

    /// Sends `line` followed by one LF.
    /// - Throws: `RawClientError.system(call: "send", …)` (e.g. `EPIPE`), `.timedOut`.
    package func send(_ line: String, timeout: Duration = .seconds(60)) throws {
        try sendBytes(Array(line.utf8) + [0x0A], timeout: timeout)
    }

    /// Sends `text` exactly as given (no LF added): for CRLF, split frames, missing LF at EOF.
    package func sendRaw(_ text: String, timeout: Duration = .seconds(60)) throws {
        try sendBytes(Array(text.utf8), timeout: timeout)
    }

    /// Writes `bytes` without ever reading (a client that floods and does not
    /// read its replies), until all are written or the broker has taken
    /// nothing for `stall` (it stopped reading us).
    /// - Returns: how many bytes were written.
    /// - Throws: `RawClientError.system(call: "send", …)`.
    package func sendWithoutReading(_ bytes: [UInt8], stall: Duration = .milliseconds(500)) throws -> Int {
        var offset = 0
        while offset < bytes.count {
            if let n = try sendNow(bytes, from: offset) {
                offset += n
                continue
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            if poll(&pfd, 1, stall.pollMilliseconds) == 0 { break }
        }
        return offset
    }

    /// Sends `bytes` exactly (any bytes, e.g. invalid UTF-8).
    ///
    /// While the socket is full, keeps reading what the broker sends into the
    /// receive buffer (later returned by `readFrame`), so a long write cannot
    /// deadlock against unread replies.
    /// - Throws: `RawClientError.system(call: "send", …)` (e.g. `EPIPE`,
    ///   `ECONNRESET`), `.timedOut` when the broker takes nothing for `timeout`.
    package func sendBytes(_ bytes: [UInt8], timeout: Duration = .seconds(60)) throws {
        var offset = 0
        let deadline = ContinuousClock.now + timeout
        while offset < bytes.count {
            if let n = try sendNow(bytes, from: offset) {
                offset += n
                continue
            }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else {
                throw RawClientError.timedOut(
                    waitingFor: "the broker to take \(bytes.count - offset) more bytes", seconds: timeout.seconds, pending: "")
            }
            var events = Int16(POLLOUT)
            if !sawEOF { events |= Int16(POLLIN) }
            var pfd = pollfd(fd: fd, events: events, revents: 0)
            switch systemCall(.returnZero, { poll(&pfd, 1, remaining.pollMilliseconds) }) {
            case .failure(let e): throw RawClientError.system(call: "poll", errno: e.rawValue)
            case .success(let rc): if rc > 0 && pfd.revents & Int16(POLLIN) != 0 { try fill() }
            }
        }
    }

    /// One send(2) of `bytes[offset...]` (`MSG_NOSIGNAL`, `EINTR` retried).
    /// - Returns: how many bytes the socket took (at least 1), or nil when it
    ///   is full (`EAGAIN`).
    /// - Throws: `RawClientError.system(call: "send", …)` on any other error.
    private func sendNow(_ bytes: [UInt8], from offset: Int) throws -> Int? {
        let result = bytes.withUnsafeBytes { buffer in
            systemCall { Glibc.send(fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL)) }
        }
        switch result {
        case .success(let n): return n > 0 ? n : nil
        case .failure(let e) where e == .wouldBlock: return nil
        case .failure(let e): throw RawClientError.system(call: "send", errno: e.rawValue)
        }
    }

    /// Shuts down the writing side (shutdown(2) `SHUT_WR`): the broker sees EOF
    /// but can still write to us (PROTOCOL.md, Semantics: half-close).
    package func shutdownWrite() throws {
        guard shutdown(fd, Int32(SHUT_WR)) == 0 else { throw RawClientError.system(call: "shutdown", errno: Glibc.errno) }
    }

    /// Closes the socket; idempotent. Unread data makes the broker see `ECONNRESET`.
    package func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    // MARK: Reading

    /// Reads one LF-terminated line (without the LF; a CR before it is kept).
    /// - Throws: `.timedOut`, `.endOfStream` (clean EOF, nothing pending),
    ///   `.truncatedAtEOF` (EOF after a partial line), `.system`.
    package func readLine(timeout: Duration = RawClient.defaultTimeout) throws -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let lf = rx[scanFrom...].firstIndex(of: 0x0A) {
                let line = Array(rx[rxStart..<lf])
                rxStart = lf + 1
                scanFrom = rxStart
                compact()
                return line
            }
            scanFrom = rx.count
            if sawEOF {
                if rxStart == rx.count { throw RawClientError.endOfStream(waitingFor: "a frame") }
                throw RawClientError.truncatedAtEOF(pending: pendingText)
            }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else {
                throw RawClientError.timedOut(waitingFor: "a frame", seconds: timeout.seconds, pending: pendingText)
            }
            try waitReadable(remaining)
        }
    }

    /// Reads one frame: a line parsed as a JSON object with JSONSerialization.
    /// - Throws: as `readLine`, plus `.invalidFrame` when the line is not a JSON object.
    package func readFrame(timeout: Duration = RawClient.defaultTimeout) throws -> Frame {
        try Frame(line: readLine(timeout: timeout))
    }

    /// Reads exactly `count` frames within one overall `timeout`.
    package func readFrames(count: Int, timeout: Duration = RawClient.defaultTimeout) throws -> [Frame] {
        let deadline = ContinuousClock.now + timeout
        var frames: [Frame] = []
        frames.reserveCapacity(count)
        while frames.count < count {
            let remaining = deadline - ContinuousClock.now
            do {
                frames.append(try readFrame(timeout: max(remaining, .zero)))
            } catch RawClientError.timedOut(_, _, let pending) {
                throw RawClientError.timedOut(
                    waitingFor: "frame \(frames.count + 1) of \(count)", seconds: timeout.seconds, pending: pending)
            }
        }
        return frames
    }

    /// Reads frames until one satisfies `stop` (included in the result), within `timeout` overall.
    package func readFrames(
        until stop: (Frame) throws -> Bool, timeout: Duration = RawClient.defaultTimeout
    ) throws -> [Frame] {
        let deadline = ContinuousClock.now + timeout
        var frames: [Frame] = []
        while true {
            let remaining = deadline - ContinuousClock.now
            let frame: Frame
            do {
                frame = try readFrame(timeout: max(remaining, .zero))
            } catch RawClientError.timedOut(_, _, let pending) {
                throw RawClientError.timedOut(
                    waitingFor: "the awaited frame after \(frames.count) others (last: \(frames.last?.raw.prefix(200) ?? "none"))",
                    seconds: timeout.seconds, pending: pending)
            }
            frames.append(frame)
            if try stop(frame) { return frames }
        }
    }

    /// Reads frames until the broker closes the connection; returns them.
    /// - Parameter allowingPartialLastLine: when true, a last line cut off by
    ///   the close ends the read without error and is kept in `partialLastLine`
    ///   (a broker may close a slow consumer in the middle of a frame).
    /// - Throws: `.timedOut` if the connection is still open after `timeout`;
    ///   `.truncatedAtEOF` for a cut-off last line unless allowed.
    package func readUntilEOF(
        timeout: Duration = RawClient.defaultTimeout, allowingPartialLastLine: Bool = false
    ) throws -> [Frame] {
        let deadline = ContinuousClock.now + timeout
        var frames: [Frame] = []
        while true {
            do {
                frames.append(try readFrame(timeout: max(deadline - ContinuousClock.now, .zero)))
            } catch RawClientError.endOfStream {
                return frames
            } catch RawClientError.truncatedAtEOF where allowingPartialLastLine {
                partialLastLine = Array(rx[rxStart...])
                rxStart = rx.count
                return frames
            } catch RawClientError.timedOut(_, _, let pending) {
                throw RawClientError.timedOut(
                    waitingFor: "EOF (after \(frames.count) frames)", seconds: timeout.seconds, pending: pending)
            }
        }
    }

    // MARK: Requests

    /// Sends `json` as one line and reads its reply.
    ///
    /// The next frame must be an `ok` or `error`; when `json` carries a `req`
    /// that is a string or an integer, the reply must carry the same `req`.
    /// - Returns: the reply, e.g. `{"op":"ok","req":1,"seq":5,"delivered":1}`.
    /// - Throws: `.unexpectedFrame` (an event, or a reply to something else), `.timedOut`, `.endOfStream`.
    @discardableResult
    package func request(_ json: String, timeout: Duration = RawClient.defaultTimeout) throws -> Frame {
        try send(json)
        let reply = try readFrame(timeout: timeout)
        try checkReply(reply, to: json)
        return reply
    }

    /// Like `request`, but events and `dropped` notices that arrive before the
    /// reply are appended to `skipped` instead of failing.
    @discardableResult
    package func request(
        _ json: String, skippingEventsInto skipped: inout [Frame], timeout: Duration = RawClient.defaultTimeout
    ) throws -> Frame {
        try send(json)
        let frames = try readFrames(until: { $0.op == "ok" || $0.op == "error" }, timeout: timeout)
        skipped.append(contentsOf: frames.dropLast())
        try checkReply(frames.last!, to: json)
        return frames.last!
    }

    /// Sends `{"op":"stats","req":"stats-N"}` and returns the `ok` (PROTOCOL.md, Requests).
    /// - Throws: `.unexpectedFrame` if the reply is not an `ok`.
    package func stats(timeout: Duration = RawClient.defaultTimeout) throws -> Frame {
        statsCount += 1
        let reply = try request(#"{"op":"stats","req":"stats-\#(statsCount)"}"#, timeout: timeout)
        guard reply.op == "ok" else { throw RawClientError.unexpectedFrame(raw: reply.raw, expecting: "ok to stats") }
        return reply
    }

    /// Sends `{"op":"ping","req":"settle-N"}` and returns every frame that
    /// arrived before its `ok`: everything the broker had queued for us.
    /// - Throws: `.timedOut` when the `ok` does not come within `timeout`.
    package func settle(timeout: Duration = RawClient.defaultTimeout) throws -> [Frame] {
        settleCount += 1
        let tag = "settle-\(settleCount)"
        try send(#"{"op":"ping","req":"\#(tag)"}"#)
        let frames = try readFrames(until: { $0.op == "ok" && $0.req == .string(tag) }, timeout: timeout)
        return Array(frames.dropLast())
    }

    /// Asserts that nothing is pending for us: settles with a ping round trip
    /// (any frame before its `ok` fails), then watches `within` more for strays.
    /// Never a bare sleep (STYLE.md, Testing).
    /// - Throws: `.unexpectedFrame` with the first stray frame; `.endOfStream`
    ///   if the broker closed the connection.
    package func expectNoFrame(within: Duration = .milliseconds(100), timeout: Duration = RawClient.defaultTimeout) throws {
        let early = try settle(timeout: timeout)
        if let first = early.first {
            throw RawClientError.unexpectedFrame(raw: first.raw, expecting: "no frame (\(early.count) arrived before the settling ping's ok)")
        }
        do {
            let stray = try readLine(timeout: within)
            throw RawClientError.unexpectedFrame(raw: String(decoding: stray, as: UTF8.self), expecting: "no frame")
        } catch RawClientError.timedOut {
            return
        }
    }

    // MARK: Internals

    private var pendingText: String {
        String(decoding: rx[rxStart...].prefix(300), as: UTF8.self)
    }

    private func waitReadable(_ remaining: Duration) throws {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        switch systemCall(.returnZero, { poll(&pfd, 1, remaining.pollMilliseconds) }) {
        case .failure(let e): throw RawClientError.system(call: "poll", errno: e.rawValue)
        case .success(let rc): if rc > 0 { try fill() }
        }
    }

    /// One non-blocking recv(2) into the receive buffer; EOF and `ECONNRESET` set `sawEOF`.
    private func fill() throws {
        let result = scratch.withUnsafeMutableBytes { buffer in systemCall { recv(fd, buffer.baseAddress, buffer.count, 0) } }
        if case .success(let n) = result, n > 0 {
            rx.append(contentsOf: scratch[0..<n])
        } else if case .success = result {
            sawEOF = true
        } else if case .failure(let error) = result {
            let e = error.rawValue
            if e == EAGAIN || e == EWOULDBLOCK { return }
            if e == ECONNRESET {
                sawEOF = true
                endedWithReset = true
                return
            }
            throw RawClientError.system(call: "recv", errno: e)
        }
    }

    private func compact() {
        if rxStart == rx.count {
            rx.removeAll(keepingCapacity: true)
            rxStart = 0
            scanFrom = 0
        } else if rxStart > 1 << 20 && rxStart > rx.count / 2 {
            rx.removeFirst(rxStart)
            scanFrom -= rxStart
            rxStart = 0
        }
    }

    private func checkReply(_ reply: Frame, to json: String) throws {
        guard reply.op == "ok" || reply.op == "error" else {
            throw RawClientError.unexpectedFrame(raw: reply.raw, expecting: "a reply to \(json.prefix(200))")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
              let sent = object["req"]
        else { return }
        let expected: RequestID?
        if let s = sent as? String {
            expected = .string(s)
        } else if let i = Frame.integer(sent), abs(i) <= 1 << 53 {
            expected = .integer(i)
        } else {
            expected = nil
        }
        if let expected, reply.req != expected {
            throw RawClientError.unexpectedFrame(raw: reply.raw, expecting: "a reply with req \(expected) to \(json.prefix(200))")
        }
    }
}

/// Builds a `sockaddr_un` for `path` (unix(7)).
/// - Throws: `RawClientError.system(call: "use socket path …", errno: ENAMETOOLONG)` beyond 107 bytes.
package func unixAddress(_ path: String) throws -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard bytes.count < capacity else {
        throw RawClientError.system(call: "use socket path \(path)", errno: ENAMETOOLONG)
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return address
}

/// Polls `condition` every 20 ms until it is true, for at most `timeout`.
///
/// For conditions the broker reaches asynchronously (a closed connection
/// disappearing from `stats`); never use it to show that something does *not* happen.
/// - Throws: `RawClientError.timedOut(waitingFor: what, …)`, or what `condition` throws.
package func waitUntil(
    _ what: String, timeout: Duration = RawClient.defaultTimeout, _ condition: () throws -> Bool
) throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try condition() { return }
        if ContinuousClock.now >= deadline {
            throw RawClientError.timedOut(waitingFor: what, seconds: timeout.seconds, pending: "")
        }
        usleep(20_000)
    }
}
