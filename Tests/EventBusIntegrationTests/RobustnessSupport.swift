// Small helpers for the fault-injection tests in
// RobustnessFaultInjectionTests.swift, on top of EventBusTestSupport's
// `BrokerProcess` and `RawClient`: bare sockets for connection storms (a
// `RawClient` holds a 256 KiB buffer each), state shared with reader threads,
// and a client process that can be SIGKILLed.
//
// Before editing: every wait here is bounded; nothing may outlive its test.
import EventBusTestSupport
import Foundation
import Glibc

/// A connected AF_UNIX stream socket without a client object around it, for
/// storms of thousands of connections. Non-blocking connect: it succeeds while
/// the listen backlog has room, even when the broker cannot accept.
/// - Throws: `RawClientError.system` with the errno (`ECONNREFUSED` when no broker listens).
func robustRawConnect(_ path: String) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
    guard fd >= 0 else { throw RawClientError.system(call: "socket", errno: errno) }
    var address = try unixAddress(path)
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else {
        let code = errno
        close(fd)
        throw RawClientError.system(call: "connect \(path)", errno: code)
    }
    return fd
}

/// Sends `text` on a bare socket (best effort: the storms only need it queued).
func robustRawSend(_ fd: Int32, _ text: String) {
    _ = text.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
}

/// Raises this process's soft RLIMIT_NOFILE to the hard limit (the storm
/// opens 2,000 sockets; a 1024 soft limit is common).
func robustRaiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

/// Which sanitizer runtime the process `pid` runs with, if any (its memory
/// figures then include shadow memory and quarantine).
func robustSanitizerRuntime(pid: pid_t) -> String? {
    let maps = readProcFile("/proc/\(pid)/maps") ?? ""
    if maps.contains("asan") { return "asan" }
    if maps.contains("tsan") { return "tsan" }
    return nil
}

/// A value shared between a test and its helper threads. An `NSLock`
/// (pthread mutex) rather than `Synchronization.Mutex`: ThreadSanitizer does
/// not see the futex hand-off inside `Mutex` and reports false races.
final class RobustShared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: Value
    init(_ value: Value) { storage = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&storage)
    }
    var value: Value { withLock { $0 } }
}

/// Hands a `RawClient` to one reader thread. `@unchecked Sendable`: after the
/// hand-off only that thread touches the client.
final class RobustHandoff: @unchecked Sendable {
    let client: RawClient
    init(_ client: RawClient) { self.client = client }
}

/// Runs `body` on a new thread; `group` is left when it returns.
func robustThread(_ group: DispatchGroup, _ body: @escaping @Sendable () -> Void) {
    group.enter()
    Thread {
        body()
        group.leave()
    }.start()
}

/// A client process (`socat`) that can be SIGKILLed: its stdin is a pipe the
/// test writes to; its stdout goes to /dev/null, or to a pipe nobody reads so
/// that it stops reading its socket. Started with `spawnChild` (posix_spawn,
/// default signal state), not Foundation.Process (see SpawnedProcess.swift).
final class RobustKillableClient {
    let pid: pid_t
    /// The write end of socat's stdin.
    private let input: Int32
    /// The read end of socat's stdout when nobody reads it, else -1.
    private let output: Int32
    private var reaped = false

    init(socketPath: String, readsOutput: Bool) throws {
        guard let socat = findInPath("socat") else { throw RawClientError.system(call: "find socat (run scripts/deps)", errno: ENOENT) }
        var inputPipe: [Int32] = [-1, -1], outputPipe: [Int32] = [-1, -1]
        guard closeOnExecPipe(&inputPipe) else { throw RawClientError.system(call: "pipe", errno: errno) }
        if !readsOutput && !closeOnExecPipe(&outputPipe) {
            let code = errno
            close(inputPipe[0]); close(inputPipe[1])
            throw RawClientError.system(call: "pipe", errno: code)
        }
        defer {
            close(inputPipe[0])
            if outputPipe[1] >= 0 { close(outputPipe[1]) }
        }
        do {
            pid = try spawnChild(socat, ["-", "UNIX-CONNECT:" + socketPath], stdinDescriptor: inputPipe[0],
                                 stdoutDescriptor: readsOutput ? nil : outputPipe[1])
        } catch {
            close(inputPipe[1])
            if outputPipe[0] >= 0 { close(outputPipe[0]) }
            throw error
        }
        input = inputPipe[1]
        output = outputPipe[0]
    }

    /// Writes `text` to socat's stdin in full (blocking while the pipe is full).
    func write(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(input, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }

    func kill9() {
        guard !reaped else { return }
        kill(pid, SIGKILL)
        _ = waitForChild(pid, timeout: .seconds(10))
        reaped = true
    }

    deinit {
        kill9()
        close(input)
        if output >= 0 { close(output) }
    }
}

/// pipe(2) with both ends close-on-exec (Swift's Glibc lacks pipe2), so no
/// other child inherits them; false with errno set when it fails.
private func closeOnExecPipe(_ ends: inout [Int32]) -> Bool {
    guard pipe(&ends) == 0 else { return false }
    for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    return true
}
