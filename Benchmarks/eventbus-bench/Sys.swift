// Thin POSIX helpers for the load generator: clock, Unix-socket and loopback TCP connect,
// blocking/non-blocking I/O, /proc readers, fatal errors.
//
// Before editing: nothing here may allocate per message; the hot loops in
// Publisher.swift and Subscriber.swift call these with raw buffers only.
import CEventBusShims
import EventBusSystem
import Glibc

/// Prints `eventbus-bench: MESSAGE` on stderr and exits with status 1.
func fail(_ message: String) -> Never {
    printErr(message)
    exit(1)
}

/// Writes `eventbus-bench: MESSAGE` and a newline to fd 2 (not the `stderr`
/// global, which strict concurrency rejects).
func printErr(_ message: String) {
    var line = "eventbus-bench: " + message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// The text of the current `errno`, from strerror(3).
func errnoText() -> String {
    String(cString: strerror(errno))
}

/// CLOCK_MONOTONIC in nanoseconds: system-wide, so stamps taken in one
/// process compare with stamps taken in another (clock_gettime(2)).
@inline(__always)
func monotonicNanos() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) &* 1_000_000_000 &+ Int64(ts.tv_nsec)
}

/// Sleeps until the CLOCK_MONOTONIC instant `nanos` (clock_nanosleep(2),
/// TIMER_ABSTIME); returns at once if it has passed. EINTR just returns early.
func sleepUntil(nanos: Int64) {
    var ts = timespec(tv_sec: Int(nanos / 1_000_000_000), tv_nsec: Int(nanos % 1_000_000_000))
    _ = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil)
}

/// Sleeps for `milliseconds` (nanosleep(2)).
func sleepMillis(_ milliseconds: Int) {
    sleepUntil(nanos: monotonicNanos() + Int64(milliseconds) * 1_000_000)
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (setrlimit(2)), so the
/// idle-connection case can hold 1,000 sockets.
func raiseFileLimit() {
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
}

/// Connects a blocking `AF_UNIX` `SOCK_STREAM` socket (close-on-exec) to `path`.
/// - Returns: the connected descriptor, owned by the caller, or nil with
///   errno set (unix(7): ENOENT, ECONNREFUSED, EAGAIN when the backlog is full).
func tryConnectUnix(_ path: String) -> Int32? {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
        close(fd)
        fail("socket path too long for sun_path (108 bytes): \(path)")
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return connectOrClose(fd, to: address)
}

/// Connects a blocking TCP socket (close-on-exec, `TCP_NODELAY` as NATS
/// clients set it) to `host:port`; `host` must be a loopback IPv4 address
/// (127.0.0.0/8): the benchmark never aims anywhere else.
/// - Returns: the connected descriptor, or nil with errno set (ECONNREFUSED).
func tryConnectTCP(host: String, port: UInt16) -> Int32? {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    guard inet_pton(AF_INET, host, &address.sin_addr) == 1,
          UInt32(bigEndian: address.sin_addr.s_addr) >> 24 == 127 else {
        fail("not a loopback IPv4 address: \(host) (the benchmark only connects to 127.0.0.0/8)")
    }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    return connectOrClose(fd, to: address)
}

/// connect(2)s `fd` to `address` (a `sockaddr_un` or `sockaddr_in`, passed
/// with its own size).
/// - Returns: `fd`, or nil after closing it, with connect's errno kept.
private func connectOrClose<Address>(_ fd: Int32, to address: Address) -> Int32? {
    var address = address
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<Address>.size))
        }
    }
    if rc != 0 {
        let saved = errno
        close(fd)
        errno = saved
        return nil
    }
    return fd
}

/// Connects to a broker address as `scripts/bench` passes it with `--socket`:
/// a Unix socket path, or `tcp:127.0.0.1:PORT` (NATS has no Unix listener).
/// - Returns: the connected descriptor, or nil with errno set.
func tryConnect(_ address: String) -> Int32? {
    guard address.hasPrefix("tcp:") else { return tryConnectUnix(address) }
    let rest = address.dropFirst(4)
    guard let colon = rest.lastIndex(of: ":"), let port = UInt16(rest[rest.index(after: colon)...]) else {
        fail("a TCP address is tcp:HOST:PORT, got \(address)")
    }
    return tryConnectTCP(host: String(rest[..<colon]), port: port)
}

/// `tryConnect`, retrying EAGAIN (listen backlog full) for up to one
/// second and failing the process on any other error.
func connectBroker(_ address: String) -> Int32 {
    let deadline = monotonicNanos() + 1_000_000_000
    while true {
        if let fd = tryConnect(address) { return fd }
        if errno == EAGAIN && monotonicNanos() < deadline {
            sleepMillis(1)
            continue
        }
        fail("failed to connect to \(address): \(errnoText())")
    }
}

/// Sets O_NONBLOCK on `fd` (fcntl(2)).
func setNonBlocking(_ fd: Int32) {
    let flags = fcntl(fd, F_GETFL)
    _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
}

/// Sets FD_CLOEXEC on `fd` (fcntl(2)).
func setCloseOnExec(_ fd: Int32) {
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
}

/// Writes every byte to a descriptor, waiting in poll(2) when it would block.
/// Fails the process on any error but EINTR/EAGAIN (EPIPE included: the
/// broker went away mid-run).
func writeAll(_ fd: Int32, _ base: UnsafeRawPointer, _ count: Int) {
    var offset = 0
    while offset < count {
        let result = systemCall { write(fd, base + offset, count - offset) }
        if case .success(let n) = result, n > 0 {
            offset += n
        } else if case .failure(let e) = result, e == .wouldBlock {
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&p, 1, 1000)
        } else {
            fail("failed to write to fd \(fd): \(errnoText())")
        }
    }
}

/// `writeAll` for a byte array.
func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { writeAll(fd, $0.baseAddress!, $0.count) }
}

/// `writeAll` for a string's UTF-8.
func writeAll(_ fd: Int32, _ text: String) {
    writeAll(fd, Array(text.utf8))
}

/// Reads the whole of a small file such as `/proc/PID/status`; nil if it
/// cannot be opened (the process is gone).
func readSmallFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let read = chunk.withUnsafeMutableBytes { buffer in systemCall { Glibc.read(fd, buffer.baseAddress, buffer.count) } }
        guard case .success(let n) = read, n > 0 else { break }
        result.append(contentsOf: chunk[0..<n])
    }
    return result
}

/// CPU time (user + system, all threads) the process `pid` has used, in
/// microseconds, from fields 14 and 15 of `/proc/PID/stat` (proc(5)); its
/// resolution is one clock tick (`sysconf(_SC_CLK_TCK)`, usually 10 ms).
func processCPUMicros(pid: Int32) -> Int64? {
    guard let bytes = readSmallFile("/proc/\(pid)/stat"),
          let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
    // Fields after the command name start at field 3 (state).
    let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
    guard fields.count > 12,
          let user = Int64(String(decoding: fields[11], as: UTF8.self)),
          let system = Int64(String(decoding: fields[12], as: UTF8.self)) else { return nil }
    let ticks = Int64(sysconf(Int32(_SC_CLK_TCK)))
    return (user + system) * 1_000_000 / max(ticks, 1)
}

/// A `kB` field of `/proc/PID/status` (proc(5)), such as `VmRSS` (resident
/// set now) or `VmHWM` (peak resident set), in KiB.
func processStatusKiB(pid: Int32, field: String) -> Int? {
    guard let bytes = readSmallFile("/proc/\(pid)/status") else { return nil }
    let text = String(decoding: bytes, as: UTF8.self)
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        let digits = line.dropFirst(field.count + 1).filter { $0.isNumber }
        return Int(digits)
    }
    return nil
}
