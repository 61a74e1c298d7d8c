// Private fixtures for the fault-injection tests in RobustnessTests.swift: a
// real `eventbusd` child process (optionally under `prlimit`/`setpriv`) with
// readers for its /proc figures, and a raw line client over a Unix socket.
//
// Before editing: these stay private to the robustness tests until
// EventBusTestSupport's shared broker fixture can replace them. Every wait is
// bounded; a broker is always killed and reaped in `deinit`.
import Foundation
import Glibc

/// A test failure in a fixture: what was expected and what happened.
struct RobustnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Monotonic seconds, for deadlines.
func robustNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass.
/// - Returns: whether it held.
func robustEventually(_ seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = robustNow() + seconds
    while true {
        if try condition() { return true }
        if robustNow() > deadline { return false }
        usleep(20_000)
    }
}

/// Raises this process's soft RLIMIT_NOFILE to the hard limit (the tests open
/// thousands of sockets; a 1024 soft limit is common).
func robustRaiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

/// One `eventbusd` child on a socket in its own temporary directory.
final class RobustBroker {
    let directory: String
    let socketPath: String
    let process = Process()
    let stderrPath: String
    /// The broker's pid (the same through `prlimit`/`setpriv`, which exec it).
    var pid: Int32 { process.processIdentifier }

    /// The built `eventbusd`: `$EVENTBUSD`, next to the test bundle, or `.build/debug`.
    static var executable: String {
        if let path = ProcessInfo.processInfo.environment["EVENTBUSD"] { return path }
        let besideTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("eventbusd").path
        if FileManager.default.isExecutableFile(atPath: besideTests) { return besideTests }
        return FileManager.default.currentDirectoryPath + "/.build/debug/eventbusd"
    }

    /// A fresh short temporary directory (sun_path holds 108 bytes).
    static func makeDirectory() -> String {
        var template = Array("/tmp/ebrobust.XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    /// Starts the broker and, unless `waitReady` is false, waits until a
    /// `ping` with `req` gets its `ok`.
    /// - Parameters:
    ///   - arguments: extra broker options, e.g. `["--max-connections", "3000"]`.
    ///   - prefix: a command that execs the broker, e.g. `["/usr/bin/prlimit", "--nofile=64:64"]`.
    ///   - socketPath: overrides the default `DIR/bus.sock`.
    init(arguments: [String] = [], prefix: [String] = [], socketPath: String? = nil, waitReady: Bool = true) throws {
        directory = RobustBroker.makeDirectory()
        self.socketPath = socketPath ?? directory + "/bus.sock"
        stderrPath = directory + "/stderr.log"
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let command = prefix + [RobustBroker.executable, "--socket", self.socketPath] + arguments
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        process.environment = environment
        try process.run()
        if waitReady {
            let ready = robustEventually(10) {
                guard process.isRunning else { return true }
                guard let client = try? RobustClient(path: self.socketPath) else { return false }
                return (try? client.request(#"{"op":"ping","req":"ready"}"#, timeout: 2))?["op"] as? String == "ok"
            }
            guard ready, process.isRunning else {
                throw RobustnessError("eventbusd did not become ready on \(self.socketPath); stderr: \(stderrText)")
            }
        }
    }

    /// Set by `stop`/`waitForExit`; an exit without it is reported in `deinit`.
    private var exitExpected = false

    deinit {
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
        } else if !exitExpected {
            // The broker died on its own during the test: show why.
            let text = "eventbusd exited unexpectedly (status \(process.terminationStatus)); stderr:\n\(stderrText)\n"
            FileHandle.standardError.write(Data(text.utf8))
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    var stderrText: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// Open descriptors of the broker (entries of /proc/PID/fd).
    func openDescriptorCount() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
    }

    /// User plus system CPU time of the broker in clock ticks (/proc/PID/stat
    /// fields 14 and 15, proc(5)).
    func cpuTicks() throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the parenthesised command name, which may hold spaces.
        let rest = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
        guard rest.count > 13, let user = Int(rest[11]), let system = Int(rest[12]) else {
            throw RobustnessError("cannot parse /proc/\(pid)/stat: \(stat)")
        }
        return user + system
    }

    /// Resident set size in KiB (VmRSS in /proc/PID/status).
    func residentKiB() throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            if let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) { return kib }
        }
        throw RobustnessError("no VmRSS in /proc/\(pid)/status")
    }

    /// Whether the broker runs with a sanitizer runtime (its memory figures
    /// then include shadow memory and quarantine).
    func sanitizerRuntime() -> String? {
        let maps = (try? String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)) ?? ""
        if maps.contains("asan") { return "asan" }
        if maps.contains("tsan") { return "tsan" }
        return nil
    }

    /// Sends `signal` and waits up to `timeout` seconds for the exit.
    /// - Returns: the exit status and the seconds it took.
    func stop(signal: Int32 = SIGTERM, timeout: Double = 10) throws -> (status: Int32, seconds: Double) {
        let start = robustNow()
        exitExpected = true
        kill(pid, signal)
        guard robustEventually(timeout, { !process.isRunning }) else {
            throw RobustnessError("eventbusd did not exit within \(timeout) s of signal \(signal)")
        }
        process.waitUntilExit()
        return (process.terminationStatus, robustNow() - start)
    }

    /// Waits for the process to exit by itself.
    func waitForExit(timeout: Double = 10) throws -> Int32 {
        exitExpected = true
        guard robustEventually(timeout, { !process.isRunning }) else {
            throw RobustnessError("eventbusd still running after \(timeout) s")
        }
        process.waitUntilExit()
        return process.terminationStatus
    }
}

/// A raw client: writes lines, reads lines, parses them with JSONSerialization.
/// Used by one thread at a time (hence `@unchecked Sendable`: a test hands it
/// to one reader thread and no longer touches it).
final class RobustClient: @unchecked Sendable {
    private(set) var fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0

    /// Connects to `path` (blocking connect, then non-blocking I/O with poll).
    /// - Throws: `RobustnessError` naming the errno when the connect fails.
    init(path: String) throws {
        fd = try RobustClient.connect(path, nonBlocking: false)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { close() }

    /// A connected (or connecting, when `nonBlocking`) AF_UNIX stream socket.
    static func connect(_ path: String, nonBlocking: Bool) throws -> Int32 {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        let fd = socket(AF_UNIX, type, 0)
        guard fd >= 0 else { throw RobustnessError("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw RobustnessError("path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if result != 0 && !(nonBlocking && (errno == EINPROGRESS || errno == EAGAIN)) {
            let code = errno
            Glibc.close(fd)
            throw RobustnessError("connect to \(path): errno \(code)")
        }
        return fd
    }

    func close() {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
    }

    /// shutdown(SHUT_WR): the broker sees EOF on its reading side.
    func shutdownWrite() { _ = shutdown(fd, Int32(SHUT_WR)) }

    /// Writes all of `text` plus LF (unless `newline` is false) within `timeout`.
    func send(_ text: String, newline: Bool = true, timeout: Double = 5) throws {
        var bytes = Array(text.utf8)
        if newline { bytes.append(0x0A) }
        try sendBytes(bytes, timeout: timeout)
    }

    func sendBytes(_ bytes: [UInt8], timeout: Double = 5) throws {
        let deadline = robustNow() + timeout
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { offset += n; continue }
            guard n < 0, errno == EAGAIN || errno == EINTR else { throw RobustnessError("send: errno \(errno)") }
            try wait(for: Int16(POLLOUT), until: deadline, what: "the socket to take \(bytes.count - offset) more bytes")
        }
    }

    private func wait(for events: Int16, until deadline: Double, what: String) throws {
        let left = deadline - robustNow()
        guard left > 0 else { throw RobustnessError("timed out waiting for \(what)") }
        var p = pollfd(fd: fd, events: events, revents: 0)
        _ = poll(&p, 1, Int32(min(left, 1) * 1000) + 1)
    }

    /// The next line without its LF; nil at EOF.
    /// - Throws: `RobustnessError` when no whole line arrives within `timeout`.
    func readLine(timeout: Double = 5) throws -> [UInt8]? {
        let deadline = robustNow() + timeout
        while true {
            if let lf = buffer[start...].firstIndex(of: 0x0A) {
                let line = Array(buffer[start..<lf])
                start = lf + 1
                if start > 65536 { buffer.removeFirst(start); start = 0 }
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { buffer.append(contentsOf: chunk[0..<n]); continue }
            if n == 0 { return nil }
            if errno == ECONNRESET { return nil }
            guard errno == EAGAIN || errno == EINTR else { throw RobustnessError("recv: errno \(errno)") }
            try wait(for: Int16(POLLIN), until: deadline, what: "a line from the broker")
        }
    }

    /// The next frame parsed as a JSON object; nil at EOF.
    func readFrame(timeout: Double = 5) throws -> [String: Any]? {
        guard let line = try readLine(timeout: timeout) else { return nil }
        guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
            throw RobustnessError("broker sent a line that is not a JSON object: \(String(decoding: line, as: UTF8.self))")
        }
        return object
    }

    /// Sends one frame that carries a `req` and returns the reply with that
    /// `req`, skipping events and drop notices that arrive before it.
    func request(_ frame: String, timeout: Double = 5) throws -> [String: Any] {
        guard let sent = try JSONSerialization.jsonObject(with: Data(frame.utf8)) as? [String: Any], let req = sent["req"] else {
            throw RobustnessError("request frame without req: \(frame)")
        }
        try send(frame, timeout: timeout)
        let deadline = robustNow() + timeout
        while true {
            guard let reply = try readFrame(timeout: max(0.01, deadline - robustNow())) else {
                throw RobustnessError("EOF before the reply to \(frame)")
            }
            if let op = reply["op"] as? String, op == "ok" || op == "error", "\(reply["req"] ?? "")" == "\(req)" {
                return reply
            }
        }
    }

    /// The broker's `stats` reply.
    func stats() throws -> [String: Any] {
        try request(#"{"op":"stats","req":"stats"}"#)
    }
}

extension Dictionary where Key == String, Value == Any {
    /// An integer field of a parsed frame (JSONSerialization gives NSNumber).
    func int(_ key: String) -> Int? { (self[key] as? NSNumber)?.intValue }
}

/// A value shared between a test and its helper threads. An `NSLock`
/// (pthread mutex) rather than `Synchronization.Mutex`: ThreadSanitizer does
/// not see the futex hand-off inside `Mutex` and reports false races.
final class RobustShared<Value: Sendable>: @unchecked Sendable {
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
