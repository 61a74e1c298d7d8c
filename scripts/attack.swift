// Attack driver for eventbusd, compiled and run by scripts/attack: replays
// every row of issue 11's table of hostile-local-user attacks against a fresh
// broker per row, as other uids (setpriv), measures what the issue asks for
// (broker CPU and RSS, queued and inbound bytes, refused connections, another
// uid's ping round trips and publish rate) and prints each figure next to
// its bound (PROTOCOL.md "Quotas (1.1)"). Exits 1 when a bound is broken.
//
// Before editing: one program, several roles. The driver (root) starts the
// broker and runs `--role attacker KIND` and `--role victim` as children
// through `setpriv --reuid N --regid N --clear-groups` (so SO_PEERCRED says
// uid N); children talk to the driver by lines on stdout (`ready`, then one
// line of `key=value` results). Every attack is bounded in time and count and
// uses local sockets only. Foundation + Glibc only, like scripts/soak.swift.
import Foundation
import Glibc

// MARK: Small socket client

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("attack: \(message)\n".utf8))
    exit(2)
}

func monotonic() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

/// One connection to the broker: non-blocking, line-framed reads.
final class Conn {
    var fd: Int32
    var rx: [UInt8] = []
    var closed = false
    var refused = false
    private var buffer = [UInt8](repeating: 0, count: 65536)

    /// nil when connect(2) fails (e.g. the backlog is full or fds ran out).
    init?(_ path: String) {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { Glibc.close(fd); return nil }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// (attacker round 5) A connected non-blocking socket of another kind (NATS over TCP).
    init(adopting fd: Int32) { self.fd = fd }

    deinit { close() }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        closed = true
    }

    /// Writes what the socket takes now; returns bytes written (0 when full).
    @discardableResult
    func writeSome(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard fd >= 0, bytes.count > 0 else { return 0 }
        let n = send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        if n < 0 {
            if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR { closed = true }
            return 0
        }
        return n
    }

    /// Writes all of `bytes`, waiting up to `timeout` s.
    func writeAll(_ bytes: [UInt8], timeout: Double = 10) -> Bool {
        var offset = 0
        let deadline = monotonic() + timeout
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { writeSome(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            offset += n
            if closed { return false }
            if n == 0 {
                if monotonic() > deadline { return false }
                var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&entry, 1, 50)
            }
        }
        return true
    }

    /// Reads what is there; returns false at EOF or error.
    @discardableResult
    func fill() -> Bool {
        guard fd >= 0 else { return false }
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n > 0 { rx.append(contentsOf: buffer[0..<n]); if n < buffer.count { return true } else { continue } }
            if n == 0 { closed = true; return false }
            if errno == EAGAIN || errno == EWOULDBLOCK { return true }
            closed = true
            return false
        }
    }

    /// Removes and returns complete lines received so far.
    func takeLines() -> [String] {
        var lines: [String] = []
        var start = 0
        for i in 0..<rx.count where rx[i] == 0x0A {
            lines.append(String(decoding: rx[start..<i], as: UTF8.self))
            start = i + 1
        }
        if start > 0 { rx.removeFirst(start) }
        return lines
    }

    /// Removes complete lines received so far and returns how many there were
    /// (without making strings of them).
    func countLines() -> Int {
        var n = 0
        var end = 0
        rx.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count, let hit = memchr(base + offset, 0x0A, raw.count - offset) {
                n += 1
                offset = UnsafeRawPointer(hit) - base + 1
                end = offset
            }
        }
        if end > 0 { rx.removeFirst(end) }
        return n
    }

    /// Sends `line` and waits for a line containing `marker`.
    func request(_ line: String, until marker: String, timeout: Double = 10) -> String? {
        guard writeAll(Array((line + "\n").utf8)) else { return nil }
        let deadline = monotonic() + timeout
        while monotonic() < deadline {
            for reply in takeLines() where reply.contains(marker) { return reply }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 20)
            if !fill() && rx.isEmpty { return nil }
        }
        return nil
    }

    /// Reads until `count` lines that `counts` keeps have come, EOF or
    /// `timeout`; returns those lines (the replies to a batch of requests).
    func readReplies(_ count: Int, timeout: Double, pollMilliseconds: Int32 = 20,
                     counting counts: (String) -> Bool = { _ in true }) -> [String] {
        var replies: [String] = []
        let deadline = monotonic() + timeout
        while replies.count < count && monotonic() < deadline {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, pollMilliseconds)
            let open = fill()
            replies += takeLines().filter(counts)
            if !open { break }
        }
        return replies
    }

    /// Reads until EOF or `timeout`; returns every line.
    func readAll(timeout: Double) -> [String] {
        var lines: [String] = []
        let deadline = monotonic() + timeout
        while monotonic() < deadline {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 20)
            let open = fill()
            lines += takeLines()
            if !open { break }
        }
        return lines
    }
}

func integer(_ key: String, in line: String) -> Int? {
    guard let range = line.range(of: "\"\(key)\":") else { return nil }
    return Int(line[range.upperBound...].prefix { $0.isNumber })
}

func raiseFileLimit() {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

/// Prints one line to the driver (stdout, flushed).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Waits until stdin closes or `seconds` pass (the driver's "stop").
func holdUntilStopped(_ seconds: Double, while body: () -> Void = {}) {
    let deadline = monotonic() + seconds
    _ = fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK)
    var sink = [UInt8](repeating: 0, count: 64)
    while monotonic() < deadline {
        body()
        var entry = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
        if poll(&entry, 1, 5) > 0 {
            if read(0, &sink, sink.count) == 0 { return }
        }
    }
}

/// Writes `bytes` round and round on every connection as fast as each takes
/// them (each from where it left off), reading and discarding whatever comes
/// back, until the driver's "stop" or `seconds`. - Returns: the bytes written.
func pumpUntilStopped(_ conns: [Conn], _ bytes: [UInt8], events: Int32, seconds: Double) -> Int {
    var offsets = [Int](repeating: 0, count: conns.count), sent = 0
    var sink = [UInt8](repeating: 0, count: 65536)
    var entries = conns.map { pollfd(fd: $0.fd, events: Int16(events), revents: 0) }
    holdUntilStopped(seconds) {
        _ = poll(&entries, nfds_t(entries.count), 5)
        for (i, c) in conns.enumerated() where entries[i].revents != 0 {
            let n = bytes.withUnsafeBytes { c.writeSome(UnsafeRawBufferPointer(rebasing: $0[offsets[i]...])) }
            offsets[i] = (offsets[i] + n) % bytes.count
            sent += n
            while read(c.fd, &sink, sink.count) > 0 {}
        }
    }
    return sent
}

/// Keeps `burst` (carrying `perBurst` requests) flowing on every connection
/// with at most `window` requests unanswered each, waiting in poll(2) when
/// nothing can move (so the attacker's own CPU is spent on its traffic, as a
/// careful attacker's would be), until stopped.
/// - Returns: replies read.
/// Runs `round` (one pass of writes over the connections, returning the
/// bytes the sockets took) until `seconds` have passed or `idleLimit` passes
/// in a row took nothing (50 ms apart): the broker stopped reading.
/// - Returns: the bytes written in all.
func writeWhileTaken(seconds: Double, idleLimit: Int, _ round: () -> Int) -> Int {
    var sent = 0
    let start = monotonic()
    var idleRounds = 0
    while monotonic() - start < seconds && idleRounds < idleLimit {
        let progress = round()
        sent += progress
        idleRounds = progress == 0 ? idleRounds + 1 : 0
        if progress == 0 { usleep(50_000) }
    }
    return sent
}

/// - Parameter sinks: (1.3) connections only read, whatever comes (a
///   server that takes its requests and never answers them).
func pipeline(_ conns: [Conn], burst: [UInt8], perBurst: Int, window: Int, seconds: Double, sinks: [Conn] = []) -> Int {
    var outstanding = [Int](repeating: 0, count: conns.count)
    var offsets = [Int](repeating: 0, count: conns.count)
    var replies = 0
    var fds = (conns + sinks).map { pollfd(fd: $0.fd, events: 0, revents: 0) }
    holdUntilStopped(seconds) {
        for i in conns.indices {
            let wantsWrite = offsets[i] > 0 || outstanding[i] + perBurst <= window
            fds[i].events = Int16(POLLIN) | (wantsWrite ? Int16(POLLOUT) : 0)
        }
        for i in sinks.indices { fds[conns.count + i].events = Int16(POLLIN) }
        _ = poll(&fds, nfds_t(fds.count), 5)
        for (i, sink) in sinks.enumerated() where fds[conns.count + i].revents != 0 {
            sink.fill()
            sink.rx.removeAll(keepingCapacity: true)
        }
        for (i, c) in conns.enumerated() where fds[i].revents != 0 {
            if fds[i].revents & Int16(POLLOUT) != 0 {
                offsets[i] += burst.withUnsafeBytes { c.writeSome(UnsafeRawBufferPointer(rebasing: $0[offsets[i]...])) }
                if offsets[i] == burst.count { offsets[i] = 0; outstanding[i] += perBurst }
            }
            if fds[i].revents & Int16(POLLIN) != 0 {
                c.fill()
                let got = c.countLines()
                outstanding[i] -= got
                replies += got
            }
        }
    }
    return replies
}

// MARK: NATS, for the rows of the link inside eventbusd (attacker round 5)

/// A nats-server on 127.0.0.1:`port` (no credentials), stopped by `stop`.
final class NATSServer {
    let process = Process()
    let port: Int

    init?(port: Int) {
        self.port = port
        let candidates: [String] = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"]
        guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["-a", "127.0.0.1", "-p", String(port)]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let deadline = monotonic() + 10
        while monotonic() < deadline {
            if let probe = NATSSubscriber(port: port, subject: "probe") { probe.close(); return }
            usleep(50_000)
        }
        stop()
        return nil
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// A raw NATS connection subscribed to `subject` (text protocol).
final class NATSSubscriber {
    let conn: Conn

    init?(port: Int, subject: String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { Glibc.close(fd); return nil }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        conn = Conn(adopting: fd)
        guard conn.writeAll(Array("CONNECT {\"verbose\":false}\r\nSUB \(subject) 1\r\nPING\r\n".utf8)) else { conn.close(); return nil }
        let deadline = monotonic() + 5
        while !conn.takeLines().contains(where: { $0.hasPrefix("PONG") }) {
            var entry = pollfd(fd: conn.fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 20)
            guard monotonic() < deadline, conn.fill() || !conn.rx.isEmpty else { conn.close(); return nil }
        }
    }

    /// Waits until a message whose subject ends in `suffix` has come (PINGs answered).
    func waitForMessage(endingIn suffix: String, timeout: Double) -> Bool {
        let deadline = monotonic() + timeout
        while monotonic() < deadline {
            for line in conn.takeLines() {
                if line.hasPrefix("PING") { _ = conn.writeAll(Array("PONG\r\n".utf8)) }
                if line.hasPrefix("MSG "), line.split(separator: " ").dropFirst().first?.hasSuffix(suffix) == true { return true }
            }
            var entry = pollfd(fd: conn.fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 20)
            if !conn.fill() && conn.rx.isEmpty { return false }
        }
        return false
    }

    func close() { conn.close() }
}

// MARK: Roles (run as another uid)

/// `--role attacker KIND SOCKET SECONDS`: one attack of the table, as this uid.
func runAttacker(_ kind: String, _ path: String, _ seconds: Double) {
    raiseFileLimit()
    var conns: [Conn] = []
    func open(_ n: Int) -> (accepted: Int, refused: Int) {
        var accepted = 0, refused = 0
        for _ in 0..<n {
            guard let c = Conn(path) else { refused += 1; continue }
            conns.append(c)
            accepted += 1
        }
        return (accepted, refused)
    }
    /// Connections the broker refused (`limit` then EOF): found with a ping each.
    func sortOutRefused() -> Int {
        var refused = 0
        for c in conns {
            if c.request(#"{"op":"ping","req":"alive"}"#, until: "\"req\":\"alive\"", timeout: 5) == nil { c.refused = true; refused += 1 }
        }
        conns.removeAll { $0.refused }
        return refused
    }
    switch kind {
    case "keys":
        // One frame of 85,000 unknown keys (924 KB, under --max-frame), on 8 connections at once.
        var frame = "{"
        for i in 0..<85_000 { frame += "\"k\(i)\":1," }
        frame += "\"op\":\"ping\",\"req\":1}\n"
        let bytes = Array(frame.utf8)
        _ = open(8)
        say("ready bytes=\(bytes.count)")
        let start = monotonic()
        var offsets = [Int](repeating: 0, count: conns.count)
        while offsets.contains(where: { $0 < bytes.count }) && monotonic() - start < seconds {
            for (i, c) in conns.enumerated() where offsets[i] < bytes.count {
                offsets[i] += bytes.withUnsafeBytes { c.writeSome(UnsafeRawBufferPointer(rebasing: $0[offsets[i]...])) }
            }
            usleep(200)
        }
        var answered = 0
        for c in conns where c.request("", until: "\"req\":1", timeout: seconds) != nil { answered += 1 }
        say("answered=\(answered) seconds=\(String(format: "%.3f", monotonic() - start))")
    case "patterns":
        // 40 connections x 4096 wildcard patterns of ~254 bytes.
        _ = open(40)
        var accepted = 0, limited = 0
        for (n, c) in conns.enumerated() {
            var batch: [UInt8] = []
            for i in 0..<4096 {
                var p = "c\(n)i\(i).*.y"
                while p.utf8.count < 250 { p += p.utf8.count % 4 == 0 ? ".*" : ".y" }
                batch += Array("{\"op\":\"subscribe\",\"type\":\"\(p).>\",\"req\":\(i)}\n".utf8)
            }
            guard c.writeAll(batch, timeout: 30) else { continue }
            for line in c.readReplies(4096, timeout: 30) {
                if line.contains("\"ok\"") { accepted += 1 } else if line.contains("\"limit\"") { limited += 1 }
            }
        }
        say("ready subscribed=\(accepted) limit_errors=\(limited)")
        holdUntilStopped(seconds)
        let t = monotonic()
        for c in conns { c.close() }
        say("closed seconds=\(String(format: "%.3f", monotonic() - t))")
    case "groups":
        // (issue 38) 40 connections x 250 queue groups each: 10,000 groups of one member.
        _ = open(40)
        var accepted = 0, limited = 0
        for (n, c) in conns.enumerated() {
            var batch: [UInt8] = []
            for i in 0..<250 { batch += Array("{\"op\":\"subscribe\",\"type\":\"grp.c\(n).>\",\"group\":\"g\(i)\",\"req\":\(i)}\n".utf8) }
            guard c.writeAll(batch, timeout: 30) else { continue }
            for line in c.readReplies(250, timeout: 30) {
                if line.contains("\"ok\"") { accepted += 1 } else if line.contains("\"limit\"") { limited += 1 }
            }
        }
        say("ready subscribed=\(accepted) limit_errors=\(limited)")
        holdUntilStopped(seconds)
        let t = monotonic()
        for c in conns { c.close() }
        say("closed seconds=\(String(format: "%.3f", monotonic() - t))")
    case "group-members":
        // (issue 38) 4,096 connections, each asking to join one group on the
        // victim's type (`v.>`), none of them reading (the broker lets in
        // --max-group-members of them, the rest get limit).
        _ = open(4096)
        var accepted = 0, limited = 0
        for (i, c) in conns.enumerated() {
            _ = c.writeAll(Array("{\"op\":\"subscribe\",\"type\":\"v.>\",\"group\":\"big\",\"req\":\(i)}\n".utf8), timeout: 30)
        }
        for c in conns {
            let deadline = monotonic() + 30
            var answered = false
            while !answered && monotonic() < deadline {
                for line in c.takeLines() where line.contains("\"req\"") {
                    answered = true
                    if line.contains("\"ok\"") { accepted += 1 } else if line.contains("\"limit\"") { limited += 1 }
                }
                if answered { break }
                var entry = pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 20)
                if !c.fill() { break }
            }
        }
        say("ready subscribed=\(accepted) limit_errors=\(limited)")
        holdUntilStopped(seconds)
        let t = monotonic()
        for c in conns { c.close() }
        say("closed seconds=\(String(format: "%.3f", monotonic() - t))")
    case let k where k.hasPrefix("plain-v"):
        // (issue 38) plain-vN: N connections subscribed to the victim's type
        // (`v.>`), plainly (no group), none reading: group-members-cost's baseline.
        let n = Int(k.dropFirst("plain-v".count)) ?? 1
        _ = open(n)
        for c in conns { _ = c.writeAll(Array(#"{"op":"subscribe","type":"v.>"}"#.utf8) + [0x0A]) }
        for c in conns { _ = c.request(#"{"op":"ping","req":"s"}"#, until: "\"req\":\"s\"", timeout: 5) }
        say("ready subscribed=\(conns.count)")
        holdUntilStopped(seconds)
    case "group-churn":
        // (issue 38) 8 connections join and leave one group on the victim's type (v.load) in a tight loop.
        _ = open(8)
        var pair: [UInt8] = []
        for i in 0..<50 {
            pair += Array("{\"op\":\"subscribe\",\"type\":\"v.>\",\"group\":\"w\",\"req\":\(i)}\n".utf8)
            pair += Array("{\"op\":\"unsubscribe\",\"type\":\"v.>\",\"group\":\"w\",\"req\":\(i)}\n".utf8)
        }
        say("ready")
        var rounds = 0
        holdUntilStopped(seconds) {
            for c in conns {
                guard c.writeAll(pair, timeout: 5) else { continue }
                _ = c.readReplies(100, timeout: 5, pollMilliseconds: 5) { $0.contains("\"req\"") }
            }
            rounds += 1
        }
        say("done rounds=\(rounds)")
    case "serve-patterns":
        // (attacker round 5) 4 connections serve 4,000 patterns each under
        // svc.> (200 bytes, none covering another: 16,000 of the uid's
        // 16,384 subscriptions), then one connection serves and drops
        // svc.churn in a loop: each change makes a watching bridge list them all.
        _ = open(4)
        var subscribed = 0
        for (n, c) in conns.enumerated() {
            var text = ""
            for i in 0..<4_000 {
                text += #"{"op":"subscribe","type":"svc.p\#(n * 4_000 + i).\#(String(repeating: "x", count: 200))","serve":true}"# + "\n"
            }
            text += #"{"op":"subscribe","type":"svc.last\#(n)","serve":true,"req":"s"}"# + "\n"
            guard c.writeAll(Array(text.utf8), timeout: 60) else { continue }
            if c.readReplies(1, timeout: 60, counting: { $0.contains("\"req\":\"s\"") }).first?.contains("\"ok\"") == true { subscribed += 4_001 }
        }
        say("ready subscribed=\(subscribed)")
        let pair = Array((#"{"op":"subscribe","type":"svc.churn","serve":true,"req":1}"# + "\n" + #"{"op":"unsubscribe","type":"svc.churn","serve":true,"req":2}"# + "\n").utf8)
        var rounds = 0
        holdUntilStopped(seconds) {
            guard conns[0].writeAll(pair, timeout: 5) else { return }
            _ = conns[0].readReplies(2, timeout: 5, pollMilliseconds: 5) { $0.contains("\"req\"") }
            rounds += 1
        }
        say("done rounds=\(rounds)")
    case "flood", "flood-x":
        // 100 connections writing pings (or `x` lines) and never reading.
        _ = open(100)
        let line = kind == "flood" ? #"{"op":"ping","req":1}"# + "\n" : "x\n"
        let chunk = Array(String(repeating: line, count: 65536 / line.utf8.count).utf8)
        let sent = writeWhileTaken(seconds: seconds, idleLimit: 40) {
            conns.reduce(0) { total, c in total + chunk.withUnsafeBytes { c.writeSome($0) } }
        }
        say("ready sent=\(sent)")
        holdUntilStopped(seconds)
    case "flood-type":
        // (issue 37) 8 connections publishing to `v.flood` (a type root
        // subscribes to) as fast as the broker takes them, no `req` (no
        // replies), reading whatever comes back.
        _ = open(8)
        let chunk = Array(String(repeating: #"{"op":"publish","type":"v.flood","data":{"n":12345,"text":"a flood of events"}}"# + "\n", count: 512).utf8)
        say("ready")
        let sent = pumpUntilStopped(conns, chunk, events: POLLOUT | POLLIN, seconds: seconds)
        say("sent=\(sent)")
    case "busy", "busy-1":
        // 200 connections pinging and reading their replies as fast as they can.
        // 200 connections, or one with the same number of requests in flight.
        let single = kind.hasSuffix("-1")
        _ = open(single ? 1 : 200)
        let burst = Array(String(repeating: #"{"op":"ping","req":1}"# + "\n", count: 64).utf8)
        say("ready")
        let pings = pipeline(conns, burst: burst, perBurst: 64, window: single ? 200 * 256 : 256, seconds: seconds)
        say("pings=\(pings)")
    case "churn", "churn-exact", "churn-1":
        // 200 connections subscribing and unsubscribing one pattern in a loop.
        let single = kind.hasSuffix("-1")
        _ = open(single ? 1 : 200)
        let type = kind == "churn-exact" ? "a.b.c" : "a.*.c"
        let pair = Array(String(repeating: "{\"op\":\"subscribe\",\"type\":\"\(type)\",\"req\":1}\n{\"op\":\"unsubscribe\",\"type\":\"\(type)\",\"req\":2}\n", count: 16).utf8)
        say("ready")
        let changes = pipeline(conns, burst: pair, perBurst: 32, window: single ? 200 * 128 : 128, seconds: seconds)
        say("changes=\(changes)")
    case "partial", "partial-200":
        // Connections each sending a frame of 1 MiB - 4 bytes without its LF
        // (300; partial-200: 200, issue 20's memory row).
        let (accepted, refusedAtConnect) = open(kind == "partial" ? 300 : 200)
        let refused = sortOutRefused()
        var frame = Array(#"{"op":"ping","x":""#.utf8)
        frame += [UInt8](repeating: 0x61, count: (1 << 20) - 4 - frame.count)
        var offsets = [Int](repeating: 0, count: conns.count)
        _ = writeWhileTaken(seconds: seconds, idleLimit: 20) {
            var progress = 0
            for (i, c) in conns.enumerated() where offsets[i] < frame.count {
                let n = frame.withUnsafeBytes { c.writeSome(UnsafeRawBufferPointer(rebasing: $0[offsets[i]...])) }
                offsets[i] += n
                progress += n
            }
            return progress
        }
        say("ready accepted=\(accepted - refused) refused=\(refused + refusedAtConnect) sent=\(offsets.reduce(0, +))")
        holdUntilStopped(seconds)
    case "last-copies":
        // (issue 20) 250 connections subscribe with `last: true` to a 1 MiB
        // retained event and read its copy until the broker holds only its
        // last ~35 KB (what it wrote and this socket holds unread is learnt
        // with one MSG_PEEK; reading r more lets the broker write r more).
        let (_, refusedAtConnect) = open(250)
        let subscribe = Array(#"{"op":"subscribe","type":"mem.big","last":true}"#.utf8) + [0x0A]
        for c in conns { _ = c.writeAll(subscribe) }
        let total = lastCopyDataBytes + 250  // the ok line and the copy, about
        let firstTarget = total - 35_000 - 300_000
        var got = [Int](repeating: 0, count: conns.count)
        var buffer = [UInt8](repeating: 0, count: 1 << 21)
        func readUntil(_ target: [Int]) {
            var lastProgress = monotonic()
            while got.indices.contains(where: { got[$0] < target[$0] }) && monotonic() - lastProgress < 3 {
                var progress = false
                for (i, c) in conns.enumerated() where got[i] < target[i] {
                    let n = read(c.fd, &buffer, min(65536, target[i] - got[i]))
                    if n > 0 { got[i] += n; progress = true }
                }
                if progress { lastProgress = monotonic() } else { usleep(2_000) }
            }
        }
        readUntil([Int](repeating: firstTarget, count: conns.count))
        usleep(300_000)  // the broker fills every socket again
        var target = got
        for (i, c) in conns.enumerated() where got[i] >= firstTarget {
            let inSocket = max(0, recv(c.fd, &buffer, buffer.count, Int32(MSG_PEEK | MSG_DONTWAIT)))
            target[i] = got[i] + max(0, total - got[i] - inSocket - 35_000)
        }
        readUntil(target)
        say("ready accepted=\(conns.count) refused=\(refusedAtConnect) copies=\(got.filter { $0 >= firstTarget }.count) read=\(got.reduce(0, +))")
        holdUntilStopped(seconds)
        for c in conns { c.close() }
    case "slow":
        // 400 connections: half send an incomplete frame and then nothing,
        // half send one byte a second.
        let (_, refusedAtConnect) = open(400)
        let refused = sortOutRefused()
        let stalled = Array(conns.prefix(conns.count / 2)), trickling = Array(conns.suffix(conns.count - conns.count / 2))
        for c in stalled { _ = c.writeAll(Array(#"{"op":"ping","x":"abc"#.utf8)) }
        for c in trickling { _ = c.writeAll(Array(#"{"op":"ping","x":""#.utf8)) }
        say("ready accepted=\(conns.count) refused=\(refused + refusedAtConnect)")
        var timedOut = 0, lastByte = monotonic(), firstClose = 0.0
        let start = monotonic()
        holdUntilStopped(seconds) {
            if monotonic() - lastByte >= 1 {
                lastByte = monotonic()
                let byte: [UInt8] = [0x61]
                for c in trickling where !c.closed { byte.withUnsafeBytes { _ = c.writeSome($0) } }
            }
            for c in stalled where !c.closed {
                c.fill()
                for line in c.takeLines() where line.contains("\"timeout\"") {
                    timedOut += 1
                    if firstClose == 0 { firstClose = monotonic() - start }
                }
            }
        }
        let tricklingOpen = trickling.filter { !$0.closed }.count
        say("stalled=\(stalled.count) timed_out=\(timedOut) after=\(String(format: "%.1f", firstClose)) trickling_open=\(tricklingOpen)")
    case "connections":
        // One uid opens 4100 connections.
        let start = monotonic()
        let (_, refusedAtConnect) = open(4100)
        let refused = sortOutRefused()
        say("ready accepted=\(conns.count) refused=\(refused + refusedAtConnect) seconds=\(String(format: "%.2f", monotonic() - start))")
        holdUntilStopped(seconds)
    case "replay":
        // 200 connections asking for the whole history ring again and again
        // (unsubscribe + subscribe `>` with since=1 and last), never reading.
        _ = open(200)
        let pair = Array(#"{"op":"unsubscribe","type":">"}"#.utf8) + [0x0A] + Array(#"{"op":"subscribe","type":">","since":1,"last":true}"#.utf8) + [0x0A]
        let chunk = Array((0..<64).map { _ in pair }.joined())
        var sent = 0
        say("ready")
        holdUntilStopped(seconds) {
            for c in conns { sent += chunk.withUnsafeBytes { c.writeSome($0) } }
            usleep(1_000)
        }
        say("sent=\(sent)")
    case "hangup":
        // 200 connections fill their sockets with replay subscribes while the
        // broker has stopped reading them (full queues), then all close at once.
        _ = open(200)
        let pair = Array(#"{"op":"unsubscribe","type":">"}"#.utf8) + [0x0A] + Array(#"{"op":"subscribe","type":">","since":1}"#.utf8) + [0x0A]
        let chunk = Array((0..<256).map { _ in pair }.joined())
        let sent = writeWhileTaken(seconds: 20, idleLimit: 20) {
            conns.reduce(0) { total, c in total + chunk.withUnsafeBytes { c.writeSome($0) } }
        }
        say("ready sent=\(sent)")
        holdUntilStopped(seconds)
        for c in conns { c.close() }
        say("closed")
    case "cost-deep", "cost-arrays", "cost-keys", "cost-escapes", "cost-number", "cost-types", "cost-patterns",
         "cost-deep-8", "cost-arrays-8", "cost-keys-8", "cost-escapes-8", "cost-number-8":
        // (issue 20) One connection sending expensive frames as fast as the
        // broker takes them, none answered (no req): the loop's cost per byte
        // is what differs. The bytes are made once and sent again and again.
        // (issue 37) `-8`: 8 connections, each sending them.
        _ = open(kind.hasSuffix("-8") ? 8 : 1)
        var buffer: [UInt8] = []
        var rng = SystemRandomNumberGenerator()
        switch kind.hasSuffix("-8") ? String(kind.dropLast(2)) : kind {
        case "cost-deep":
            // 1 MiB frames of 509-deep nesting: 1,000 arrays 507 deep in an array in the object.
            let block = String(repeating: "[", count: 507) + String(repeating: "]", count: 507)
            buffer = Array((#"{"op":"ping","x":["# + Array(repeating: block, count: 1030).joined(separator: ",") + "]}\n").utf8)
        case "cost-arrays":
            buffer = Array((#"{"op":"ping","x":["# + Array(repeating: "1234567", count: 100_000).joined(separator: ",") + "]}\n").utf8)
        case "cost-keys":
            buffer = Array(("{" + (0..<85_000).map { "\"k\($0)\":1," }.joined() + #""op":"ping"}"# + "\n").utf8)
        case "cost-escapes":
            buffer = Array((#"{"op":"ping","x":""# + String(repeating: #"\u00e9"#, count: 174_000) + "\"}\n").utf8)
        case "cost-number":
            buffer = Array((#"{"op":"ping","x":"# + String(repeating: "1", count: 1_040_000) + "}\n").utf8)
        case "cost-types":
            // Random three-segment types, a new one nearly every frame (4 MiB of them, sent in a loop).
            while buffer.count < 4 << 20 {
                buffer += Array(#"{"op":"publish","type":"r\#(UInt32.random(in: 0...999_999, using: &rng)).s\#(UInt32.random(in: 0...999_999, using: &rng)).t\#(UInt32.random(in: 0...999_999, using: &rng))"}"#.utf8) + [0x0A]
            }
        default:
            // Churning random patterns: subscribe then unsubscribe, a new pattern each time.
            while buffer.count < 4 << 20 {
                let p = "p\(UInt32.random(in: 0...999_999, using: &rng)).*.q\(UInt32.random(in: 0...999_999, using: &rng)).>"
                buffer += Array(#"{"op":"subscribe","type":"\#(p)"}"#.utf8) + [0x0A] + Array(#"{"op":"unsubscribe","type":"\#(p)"}"#.utf8) + [0x0A]
            }
        }
        say("ready bytes=\(buffer.count)")
        let sent = pumpUntilStopped(conns, buffer, events: POLLOUT, seconds: seconds)
        say("sent=\(sent)")
    case "never-read-250":
        // (issue 20) 250 drop-new subscribers of > that never read.
        let (_, refusedAtConnect) = open(250)
        for c in conns {
            _ = c.writeAll(Array(#"{"op":"hello","overflow":"drop-new"}"#.utf8) + [0x0A] + Array(#"{"op":"subscribe","type":">"}"#.utf8) + [0x0A])
        }
        var answered = 0
        for c in conns where c.request(#"{"op":"ping","req":"s"}"#, until: "\"req\":\"s\"", timeout: 10) != nil { answered += 1 }
        say("ready accepted=\(answered) refused=\(refusedAtConnect)")
        holdUntilStopped(seconds)
    case "never-read-200-drop-new", "never-read-200-wait", "never-read-200-drop-old", "never-read-200-disconnect", "trickle-read-50":
        // (issue 37) 200 subscribers of > under one overflow kind that never
        // read; trickle-read-50: 50 `wait` subscribers of > reading a byte every 0.9 s.
        let trickle = kind == "trickle-read-50"
        let overflow = trickle ? "wait" : String(kind.dropFirst("never-read-200-".count))
        let (_, refusedAtConnect) = open(trickle ? 50 : 200)
        for c in conns {
            _ = c.writeAll(Array(#"{"op":"hello","overflow":"\#(overflow)"}"#.utf8) + [0x0A] + Array(#"{"op":"subscribe","type":">"}"#.utf8) + [0x0A])
        }
        var answered = 0
        for c in conns where c.request(#"{"op":"ping","req":"s"}"#, until: "\"req\":\"s\"", timeout: 10) != nil { answered += 1 }
        say("ready accepted=\(answered) refused=\(refusedAtConnect)")
        var lastByte = monotonic()
        holdUntilStopped(seconds) {
            guard trickle, monotonic() - lastByte >= 0.9 else { return }
            lastByte = monotonic()
            var byte: UInt8 = 0
            for c in conns { _ = read(c.fd, &byte, 1) }
        }
    case "types-70000":
        // (issue 37) 70,000 publishes of distinct types, then a ping.
        _ = open(1)
        var n = 0
        while n < 70_000 {
            var frames: [UInt8] = []
            for i in n..<min(n + 1000, 70_000) { frames += Array(#"{"op":"publish","type":"flood\#(getuid()).t\#(i)"}"#.utf8) + [0x0A] }
            guard conns[0].writeAll(frames, timeout: 30) else { break }
            n += 1000
        }
        let answered = conns[0].request(#"{"op":"ping","req":"p"}"#, until: "\"req\":\"p\"", timeout: 60) != nil
        say("ready published=\(n) answered=\(answered)")
        holdUntilStopped(seconds)
    case "hold-trickle":
        // (issue 37) One `wait` subscriber of > (its uid has `allow hold`)
        // that reads about 200 KB every 0.9 s.
        _ = open(1)
        _ = conns[0].writeAll(Array(#"{"op":"subscribe","type":">"}"#.utf8) + [0x0A])
        _ = conns[0].request(#"{"op":"ping","req":"s"}"#, until: "\"req\":\"s\"", timeout: 5)
        say("ready")
        var last = monotonic()
        var buffer = [UInt8](repeating: 0, count: 65536)
        holdUntilStopped(seconds) {
            guard monotonic() - last >= 0.9 else { return }
            last = monotonic()
            var taken = 0
            while taken < 200_000 {
                let n = read(conns[0].fd, &buffer, min(buffer.count, 200_000 - taken))
                if n <= 0 { break }
                taken += n
            }
        }
    case "drop-old-loop":
        // (issue 20) 8 connections with overflow drop-old and echo, each
        // subscribed to its own type, send 30,000 (publish to itself + ping)
        // pairs and never read; a ninth connection publishes to their types
        // as fast as the broker takes it: every event drops the oldest one
        // queued between thousands of replies.
        _ = open(9)
        let loops = Array(conns.prefix(8)), publisher = conns[8]
        var sent = 0
        for (n, c) in loops.enumerated() {
            _ = c.writeAll(Array(#"{"op":"hello","overflow":"drop-old","echo":true}"#.utf8) + [0x0A])
            _ = c.request(#"{"op":"subscribe","type":"loop.\#(n)","req":"s"}"#, until: "\"req\":\"s\"", timeout: 10)
            var pairs: [UInt8] = []
            for k in 0..<30_000 {
                pairs += Array(#"{"op":"publish","type":"loop.\#(n)","data":"0123456789abcdef"}"#.utf8) + [0x0A]
                pairs += Array(#"{"op":"ping","req":\#(k)}"#.utf8) + [0x0A]
            }
            sent += writeWhileTaken(seconds: 5, idleLimit: 10) { pairs.withUnsafeBytes { c.writeSome($0) } }
        }
        let burst = Array((0..<512).map { #"{"op":"publish","type":"loop.\#($0 % 8)","data":"0123456789abcdef"}"# + "\n" }.joined().utf8)
        say("ready sent=\(sent)")
        var published = 0
        holdUntilStopped(seconds) {
            published += burst.withUnsafeBytes { publisher.writeSome($0) }
            var byte = [UInt8](repeating: 0, count: 65536)
            while read(publisher.fd, &byte, byte.count) > 0 {}
        }
        say("published_bytes=\(published)")
    case "never-read", "trickle-read", "never-read-1":
        // (1.2 flow control, issue 24) One connection subscribed to `>` that
        // never reads (or reads one byte a second); never-read-1: one
        // subscribed to the victim's type, for a victim of the same uid.
        // (Many never-readers per uid are issue 20's row.)
        let (_, refusedAtConnect) = open(1)
        let subscribe = kind == "never-read-1" ? #"{"op":"subscribe","type":"v.load"}"# : #"{"op":"subscribe","type":">"}"#
        for c in conns { _ = c.writeAll(Array(subscribe.utf8) + [0x0A]) }
        for c in conns { _ = c.request(#"{"op":"ping","req":"s"}"#, until: "\"req\":\"s\"", timeout: 5) }
        say("ready accepted=\(conns.count) refused=\(refusedAtConnect)")
        var lastByte = monotonic()
        holdUntilStopped(seconds) {
            guard kind == "trickle-read", monotonic() - lastByte >= 1 else { return }
            lastByte = monotonic()
            var byte: UInt8 = 0
            for c in conns { _ = read(c.fd, &byte, 1) }
        }
    case "trickle":
        // One small retaining publish every 50 ms (each changes the state file).
        _ = open(1)
        var published = 0
        say("ready")
        holdUntilStopped(seconds) {
            if conns[0].request(#"{"op":"publish","type":"user.\#(getuid()).tick","retain":true,"req":"t","data":\#(published)}"#, until: "\"req\":\"t\"") != nil { published += 1 }
            usleep(50_000)
        }
        say("published=\(published)")
    case "retain-many":
        // As many tiny retained events of distinct types as the broker keeps.
        _ = open(1)
        var kept = 0, refused = 0
        for batch in 0..<100 {
            var frames: [UInt8] = []
            for i in 0..<500 { frames += Array(#"{"op":"publish","type":"r\#(getuid()).t\#(batch * 500 + i)","retain":true,"req":1}"#.utf8) + [0x0A] }
            guard conns[0].writeAll(frames, timeout: 30) else { break }
            var lines: [String] = []
            let deadline = monotonic() + 30
            while lines.count < 500 && monotonic() < deadline {
                var entry = pollfd(fd: conns[0].fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 20)
                conns[0].fill()
                lines += conns[0].takeLines()
            }
            kept += lines.filter { $0.contains("\"ok\"") }.count
            refused += lines.filter { $0.contains("\"limit\"") }.count
            if refused > 0 { break }
        }
        say("kept=\(kept) refused=\(refused)")
    case "retain-big":
        // Issue 20, break 1: two ~1 MB retained events (2 MiB, the uid's
        // share of --max-retained-bytes 16M), republished in turn.
        _ = open(1)
        let pad = String(repeating: "x", count: 1_000_000)
        var published = 0
        say("ready")
        holdUntilStopped(seconds) {
            // One every 120 ms, so each window of the state writer (250 ms and
            // its write) appends a batch just under what made it rewrite whole.
            let t = monotonic()
            if conns[0].request(#"{"op":"publish","type":"big.u\#(getuid()).\#(published % 2)","retain":true,"req":"b","data":"\#(published)\#(pad)"}"#, until: "\"req\":\"b\"", timeout: 30) != nil { published += 1 }
            let left = 0.12 - (monotonic() - t)
            if left > 0 { usleep(UInt32(left * 1e6)) }
        }
        say("published=\(published)")
    case "line-split":
        // Issue 20, break 6: a raw CR as whitespace inside `data` carrying a
        // whole forged event line, and raw U+2028/U+2029/U+0085 in strings.
        _ = open(1)
        let forged = #"{"op":"event","seq":1,"type":"system.reboot","time":"2026-12-01T23:00:00.000Z","source":"init","id":"x","pid":1,"uid":0,"gid":0,"data":{}}"#
        let frames = ["{\"op\":\"publish\",\"type\":\"line.cr\",\"req\":\"l\",\"data\":[1,\r\(forged)\r]}",
                      "{\"op\":\"publish\",\"type\":\"line.ls\",\"req\":\"l\",\"data\":[\"a\u{2028}b\",\"c\u{2029}d\"]}",
                      "{\"op\":\"publish\",\"type\":\"line.nel\",\"req\":\"l\",\"data\":\"a\u{85}b\"}"]
        var refused = 0
        // A refused frame's error has no `req` (it could not be read): wait for any reply.
        for frame in frames where conns[0].request(frame, until: "\"op\":")?.contains("\"bad_frame\"") == true { refused += 1 }
        say("refused=\(refused) sent=\(frames.count)")
    case "make-dir":
        // Issue 20, break 7: `path` is the state directory the root broker
        // will be given: made first, world-writable, with a symlink at the
        // temporary file's name to a root-only file and a forged state file.
        let victim = path + ".victim"
        mkdir(path, 0o777)
        chmod(path, 0o777)
        symlink(victim, path + "/retained.jsonl.tmp")
        let line = #"{"op":"event","seq":1,"type":"forged.x","time":"2026-12-01T23:00:00.000Z","source":"root","id":"i","pid":1,"uid":0,"gid":0,"data":1}"#
        _ = FileManager.default.createFile(atPath: path + "/retained.jsonl", contents: Data(("{\"op\":\"eventbus-state\",\"format\":1}\n" + line + "\n").utf8))
        say("made=1")
    case "stats-retained":
        // Issue 20, break 8: what `stats` says of the retained events.
        _ = open(1)
        let line = conns[0].request(#"{"op":"stats","req":"s"}"#, until: "\"req\":\"s\"") ?? ""
        // The top-level figures come after `me` (which has the uid's own `retained_bytes`).
        let top = line.range(of: "\"policy_generation\":").map { String(line[$0.lowerBound...]) } ?? ""
        say("retained=\(integer("retained", in: top) ?? -1) bytes=\(integer("retained_bytes", in: top) ?? -1)")
    case "conn-id":
        // Issue 20, break 8: this connection's `conn` from `hello`.
        _ = open(1)
        let line = conns[0].request(#"{"op":"hello","req":"h"}"#, until: "\"req\":\"h\"") ?? ""
        say("conn=\(integer("conn", in: line) ?? -1)")
    case "rr-no-server":
        // (issue 32) 200 connections asking, as fast as they are answered,
        // for a type nobody serves (each answered no_responders at once).
        _ = open(200)
        let burst = Array(String(repeating: #"{"op":"request","type":"rr.none","req":1}"# + "\n", count: 64).utf8)
        say("ready")
        let answers = pipeline(conns, burst: burst, perBurst: 64, window: 256, seconds: seconds)
        say("answers=\(answers)")
    case "rr-remote-hoard":
        // (attacker7) 2 connections asking 600 requests each of rr.slow (2 min
        // deadlines), which a server on another machine reads and never
        // answers; counts the ones refused `limit` (ready: after a ping on each).
        _ = open(2)
        var limited = 0, ponged = 0
        func take(_ c: Conn) {
            c.fill()
            for line in c.takeLines() {
                if line.contains(#""code":"limit""#) { limited += 1 } else if line.contains(#""req":"p""#) { ponged += 1 }
            }
        }
        for (n, c) in conns.enumerated() {
            var out = ""
            for i in 0..<600 { out += #"{"op":"request","type":"rr.slow","timeout":120000,"req":"h\#(n)-\#(i)"}"# + "\n" }
            _ = c.writeAll(Array((out + #"{"op":"ping","req":"p"}"# + "\n").utf8))
        }
        let deadline = monotonic() + 60
        while ponged < conns.count && monotonic() < deadline {
            var entries = conns.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            _ = poll(&entries, nfds_t(entries.count), 5)
            conns.forEach(take)
        }
        say("ready limited=\(limited)")
        var said = limited, saidAt = monotonic()
        holdUntilStopped(seconds) {
            conns.forEach(take)
            if limited != said && monotonic() - saidAt >= 0.1 {
                say("progress limited=\(limited)")
                (said, saidAt) = (limited, monotonic())
            }
        }
        say("limited=\(limited)")
    case "rr-ignored":
        // (issue 32) A server of this uid that reads its requests and never
        // answers, and 200 connections asking it (1 s deadline): the uid's
        // 4096 pending requests are always taken, the rest is limit at once.
        _ = open(201)
        let server = conns.removeLast()
        guard server.request(#"{"op":"subscribe","type":"rr.ignored","serve":true,"req":"s"}"#, until: "\"req\":\"s\"") != nil else { fail("cannot serve rr.ignored") }
        let burst = Array(String(repeating: #"{"op":"request","type":"rr.ignored","timeout":1000,"req":1}"# + "\n", count: 64).utf8)
        say("ready")
        let answers = pipeline(conns, burst: burst, perBurst: 64, window: 256, seconds: seconds, sinks: [server])
        say("answers=\(answers)")
    case "rr-forged":
        // (issue 32) 200 connections replying with tokens that are not theirs:
        // random ones, one reused over and over, malformed ones, and a live
        // token given to this uid's own server (foreign on every other
        // connection); that server answers with it at the end (it must still be good).
        _ = open(202)
        let server = conns.removeLast(), asker = conns.removeLast()
        guard server.request(#"{"op":"subscribe","type":"rr.forged","serve":true,"req":"s"}"#, until: "\"req\":\"s\"") != nil else { fail("cannot serve rr.forged") }
        guard asker.writeAll(Array((#"{"op":"request","type":"rr.forged","timeout":300000,"req":"live"}"# + "\n").utf8)),
              let request = server.request("", until: "\"op\":\"request\""),
              let range = request.range(of: "\"reply\":\"") else { fail("no live token") }
        let live = String(request[range.upperBound...].prefix(32))
        func hex() -> String { (0..<32).map { _ in String("0123456789abcdef".randomElement()!) }.joined() }
        let reused = hex()
        var text = ""
        for i in 0..<64 {
            let token = i % 4 == 0 ? hex() : i % 4 == 1 ? reused : i % 4 == 2 ? live : "zz" + hex().dropFirst(2)
            text += #"{"op":"reply","to":"\#(token)","data":1,"req":1}"# + "\n"
        }
        say("ready")
        let answers = pipeline(conns, burst: Array(text.utf8), perBurst: 64, window: 256, seconds: seconds)
        let owner = server.request(#"{"op":"reply","to":"\#(live)","data":"mine","req":"own"}"#, until: "\"req\":\"own\"") ?? ""
        let answered = asker.request("", until: "\"req\":\"live\"") ?? ""
        say("answers=\(answers) owner_accepted=\(owner.contains("\"accepted\":true") ? 1 : 0) asker_answered=\(answered.contains("\"mine\"") ? 1 : 0)")
    case "rr-unread":
        // (issue 32) This uid's server answers each request with 32 KiB; 20
        // connections ask 1000 requests each and never read the answers.
        _ = open(21)
        let server = conns.removeLast()
        guard server.request(#"{"op":"subscribe","type":"rr.unread","serve":true,"req":"s"}"#, until: "\"req\":\"s\"") != nil else { fail("cannot serve rr.unread") }
        let pad = String(repeating: "u", count: 32 * 1024)
        let ask = Array(String(repeating: #"{"op":"request","type":"rr.unread","timeout":300000,"req":1}"# + "\n", count: 1000).utf8)
        var offsets = [Int](repeating: 0, count: conns.count)
        var answered = 0, refused = 0
        let start = monotonic()
        var idle = 0
        // Until every asker wrote its 1000 (or the broker stopped reading them) and the server went quiet.
        while monotonic() - start < seconds * 3 && idle < 40 {
            var progress = 0
            for (i, c) in conns.enumerated() where offsets[i] < ask.count {
                let n = ask.withUnsafeBytes { c.writeSome(UnsafeRawBufferPointer(rebasing: $0[offsets[i]...])) }
                offsets[i] += n
                progress += n
            }
            var entry = pollfd(fd: server.fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 20)
            server.fill()
            var out = ""
            for line in server.takeLines() {
                if line.contains("\"accepted\":true") { answered += 1 } else if line.contains("\"accepted\":false") { refused += 1 }
                guard line.hasPrefix(#"{"op":"request""#), let range = line.range(of: "\"reply\":\"") else { continue }
                out += #"{"op":"reply","to":"\#(line[range.upperBound...].prefix(32))","data":"\#(pad)","req":1}"# + "\n"
            }
            if !out.isEmpty { _ = server.writeAll(Array(out.utf8), timeout: 30); progress += 1 }
            idle = progress == 0 ? idle + 1 : 0
        }
        say("ready written=\(offsets.reduce(0, +) / (ask.count / 1000)) accepted=\(answered) refused=\(refused)")
        holdUntilStopped(seconds * 3)
    case "rr-answers":
        // (attacker round 4) This uid serves rr.answers, which root asks 600
        // times without reading: each answer is 1 MB, as many as root's queue takes.
        _ = open(1)
        let server = conns[0]
        guard server.request(#"{"op":"subscribe","type":"rr.answers","serve":true,"req":"s"}"#, until: "\"req\":\"s\"") != nil else { fail("cannot serve rr.answers") }
        say("serving")
        let pad = String(repeating: "a", count: 1_000_000)
        var answered = 0, refused = 0, idle = 0
        let start = monotonic()
        while answered + refused < 600 && monotonic() - start < seconds * 10 && idle < 500 {
            var entry = pollfd(fd: server.fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 20)
            server.fill()
            var out = ""
            for line in server.takeLines() {
                if line.contains("\"accepted\":true") { answered += 1 } else if line.contains("\"accepted\":false") { refused += 1 }
                guard line.hasPrefix(#"{"op":"request""#), let range = line.range(of: "\"reply\":\"") else { continue }
                out += #"{"op":"reply","to":"\#(line[range.upperBound...].prefix(32))","data":"\#(pad)","req":1}"# + "\n"
            }
            if out.isEmpty { idle += 1 } else { idle = 0; _ = server.writeAll(Array(out.utf8), timeout: 60) }
        }
        say("ready accepted=\(answered) refused=\(refused)")
        holdUntilStopped(seconds * 3)
    case "rr-expired":
        // (attacker round 4) Three rounds of 2000 requests of 1 KB with 200 ms
        // deadlines to root's server of rr.dead, which does not read: each
        // round waits for its answers (timeouts, no_responders, limit).
        _ = open(1)
        let c = conns[0]
        let pad = String(repeating: "d", count: 1000)
        var reached = 0, other = 0
        for _ in 0..<3 {
            let text = String(repeating: #"{"op":"request","type":"rr.dead","timeout":200,"req":1,"data":"\#(pad)"}"# + "\n", count: 2000)
            guard c.writeAll(Array(text.utf8), timeout: 60) else { break }
            for line in c.readReplies(2000, timeout: 60) {
                if line.contains("\"timeout\"") { reached += 1 } else { other += 1 }
            }
        }
        say("ready reached=\(reached) other=\(other)")
        holdUntilStopped(seconds * 3)
    case "rr-fill":
        // (issue 32) 8 connections ask root's server for rr.flood (which it
        // never answers) 1024 times each with a 300 s deadline: as much of its
        // reply-token slots as this uid can take.
        _ = open(8)
        let ask = Array(String(repeating: #"{"op":"request","type":"rr.flood","timeout":300000,"req":1}"# + "\n", count: 1024).utf8)
        var noResponders = 0, limit = 0
        for c in conns {
            guard c.writeAll(ask + Array((#"{"op":"ping","req":"p"}"# + "\n").utf8), timeout: 30) else { continue }
            // Every request is answered at once (no_responders, limit) or pending: counted until the ping's ok.
            let deadline = monotonic() + 30
            var synced = false
            while !synced && monotonic() < deadline {
                var entry = pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 20)
                c.fill()
                for line in c.takeLines() {
                    if line.contains("\"no_responders\"") { noResponders += 1 } else if line.contains("\"limit\"") { limit += 1 }
                    if line.contains("\"req\":\"p\"") { synced = true }
                }
            }
        }
        say("ready reached=\(8 * 1024 - noResponders - limit) no_responders=\(noResponders) limit=\(limit)")
        holdUntilStopped(seconds * 10)
    default:
        fail("unknown attack \(kind)")
    }
}

/// `--role victim SOCKET SECONDS`: another uid's publish rate (pipelined,
/// 8192 in flight, a type nobody subscribes) and ping round trips (one every
/// 5 ms on a second connection); prints `rate=... p50_ms=... p99_ms=... max_ms=...`.
/// `--role victim SOCKET SECONDS rr1|rr256`: request/response rate (pings
/// with req, 1 or 256 in flight on one connection); prints `rate=...`.
func runRequestVictim(_ path: String, _ seconds: Double, window: Int) {
    guard let c = Conn(path) else { fail("victim cannot connect") }
    let ping = Array(#"{"op":"ping","req":1}"#.utf8) + [0x0A]
    var inFlight = 0, answered = 0
    let start = monotonic(), end = start + seconds
    var out: [UInt8] = []
    while monotonic() < end {
        if inFlight < window {
            out.removeAll(keepingCapacity: true)
            for _ in inFlight..<window { out += ping }
            if !c.writeAll(out) { break }
            inFlight = window
        }
        var entry = pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&entry, 1, 5)
        c.fill()
        let n = c.countLines()
        answered += n
        inFlight -= n
        if c.closed { break }
    }
    say(String(format: "rate=%.0f", Double(answered) / (monotonic() - start)))
}

/// (issue 37) `--role victim SOCKET SECONDS subscribed-timeline`: one
/// connection subscribed to `v.flood`, reading every event as fast as it
/// can; prints `tick t=MONOTONIC events=TOTAL` every 100 ms (the driver's
/// clock), then `events=N`. Its pings come from another process
/// (`ping-timeline`), so the time this one spends reading the flood is not
/// counted in their round trips.
func runSubscribedVictim(_ path: String, _ seconds: Double) {
    guard let subscriber = Conn(path) else { fail("victim cannot connect") }
    guard subscriber.request(#"{"op":"subscribe","type":"v.flood","req":"s"}"#, until: "\"req\":\"s\"") != nil else { fail("victim cannot subscribe") }
    var events = 0
    let start = monotonic(), end = start + seconds
    var nextTick = start
    var entry = pollfd(fd: subscriber.fd, events: Int16(POLLIN), revents: 0)
    var buffer = [UInt8](repeating: 0, count: 65536)
    while monotonic() < end {
        let now = monotonic()
        if now >= nextTick {
            say(String(format: "tick t=%.6f events=%d", now, events))
            nextTick += 0.1
        }
        _ = poll(&entry, 1, 5)
        let n = read(subscriber.fd, &buffer, buffer.count)
        if n == 0 { break }
        if n > 0 { for i in 0..<n where buffer[i] == 0x0A { events += 1 } }
    }
    say("events=\(events)")
}

/// - Parameter timeline: also print `tick t=MONOTONIC acks=TOTAL` every
///   100 ms and `ping t=MONOTONIC ms=RTT` for each ping (CLOCK_MONOTONIC, s,
///   as the driver's clock), for rows that alternate the attack on and off.
func runVictim(_ path: String, _ seconds: Double, publish: Bool, timeline: Bool = false, read: Bool = false) {
    guard let publisher = Conn(path), let pinger = Conn(path) else { fail("victim cannot connect") }
    // (parkfair) `publish-read`: a third connection of the victim's uid
    // subscribes to its type and reads every event: `read=` is what reached it.
    let reader = read ? Conn(path) : nil
    if read {
        guard let reader, reader.request(#"{"op":"subscribe","type":"v.>","req":"r"}"#, until: "\"req\":\"r\"") != nil else { fail("victim's reader cannot subscribe") }
    }
    var eventsRead = 0
    let burst = Array(String(repeating: #"{"op":"publish","type":"v.load","req":1}"# + "\n", count: 64).utf8)
    var inFlight = 0, acknowledged = 0, burstOffset = 0
    let window = 8192
    var rtts: [Double] = []
    var rttTimes: [Double] = []
    var pingSent: Double? = nil, lastPing = 0.0
    let start = monotonic()
    // (1.2) The longest time without an answer to a publish, and the rate in the run's second half.
    var lastAck = start, longestWaitMs = 0.0, lateAcknowledged = 0
    let end = start + seconds
    var fds = [pollfd(fd: publisher.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: pinger.fd, events: Int16(POLLIN), revents: 0)]
    if let reader { fds.append(pollfd(fd: reader.fd, events: Int16(POLLIN), revents: 0)) }
    var nextTick = start
    while monotonic() < end {
        if timeline && monotonic() >= nextTick {
            say(String(format: "tick t=%.6f acks=%d", monotonic(), acknowledged))
            nextTick += 0.1
        }
        // Keep the window full; a burst the socket took only in part is finished first.
        while publish && (burstOffset > 0 || inFlight <= window - 64) {
            let n = burst.withUnsafeBytes { publisher.writeSome(UnsafeRawBufferPointer(rebasing: $0[burstOffset...])) }
            burstOffset += n
            if burstOffset == burst.count { burstOffset = 0; inFlight += 64 }
            if n == 0 { break }
        }
        let now = monotonic()
        if pingSent == nil && now - lastPing >= 0.005 {
            if pinger.writeAll(Array(#"{"op":"ping","req":7}"#.utf8) + [0x0A]) { pingSent = now; lastPing = now }
        }
        _ = poll(&fds, nfds_t(fds.count), publish ? 1 : 5)
        if let reader {
            reader.fill()
            eventsRead += reader.countLines()
        }
        publisher.fill()
        let acks = publisher.countLines()
        acknowledged += acks
        if acks > 0 {
            let t = monotonic()
            longestWaitMs = max(longestWaitMs, (t - lastAck) * 1000)
            lastAck = t
            if t - start >= seconds / 2 { lateAcknowledged += acks }
        }
        inFlight -= acks
        pinger.fill()
        if !pinger.takeLines().isEmpty, let sent = pingSent {
            if timeline { say(String(format: "ping t=%.6f ms=%.3f", sent, (monotonic() - sent) * 1000)) }
            rtts.append((monotonic() - sent) * 1000)
            rttTimes.append(sent - start)
            pingSent = nil
        }
        if publisher.closed || pinger.closed { break }
    }
    if let sent = pingSent { rtts.append((monotonic() - sent) * 1000); rttTimes.append(sent - start) }  // an unanswered ping counts as long as it waited
    if ProcessInfo.processInfo.environment["ATTACK_DEBUG"] != nil {
        FileHandle.standardError.write(Data("victim: slowest pings (ms, at s): \(zip(rtts, rttTimes).sorted { $0.0 > $1.0 }.prefix(5).map { String(format: "%.1f@%.2f", $0.0, $0.1) })\n".utf8))
    }
    rtts.sort()
    func percentile(_ p: Double) -> Double { rtts.isEmpty ? 9999 : rtts[min(rtts.count - 1, Int(Double(rtts.count) * p))] }
    let rate = Double(acknowledged) / (monotonic() - start)
    let lateRate = Double(lateAcknowledged) / max(0.001, monotonic() - start - seconds / 2)
    say(String(format: "rate=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f pings=%d longest_wait_ms=%.1f late_rate=%.0f",
               rate, percentile(0.5), percentile(0.99), rtts.last ?? 9999, rtts.count, longestWaitMs, lateRate)
        + (read ? String(format: " read=%d read_rate=%.0f", eventsRead, Double(eventsRead) / (monotonic() - start)) : ""))
}

/// `--role rr-server SOCKET SECONDS` (issue 32, as root): serves `rr.>`,
/// answers the requests of `rr.mine` at once and reads and drops the rest.
func runRequestServer(_ path: String, _ seconds: Double) {
    guard let c = Conn(path), c.request(#"{"op":"subscribe","type":"rr.>","serve":true,"req":"s"}"#, until: "\"req\":\"s\"") != nil else { fail("rr-server cannot serve") }
    say("ready")
    holdUntilStopped(seconds) {
        var entry = pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&entry, 1, 5)
        c.fill()
        var out = ""
        for line in c.takeLines() where line.hasPrefix(#"{"op":"request""#) && line.contains(#""type":"rr.mine""#) {
            guard let range = line.range(of: "\"reply\":\"") else { continue }
            out += #"{"op":"reply","to":"\#(line[range.upperBound...].prefix(32))","data":"yours"}"# + "\n"
        }
        if !out.isEmpty { _ = c.writeAll(Array(out.utf8)) }
    }
}

/// `--role rr-asker SOCKET COUNT` (issue 32): COUNT requests of `rr.mine`,
/// one at a time; prints `answered= no_responders= other= p50_ms= p99_ms= max_ms=`.
func runRequestAsker(_ path: String, _ count: Int) {
    guard let c = Conn(path) else { fail("rr-asker cannot connect") }
    var answered = 0, noResponders = 0, other = 0
    var times: [Double] = []
    for i in 0..<count {
        let t = monotonic()
        guard let line = c.request(#"{"op":"request","type":"rr.mine","timeout":10000,"req":\#(i)}"#, until: "\"req\":\(i),", timeout: 15) else { other += 1; continue }
        times.append((monotonic() - t) * 1000)
        if line.contains("\"yours\"") { answered += 1 } else if line.contains("\"no_responders\"") { noResponders += 1 } else { other += 1 }
    }
    times.sort()
    func percentile(_ p: Double) -> Double { times.isEmpty ? 9999 : times[min(times.count - 1, Int(Double(times.count) * p))] }
    say(String(format: "answered=%d no_responders=%d other=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f", answered, noResponders, other, percentile(0.5), percentile(0.99), times.last ?? 9999))
}

// MARK: Driver

struct Options {
    var broker = ".build/release/eventbusd"
    var rows: [String] = []
    var attackerUID = 4321
    var victimUID = 4322
    var seconds = 4.0
    /// `--nice N`: the broker, the attackers and the victims at nice N (on a
    /// shared machine, so the others' load does not pass for the broker's).
    var niceness: Int? = nil
}

/// A running child of this program (a role) or of the broker, with its stdout as lines.
final class Child {
    let process = Process()
    let input = Pipe(), output = Pipe()
    var buffer: [UInt8] = []

    init(_ executable: String, _ arguments: [String]) {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        do { try process.run() } catch { fail("cannot run \(executable): \(error)") }
        _ = fcntl(output.fileHandleForReading.fileDescriptor, F_SETFL, O_NONBLOCK)
    }

    /// The next line of output, waiting up to `timeout` s.
    func line(timeout: Double) -> String? {
        let deadline = monotonic() + timeout
        let fd = output.fileHandleForReading.fileDescriptor
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let lf = buffer.firstIndex(of: 0x0A) {
                let text = String(decoding: buffer[..<lf], as: UTF8.self)
                buffer.removeSubrange(...lf)
                return text
            }
            let remaining = deadline - monotonic()
            if remaining <= 0 { return nil }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, Int32(min(remaining, 1) * 1000) + 1)
            let n = read(fd, &chunk, chunk.count)
            if n > 0 { buffer += chunk[0..<n] } else if n == 0 { return nil }
        }
    }

    /// Closes its stdin (the "stop" of a holding role) and waits.
    func stop() {
        try? input.fileHandleForWriting.close()
        let deadline = monotonic() + 20
        while process.isRunning && monotonic() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }
}

/// CPU time of process `pid` (all its threads), s (/proc/PID/stat).
func processCPUSeconds(_ pid: Int32) -> Double {
    let text = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
    guard let close = text.lastIndex(of: ")") else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    return ((Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func value(_ key: String, _ line: String?) -> Double? {
    guard let line, let range = line.range(of: key + "=") else { return nil }
    return Double(line[range.upperBound...].prefix { !$0.isWhitespace })
}

final class Broker {
    let child: Child
    let socket: String
    var pid: Int32 { child.process.processIdentifier }

    /// - Parameters:
    ///   - cpu: run it on that CPU only (taskset), with the attackers.
    ///   - niceness: run it at that nice value (nice(1) execs it: the same
    ///     pid), so the machine's other load does not pass for its latency.
    init(_ path: String, directory: String, options: [String], cpu: Int? = nil, niceness: Int? = nil) {
        socket = directory + "/bus.sock"
        let arguments = ["--socket", socket, "--log-level", "warning"] + options
        if let niceness {
            let pinned = cpu.map { ["/usr/bin/taskset", "-c", String($0)] } ?? []
            child = Child("/usr/bin/nice", ["-n", String(niceness)] + pinned + [path] + arguments)
        } else if let cpu {
            child = Child("/usr/bin/taskset", ["-c", String(cpu), path] + arguments)  // taskset execs it: the same pid
        } else {
            child = Child(path, arguments)
        }
        let deadline = monotonic() + 10
        while monotonic() < deadline {
            if let c = Conn(socket), c.request(#"{"op":"ping","req":0}"#, until: "\"ok\"", timeout: 1) != nil { return }
            usleep(20_000)
        }
        fail("eventbusd did not start")
    }

    func rssMiB() -> Double {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Double(line.filter(\.isNumber)) ?? 0) / 1024
    }

    func cpuSeconds() -> Double { processCPUSeconds(pid) }

    /// Time it ran on a CPU, s (/proc/PID/schedstat, ns: exact where the
    /// clock-tick counts of /proc/PID/stat sample a broker that runs in
    /// short bursts badly).
    func runSeconds() -> Double {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/schedstat", encoding: .utf8)) ?? ""
        return (Double(text.split(separator: " ").first ?? "") ?? 0) / 1e9
    }

    /// `stats` as root; nil when the broker did not answer within 5 s.
    func stats() -> (line: String, ms: Double)? {
        guard let c = Conn(socket) else { return nil }
        let t = monotonic()
        guard let line = c.request(#"{"op":"stats","req":"s"}"#, until: "\"req\":\"s\"", timeout: 5) else { return nil }
        return (line, (monotonic() - t) * 1000)
    }

    /// Sum of `key` over the `clients` entries of `uid`.
    func clientsSum(_ key: String, uid: Int) -> Int {
        guard let c = Conn(socket), let line = c.request(#"{"op":"clients","req":"c"}"#, until: "\"req\":\"c\"", timeout: 10) else { return -1 }
        var sum = 0
        for entry in line.components(separatedBy: "{\"conn\":").dropFirst() where integer("uid", in: entry) == uid {
            sum += integer(key, in: entry) ?? 0
        }
        return sum
    }

    /// Bytes it caused to be written to storage (`write_bytes` of /proc/PID/io).
    func writeBytes() -> Int {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix("write_bytes:") } ?? ""
        return Int(line.filter(\.isNumber)) ?? 0
    }

    func stop() {
        kill(pid, SIGTERM)
        let deadline = monotonic() + 10
        while child.process.isRunning && monotonic() < deadline { usleep(10_000) }
        if child.process.isRunning { kill(pid, SIGKILL) }
    }
}

/// One printed row: measured figures against bounds.
struct Check {
    let row: String, measure: String, value: String, bound: String, ok: Bool
}

nonisolated(unsafe) var checks: [Check] = []
func check(_ row: String, _ measure: String, _ value: String, _ bound: String, _ ok: Bool) {
    checks.append(Check(row: row, measure: measure, value: value, bound: bound, ok: ok))
    FileHandle.standardError.write(Data("attack: \(row): \(measure) = \(value) (bound \(bound)) \(ok ? "ok" : "BROKEN")\n".utf8))
}

let mib = 1024.0 * 1024.0
/// Bytes of `data` in the retained event of the `last-copies` row (its frame just under 1 MiB).
let lastCopyDataBytes = 1_040_000

/// Issue 20's rows for the state file, the state directory, the frames a
/// line reader splits, `stats` and `conn`.
let stateRows = ["statefile-past", "line-split", "statedir", "stats-secret", "conn-ids"]

func runDriver(_ options: Options) {
    let me = CommandLine.arguments[0]
    let seconds = options.seconds
    /// - Parameter cpu: on that CPU only (taskset); the pinned rows put the
    ///   broker and the attackers on CPU 0 and the victim on CPU 1.
    func asUID(_ uid: Int, _ arguments: [String], cpu: Int? = nil, niceness: Int? = options.niceness) -> Child {
        let setpriv = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", me] + arguments
        if let niceness {
            let pinned = cpu.map { ["/usr/bin/taskset", "-c", String($0)] } ?? []
            return Child("/usr/bin/nice", ["-n", String(niceness)] + pinned + ["/usr/bin/setpriv"] + setpriv)
        }
        if let cpu { return Child("/usr/bin/taskset", ["-c", String(cpu), "/usr/bin/setpriv"] + setpriv) }
        return Child("/usr/bin/setpriv", setpriv)
    }
    /// The CPU the victim runs on in a pinned row (nil: unpinned).
    var victimCPU: Int? = nil
    func victim(_ broker: Broker, publish: Bool = true, uid: Int? = nil) -> String? {
        let v = asUID(uid ?? options.victimUID, ["--role", "victim", broker.socket, String(seconds), publish ? "publish" : "ping"], cpu: victimCPU)
        defer { v.stop() }
        return v.line(timeout: seconds + 20)
    }
    var brokersStarted = 0
    func fresh(_ extra: [String], cpu: Int? = nil, niceness: Int? = options.niceness) -> (Broker, String) {
        brokersStarted += 1
        let directory = directory(for: brokersStarted)
        mkdir(directory, 0o755)
        chmod(directory, 0o755)
        return (Broker(options.broker, directory: directory, options: extra, cpu: cpu, niceness: niceness), directory)
    }
    /// (issue 20) Root's request/response rate with `window` requests in flight.
    func requestRate(_ broker: Broker, window: Int) -> Double {
        let v = asUID(0, ["--role", "victim", broker.socket, String(seconds), "rr\(window)"], cpu: victimCPU)
        defer { v.stop() }
        return value("rate", v.line(timeout: seconds + 20)) ?? 0
    }
    /// Runs `body` and returns its result with the broker's CPU share meanwhile (/proc/PID/stat).
    func withShare<T>(_ broker: Broker, _ body: () -> T) -> (T, Double) {
        let cpu0 = broker.runSeconds(), t0 = monotonic()
        let result = body()
        return (result, (broker.runSeconds() - cpu0) / max(0.001, monotonic() - t0))
    }
    func percent(_ share: Double) -> String { String(format: "%.0f %%", share * 100) }
    /// The directory `fresh` makes for the broker numbered `n`.
    func directory(for n: Int) -> String { NSTemporaryDirectory() + "attack-\(getpid())-\(n)" }
    let all = ["keys", "patterns", "flood", "partial", "slow", "connections", "churn", "busy", "replay", "hangup", "statefile", "retained",
               "never-readers", "trickle-readers", "stopped-readers", "stall-once", "last-copies", "partial-memory", "drop-old",
               "never-readers-3", "never-readers-kinds", "types-flood", "trusted-holder", "cost-deep", "cost-arrays", "cost-keys", "cost-escapes", "cost-number", "cost-types", "cost-patterns",
               "groups", "group-members", "group-members-cost", "group-churn", "fair-never-readers", "rr-no-server", "rr-ignored", "rr-forged", "rr-unread", "rr-fill", "rr-answers", "rr-expired", "bridge-watch", "bridge-rr", "bridge-places",
               "flood-subscribed", "cost-deep-8", "cost-arrays-8", "cost-keys-8", "cost-escapes-8"] + stateRows
    for row in options.rows.isEmpty ? all : options.rows {
        // (issue 20) The rows the attack clients' own CPU distorts: broker and
        // attackers on CPU 0, the victim on CPU 1 (taskset), the broker's
        // share of its CPU measured and printed next to the figure.
        let pinned = row.hasPrefix("cost-") || row.hasPrefix("churn") || row.hasPrefix("rr-") || row == "never-readers-3" || row == "drop-old" || row == "never-readers-kinds"
        victimCPU = pinned ? 1 : nil
        let brokerCPU: Int? = pinned ? 0 : nil
        let attackerCPU: Int? = pinned ? 0 : nil
        switch row {
        case "keys":
            let (broker, _) = fresh([])
            // One frame alone, sequentially, to price it: 20 of them (CPU time comes in 10 ms ticks).
            var frame = "{"
            for i in 0..<85_000 { frame += "\"k\(i)\":1," }
            frame += "\"op\":\"ping\",\"req\":1}"
            let c = Conn(broker.socket)!
            let cpu0 = broker.cpuSeconds()
            for _ in 0..<20 { _ = c.request(frame, until: "\"req\":1", timeout: 30) }
            let perFrame = (broker.cpuSeconds() - cpu0) / 20 * 1000
            check(row, "broker CPU per 85,000-key frame (924 KB)", String(format: "%.1f ms", perFrame), "< 50 ms", perFrame < 50)
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "keys", broker.socket, "30"])
            _ = attacker.line(timeout: 30)
            let v = victim(broker, publish: false)
            let done = attacker.line(timeout: 60)
            attacker.stop()
            let maxPing = value("max_ms", v) ?? 9999
            check(row, "another uid's ping, max, while 8 such frames are handled (\(value("answered", done).map { String(Int($0)) } ?? "?") answered)",
                  String(format: "%.1f ms", maxPing), "< 100 ms", maxPing < 100)
            broker.stop()
        case "patterns":
            let (broker, _) = fresh([])
            let rss0 = broker.rssMiB()
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "patterns", broker.socket, "60"])
            let ready = attacker.line(timeout: 120)
            let subscribed = Int(value("subscribed", ready) ?? -1)
            check(row, "subscriptions one uid holds (40 connections x 4096 patterns of 254 bytes)", "\(subscribed)", "<= 16384 (per uid)", subscribed <= 16384 && subscribed > 0)
            let grown = broker.rssMiB() - rss0
            check(row, "broker RSS growth", String(format: "%.1f MiB", grown), "<= 64 MiB", grown <= 64)
            let v = asUID(options.victimUID, ["--role", "victim", broker.socket, "2", "ping"])
            usleep(200_000)
            attacker.stop()  // closes all 40 connections at once
            let vline = v.line(timeout: 30)
            v.stop()
            let maxPing = value("max_ms", vline) ?? 9999
            check(row, "another uid's ping, max, while they are torn down", String(format: "%.1f ms", maxPing), "< 100 ms", maxPing < 100)
            let stats = broker.stats()
            check(row, "stats round trip after teardown", stats.map { String(format: "%.1f ms", $0.ms) } ?? "no answer", "< 100 ms", (stats?.ms ?? 9999) < 100)
            broker.stop()
        case "groups":
            // A uid's group memberships are at most its connection limit
            // (256 by default, PROTOCOL-NOTES "Queue groups"): raised here so
            // the row still measures 10,000 groups of one uid.
            let (broker, _) = fresh(["--max-connections-per-uid", "10000"])
            let idle = victim(broker)
            let rss0 = broker.rssMiB()
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "groups", broker.socket, "120"])
            let ready = attacker.line(timeout: 120)
            let subscribed = Int(value("subscribed", ready) ?? -1)
            check(row, "queue groups one uid holds (40 connections x 250 groups, one member each)", "\(subscribed)", "10000 (<= 16384 subscriptions per uid; --max-connections-per-uid 10000)", subscribed == 10_000)
            let grown = broker.rssMiB() - rss0
            check(row, "broker RSS growth", String(format: "%.1f MiB", grown), "<= 64 MiB", grown <= 64)
            let v = victim(broker)
            let idleRate = value("rate", idle) ?? 1, rate = value("rate", v) ?? 0, p99 = value("p99_ms", v) ?? 9999
            check(row, "another uid's publish rate (idle \(Int(idleRate))/s)", "\(Int(rate))/s", ">= half idle", rate >= idleRate / 2)
            check(row, "another uid's ping p99", String(format: "%.1f ms", p99), "< 100 ms", p99 < 100)
            let pinger = asUID(options.victimUID, ["--role", "victim", broker.socket, "2", "ping"])
            usleep(200_000)
            attacker.stop()  // closes all 40 connections at once
            let pline = pinger.line(timeout: 30)
            pinger.stop()
            let maxPing = value("max_ms", pline) ?? 9999
            check(row, "another uid's ping, max, while the 10,000 groups are torn down", String(format: "%.1f ms", maxPing), "< 100 ms", maxPing < 100)
            broker.stop()
        case "group-members":
            // 4,096 connections of another uid join one group on the victim's
            // type; --max-group-members (default 64) lets the first in. Each
            // victim publish picks one (O(1) amortised: a member found full is
            // passed over until it writes, and these never write), one write(2)
            // to its socket while the members' kernel buffers fill: the bound
            // on members is what keeps that cost a few plain subscribers'.
            // (issue 38, fifth stop) The rate is measured once the members are
            // full: a first run of the victim fills their kernel buffers and
            // the victim's fair share of their queues (about 180,000 events),
            // which plain subscribers of the uid fill as well (the cost of that
            // fill is the quota's, docs/RELIABILITY.md; `group-members-cost`
            // compares the group's cost per event with 8 plain never-readers').
            let (broker, _) = fresh(["--max-connections-per-uid", "5000", "--max-connections", "8192"])
            let idle = victim(broker)
            let rss0 = broker.rssMiB()
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "group-members", broker.socket, "120"])
            let ready = attacker.line(timeout: 120)
            let subscribed = Int(value("subscribed", ready) ?? -1), refused = Int(value("limit_errors", ready) ?? -1)
            check(row, "members of one group one uid holds (4,096 connections try, none reading)", "\(subscribed) (\(refused) refused: limit)",
                  "64 (--max-group-members; --max-connections-per-uid 5000)", subscribed == 64 && refused == 4096 - 64)
            let fill = victim(broker)
            let queued = broker.clientsSum("queued_bytes", uid: options.attackerUID)
            let delivered0 = broker.stats().flatMap { integer("delivered", in: $0.line) } ?? -1
            let v = victim(broker)
            let delivered = (broker.stats().flatMap { integer("delivered", in: $0.line) } ?? -1) - delivered0
            let grown = broker.rssMiB() - rss0
            check(row, "broker RSS growth (members plus what the victim's events queued to them)", String(format: "%.1f MiB", grown), "<= 128 MiB", grown <= 128)
            let idleRate = value("rate", idle) ?? 1, rate = value("rate", v) ?? 0, p99 = value("p99_ms", v) ?? 9999
            check(row, "another uid's publish rate into the full group (idle \(Int(idleRate))/s; the run that filled it \(Int(value("rate", fill) ?? 0))/s, "
                  + "its members then holding \(String(format: "%.1f", Double(queued) / mib)) MiB; \(delivered) delivered in this run)",
                  "\(Int(rate))/s (\(Int(rate * 100 / idleRate)) %)", ">= half idle", rate >= idleRate / 2)
            check(row, "another uid's ping p99", String(format: "%.1f ms", p99), "< 100 ms", p99 < 100)
            let pinger = asUID(options.victimUID, ["--role", "victim", broker.socket, "2", "ping"])
            usleep(200_000)
            attacker.stop()  // closes all 4,096 connections (64 members) at once
            let pline = pinger.line(timeout: 30)
            pinger.stop()
            let maxPing = value("max_ms", pline) ?? 9999
            check(row, "another uid's ping, max, while the 4,096 connections leave", String(format: "%.1f ms", maxPing), "< 100 ms", maxPing < 100)
            broker.stop()
        case "bridge-places":
            // (attacker7) Two brokers whose in-broker links meet on one
            // nats-server: b exports requests of rr.>, a imports them and has
            // root's rr-server (answers rr.mine, reads and drops the rest).
            // uid 4321 on b asks 1,200 requests of rr.slow with 2 min
            // deadlines; a's link asks a's bus for them on one connection
            // (1,024 pending at most). Root's rr.mine from b must still be
            // answered, and the attacker's past its share refused `limit`.
            let port = 20_000 + Int(getpid()) % 20_000 + 2
            guard let nats = NATSServer(port: port) else {
                check(row, "nats-server on 127.0.0.1", "cannot start", "runs", false)
                continue
            }
            defer { nats.stop() }
            func link(_ node: String, _ lines: String) -> String {
                let conf = NSTemporaryDirectory() + "attack-\(getpid())-\(node).conf"
                let text = "nats = nats://127.0.0.1:\(port)\nnode = \(node)\n\(lines)status-file = \(conf).json\n"
                guard (try? text.write(toFile: conf, atomically: true, encoding: .utf8)) != nil else { fail("cannot write \(conf)") }
                return conf
            }
            let (a, _) = fresh(["--bridge", link("a", "import-requests = rr.>\n")])
            let (b, _) = fresh(["--bridge", link("b", "export-requests = rr.>\n")])
            defer { a.stop(); b.stop() }
            let server = asUID(0, ["--role", "rr-server", a.socket, String(seconds * 10 + 60)])
            defer { server.stop() }
            _ = server.line(timeout: 30)
            guard let root = Conn(b.socket) else { fail("cannot connect to b") }
            var k = 0
            func askMine() -> String {
                k += 1
                return root.request(#"{"op":"request","type":"rr.mine","timeout":10000,"req":"m\#(k)"}"#, until: "\"req\":\"m\(k)\"", timeout: 15) ?? "no answer"
            }
            var up = false
            for _ in 0..<300 where !up {
                up = askMine().contains(#""op":"ok""#)
                if !up { usleep(20_000) }
            }
            guard up else { fail("the links never carried rr.mine from b to a") }
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "rr-remote-hoard", b.socket, String(seconds * 10)])
            _ = attacker.line(timeout: 90)
            let t = monotonic()
            let answer = askMine()
            let ms = (monotonic() - t) * 1000
            let answered = answer.contains(#""op":"ok""#)
            var limited = 0
            let until = monotonic() + 30
            while limited < 688 && monotonic() < until {
                if let line = attacker.line(timeout: max(0.01, until - monotonic())) { limited = Int(value("limited", line) ?? Double(limited)) }
            }
            attacker.stop()
            limited = max(limited, Int(value("limited", attacker.line(timeout: 10)) ?? -1))
            check(row, "root's request on b to a's answering server, behind 1,200 of uid 4321's on b that a's server reads and never answers (2 min deadlines)",
                  answered ? String(format: "answered in %.1f ms", ms) : String(answer.prefix(200)), "answered", answered)
            check(row, "uid 4321's requests refused limit at once (a's link gives one origin its fair share of 1,024 places: 512 alone)",
                  "\(limited) of 1200", ">= 688", limited >= 688)
        case "bridge-watch":
            // (attacker round 5) The link inside eventbusd exports ev.> and
            // imports requests of svc.> (it watches the bus's serving patterns
            // under svc.>). Another uid serves 16,000 long patterns there and
            // then serves and drops svc.churn in a loop (each change: the
            // link lists the 16,000 again). Root publishes ev.N one at a time,
            // each waited for on NATS: the link must keep exporting.
            let port = 20_000 + Int(getpid()) % 20_000
            guard let nats = NATSServer(port: port) else {
                check(row, "nats-server on 127.0.0.1", "cannot start", "runs", false)
                continue
            }
            defer { nats.stop() }
            let conf = NSTemporaryDirectory() + "attack-\(getpid())-bridge.conf"
            let link = "nats = nats://127.0.0.1:\(port)\nnode = a\nexport = ev.>\nimport-requests = svc.>\nstatus-file = \(conf).json\n"
            guard (try? link.write(toFile: conf, atomically: true, encoding: .utf8)) != nil else { fail("cannot write \(conf)") }
            let (broker, _) = fresh(["--bridge", conf])
            guard let watcher = NATSSubscriber(port: port, subject: "eventbus.evt.*.ev.>"), let root = Conn(broker.socket) else { fail("cannot watch the link") }
            var published = 0
            /// Root's exports for `window` s (at least one, waited for up to 60 s), one at a time:
            /// (crossed, slowest wait in ms, when it started in s from the window's start, waits
            /// over 100 ms; a stall counts to the wait's end).
            func exports(_ window: Double) -> (crossed: Int, slowest: Double, at: Double, slow: Int) {
                var crossed = 0, slowest = 0.0, at = 0.0, slow = 0
                let before = published
                let start = monotonic(), end = start + max(window, 60)
                while monotonic() < start + window || published == before {
                    published += 1
                    let t = monotonic()
                    guard root.writeAll(Array(#"{"op":"publish","type":"ev.n\#(published)","data":1}"#.utf8 + [0x0A])) else { break }
                    let arrived = watcher.waitForMessage(endingIn: ".ev.n\(published)", timeout: max(0.05, end - t))
                    let waited = (monotonic() - t) * 1000
                    if waited > slowest { slowest = waited; at = t - start }
                    if waited > 100 { slow += 1 }
                    if !arrived { break }
                    crossed += 1
                    usleep(20_000)
                }
                return (crossed, slowest, at, slow)
            }
            // The link is up once an export crosses (one published before it subscribed is lost).
            var up = false
            for _ in 0..<300 where !up {
                guard root.writeAll(Array(#"{"op":"publish","type":"ev.warm","data":1}"#.utf8 + [0x0A])) else { break }
                up = watcher.waitForMessage(endingIn: ".ev.warm", timeout: 0.1)
            }
            guard up else { fail("the link inside eventbusd never exported") }
            let (idleCrossed, idleSlowest, _, _) = exports(2)
            let rss0 = broker.rssMiB()
            // (watchlist) The churn lasts 30 s at least: the link asks a list
            // again only 99x its last round trip later, so a shorter window
            // may hold no list at all after the first (0.1-0.2 s) one.
            let churn = max(seconds * 2, 30)
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "serve-patterns", broker.socket, String(churn + seconds)])
            let ready = attacker.line(timeout: 120)
            let subscribed = Int(value("subscribed", ready) ?? -1)
            check(row, "serving patterns one uid holds under the link's svc.> (4 connections x 4,001, 200 bytes each)", "\(subscribed)",
                  "<= 16384 (per uid)", subscribed > 0 && subscribed <= 16_384)
            // The link lists the 16,004 once and subscribes them on NATS, and
            // nats-server takes 16,004 SUBs: the exports of the first seconds
            // wait behind that (once), measured apart from the churn's.
            let natsCPU0 = processCPUSeconds(nats.process.processIdentifier)
            let (_, first, _, _) = exports(3)
            let natsCPU = processCPUSeconds(nats.process.processIdentifier) - natsCPU0
            check(row, "root's exports, slowest, in the 3 s after they are served (nats-server took \(String(format: "%.2f", natsCPU)) s of CPU for the 16,004 SUBs)",
                  String(format: "%.1f ms", first), "< 5000 ms", first < 5000)
            let cpu0 = broker.cpuSeconds(), t0 = monotonic()
            // (attacker6) Another uid's pings on the same broker meanwhile: the
            // link's request part runs on the broker's loop, and each change
            // was a list of 16,004 read there (70 % of the loop, root's ping
            // p50 1.4 s in a debug build); now re-asked at most every 9x what
            // the last list took. (watchlist) One list of 16,004 took ~0.5 s of
            // the loop in one piece (String.split by grapheme clusters); now
            // tens of ms, and an unchanged list is not read again: the max
            // is checked too.
            let pinger = asUID(options.victimUID, ["--role", "victim", broker.socket, String(churn), "ping"])
            let (crossed, slowest, at, slow) = exports(churn)
            let share = (broker.cpuSeconds() - cpu0) / max(0.001, monotonic() - t0)
            let pline = pinger.line(timeout: 60)
            pinger.stop()
            let pingP99 = value("p99_ms", pline) ?? 9999, pingMax = value("max_ms", pline) ?? 9999
            check(row, "another uid's ping p99 on the broker while they churn",
                  String(format: "%.1f ms", pingP99), "< 25 ms", pingP99 < 25)
            check(row, "another uid's ping max on the broker while they churn (one list of 16,004 in one piece: 0.5 s before watchlist)",
                  String(format: "%.1f ms", pingMax), "< 250 ms", pingMax < 250)
            attacker.stop()
            let rounds = value("rounds", attacker.line(timeout: 30)).map { String(Int($0)) } ?? "?"
            check(row, "root's exports to NATS, slowest, while they churn (\(rounds) changes; \(crossed) crossed, \(slow) over 100 ms, the slowest \(String(format: "%.1f", at)) s in; idle \(idleCrossed), slowest \(String(format: "%.1f", idleSlowest)) ms)",
                  String(format: "%.1f ms", slowest), "< 1000 ms", crossed > 0 && slowest < 1000)
            check(row, "broker CPU (both threads) while they churn", percent(share), "informational", true)
            let grown = broker.rssMiB() - rss0
            check(row, "broker RSS growth", String(format: "%.1f MiB", grown), "<= 64 MiB", grown <= 64)
            watcher.close()
            broker.stop()
            unlink(conf)
        case "group-members-cost":
            // (issue 38, fifth stop) What a full group costs the victim per
            // event against what the same uid imposes without groups: broker
            // CPU (schedstat, so the machine's load does not count) per event
            // the victim publishes, once the attacker's connections are full
            // (a first victim run fills them), minus the same broker's idle
            // figure; next to 64 never-reading members of one group, and, on
            // a fresh broker, next to 8 plain never-reading subscribers of the
            // victim's type. Bound: no more than the 8 plain ones (figures in
            // docs/RELIABILITY.md, fifth stop of issue 38: the group about
            // 2-3 plain never-readers' worth, 8 of them about 1.5x the group).
            func extraNanoseconds(_ kind: String) -> (extra: Double, line: String) {
                let (broker, _) = fresh(["--max-connections-per-uid", "5000", "--max-connections", "8192"])
                defer { broker.stop() }
                func nanosecondsPerEvent(_ body: () -> String?) -> Double {
                    let published0 = broker.stats().flatMap { integer("published", in: $0.line) } ?? 0, cpu0 = broker.runSeconds()
                    _ = body()
                    let published = (broker.stats().flatMap { integer("published", in: $0.line) } ?? 0) - published0
                    return (broker.runSeconds() - cpu0) * 1e9 / Double(max(1, published))
                }
                // The smaller of two runs each: another process on the CPU's
                // other hyperthread slows a run by 30 % and more (seen: 8 plain
                // ones' +241 ns in one run, +356 and +413 ns in others).
                let idle = min(nanosecondsPerEvent { victim(broker) }, nanosecondsPerEvent { victim(broker) })
                let attacker = asUID(options.attackerUID, ["--role", "attacker", kind, broker.socket, "120"])
                defer { attacker.stop() }
                _ = attacker.line(timeout: 120)
                let filling = nanosecondsPerEvent { victim(broker) }
                let full = min(nanosecondsPerEvent { victim(broker) }, nanosecondsPerEvent { victim(broker) })
                return (full - idle, String(format: "idle %.0f ns, filling %.0f ns, full %.0f ns", idle, filling, full))
            }
            let group = extraNanoseconds("group-members"), plain = extraNanoseconds("plain-v8")
            check(row, "broker CPU per victim event added by a full group of 64 never-reading members (\(group.line)), against 8 plain never-reading subscribers of the same uid (\(plain.line))",
                  String(format: "%.0f ns (8 plain: %.0f ns)", group.extra, plain.extra), "<= the 8 plain ones'", group.extra <= plain.extra)
        case "fair-never-readers":
            // (parkfair) No uid slows another through the fair share: the
            // victim publishes as a non-root uid (so its events to another
            // uid's queues are charged to its fair share of them), one
            // connection of its uid reading them; another uid holds N plain
            // never-reading subscribers of the victim's type (64, then 256:
            // --max-connections-per-uid's default). A first victim run fills
            // their queues to the victim's fair share (unmeasured); then the
            // victim's publish rate, what reached its reader, and the broker
            // CPU (schedstat) per victim event over the same broker's idle
            // figure. Before parkfair each full subscriber was tried per
            // event for good (64: +2.9 us per event, rate 43-107k/s against
            // 422k-1.2M idle); now each is parked against the victim's uid
            // at its second refusal (ParkedSubscribers.swift), so the cost
            // does not grow with N.
            func attacked(_ n: Int) {
                let (broker, _) = fresh([])
                defer { broker.stop() }
                func run(_ runSeconds: Double) -> (line: String?, ns: Double) {
                    let published0 = broker.stats().flatMap { integer("published", in: $0.line) } ?? 0, cpu0 = broker.runSeconds()
                    let v = asUID(options.victimUID, ["--role", "victim", broker.socket, String(runSeconds), "publish-read"], cpu: victimCPU)
                    let line = v.line(timeout: runSeconds + 20)
                    v.stop()
                    let published = (broker.stats().flatMap { integer("published", in: $0.line) } ?? 0) - published0
                    return (line, (broker.runSeconds() - cpu0) * 1e9 / Double(max(1, published)))
                }
                let idle = run(seconds)
                let attacker = asUID(options.attackerUID, ["--role", "attacker", "plain-v\(n)", broker.socket, "300"])
                defer { attacker.stop() }
                let ready = attacker.line(timeout: 60)
                let subscribed = Int(value("subscribed", ready) ?? -1)
                let fill = run(2 * seconds)
                let queued = broker.clientsSum("queued_bytes", uid: options.attackerUID)
                let dropped0 = broker.stats().flatMap { integer("dropped", in: $0.line) } ?? 0
                let full = run(seconds)
                let dropped = (broker.stats().flatMap { integer("dropped", in: $0.line) } ?? 0) - dropped0
                let idleRate = value("rate", idle.line) ?? 1, rate = value("rate", full.line) ?? 0
                let idleRead = value("read_rate", idle.line) ?? 1, read = value("read_rate", full.line) ?? 0
                let extra = full.ns - idle.ns
                check(row, "uid \(options.victimUID)'s publish rate with \(subscribed) never-reading subscribers of another uid on its type, full to its fair share "
                      + "(\(String(format: "%.1f", Double(queued) / mib)) MiB queued to them; idle \(Int(idleRate))/s; the filling run \(Int(value("rate", fill.line) ?? 0))/s)",
                      "\(Int(rate))/s (\(Int(rate * 100 / idleRate)) %)", ">= half idle", rate >= idleRate / 2)
                check(row, "events per s reaching the victim's own reader (idle \(Int(idleRead))/s; \(dropped) dropped for the never-readers in the run)",
                      "\(Int(read))/s (\(Int(read * 100 / idleRead)) %)", ">= half idle", read >= idleRead / 2)
                check(row, "broker CPU per victim event added by the \(subscribed) full never-readers (idle \(Int(idle.ns)) ns, filling \(Int(fill.ns)) ns, full \(Int(full.ns)) ns)",
                      String(format: "%.0f ns", extra), "<= 300 ns (not O(N))", extra <= 300)
            }
            attacked(64)
            attacked(256)
        case "group-churn":
            let (broker, _) = fresh([])
            let idle = victim(broker)
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "group-churn", broker.socket, String(seconds * 3)])
            _ = attacker.line(timeout: 60)
            let v = victim(broker)
            attacker.stop()
            let done = attacker.line(timeout: 30)
            let idleRate = value("rate", idle) ?? 1, rate = value("rate", v) ?? 0, p99 = value("p99_ms", v) ?? 9999
            check(row, "another uid's publish rate while 8 connections join and leave a group on its type (\(value("rounds", done).map { String(Int($0)) } ?? "?") rounds of 400 joins; idle \(Int(idleRate))/s)",
                  "\(Int(rate))/s", ">= half idle", rate >= idleRate / 2)
            check(row, "another uid's ping p99", String(format: "%.1f ms", p99), "< 100 ms", p99 < 100)
            broker.stop()
        case "flood", "flood-x":
            let (broker, _) = fresh([])
            let idle = victim(broker)
            let rss0 = broker.rssMiB()
            let attacker = asUID(options.attackerUID, ["--role", "attacker", row, broker.socket, String(seconds * 3)])
            let ready = attacker.line(timeout: 60)
            let sent = value("sent", ready) ?? 0
            let queued = broker.clientsSum("queued_bytes", uid: options.attackerUID)
            let total = broker.stats().flatMap { integer("queued_bytes", in: $0.line) } ?? -1
            check(row, "queued_bytes of 100 connections flooding \(row == "flood" ? "pings" : "`x` lines (error replies)"), never reading (sent \(Int(sent / mib)) MiB)",
                  String(format: "%.1f MiB", Double(queued) / mib), "<= 64 MiB per uid (+1 frame per connection)", Double(queued) <= 64 * mib + 100 * 4096 && queued >= 0)
            check(row, "queued_bytes in total", String(format: "%.1f MiB", Double(total) / mib), "<= 512 MiB (--max-queued)", Double(total) <= 512 * mib)
            let grown = broker.rssMiB() - rss0
            check(row, "broker RSS growth", String(format: "%.1f MiB", grown), "<= 64 MiB queued + 64 MiB", grown <= 128)
            let v = victim(broker)
            let idleRate = value("rate", idle) ?? 1, rate = value("rate", v) ?? 0, p99 = value("p99_ms", v) ?? 9999
            check(row, "another uid's publish rate (idle \(Int(idleRate))/s)", "\(Int(rate))/s", ">= half idle", rate >= idleRate / 2)
            check(row, "another uid's ping p99", String(format: "%.1f ms", p99), "< 100 ms", p99 < 100)
            attacker.stop()
            broker.stop()
        case "busy", "churn", "churn-exact", "rr-no-server", "rr-ignored", "rr-forged", "bridge-rr":
            // This machine's speed drifts by 20 % and more within seconds (a
            // shared host), more than the bound's margin, so the victim's
            // idle and attacked rates are taken in one run of the victim, in
            // alternating 1 s phases: the attacker is SIGSTOPped for the
            // idle ones (its connections stay open) and SIGCONTed for the
            // attacked ones; each attacked phase (its first 150 ms left out)
            // is compared with the mean of the idle phases either side, per
            // second the broker ran (the attackers share its CPU), and the
            // median of the four ratios is checked (the raw one shown too).
            // (attacker7) bridge-rr: rr-no-server's attack on a broker whose
            // link (`--bridge`, the request part on the broker's loop) exports
            // requests of rr.>: each becomes a NATS request (an inbox, an
            // outstanding entry) answered 503 by nats-server, which no
            // machine imports; the loop does the link's work for them.
            var nats: NATSServer? = nil
            var extra: [String] = []
            if row == "bridge-rr" {
                let port = 20_000 + Int(getpid()) % 20_000 + 1
                guard let server = NATSServer(port: port) else {
                    check(row, "nats-server on 127.0.0.1", "cannot start", "runs", false)
                    continue
                }
                nats = server
                let conf = NSTemporaryDirectory() + "attack-\(getpid())-bridge-rr.conf"
                let link = "nats = nats://127.0.0.1:\(port)\nnode = a\nexport-requests = rr.>\nstatus-file = \(conf).json\n"
                guard (try? link.write(toFile: conf, atomically: true, encoding: .utf8)) != nil else { fail("cannot write \(conf)") }
                extra = ["--bridge", conf]
            }
            defer { nats?.stop() }
            let (broker, _) = fresh(extra, cpu: brokerCPU)
            if row == "bridge-rr" {
                // The link is up once a request nobody serves comes back as NATS's no responders.
                guard let root = Conn(broker.socket) else { fail("cannot connect") }
                var up = false
                for k in 0..<300 where !up {
                    let answer = root.request(#"{"op":"request","type":"rr.none","req":"w\#(k)"}"#, until: "\"req\":\"w\(k)\"", timeout: 5) ?? ""
                    up = answer.contains("NATS no responders")
                    if !up { usleep(20_000) }
                }
                guard up else { fail("the link inside eventbusd never asked NATS") }
            }
            let attacker = asUID(options.attackerUID, ["--role", "attacker", row == "bridge-rr" ? "rr-no-server" : row, broker.socket, "60"], cpu: attackerCPU)
            _ = attacker.line(timeout: 30)
            kill(attacker.process.processIdentifier, SIGSTOP)
            let phases = 9, phase = 1.0, lead = 0.5, settle = 0.15
            let v = asUID(options.victimUID, ["--role", "victim", broker.socket, String(lead + Double(phases) * phase + 0.2), "publish-timeline"], cpu: victimCPU)
            var ticks: [(t: Double, acks: Double)] = [], pings: [(t: Double, ms: Double)] = []
            var summary: String? = nil
            /// Takes the victim's lines until `deadline`.
            func collect(until deadline: Double) {
                while summary == nil, monotonic() < deadline, let line = v.line(timeout: max(0.001, deadline - monotonic())) {
                    if line.hasPrefix("tick ") {
                        ticks.append((value("t", line) ?? 0, value("acks", line) ?? 0))
                    } else if line.hasPrefix("ping ") {
                        pings.append((value("t", line) ?? 0, value("ms", line) ?? 9999))
                    } else {
                        summary = line
                    }
                }
            }
            let connected = monotonic() + 5
            while ticks.isEmpty && summary == nil && monotonic() < connected { collect(until: monotonic() + 0.01) }  // its first tick
            let t0 = (ticks.first?.t ?? monotonic()) + lead
            var bounds: [Double] = [], cpu: [Double] = []
            var statsDuringAttack: (line: String, ms: Double)? = nil
            for k in 0...phases {
                collect(until: t0 + Double(k) * phase)
                bounds.append(monotonic())
                cpu.append(broker.runSeconds())
                guard k < phases else { break }
                kill(attacker.process.processIdentifier, k % 2 == 1 ? SIGCONT : SIGSTOP)
                if k == 3 {
                    collect(until: monotonic() + 0.5)
                    statsDuringAttack = broker.stats()
                }
            }
            kill(attacker.process.processIdentifier, SIGCONT)
            collect(until: monotonic() + 20)
            v.stop()
            let rssDuring = broker.rssMiB()
            attacker.stop()
            if row.hasPrefix("rr-") || row == "bridge-rr" {
                // (issue 32) What the attack left held, and the broker's memory.
                let done = attacker.line(timeout: 10)
                check(row, "broker RSS at the end of the attack", String(format: "%.1f MiB", rssDuring), "<= 128 MiB (64 MiB per-uid outbound quota + 64 MiB)", rssDuring <= 128)
                if row == "rr-forged" {
                    check(row, "the live token, tried on 200 other connections, still answers from its own (owner accepted, asker answered)",
                          "\(Int(value("owner_accepted", done) ?? 0)), \(Int(value("asker_answered", done) ?? 0))", "1, 1", value("owner_accepted", done) == 1 && value("asker_answered", done) == 1)
                }
            }
            /// The victim's rate in phase `k`, without its first `settle` s.
            func rate(_ k: Int) -> Double {
                let inside = ticks.filter { $0.t >= bounds[k] + settle && $0.t <= bounds[k + 1] }
                guard let first = inside.first, let last = inside.last, last.t > first.t else { return 0 }
                return (last.acks - first.acks) / (last.t - first.t)
            }
            let rates = (0..<phases).map(rate)
            let shares: [Double] = (0..<phases).map { (k: Int) -> Double in
                let ran: Double = cpu[k + 1] - cpu[k]
                let took: Double = bounds[k + 1] - bounds[k]
                return ran / max(0.001, took)
            }
            let attackedPhases = Array(stride(from: 1, to: phases, by: 2))
            /// Each attacked phase's rate against the mean of the idle phases either side.
            func ratios(_ r: [Double]) -> [Double] {
                attackedPhases.map { (k: Int) -> Double in
                    let around: Double = (r[k - 1] + r[k + 1]) / 2
                    return r[k] / max(1e-9, around)
                }
            }
            /// The lower middle of an even count.
            func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2 - 1 + xs.count % 2] }
            // The attackers share CPU 0 with the broker: the rate per second
            // the broker ran (its share measured in each phase) is what its
            // scheduling gave the victim; the bound is checked on it, the raw
            // rate shown next to it.
            let perBrokerSecond: [Double] = (0..<phases).map { (k: Int) -> Double in rates[k] / max(0.01, shares[k]) }
            let raw = ratios(rates), normalized = ratios(perBrokerSecond)
            func list(_ xs: [Double], _ format: (Double) -> String) -> String { xs.map(format).joined(separator: ", ") }
            if pinned {
                check(row, "broker's CPU share, idle / under attack phases (broker and attackers on CPU 0, victim on CPU 1)",
                      "\(list(stride(from: 0, to: phases, by: 2).map { shares[$0] }) { percent($0) }) / \(list(attackedPhases.map { shares[$0] }) { percent($0) })", "informational", true)
            }
            let what = [
                "busy": "200 connections of one uid pinging as fast as they can",
                "rr-no-server": "200 connections of one uid requesting a type nobody serves as fast as they are answered",
                "bridge-rr": "200 connections of one uid requesting a type the link exports and no machine imports (each a NATS request, 503) as fast as they are answered",
                "rr-ignored": "200 connections of one uid requesting from its own server that never answers (1 s deadlines)",
                "rr-forged": "200 connections of one uid replying with forged, reused, malformed and foreign tokens",
            ][row] ?? "200 connections of one uid churning \(row == "churn-exact" ? "a.b.c" : "a.*.c")"
            check(row, "another uid's publish rate under \(what), 1 s phases on and off, median of 4, per second of broker CPU (idle phases \(list(stride(from: 0, to: phases, by: 2).map { rates[$0] }) { String(Int($0)) })/s; attacked \(list(attackedPhases.map { rates[$0] }) { String(Int($0)) })/s; per broker second \(list(normalized) { String(Int($0 * 100)) }) %; raw \(list(raw) { String(Int($0 * 100)) }) %)",
                  "\(Int(median(normalized) * 100)) % (raw \(Int(median(raw) * 100)) %)", ">= half idle", median(normalized) >= 0.5 && summary != nil)
            let attackedPings = pings.filter { p in attackedPhases.contains { p.t >= bounds[$0] && p.t < bounds[$0 + 1] } }.map(\.ms).sorted()
            let p99 = attackedPings.isEmpty ? 9999 : attackedPings[min(attackedPings.count - 1, Int(Double(attackedPings.count) * 0.99))]
            check(row, "another uid's ping p99 in the attacked phases (\(attackedPings.count) pings)", String(format: "%.1f ms", p99), "< 100 ms", p99 < 100)
            check(row, "stats round trip during the attack", statsDuringAttack.map { String(format: "%.1f ms", $0.ms) } ?? "no answer", "< 100 ms", (statsDuringAttack?.ms ?? 9999) < 100)
            broker.stop()
        case "rr-unread":
            // (issue 32) Answers never read: bounded by the requester uid's outbound quota.
            let (broker, _) = fresh([])
            let idle = victim(broker)
            let rss0 = broker.rssMiB()
            let attacker = asUID(options.attackerUID, ["--role", "attacker", row, broker.socket, String(seconds * 3)])
            let ready = attacker.line(timeout: seconds * 3 + 60)
            let queued = broker.clientsSum("queued_bytes", uid: options.attackerUID)
            let pending = broker.clientsSum("pending", uid: options.attackerUID)
            check(row, "queued_bytes of 20 requesters never reading 32 KiB answers (\(Int(value("written", ready) ?? 0)) requests written, \(Int(value("accepted", ready) ?? 0)) replies accepted, \(Int(value("refused", ready) ?? 0)) refused; \(pending) pending)",
                  String(format: "%.1f MiB", Double(queued) / mib), "<= 64 MiB per uid (+ one answer per connection)", queued >= 0 && Double(queued) <= 64 * mib + 21 * 40_000)
            let grown = broker.rssMiB() - rss0
            check(row, "broker RSS growth", String(format: "%.1f MiB", grown), "<= 64 MiB queued + 64 MiB", grown <= 128)
            let v = victim(broker)
            let idleRate = value("rate", idle) ?? 1, rate = value("rate", v) ?? 0, p99 = value("p99_ms", v) ?? 9999
            check(row, "another uid's publish rate (idle \(Int(idleRate))/s)", "\(Int(rate))/s", ">= half idle", rate >= idleRate / 2)
            check(row, "another uid's ping p99", String(format: "%.1f ms", p99), "< 100 ms", p99 < 100)
            attacker.stop()
            broker.stop()
        case "rr-answers":
            // (attacker round 4) Root asks another uid's server 600 times and
            // does not read; the server answers each with 1 MB. Before, only
            // the requester's uid quota bounded answers, and uid 0 has none.
            let (broker, _) = fresh([])
            let rss0 = broker.rssMiB()
            let attacker = asUID(options.attackerUID, ["--role", "attacker", row, broker.socket, String(seconds * 3)])
            guard attacker.line(timeout: 30) == "serving" else { fail("the rr-answers server did not start") }
            let hoarder = asUID(0, ["--role", "rr-hoarder", broker.socket, "600", String(seconds * 30 + 60)])
            _ = hoarder.line(timeout: 60)
            let ready = attacker.line(timeout: seconds * 10 + 60)
            let queued = broker.clientsSum("queued_bytes", uid: 0)
            check(row, "queued_bytes of root's requester (600 requests to another uid's server, never read; \(Int(value("accepted", ready) ?? -1)) 1 MB answers accepted, \(Int(value("refused", ready) ?? -1)) refused)",
                  String(format: "%.1f MiB", Double(queued) / mib), "<= 8 MiB (--max-outbound) + one answer", queued >= 0 && Double(queued) <= 8 * mib + 1_100_000)
            let grown = broker.rssMiB() - rss0
            check(row, "broker RSS growth", String(format: "%.1f MiB", grown), "<= 64 MiB", grown <= 64)
            hoarder.stop()
            attacker.stop()
            broker.stop()
        case "rr-expired":
            // (attacker round 4) Requests that expire while queued to root's
            // server keep their share until written: before, each round of
            // 2000 reached it (6000 dead requests queued), the share notwithstanding.
            let (broker, _) = fresh([])
            let server = asUID(0, ["--role", "rr-sleeper", broker.socket, String(seconds * 30 + 60)])
            guard server.line(timeout: 30) == "ready" else { fail("rr-sleeper did not start") }
            let attacker = asUID(options.attackerUID, ["--role", "attacker", row, broker.socket, String(seconds * 3)])
            let ready = attacker.line(timeout: 240)
            let reached = Int(value("reached", ready) ?? -1)
            check(row, "requests of another uid queued to root's server that does not read (3 x 2000 asked, 200 ms deadlines, all expired; \(Int(value("other", ready) ?? -1)) no_responders or limit)",
                  "\(reached)", "<= 2048 (its fair share of the 4096 slots) + what the kernel's socket buffer took (<= 2600)", reached >= 0 && reached <= 2600)
            let queued = broker.clientsSum("queued_bytes", uid: 0)
            check(row, "root's server's queued_bytes", String(format: "%.1f MiB", Double(queued) / mib), "<= 3 MiB", queued >= 0 && Double(queued) <= 3 * mib)
            attacker.stop()
            server.stop()
            broker.stop()
        case "rr-fill":
            // (issue 32) Another uid fills root's server's reply-token slots with
            // requests it never answers: root's own requests still get there.
            let (broker, _) = fresh([])
            let server = asUID(0, ["--role", "rr-server", broker.socket, String(seconds * 10 + 60)])
            guard server.line(timeout: 30) == "ready" else { fail("rr-server did not start") }
            let rss0 = broker.rssMiB()
            let before = asUID(0, ["--role", "rr-asker", broker.socket, "200"])
            let baseline = before.line(timeout: 60)
            before.stop()
            let attacker = asUID(options.attackerUID, ["--role", "attacker", row, broker.socket, String(seconds * 10)])
            let ready = attacker.line(timeout: 120)
            let reached = Int(value("reached", ready) ?? -1)
            check(row, "requests of another uid root's server holds (8 x 1024 asked, 300 s deadlines; \(Int(value("no_responders", ready) ?? -1)) no_responders, \(Int(value("limit", ready) ?? -1)) limit)",
                  "\(reached)", "<= 2048 (its fair share: about half of the 4096 a connection may hold)", reached >= 0 && reached <= 2048)
            let asker = asUID(0, ["--role", "rr-asker", broker.socket, "200"])
            let during = asker.line(timeout: 120)
            asker.stop()
            let answered = Int(value("answered", during) ?? 0)
            check(row, "root's requests to its server answered meanwhile (before the attack: \(Int(value("answered", baseline) ?? 0)) of 200, p99 \(value("p99_ms", baseline).map { String(format: "%.2f ms", $0) } ?? "?"))",
                  "\(answered) of 200 (\(Int(value("no_responders", during) ?? 0)) no_responders)", "200 of 200", answered == 200)
            let p99 = value("p99_ms", during) ?? 9999
            check(row, "root's request round trip p99 meanwhile", String(format: "%.2f ms", p99), "< 100 ms", p99 < 100)
            let grown = broker.rssMiB() - rss0
            check(row, "broker RSS growth", String(format: "%.1f MiB", grown), "<= 64 MiB", grown <= 64)
            attacker.stop()
            server.stop()
            broker.stop()
        case "flood-subscribed":
            // (issue 37, item 4) Root subscribes to `v.flood` and pings every
            // 5 ms while 8 connections of another uid flood that type. 1 s
            // phases, the attacker SIGSTOPped for the idle ones and SIGCONTed
            // for the attacked ones (as busy/churn), so both p99s come from
            // one run of the same victim; the reader of the events and the
            // pinger are two processes (reading 500k events/s, one process
            // answered its own pings late). All of them and the broker run at
            // nice -15: on a shared machine (load 20-30 while others build) a
            // busy process waits on the run queue for tens of ms, which is
            // the kernel's latency, not the broker's. Three busy processes
            // (broker, attacker, reader) on two CPUs still preempt each
            // other: the round trip has the kernel's time slices in it
            // (docs/RELIABILITY.md "Root's ping under another uid's flood").
            let (broker, _) = fresh([], niceness: -15)
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "flood-type", broker.socket, "60"], niceness: -15)
            _ = attacker.line(timeout: 30)
            kill(attacker.process.processIdentifier, SIGSTOP)
            let phases = 9, phase = 1.0, lead = 0.5
            let length = String(lead + Double(phases) * phase + 0.2)
            let reader = asUID(0, ["--role", "victim", broker.socket, length, "subscribed-timeline"], niceness: -15)
            let v = asUID(0, ["--role", "victim", broker.socket, length, "ping-timeline"], niceness: -15)
            var pings: [(t: Double, ms: Double)] = [], ticks: [(t: Double, events: Double)] = []
            var summary: String? = nil
            /// Takes the pinger's lines, and the reader's, until `deadline`.
            func collect(until deadline: Double) {
                repeat {
                    while summary == nil, let line = v.line(timeout: max(0.001, min(0.01, deadline - monotonic()))) {
                        if line.hasPrefix("ping ") {
                            pings.append((value("t", line) ?? 0, value("ms", line) ?? 9999))
                        } else if !line.hasPrefix("tick ") {
                            summary = line
                        }
                        if monotonic() >= deadline { break }
                    }
                    while let line = reader.line(timeout: 0.0001), line.hasPrefix("tick ") {
                        ticks.append((value("t", line) ?? 0, value("events", line) ?? 0))
                    }
                } while summary == nil && monotonic() < deadline
            }
            let connected = monotonic() + 5
            while ticks.isEmpty && summary == nil && monotonic() < connected { collect(until: monotonic() + 0.01) }
            let t0 = (ticks.first?.t ?? monotonic()) + lead
            var bounds: [Double] = []
            for k in 0...phases {
                collect(until: t0 + Double(k) * phase)
                bounds.append(monotonic())
                guard k < phases else { break }
                kill(attacker.process.processIdentifier, k % 2 == 1 ? SIGCONT : SIGSTOP)
            }
            kill(attacker.process.processIdentifier, SIGCONT)
            collect(until: monotonic() + 20)
            v.stop()
            reader.stop()
            attacker.stop()
            let stats = broker.stats()
            func p99(_ odd: Bool) -> (Double, Int) {
                let inside = pings.filter { p in (0..<phases).contains { ($0 % 2 == 1) == odd && p.t >= bounds[$0] && p.t < bounds[$0 + 1] } }.map(\.ms).sorted()
                return (inside.isEmpty ? 9999 : inside[min(inside.count - 1, Int(Double(inside.count) * 0.99))], inside.count)
            }
            /// Events root received per second in phase `k`.
            func eventRate(_ k: Int) -> Int {
                let inside = ticks.filter { $0.t >= bounds[k] && $0.t <= bounds[k + 1] }
                guard let first = inside.first, let last = inside.last, last.t > first.t else { return 0 }
                return Int((last.events - first.events) / (last.t - first.t))
            }
            if ProcessInfo.processInfo.environment["ATTACK_DEBUG"] != nil {
                let slowest = pings.sorted { $0.ms > $1.ms }.prefix(12).map { p -> String in
                    let k = bounds.lastIndex { $0 <= p.t } ?? 0
                    return String(format: "%.1f ms in phase %d at +%.3f s", p.ms, k, p.t - bounds[k])
                }
                FileHandle.standardError.write(Data("flood-subscribed: slowest pings: \(slowest.joined(separator: "; "))\n".utf8))
            }
            let idle = p99(false), attacked = p99(true)
            let delivered = stats.flatMap { integer("delivered", in: $0.line) } ?? -1, dropped = stats.flatMap { integer("dropped", in: $0.line) } ?? -1
            check(row, "root's ping p99 in the idle phases (\(idle.1) pings)", String(format: "%.1f ms", idle.0), "informational", summary != nil)
            check(row, "root's ping p99 while 8 connections of another uid flood v.flood, which root subscribes to (\(attacked.1) pings; events root read per s in the attacked phases: \(stride(from: 1, to: phases, by: 2).map { String(eventRate($0)) }.joined(separator: ", ")); broker delivered \(delivered), dropped \(dropped))",
                  String(format: "%.1f ms", attacked.0), "<= 5 ms", attacked.0 <= 5 && summary != nil)
            broker.stop()
        case "never-readers", "trickle-readers", "stopped-readers":
            // (1.2 flow control) No uid slows another's publishers: root's
            // publish rate next to a subscriber of `>` of another uid that
            // never reads, reads a byte a second, or is SIGSTOPped.
            // (attacker7) Judged by the broker's CPU per root event (schedstat)
            // over the same broker's idle figure, the median of three rounds
            // (idle run; the attacker joins; a filling run, unmeasured; the
            // attacked run; the attacker leaves): root's publish rate alone,
            // one idle run against one attacked run, swung 377k-2.1M/s
            // between idle runs of one broker on a loaded 2-CPU machine
            // (42-81 % "of idle" before any change), while the broker's CPU
            // per event stayed within noise (the never-reader is parked:
            // ParkedSubscribers.swift). The rates stay, informational.
            let (broker, _) = fresh([])
            func run() -> (line: String?, ns: Double) {
                let published0 = broker.stats().flatMap { integer("published", in: $0.line) } ?? 0, cpu0 = broker.runSeconds()
                let v = asUID(0, ["--role", "victim", broker.socket, String(seconds / 2), "publish"], cpu: victimCPU)
                let line = v.line(timeout: seconds / 2 + 20)
                v.stop()
                let published = (broker.stats().flatMap { integer("published", in: $0.line) } ?? 0) - published0
                return (line, (broker.runSeconds() - cpu0) * 1e9 / Double(max(1, published)))
            }
            var idle: [(line: String?, ns: Double)] = [], attacked: [(line: String?, ns: Double)] = []
            for _ in 0..<3 {
                idle.append(run())
                let attacker = asUID(options.attackerUID, ["--role", "attacker", row == "trickle-readers" ? "trickle-read" : "never-read", broker.socket, String(seconds * 2 + 20)])
                _ = attacker.line(timeout: 30)
                if row == "stopped-readers" { kill(attacker.process.processIdentifier, SIGSTOP) }
                _ = run()
                attacked.append(run())
                if row == "stopped-readers" { kill(attacker.process.processIdentifier, SIGCONT) }
                attacker.stop()
            }
            func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
            let what = ["never-readers": "never reads", "trickle-readers": "reads one byte a second", "stopped-readers": "is SIGSTOPped"][row]!
            let idleNs = median(idle.map(\.ns)), attackedNs = median(attacked.map(\.ns))
            let rates = { (runs: [(line: String?, ns: Double)]) in runs.map { String(Int(value("rate", $0.line) ?? 0)) }.joined(separator: ", ") }
            let p99 = attacked.map { value("p99_ms", $0.line) ?? 9999 }.max() ?? 9999
            let stats = broker.stats()
            check(row, "root's publish rate alone, then next to a subscriber of > of another uid that \(what), three rounds (the machine's load moves it)",
                  "\(rates(idle)) / \(rates(attacked)) per s", "informational", !attacked.isEmpty)
            check(row, "broker CPU per root event added by that subscriber, median of three rounds (idle \(Int(idleNs)) ns, attacked \(Int(attackedNs)) ns)",
                  String(format: "%.0f ns", attackedNs - idleNs), "<= 300 ns", attackedNs - idleNs <= 300)
            check(row, "root's ping p99 (the worst attacked run)", String(format: "%.1f ms", p99), "< 100 ms", p99 < 100)
            let holds = stats.flatMap { integer("holds", in: $0.line) } ?? -1
            check(row, "publishers held (stats.holds)", "\(holds)", "0 (no uid holds another's)", holds == 0)
            broker.stop()
        case "cost-deep", "cost-arrays", "cost-keys", "cost-escapes", "cost-number", "cost-types", "cost-patterns",
             "cost-deep-8", "cost-arrays-8", "cost-keys-8", "cost-escapes-8", "cost-number-8":
            // (issue 20) Fair share by cost: root's request/response rate with
            // 1 and with 256 requests in flight next to one connection of
            // another uid sending expensive frames. (issue 37) `-8`: next to 8
            // connections of it (one large frame is not one piece of work:
            // the broker validates frames as their bytes arrive).
            let eight = row.hasSuffix("-8")
            let shape = ["cost-deep": "1 MiB frames of 509-deep nesting", "cost-arrays": "frames of 100k-element arrays",
                         "cost-keys": "frames of 85k keys", "cost-escapes": "1 MiB of \\u00e9 escapes per frame",
                         "cost-number": "a 1 MiB number per frame", "cost-types": "publishes to random three-segment types",
                         "cost-patterns": "subscribe + unsubscribe of random patterns"][eight ? String(row.dropLast(2)) : row]!
            let what = shape
            let (broker, _) = fresh([], cpu: brokerCPU)
            let idle1 = requestRate(broker, window: 1), idle256 = requestRate(broker, window: 256)
            let attacker = asUID(options.attackerUID, ["--role", "attacker", row, broker.socket, String(seconds * 2 + 10)], cpu: attackerCPU)
            _ = attacker.line(timeout: 60)
            usleep(300_000)
            let (rates, share) = withShare(broker) { (requestRate(broker, window: 1), requestRate(broker, window: 256)) }
            let answered = Conn(broker.socket)?.request(#"{"op":"ping","req":"p"}"#, until: "\"req\":\"p\"") != nil
            attacker.stop()
            for (window, idle, rate) in [(1, idle1, rates.0), (256, idle256, rates.1)] {
                check(row, "root's request rate, \(window) in flight, next to \(eight ? "8 connections" : "one connection") of another uid sending \(what) (idle \(Int(idle))/s; broker's CPU share \(percent(share)))",
                      "\(Int(rate))/s (\(Int(rate * 100 / max(1, idle))) %)", ">= 50 % of idle", rate >= 0.5 * idle)
            }
            check(row, "root's ping answered afterwards", answered ? "yes" : "no", "yes", answered)
            broker.stop()
        case "never-readers-3":
            // (issue 20) 250 never-reading drop-new subscribers of > from each of 3 uids.
            let (broker, _) = fresh([], cpu: brokerCPU)
            let (idle, idleShare) = withShare(broker) { victim(broker, uid: 0) }
            var attackers: [Child] = []
            var accepted: [Int] = []
            for k in 0..<3 {
                let a = asUID(options.attackerUID + 200 + k, ["--role", "attacker", "never-read-250", broker.socket, String(seconds + 60)], cpu: attackerCPU)
                accepted.append(Int(value("accepted", a.line(timeout: 60)) ?? -1))
                attackers.append(a)
            }
            // Fill their queues first (root publishes 1 KiB events to them).
            let filler = Conn(broker.socket)!
            let pad = String(repeating: "f", count: 1000)
            let fill = Array(String(repeating: #"{"op":"publish","type":"v.fill","data":"\#(pad)"}"# + "\n", count: 2000).utf8)
            for _ in 0..<8 { _ = filler.writeAll(fill, timeout: 60) }
            _ = filler.request(#"{"op":"ping","req":"f"}"#, until: "\"req\":\"f\"", timeout: 60)
            let (v, share) = withShare(broker) { victim(broker, uid: 0) }
            let stats = broker.stats()
            for a in attackers { a.stop() }
            let idleRate = value("rate", idle) ?? 1, rate = value("rate", v) ?? 0
            let dropped = stats.flatMap { integer("dropped", in: $0.line) } ?? -1
            check(row, "root's publish rate next to \(accepted.map(String.init).joined(separator: " + ")) never-reading drop-new subscribers of > (3 uids; idle \(Int(idleRate))/s; broker's CPU share \(percent(idleShare)) idle, \(percent(share)) meanwhile)",
                  "\(Int(rate))/s (\(Int(rate * 100 / idleRate)) %)", ">= 50 % of idle", rate >= 0.5 * idleRate)
            check(row, "events dropped (stats.dropped)", "\(dropped)", "> 0", dropped > 0)
            broker.stop()
        case "never-readers-kinds":
            // (issue 37) 200 never-reading subscribers of > of another uid under
            // each overflow kind, and 50 `wait` ones reading a byte every 0.9 s:
            // root's publish rate against the mean of an idle run before the
            // attackers connect and one after they are gone (the same broker).
            // Their queues are filled first, then left 1.2 s (past the 1 s
            // --stall-timeout, after which a drop-old one is parked).
            for (k, kind) in ["drop-new", "wait", "drop-old", "disconnect", "trickle"].enumerated() {
                let (broker, _) = fresh([], cpu: brokerCPU)
                let (idleBefore, idleShare) = withShare(broker) { victim(broker, uid: 0) }
                let uid = options.attackerUID + 300 + k
                let attacker = asUID(uid, ["--role", "attacker", kind == "trickle" ? "trickle-read-50" : "never-read-200-\(kind)", broker.socket, String(seconds * 3 + 90)], cpu: attackerCPU)
                let accepted = Int(value("accepted", attacker.line(timeout: 60)) ?? -1)
                let filler = Conn(broker.socket)!
                let pad = String(repeating: "f", count: 1000)
                let fill = Array(String(repeating: #"{"op":"publish","type":"v.fill","data":"\#(pad)"}"# + "\n", count: 2000).utf8)
                for _ in 0..<4 { _ = filler.writeAll(fill, timeout: 60) }
                _ = filler.request(#"{"op":"ping","req":"f"}"#, until: "\"req\":\"f\"", timeout: 60)
                usleep(1_200_000)
                _ = filler.writeAll(fill, timeout: 60)
                _ = filler.request(#"{"op":"ping","req":"g"}"#, until: "\"req\":\"g\"", timeout: 60)
                let (v, share) = withShare(broker) { victim(broker, uid: 0) }
                let stats = broker.stats()
                attacker.stop()
                usleep(300_000)
                let idleAfter = victim(broker, uid: 0)
                let idleRate = ((value("rate", idleBefore) ?? 1) + (value("rate", idleAfter) ?? 1)) / 2, rate = value("rate", v) ?? 0
                let dropped = stats.flatMap { integer("dropped", in: $0.line) } ?? -1
                let what = kind == "trickle" ? "\(accepted) wait subscribers of > reading a byte every 0.9 s" : "\(accepted) never-reading \(kind) subscribers of >"
                check(row, "root's publish rate next to \(what) (uid \(uid); idle \(Int(value("rate", idleBefore) ?? 0))/s before, \(Int(value("rate", idleAfter) ?? 0))/s after; broker's CPU share \(percent(idleShare)) idle, \(percent(share)) meanwhile; dropped \(dropped))",
                      "\(Int(rate))/s (\(Int(rate * 100 / idleRate)) %)", ">= 80 % of idle", rate >= 0.8 * idleRate)
                broker.stop()
            }
        case "types-flood":
            // (issue 37) Another uid publishing 70,000 distinct types: root's
            // types and their counters stay; the time of a `types` answer.
            let (broker, _) = fresh([])
            let root = Conn(broker.socket)!
            for _ in 0..<3 { _ = root.request(#"{"op":"publish","type":"root.plain","req":"a"}"#, until: "\"req\":\"a\"") }
            _ = root.request(#"{"op":"publish","type":"root.kept","retain":true,"req":"b"}"#, until: "\"req\":\"b\"")
            /// The `published` and `last_seq` of root's two types in a `types` answer of `limit`, and its broker CPU time.
            func rootTypes(limit: Int) -> (String, Double) {
                let cpu0 = broker.cpuSeconds()
                let reply = root.request(#"{"op":"types","limit":\#(limit),"req":"t"}"#, until: "\"req\":\"t\"", timeout: 60) ?? ""
                let ms = (broker.cpuSeconds() - cpu0) * 1000
                let found = ["root.plain", "root.kept"].map { name -> String in
                    guard let at = reply.range(of: #"{"type":"\#(name)""#) else { return "\(name) missing" }
                    let entry = reply[at.lowerBound...].prefix { $0 != "}" }
                    return "\(name) published=\(integer("published", in: String(entry)) ?? -1) last_seq=\(integer("last_seq", in: String(entry)) ?? -1)"
                }
                return (found.joined(separator: ", "), ms)
            }
            let (before, _) = rootTypes(limit: 100_000)
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "types-70000", broker.socket, "30"])
            let ready = attacker.line(timeout: 120)
            let (after, msAll) = rootTypes(limit: 100_000)
            let (_, ms1000) = rootTypes(limit: 1000)
            attacker.stop()
            check(row, "root's types after another uid published \(Int(value("published", ready) ?? -1)) distinct types (before: \(before))", after, "unchanged", after == before && !before.contains("missing"))
            check(row, "broker CPU of a types answer, limit 1000 (limit 100,000: \(String(format: "%.0f", msAll)) ms, 65,536 types listed)", String(format: "%.1f ms", ms1000), "< 20 ms", ms1000 < 20)
            broker.stop()
        case "trusted-holder":
            // (issue 37) A uid with `allow hold` (as the bridge's) whose one
            // subscriber of > reads about 200 KB every 0.9 s: held for 95 % of
            // a --trusted-hold-window (1 s here) it is behind for root, whose
            // rate over the victim's run is compared with an idle run.
            let policyPath = NSTemporaryDirectory() + "attack-\(getpid())-hold.conf"
            _ = try? "allow hold - user=\(options.attackerUID)\n".write(toFile: policyPath, atomically: true, encoding: .utf8)
            chmod(policyPath, 0o644)
            let (broker, _) = fresh(["--policy", policyPath, "--trusted-hold-window", "1s"])
            let idle = victim(broker, uid: 0)
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "hold-trickle", broker.socket, String(seconds * 2 + 30)])
            _ = attacker.line(timeout: 30)
            let v = victim(broker, uid: 0)
            let stats = broker.stats()
            attacker.stop()
            let idleRate = value("rate", idle) ?? 1, rate = value("rate", v) ?? 0
            let stalls = stats.flatMap { integer("stalls", in: $0.line) } ?? -1
            check(row, "root's publish rate over \(Int(seconds)) s next to a subscriber of > with allow hold reading 200 KB every 0.9 s (--trusted-hold-window 1s; idle \(Int(idleRate))/s; stats.stalls \(stalls))",
                  "\(Int(rate))/s (\(Int(rate * 100 / idleRate)) %)", ">= 50 % of idle", rate >= 0.5 * idleRate && stalls >= 1)
            unlink(policyPath)
            broker.stop()
        case "drop-old":
            // (issue 20) drop-old between queued replies: each drop must cost
            // O(1), not O(replies queued before the oldest event).
            let (broker, _) = fresh([], cpu: brokerCPU)
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "drop-old-loop", broker.socket, String(seconds + 5)], cpu: attackerCPU)
            let ready = attacker.line(timeout: 90)
            let cpu0 = broker.runSeconds(), t0 = monotonic()
            let v = victim(broker, publish: false, uid: 0)
            let cpu = broker.runSeconds() - cpu0, wall = monotonic() - t0
            let stats = broker.stats()
            attacker.stop()
            let p99 = value("p99_ms", v) ?? 9999, maxPing = value("max_ms", v) ?? 9999
            check(row, "root's ping p99 next to 8 drop-old echo connections of one uid with (publish to self + ping) pairs unread (\(Int((value("sent", ready) ?? 0) / mib)) MiB) and a publisher to them (max \(String(format: "%.1f", maxPing)) ms)",
                  String(format: "%.1f ms", p99), "< 100 ms", p99 < 100)
            let dropped = stats.flatMap { integer("dropped", in: $0.line) } ?? -1
            check(row, "events dropped (stats.dropped)", "\(dropped)", "> 0 (drop-old at work)", dropped > 0)
            check(row, "broker CPU share meanwhile", String(format: "%.0f %%", cpu * 100 / wall), "informational", true)
            broker.stop()
        case "stall-once":
            // (1.2) A same-uid subscriber that never reads holds a flooding
            // publisher once, for at most the stall timeout (1 s) + 100 ms; then it runs on.
            let (broker, _) = fresh([])
            let idle = victim(broker)
            let stalled = asUID(options.victimUID, ["--role", "attacker", "never-read-1", broker.socket, String(seconds + 20)])
            _ = stalled.line(timeout: 30)
            let v = victim(broker)
            let wait = value("longest_wait_ms", v) ?? 9999, late = value("late_rate", v) ?? 0, idleRate = value("rate", idle) ?? 1
            let stats = broker.stats()
            check(row, "the publisher's longest wait (a same-uid subscriber never reads; --stall-timeout 1s)", String(format: "%.0f ms", wait), "<= 1100 ms", wait <= 1100)
            check(row, "its publish rate in the run's second half (idle \(Int(idleRate))/s)", "\(Int(late))/s (\(Int(late * 100 / idleRate)) %)", ">= 90 % of idle", late >= 0.9 * idleRate)
            let stalls = stats.flatMap { integer("stalls", in: $0.line) } ?? -1
            check(row, "stalls (stats.stalls)", "\(stalls)", "1", stalls == 1)
            stalled.stop()
            broker.stop()
        case "partial":
            let (broker, _) = fresh([])
            let rss0 = broker.rssMiB()
            // One uid with 300 connections, and 7 more uids with 64 each: over the total too.
            var attackers = [asUID(options.attackerUID, ["--role", "attacker", "partial", broker.socket, "20"])]
            let first = attackers[0].line(timeout: 60)
            for k in 1...7 { attackers.append(asUID(options.attackerUID + 100 + k, ["--role", "attacker", "partial", broker.socket, "20"])) }
            for a in attackers.dropFirst() { _ = a.line(timeout: 60) }
            let inbound = broker.clientsSum("inbound_bytes", uid: options.attackerUID)
            check(row, "connections of one uid sending 1 MiB - 4 bytes without LF: accepted",
                  "\(Int(value("accepted", first) ?? -1)) of 300", "<= 256 (per uid)", (value("accepted", first) ?? 999) <= 256)
            check(row, "incomplete-frame bytes held for that uid", String(format: "%.1f MiB", Double(inbound) / mib), "<= 16 MiB + 1 frame", Double(inbound) <= 17 * mib)
            let total = (try? broker.clientsTotal("inbound_bytes")) ?? -1
            if ProcessInfo.processInfo.environment["ATTACK_DEBUG"] != nil {
                let perUID = (0...7).map { k in broker.clientsSum("inbound_bytes", uid: k == 0 ? options.attackerUID : options.attackerUID + 100 + k) / (1 << 20) }
                FileHandle.standardError.write(Data("partial: MiB held per uid \(perUID)\n".utf8))
            }
            // Over --max-inbound only the uids above their share stop; later uids still
            // get their share: at most twice the budget, plus one frame per throttled uid.
            check(row, "incomplete-frame bytes held in total (8 uids)", String(format: "%.1f MiB", Double(total) / mib), "<= 2 x 64 MiB + 1 frame per uid", Double(total) <= 136 * mib)
            let grown = broker.rssMiB() - rss0
            check(row, "broker RSS growth", String(format: "%.1f MiB", grown), "<= 64 MiB inbound + 64 MiB", grown <= 128)
            let v = victim(broker)
            let p99 = value("p99_ms", v) ?? 9999
            check(row, "another uid's ping p99", String(format: "%.1f ms", p99), "< 100 ms", p99 < 100)
            for a in attackers { a.stop() }
            broker.stop()
        case "last-copies", "partial-memory":
            // (issue 20) What the broker holds against what the quotas count, and
            // what it gives back once the attackers are gone.
            let (broker, _) = fresh([])
            if row == "last-copies" {
                let root = Conn(broker.socket)!
                let data = String(repeating: "m", count: lastCopyDataBytes)
                guard root.request(#"{"op":"publish","type":"mem.big","retain":true,"req":"r","data":"\#(data)"}"#, until: "\"req\":\"r\"")?.contains("\"ok\"") == true else {
                    fail("the 1 MiB retained event was refused")
                }
            }
            usleep(300_000)
            let rss0 = broker.rssMiB()
            let kind = row == "last-copies" ? "last-copies" : "partial-200"
            let attacker = asUID(options.attackerUID, ["--role", "attacker", kind, broker.socket, "60"])
            let ready = attacker.line(timeout: 90)
            let rss1 = broker.rssMiB()
            let queued = Double(broker.stats().flatMap { integer("queued_bytes", in: $0.line) } ?? -1) / mib
            let inbound = Double((try? broker.clientsTotal("inbound_bytes")) ?? -1) / mib
            let counted = queued + inbound
            let grown = rss1 - rss0
            // The constant: per connection 24 KiB the quotas do not count: the
            // chunk slack (a 4 KiB reply chunk and a 16 KiB event chunk may
            // stay while their last frames are written, OutboundQueue.swift)
            // and about 4 KiB of its records (Connection, the server's, epoll).
            let connections = value("accepted", ready) ?? 250
            let slack = connections * 24 / 1024
            let what = row == "last-copies"
                ? "250 connections of one uid with last: true on a 1 MiB retained event, each copy read but for its tail (\(Int(value("copies", ready) ?? -1)) got theirs)"
                : "200 connections of one uid each with an incomplete frame of 1 MiB - 4 bytes"
            check(row, "broker RSS growth against what the quotas count (\(what); queued \(String(format: "%.1f", queued)) MiB, inbound \(String(format: "%.1f", inbound)) MiB)",
                  String(format: "%.1f MiB for %.1f MiB counted", grown, counted), String(format: "<= 1.25 x counted + %.0f MiB", slack),
                  counted >= 0 && grown <= 1.25 * counted + slack)
            attacker.stop()
            let deadline = monotonic() + 20
            while monotonic() < deadline, let stats = broker.stats(), integer("connections", in: stats.line) ?? 0 > 1 { usleep(50_000) }
            usleep(1_500_000)  // the trim is held back for at most 1 s after the previous one
            _ = broker.stats()
            usleep(100_000)
            let left = broker.rssMiB() - rss0
            check(row, "broker RSS once the attackers are gone, above the start (\(String(format: "%.1f", rss0)) MiB; peak \(String(format: "%.1f", rss1)) MiB)",
                  String(format: "%.1f MiB", left), "<= 4 MiB", left <= 4)
            broker.stop()
        case "slow":
            let (broker, _) = fresh(["--frame-timeout", "3s"])
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "slow", broker.socket, "6"])
            let ready = attacker.line(timeout: 60)
            let done = attacker.line(timeout: 30)
            attacker.stop()
            check(row, "connections of one uid accepted of 400", "\(Int(value("accepted", ready) ?? -1))", "<= 256 (per uid)", (value("accepted", ready) ?? 999) <= 256)
            let stalled = Int(value("stalled", done) ?? -1), timedOut = Int(value("timed_out", done) ?? -2)
            check(row, "stalled incomplete frames closed with timeout (--frame-timeout 3s, after \(value("after", done).map { String($0) } ?? "?") s)",
                  "\(timedOut) of \(stalled)", "all", timedOut == stalled)
            check(row, "connections sending one byte a second still open (they make progress; bounded per uid)", "\(Int(value("trickling_open", done) ?? -1))", "<= 128", (value("trickling_open", done) ?? 999) <= 128)
            broker.stop()
        case "connections":
            let (broker, _) = fresh([])
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "connections", broker.socket, "20"])
            let ready = attacker.line(timeout: 60)
            check(row, "connections one uid got of 4100 (\(value("seconds", ready).map { String($0) } ?? "?") s)", "\(Int(value("accepted", ready) ?? -1))", "<= 256", (value("accepted", ready) ?? 999) <= 256)
            let rootOK = Conn(broker.socket)?.request(#"{"op":"ping","req":1}"#, until: "\"ok\"") != nil
            let v = victim(broker, publish: false)
            check(row, "root connects", rootOK ? "yes" : "no", "yes", rootOK)
            check(row, "a second uid connects and pings", v.flatMap { value("pings", $0) }.map { "\(Int($0)) pings" } ?? "no", "yes", (value("pings", v) ?? 0) > 0)
            attacker.stop()
            broker.stop()
        case "replay", "hangup":
            // A 16 MiB history ring of 64 KiB events (as root), then the attack.
            let (broker, _) = fresh([])
            let filler = Conn(broker.socket)!
            let big = String(repeating: "y", count: 65_000)
            for i in 0..<300 { _ = filler.request(#"{"op":"publish","type":"big.t\#(i % 50)","req":"f","data":"\#(big)"}"#, until: "\"req\":\"f\"") }
            let cpu0 = broker.cpuSeconds()
            if row == "replay" {
                let attacker = asUID(options.attackerUID, ["--role", "attacker", "replay", broker.socket, String(seconds + 5)])
                _ = attacker.line(timeout: 30)
                usleep(300_000)
                let v = victim(broker, publish: false)
                attacker.stop()
                let cpu = broker.cpuSeconds() - cpu0
                let p99 = value("p99_ms", v) ?? 9999, maxPing = value("max_ms", v) ?? 9999
                check(row, "another uid's ping p99 while 200 connections of one uid replay the ring (since=1, last) unread (max \(String(format: "%.1f", maxPing)) ms)",
                      String(format: "%.1f ms", p99), "< 100 ms", p99 < 100)
                check(row, "broker CPU during the attack (\(String(format: "%.1f", seconds + 0.3)) s)", String(format: "%.2f s", cpu), "informational", true)
            } else {
                let attacker = asUID(options.attackerUID, ["--role", "attacker", "hangup", broker.socket, "60"])
                let ready = attacker.line(timeout: 60)
                let v = asUID(options.victimUID, ["--role", "victim", broker.socket, "3", "ping"])
                usleep(500_000)
                attacker.stop()  // closes all 200 connections at once
                let vline = v.line(timeout: 30)
                v.stop()
                let maxPing = value("max_ms", vline) ?? 9999
                check(row, "another uid's ping, max, while 200 connections close with full sockets (\(Int((value("sent", ready) ?? 0) / mib)) MiB of frames)",
                      String(format: "%.1f ms", maxPing), "< 100 ms", maxPing < 100)
            }
            broker.stop()
        case "statefile":
            // 32 MiB of retained events (as root), then another uid retains a
            // tiny event every 50 ms: what the broker writes to the disk.
            let (broker, _) = fresh(["--state-dir", directory(for: brokersStarted + 1) + "/state"])
            let filler = Conn(broker.socket)!
            let pad = String(repeating: "z", count: 1_000)
            var frames: [UInt8] = []
            for i in 0..<32_000 { frames += Array(#"{"op":"publish","type":"fill.t\#(i)","retain":true,"data":"\#(pad)"}"#.utf8) + [0x0A] }
            _ = filler.writeAll(frames, timeout: 60)
            _ = filler.request(#"{"op":"ping","req":"p"}"#, until: "\"req\":\"p\"", timeout: 60)
            usleep(2_000_000)  // the first (whole) write of the run
            let written0 = broker.writeBytes()
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "trickle", broker.socket, String(seconds)])
            _ = attacker.line(timeout: 30)
            let done = attacker.line(timeout: seconds + 30)
            attacker.stop()
            usleep(500_000)
            let written = Double(broker.writeBytes() - written0)
            let published = Int(value("published", done) ?? 0)
            check(row, "bytes the broker wrote to --state-dir for \(published) retaining publishes of one uid, next to 32 MiB retained (\(Int(seconds)) s)",
                  String(format: "%.2f MiB", written / mib), "<= 1 MiB (the changes, not the state)", written <= mib && published > 0)
            broker.stop()
        case "retained":
            // Two uids retain as many tiny events as they may; then a third and root retain one.
            let (broker, _) = fresh([])
            var kept: [Int] = []
            for k in 0..<2 {
                let attacker = asUID(options.attackerUID + k * 10, ["--role", "attacker", "retain-many", broker.socket, "60"])
                kept.append(Int(value("kept", attacker.line(timeout: 120)) ?? -1))
                attacker.stop()
            }
            check(row, "tiny retained events two uids got", kept.map(String.init).joined(separator: ", "), "<= 8192 each (1/8 of --max-retained)", kept.allSatisfy { $0 >= 0 && $0 <= 8192 })
            let rootOK = Conn(broker.socket)?.request(#"{"op":"publish","type":"system.after","retain":true,"req":"r"}"#, until: "\"req\":\"r\"")?.contains("\"ok\"") == true
            check(row, "root retains a new type afterwards", rootOK ? "yes" : "no", "yes", rootOK)
            broker.stop()
        case "statefile-past":
            // Issue 20, break 1: six uids republish ~1 MB retained events;
            // root changes secret.key (v1 -> v2) and clears secret.revoked;
            // then a restart. --max-retained-bytes 16M (root holds 3.6 MB
            // more): the file's bound is 2 x 16 MiB + 1 MiB.
            let state = directory(for: brokersStarted + 1) + "/state"
            let limits = ["--state-dir", state, "--max-retained-bytes", "16M"]
            let (broker, _) = fresh(limits)
            let root = Conn(broker.socket)!
            let filler = String(repeating: "f", count: 900_000)
            for i in 0..<4 { _ = root.request(#"{"op":"publish","type":"fill.\#(i)","retain":true,"req":"f","data":"\#(filler)"}"#, until: "\"req\":\"f\"") }
            _ = root.request(#"{"op":"publish","type":"secret.key","retain":true,"req":"k","data":"v1"}"#, until: "\"req\":\"k\"")
            _ = root.request(#"{"op":"publish","type":"secret.revoked","retain":true,"req":"r","data":["token-7"]}"#, until: "\"req\":\"r\"")
            let attackers = (0..<6).map { k in asUID(options.attackerUID + k, ["--role", "attacker", "retain-big", broker.socket, String(seconds)]) }
            for a in attackers { _ = a.line(timeout: 30) }
            func size() -> Int {
                var info = stat()
                return stat(state + "/retained.jsonl", &info) == 0 ? Int(info.st_size) : 0
            }
            var largest = 0
            let end = monotonic() + seconds
            while monotonic() < end { largest = max(largest, size()); usleep(20_000) }
            for a in attackers { a.stop() }
            _ = root.request(#"{"op":"publish","type":"secret.key","retain":true,"req":"k2","data":"v2"}"#, until: "\"req\":\"k2\"")
            _ = root.request(#"{"op":"clear","type":"secret.revoked","req":"c"}"#, until: "\"req\":\"c\"")
            for _ in 0..<25 { largest = max(largest, size()); usleep(20_000) }
            broker.stop()
            largest = max(largest, size())
            check(row, "largest state file while six uids republish 2 x 1 MB retained events each (\(Int(seconds)) s)", String(format: "%.1f MiB", Double(largest) / mib),
                  "<= 33 MiB (2 x --max-retained-bytes + 1 MiB)", largest <= 33 << 20)
            for run in 1...2 {
                let (again, _) = fresh(limits)
                let c = Conn(again.socket)!
                _ = c.writeAll(Array((#"{"op":"subscribe","type":"secret.>","last":true,"req":"s"}"# + "\n" + #"{"op":"ping","req":"end"}"# + "\n").utf8))
                var lines: [String] = []
                let deadline = monotonic() + 5
                while !lines.contains(where: { $0.contains("\"req\":\"end\"") }) && monotonic() < deadline {
                    var entry = pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)
                    _ = poll(&entry, 1, 20)
                    _ = c.fill()
                    lines += c.takeLines()
                }
                let key = lines.first { $0.contains("\"secret.key\"") }.map { $0.contains("\"data\":\"v2\"") ? "v2" : "v1" } ?? "none"
                let revoked = lines.contains { $0.contains("\"secret.revoked\"") }
                check(row, "after restart \(run): secret.key, and the cleared secret.revoked", "\(key), \(revoked ? "back" : "gone")", "v2, gone", key == "v2" && !revoked)
                again.stop()
            }
        case "line-split":
            // Issue 20, break 6: root subscribes; another uid publishes frames
            // with a raw CR (carrying a forged event line) and raw U+2028,
            // U+2029, U+0085; root's bytes are then split as Python's
            // universal newlines (CR, LF, CRLF) and `str.splitlines()` would.
            let (broker, _) = fresh([])
            let root = Conn(broker.socket)!
            _ = root.request(#"{"op":"subscribe","type":"line.>","req":"s"}"#, until: "\"req\":\"s\"")
            let attacker = asUID(options.attackerUID, ["--role", "attacker", "line-split", broker.socket, "10"])
            let done = attacker.line(timeout: 30)
            attacker.stop()
            let publisher = Conn(broker.socket)!
            _ = publisher.request(#"{"op":"publish","type":"line.end","req":"e"}"#, until: "\"req\":\"e\"")
            var bytes: [UInt8] = []
            let deadline = monotonic() + 5
            while monotonic() < deadline && !String(decoding: bytes, as: UTF8.self).contains("\"line.end\"") {
                var entry = pollfd(fd: root.fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 20)
                _ = root.fill()
                bytes += root.rx
                root.rx.removeAll()
            }
            let text = String(decoding: bytes, as: UTF8.self)
            let frames = text.split(separator: "\n").count
            let universal = text.split(omittingEmptySubsequences: true) { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }.count
            let separators: Set<Character> = ["\n", "\r", "\r\n", "\u{0B}", "\u{0C}", "\u{1C}", "\u{1D}", "\u{1E}", "\u{85}", "\u{2028}", "\u{2029}"]
            let splitlines = text.split(omittingEmptySubsequences: true) { separators.contains($0) }.count
            let forged = text.split { separators.contains($0) }.filter { $0.hasPrefix("{\"op\":\"event\"") && $0.contains("\"system.reboot\"") }.count
            check(row, "lines root's universal-newline reader / str.splitlines() sees for \(frames) frames (the attacker's refused: \(Int(value("refused", done) ?? -1)) of \(Int(value("sent", done) ?? -1)))",
                  "\(universal) / \(splitlines)", "\(frames) / \(frames)", universal == frames && splitlines == frames)
            check(row, "forged system.reboot events a line reader parses", "\(forged)", "0", forged == 0)
            broker.stop()
        case "statedir":
            // Issue 20, break 7: another uid makes root's --state-dir first
            // under a world-writable parent, with a symlink at the temporary
            // file's name and a forged state file.
            let parent = directory(for: 900 + brokersStarted)
            mkdir(parent, 0o1777)
            chmod(parent, 0o1777)
            let state = parent + "/state"
            let victimFile = state + ".victim"
            _ = FileManager.default.createFile(atPath: victimFile, contents: Data("root-only\n".utf8), attributes: [.posixPermissions: 0o600])
            let maker = asUID(options.attackerUID, ["--role", "attacker", "make-dir", state, "5"])
            _ = maker.line(timeout: 30)
            maker.stop()
            let socket = parent + "/refused.sock"
            let started = Child(options.broker, ["--socket", socket, "--state-dir", state])
            let deadline = monotonic() + 10
            while started.process.isRunning && monotonic() < deadline { usleep(10_000) }
            let status = started.process.isRunning ? -1 : Int(started.process.terminationStatus)
            if started.process.isRunning { kill(started.process.processIdentifier, SIGKILL) }
            let victimText = (try? String(contentsOfFile: victimFile, encoding: .utf8)) ?? ""
            check(row, "eventbusd --state-dir on a directory another uid made (0777, symlink planted)", "exit \(status)", "exit 78 (EX_CONFIG), nothing written", status == 78 && victimText == "root-only\n")
            // A hand-made 0755 root-owned directory is used, and tightened.
            let own = parent + "/own"
            mkdir(own, 0o755)
            chmod(own, 0o755)
            let (broker, _) = fresh(["--state-dir", own])
            var info = stat()
            _ = stat(own, &info)
            check(row, "mode of a root-owned 0755 --state-dir once the broker runs", String(info.st_mode & 0o777, radix: 8), "700", info.st_mode & 0o777 == 0o700)
            broker.stop()
        case "stats-secret":
            // Issue 20, break 8: root retains a type another uid may not
            // receive; what that uid's `stats` says of the retained events.
            let policy = directory(for: 950 + brokersStarted) + ".policy"
            _ = FileManager.default.createFile(atPath: policy, contents: Data("default subscribe deny\nallow subscribe public.>\n".utf8))
            let (broker, _) = fresh(["--policy", policy])
            let root = Conn(broker.socket)!
            _ = root.request(#"{"op":"publish","type":"public.x","retain":true,"req":"p","data":1}"#, until: "\"req\":\"p\"")
            func watch() -> String? {
                let w = asUID(options.attackerUID, ["--role", "attacker", "stats-retained", broker.socket, "5"])
                defer { w.stop() }
                return w.line(timeout: 20)
            }
            let before = watch()
            _ = root.request(#"{"op":"publish","type":"secret.key","retain":true,"req":"k","data":"\#(String(repeating: "s", count: 777))"}"#, until: "\"req\":\"k\"")
            let after = watch()
            check(row, "another uid's stats retained/retained_bytes before and after root retains a 777-byte secret it may not read",
                  "\(Int(value("retained", before) ?? -1))/\(Int(value("bytes", before) ?? -1)) -> \(Int(value("retained", after) ?? -1))/\(Int(value("bytes", after) ?? -1))",
                  "unchanged", before != nil && value("retained", before) == value("retained", after) && value("bytes", before) == value("bytes", after))
            broker.stop()
        case "conn-ids":
            // Issue 20, break 8: a uid's `conn` before and after root opens 100 connections.
            let (broker, _) = fresh([])
            func conn() -> Int {
                let w = asUID(options.attackerUID, ["--role", "attacker", "conn-id", broker.socket, "5"])
                defer { w.stop() }
                return Int(value("conn", w.line(timeout: 20)) ?? -1)
            }
            let first = conn()
            let churn = (0..<100).compactMap { _ in Conn(broker.socket) }
            for c in churn { _ = c.request(#"{"op":"ping","req":"p"}"#, until: "\"req\":\"p\"") }
            let second = conn()
            check(row, "a uid's conn ids around 100 connections of root (a counter gives a difference of 101)", "\(first), \(second)",
                  "difference not 101", first > 0 && second > 0 && second - first != 101)
            broker.stop()
        default:
            fail("unknown row \(row); rows: \(all.joined(separator: ", "))")
        }
    }
    print("| row | measured | figure | bound | |")
    print("| --- | --- | --- | --- | --- |")
    for c in checks { print("| \(c.row) | \(c.measure) | \(c.value) | \(c.bound) | \(c.ok ? "ok" : "**broken**") |") }
    exit(checks.allSatisfy(\.ok) ? 0 : 1)
}

extension Broker {
    /// Sum of `key` over every `clients` entry.
    func clientsTotal(_ key: String) throws -> Int {
        guard let c = Conn(socket), let line = c.request(#"{"op":"clients","req":"c"}"#, until: "\"req\":\"c\"", timeout: 10) else { return -1 }
        return line.components(separatedBy: "{\"conn\":").dropFirst().reduce(0) { $0 + (integer(key, in: $1) ?? 0) }
    }
}

// MARK: Entry

signal(SIGPIPE, SIG_IGN)
var args = Array(CommandLine.arguments.dropFirst())
if args.first == "--role" {
    guard args.count >= 2 else { fail("--role needs a role") }
    switch args[1] {
    case "attacker":
        guard args.count == 5, let seconds = Double(args[4]) else { fail("--role attacker KIND SOCKET SECONDS") }
        runAttacker(args[2], args[3], seconds)
    case "rr-server":
        guard args.count == 4, let seconds = Double(args[3]) else { fail("--role rr-server SOCKET SECONDS") }
        runRequestServer(args[2], seconds)
    case "rr-asker":
        guard args.count == 4, let count = Int(args[3]) else { fail("--role rr-asker SOCKET COUNT") }
        runRequestAsker(args[2], count)
    case "rr-sleeper":
        // (attacker round 4) Serves rr.dead and never reads.
        guard args.count == 4, let seconds = Double(args[3]), let c = Conn(args[2]) else { fail("--role rr-sleeper SOCKET SECONDS") }
        guard c.request(#"{"op":"subscribe","type":"rr.dead","serve":true,"req":"s"}"#, until: "\"req\":\"s\"") != nil else { fail("cannot serve rr.dead") }
        say("ready")
        holdUntilStopped(seconds)
    case "rr-hoarder":
        // (attacker round 4) COUNT requests of rr.answers (300 s deadlines), never read.
        guard args.count == 5, let count = Int(args[3]), let seconds = Double(args[4]), let c = Conn(args[2]) else { fail("--role rr-hoarder SOCKET COUNT SECONDS") }
        _ = c.writeAll(Array(String(repeating: #"{"op":"request","type":"rr.answers","timeout":300000,"req":1}"# + "\n", count: count).utf8), timeout: 30)
        say("ready")
        holdUntilStopped(seconds)
    case "victim":
        guard args.count == 5, let seconds = Double(args[3]) else { fail("--role victim SOCKET SECONDS publish|publish-read|publish-timeline|ping|rr1|rr256") }
        if args[4] == "subscribed-timeline" {
            runSubscribedVictim(args[2], seconds)
        } else if args[4].hasPrefix("rr"), let window = Int(args[4].dropFirst(2)) {
            runRequestVictim(args[2], seconds, window: window)
        } else {
            runVictim(args[2], seconds, publish: args[4] != "ping" && args[4] != "ping-timeline", timeline: args[4].hasSuffix("-timeline"),
                      read: args[4] == "publish-read")
        }
    default:
        fail("unknown role \(args[1])")
    }
    exit(0)
}
var options = Options()
while let arg = args.first {
    args.removeFirst()
    switch arg {
    case "--broker":
        guard !args.isEmpty else { fail("--broker needs a path") }
        options.broker = args.removeFirst()
    case "--nice":
        guard !args.isEmpty, let niceness = Int(args.removeFirst()) else { fail("--nice takes a number") }
        options.niceness = niceness
    case "--seconds":
        guard !args.isEmpty, let seconds = Double(args.removeFirst()) else { fail("--seconds takes a number") }
        options.seconds = seconds
    default: options.rows.append(arg)
    }
}
guard getuid() == 0 else { fail("run as root: the attacks run as other uids through setpriv") }
runDriver(options)
