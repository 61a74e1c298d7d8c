// The publisher role: floods pipelined publish frames from one prebuilt
// buffer (throughput), or sends stamped frames at a fixed rate (latency),
// then syncs with the broker (`syncRequest`) and prints `sent=N ...` on stdout.
//
// Before editing: the flood loop does one write(2) per up to 64 KiB and
// no per-message work at all; keep it that way, or the generator becomes
// the bottleneck it must never be.
import EventBusSystem
import Glibc

/// What the publisher process does, from its command line.
struct PublisherOptions {
    var wire: Wire
    var socket: String
    var type = "bench.t"
    /// Payload size in bytes (see `Payload`).
    var payloadBytes = 64
    /// Fixed rate in messages per second; 0 floods as fast as the broker reads.
    var rate = 0
    /// Upper bound on messages sent.
    var count = 50_000_000
    /// Upper bound on sending time, in seconds.
    var seconds = 1.0
    /// (nats) Send each message as an HPUB with this header block
    /// (`--headers`, WireCloudEvents.swift); nil sends PUB.
    var headers: NATSHeaderSet?
}

/// Reads and counts the broker's replies to the publisher without blocking:
/// redis answers every PUBLISH with `:N`; eventbus answers nothing unless a
/// frame failed (an `error` frame); nats and mqtt answer nothing at QoS 0 but
/// `-ERR` (nats) and the server's own PINGs (nats). Each answers the sync
/// marker (`syncRequest`) in order after the publishes; the relay answers nothing.
private struct ReplyReader {
    let fd: Int32
    let wire: Wire
    let capacity = 1 << 16
    let buffer: UnsafeMutablePointer<UInt8>
    var used = 0
    var errors = 0
    var sawSync = false
    /// NATS server PINGs not answered yet (answered between whole frames).
    var pings = 0
    var firstError: String?

    init(fd: Int32, wire: Wire) {
        self.fd = fd
        self.wire = wire
        buffer = .allocate(capacity: capacity)
    }

    /// Reads what is there (MSG_DONTWAIT) and counts complete replies.
    /// - Returns: false at EOF.
    mutating func drain() -> Bool {
        while true {
            let n: Int
            switch systemCall(.retry, { recv(fd, buffer + used, capacity - used, Int32(MSG_DONTWAIT)) }) {
            case .success(0): return false
            case .success(let count): n = count
            case .failure(let e) where e == .wouldBlock: return true
            case .failure: fail("failed to read publisher replies: \(errnoText())")
            }
            used += n
            let consumed = wire == .mqtt ? consumePackets() : consumeLines()
            if consumed > 0 {
                memmove(buffer, buffer + consumed, used - consumed)
                used -= consumed
            }
            if used == capacity { used = 0 }  // a reply longer than 64 KiB: not ours, skip it
            if n < capacity / 2 { return true }
        }
    }

    private mutating func consumeLines() -> Int {
        if wire == .redis { return consumeRedisReplies() }
        let raw = UnsafeMutableRawPointer(buffer)
        var pos = 0
        while pos < used, let lf = memchr(raw + pos, 0x0A, used - pos) {
            let end = raw.distance(to: lf)
            let length = end - pos
            let line = buffer + pos
            let isError: Bool
            switch wire {
            case .eventbus:
                // {"op":"error"... ; {"op":"ok","req":"sync"} ends the run.
                isError = length > 8 && line[7] == 0x65 && line[8] == 0x72
                if length > 8 && line[7] == 0x6F && line[8] == 0x6B { sawSync = true }
            case .nats:
                isError = line[0] == 0x2D  // -ERR
                if length >= 4 && line[0] == 0x50 && line[1] == 0x4F { sawSync = true }  // PONG
                if length >= 4 && line[0] == 0x50 && line[1] == 0x49 { pings += 1 }  // PING
            case .relay, .mqtt, .redis:
                isError = true  // nothing comes back (redis: consumeRedisReplies)
            }
            if isError { noteError(line, length) }
            pos = end + 1
        }
        return pos
    }

    /// Redis: one `:N` CR LF per PUBLISH, counted by nobody; only an error
    /// line (`-`...) and the sync's `+PONG` matter, and neither byte occurs
    /// in a `:N` reply (N ≥ 0), so two memchr(3) passes over the complete
    /// lines replace a walk line by line.
    /// - Returns: bytes consumed, up to and including the last LF.
    private mutating func consumeRedisReplies() -> Int {
        var end = used
        while end > 0 && buffer[end - 1] != 0x0A { end -= 1 }
        let raw = UnsafeMutableRawPointer(buffer)
        var at = 0
        while at < end, let minus = memchr(raw + at, 0x2D, end - at) {
            let start = raw.distance(to: minus)
            let lf = memchr(raw + start, 0x0A, end - start).map { raw.distance(to: $0) } ?? end - 1
            noteError(buffer + start, lf - start)
            at = lf + 1
        }
        if end > 0 && memchr(raw, 0x2B, end) != nil { sawSync = true }  // +PONG
        return end
    }

    private mutating func consumePackets() -> Int {
        var pos = 0
        while let packet = parseMQTT(buffer, pos, used) {
            if packet.first == 0xD0 { sawSync = true } else { noteError(buffer + pos, packet.end - pos) }
            pos = packet.end
        }
        return pos
    }

    private mutating func noteError(_ line: UnsafeMutablePointer<UInt8>, _ length: Int) {
        errors += 1
        if firstError == nil {
            firstError = String(decoding: UnsafeBufferPointer(start: line, count: min(length, 300)), as: UTF8.self)
        }
    }
}

/// Runs the publisher role and exits.
/// Prints `sent=N t_start=NS t_end=NS t_synced=NS errors=E cpu_us=U`
/// (CLOCK_MONOTONIC ns; U: this process's utime+stime in µs, `processCPUMicros`).
func runPublisher(_ options: PublisherOptions) -> Never {
    let fd = openClient(options.wire, options.socket, natsHeaders: options.headers != nil)
    setNonBlocking(fd)
    var replies = ReplyReader(fd: fd, wire: options.wire)
    let payload = Payload.make(size: options.payloadBytes)
    let (frame, stampOffset) = options.headers.map { NATS.publish(subject: options.type, headers: $0.block, payload: payload) }
        ?? publishFrame(options.wire, type: options.type, payload: payload)
    let start = monotonicNanos()
    let sent = options.rate > 0
        ? paced(fd: fd, frame: frame, stampOffset: stampOffset, options: options, replies: &replies)
        : flood(fd: fd, frame: frame, options: options, replies: &replies)
    let end = monotonicNanos()

    // Sync: every publish is handled once the broker answered what follows it.
    // The relay answers nothing: what it has not read yet it reads after we close.
    let syncDeadline = monotonicNanos() + 60_000_000_000
    let sync = syncRequest(options.wire)
    if !sync.isEmpty { writeReading(fd, sync, replies: &replies) }
    while !sync.isEmpty && !replies.sawSync {
        if monotonicNanos() > syncDeadline { fail("publisher: broker did not answer the final sync in 60 s") }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&p, 1, 100)
        if !replies.drain() { fail("publisher: broker closed the connection") }
        while replies.pings > 0 {  // between whole frames now
            writeReading(fd, NATS.pong, replies: &replies)
            replies.pings -= 1
        }
    }
    let synced = monotonicNanos()
    if let first = replies.firstError { printErr("publisher: first error reply: \(first)") }
    close(fd)
    let cpu = processCPUMicros(pid: getpid()) ?? 0
    writeAll(1, "sent=\(sent) t_start=\(start) t_end=\(end) t_synced=\(synced) errors=\(replies.errors) cpu_us=\(cpu)\n")
    exit(0)
}

/// Bytes a flooding publisher writes between two reads of the broker's
/// replies: Redis's `:N` answers to 256 KiB of 64-byte PUBLISHes are about
/// 13 KiB, far below what its socket to us holds.
private let replyCheckBytes = 1 << 18

/// Writes copies of `frame` as fast as the socket takes them, for up to
/// `options.count` frames or `options.seconds`, ending on a frame boundary.
/// A full socket (EAGAIN: the broker reads slower, or holds this publisher,
/// PROTOCOL.md 1.2 "Flow control") waits in poll(2) for POLLOUT alone
/// (`waitWritable`: replies are read when that wait times out, so a broker
/// waiting for us to read is never waited on in turn). Replies are read
/// every `replyCheckBytes` written (Redis answers every PUBLISH); a NATS
/// `PING` is answered between two frames.
/// - Returns: frames sent.
private func flood(fd: Int32, frame: [UInt8], options: PublisherOptions, replies: inout ReplyReader) -> Int {
    let frameBytes = frame.count
    let perChunk = max(1, (1 << 16) / frameBytes)
    let chunkBytes = perChunk * frameBytes
    let chunk = UnsafeMutablePointer<UInt8>.allocate(capacity: chunkBytes)
    for i in 0..<perChunk {
        frame.withUnsafeBufferPointer { (chunk + i * frameBytes).update(from: $0.baseAddress!, count: frameBytes) }
    }
    var nextCheck = replyCheckBytes
    var target = options.count * frameBytes
    var written = 0
    let deadline = monotonicNanos() + Int64(options.seconds * 1e9)
    var stopped = false
    while written < target {
        if !stopped && monotonicNanos() >= deadline {
            stopped = true
            target = (written + frameBytes - 1) / frameBytes * frameBytes
            if written >= target { break }
        }
        if replies.pings > 0 && written % frameBytes == 0 {
            writeReading(fd, NATS.pong, replies: &replies)
            replies.pings -= 1
        }
        let offset = written % chunkBytes
        let length = min(chunkBytes - offset, target - written)
        let result = systemCall { write(fd, chunk + offset, length) }
        if case .success(let n) = result, n > 0 {
            written += n
            if written >= nextCheck {
                nextCheck = written + replyCheckBytes
                if !replies.drain() { fail("publisher: broker closed the connection") }
            }
        } else if case .failure(let e) = result, e == .wouldBlock {
            waitWritable(fd, replies: &replies)
        } else {
            fail("publisher: failed to write: \(errnoText())")
        }
    }
    return written / frameBytes
}

/// Waits up to 100 ms for `fd` to take bytes again, and reads the broker's
/// replies when it did not (or the connection failed): a broker that waits
/// for us to read is read, while a broker that answers as it reads (Redis,
/// a `:N` per PUBLISH) does not wake the publisher once per answer; those
/// are read every `replyCheckBytes` written.
private func waitWritable(_ fd: Int32, replies: inout ReplyReader) {
    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    _ = poll(&p, 1, 100)
    if p.revents & Int16(POLLOUT) == 0 && !replies.drain() {
        fail("publisher: broker closed the connection")
    }
}

/// Writes all of `bytes` on the non-blocking `fd`, reading replies while
/// the socket is full (`waitWritable`).
private func writeReading(_ fd: Int32, _ bytes: [UInt8], replies: inout ReplyReader) {
    bytes.withUnsafeBytes { writeReading(fd, $0.baseAddress!, $0.count, replies: &replies) }
}

/// `writeReading` for `count` bytes at `base`.
private func writeReading(_ fd: Int32, _ base: UnsafeRawPointer, _ count: Int, replies: inout ReplyReader) {
    var offset = 0
    while offset < count {
        let result = systemCall { write(fd, base + offset, count - offset) }
        if case .success(let n) = result, n > 0 {
            offset += n
        } else if case .failure(let e) = result, e == .wouldBlock {
            waitWritable(fd, replies: &replies)
        } else {
            fail("publisher: failed to write: \(errnoText())")
        }
    }
}

/// Sends stamped frames at `options.rate` per second for `options.seconds`
/// (at most `options.count`). Each frame carries the CLOCK_MONOTONIC time just
/// before its write; frames that fall due together go in one write.
/// - Returns: frames sent.
private func paced(fd: Int32, frame: [UInt8], stampOffset: Int, options: PublisherOptions, replies: inout ReplyReader) -> Int {
    let frameBytes = frame.count
    let total = min(options.count, Int(Double(options.rate) * options.seconds))
    let interval = 1e9 / Double(options.rate)
    let batchLimit = 64
    let batch = UnsafeMutablePointer<UInt8>.allocate(capacity: batchLimit * frameBytes)
    for i in 0..<batchLimit {
        frame.withUnsafeBufferPointer { (batch + i * frameBytes).update(from: $0.baseAddress!, count: frameBytes) }
    }
    let start = monotonicNanos() + 1_000_000
    var sent = 0
    while sent < total {
        sleepUntil(nanos: start + Int64(Double(sent) * interval))
        let now = monotonicNanos()
        var n = 0
        while sent + n < total && n < batchLimit && start + Int64(Double(sent + n) * interval) <= now {
            writeStamp(now, at: batch + n * frameBytes + stampOffset)
            n += 1
        }
        if n == 0 { continue }
        writeReading(fd, batch, n * frameBytes, replies: &replies)
        sent += n
        if !replies.drain() { fail("publisher: broker closed the connection") }
    }
    return sent
}
