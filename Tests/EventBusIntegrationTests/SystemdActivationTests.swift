// eventbusd under systemd's own systemd-socket-activate: it serves the passed socket
// without binding or unlinking, serves a client that connected before it started,
// refuses --accept, and sends READY=1, WATCHDOG=1 and STOPPING=1 to NOTIFY_SOCKET.
//
// Before editing: children are started with posix_spawn (see `SystemdFixture.Child` for why
// not Foundation.Process), every wait is bounded, and systemd-socket-activate passes
// only TERM/PATH/USER/HOME and what `-E` names on to the broker.
import Foundation
import Glibc
import Testing

@Suite(.enabled(if: SystemdFixture.haveExecutable("systemd-socket-activate"), "needs systemd-socket-activate (package systemd)"),
       .timeLimit(.minutes(1)))
struct SystemdActivationTests {
    @Test(arguments: [nil, "bus"] as [String?])
    func brokerServesThePassedSocketWithoutBindingOrUnlinkingIt(fdName: String?) async throws {
        let dir = try SystemdFixture.TempDirectory()
        let path = dir.file("bus.sock"), other = dir.file("other.sock")
        let broker = try SystemdFixture.Child("systemd-socket-activate",
                                       ["-l", path] + (fdName.map { ["--fdname=\($0)"] } ?? [])
                                           + [SystemdFixture.eventbusd, "--socket", other], in: dir)
        try await SystemdFixture.waitForPath(path)
        let inode = try SystemdFixture.inode(path)
        // systemd-socket-activate starts the broker on this first connection.
        let first = try SystemdFixture.LineClient(path)
        try first.send(#"{"op":"ping","req":1}"#)
        #expect(try first.readLine() == #"{"op":"ok","req":1}"#)
        let second = try SystemdFixture.LineClient(path)
        try second.send(#"{"op":"ping","req":"two"}"#)
        #expect(try second.readLine() == #"{"op":"ok","req":"two"}"#)

        let finished = try await broker.stop(SIGTERM)
        #expect(finished.status == 0, "stderr: \(finished.stderr)")
        #expect(try SystemdFixture.inode(path) == inode, "the passed socket's path was replaced or removed")
        #expect(access(other, F_OK) != 0, "--socket was bound although sockets were passed")
    }

    @Test func clientThatConnectedBeforeTheBrokerStartedIsServed() async throws {
        let dir = try SystemdFixture.TempDirectory()
        let path = dir.file("bus.sock"), go = dir.file("go")
        // `exec` keeps the pid, so LISTEN_PID (set for sh) still names the broker.
        let broker = try SystemdFixture.Child("systemd-socket-activate",
                                       ["-l", path, "/bin/sh", "-c", #"until [ -e "$1" ]; do sleep 0.01; done; exec "$0""#,
                                        SystemdFixture.eventbusd, go], in: dir)
        try await SystemdFixture.waitForPath(path)
        let early = try SystemdFixture.LineClient(path)
        try early.send(#"{"op":"ping","req":"early"}"#)
        #expect(!(try early.hasInput(within: .milliseconds(100))), "something answered before the broker started")
        try SystemdFixture.createEmptyFile(go)
        #expect(try early.readLine() == #"{"op":"ok","req":"early"}"#)
        #expect(try await broker.stop(SIGTERM).status == 0)
    }

    @Test func acceptModeIsRefusedWithAClearMessageAndNonZeroExit() async throws {
        let dir = try SystemdFixture.TempDirectory()
        let path = dir.file("bus.sock")
        let activator = try SystemdFixture.Child("systemd-socket-activate", ["--accept", "-l", path, SystemdFixture.eventbusd], in: dir)
        try await SystemdFixture.waitForPath(path)
        let client = try SystemdFixture.LineClient(path)
        try client.send(#"{"op":"ping","req":1}"#)
        #expect(try client.readToEnd() == "", "a broker given a connected socket must not serve it")
        try await SystemdFixture.waitUntil("the broker's exit being logged") { activator.stderrSoFar().contains("died with code") }
        let log = try await activator.stop(SIGTERM).stderr
        #expect(log.contains("fd 3 (name 'unknown') is not a listening AF_UNIX stream socket; Accept=yes is not supported"))
        #expect(!log.contains("died with code 0"), "log: \(log)")
    }

    @Test func readyArrivesOnceAndTheSocketServesWhenItDoes() async throws {
        let dir = try SystemdFixture.TempDirectory()
        let path = dir.file("bus.sock")
        let notify = try SystemdFixture.DatagramReceiver(path: dir.file("notify.sock"))
        let broker = try SystemdFixture.Child("systemd-socket-activate",
                                       ["-l", path, "-E", "NOTIFY_SOCKET=\(notify.path)", SystemdFixture.eventbusd], in: dir)
        try await SystemdFixture.waitForPath(path)
        let first = try SystemdFixture.LineClient(path)
        #expect(try notify.receive() == "READY=1")
        try first.send(#"{"op":"ping","req":1}"#)
        #expect(try first.readLine() == #"{"op":"ok","req":1}"#)
        let later = try SystemdFixture.LineClient(path)
        try later.send(#"{"op":"ping","req":2}"#)
        #expect(try later.readLine() == #"{"op":"ok","req":2}"#)
        // No watchdog without WATCHDOG_USEC, and READY=1 only once (STATUS= may come).
        let rest = try notify.receiveAll(for: .milliseconds(200))
        #expect(rest.filter { !$0.hasPrefix("STATUS=") } == [])
        _ = try await broker.stop(SIGTERM)
    }

    @Test func watchdogPingsArriveAtHalfTheWatchdogInterval() async throws {
        let dir = try SystemdFixture.TempDirectory()
        let path = dir.file("bus.sock")
        let notify = try SystemdFixture.DatagramReceiver(path: dir.file("notify.sock"))
        let broker = try SystemdFixture.Child("systemd-socket-activate",
                                       ["-l", path, "-E", "NOTIFY_SOCKET=\(notify.path)", "-E", "WATCHDOG_USEC=1000000",
                                        SystemdFixture.eventbusd], in: dir)
        try await SystemdFixture.waitForPath(path)
        _ = try SystemdFixture.LineClient(path)  // starts the broker
        #expect(try notify.receive() == "READY=1")
        let start = ContinuousClock.now
        let pings = try notify.receiveStamped(for: .milliseconds(2600)).filter { $0.text == "WATCHDOG=1" }.map { $0.at - start }
        _ = try await broker.stop(SIGTERM)
        // Every 500 ms is 5 pings in 2.6 s; wide bounds for a loaded machine. What systemd
        // enforces is that no gap reaches WATCHDOG_USEC (1 s).
        #expect((3...7).contains(pings.count), "pings at \(pings)")
        let gaps = zip(pings.dropFirst(), pings).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 < .seconds(1) }, "gaps \(gaps)")
        #expect(gaps.allSatisfy { $0 > .milliseconds(250) }, "gaps \(gaps)")
    }

    @Test func exitIdleTimeExitsWhenIdleAndTheNextClientIsServedByARestartedBroker() async throws {
        let dir = try SystemdFixture.TempDirectory()
        let path = dir.file("bus.sock")
        // Plays systemd's part: keep the listening socket, start the broker again
        // whenever it exits. `exec` in a subshell keeps $BASHPID, so LISTEN_PID names it.
        let script = #"while :; do ( LISTEN_PID=$BASHPID exec "$0" --exit-idle-time 300ms ); echo "broker exited $?" >&2; sleep 0.05; done"#
        let activator = try SystemdFixture.Child("systemd-socket-activate",
                                                 ["-l", path, "/bin/bash", "-c", script, SystemdFixture.eventbusd], in: dir)
        try await SystemdFixture.waitForPath(path)
        func instance() throws -> String {
            let client = try SystemdFixture.LineClient(path)
            try client.send(#"{"op":"hello","req":1}"#)
            let reply = try client.readLine()
            let object = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]
            return try #require(object?["instance"] as? String, "reply: \(reply)")
        }
        let first = try instance()  // the client closes on return
        try await SystemdFixture.waitUntil("the idle broker exiting") { activator.stderrSoFar().contains("broker exited 0") }
        #expect(activator.stderrSoFar().contains("--exit-idle-time"))
        let second = try instance()
        #expect(first != second, "the second client was not served by a new broker run")
        _ = try await activator.stop(SIGTERM)
    }

    @Test func stoppingArrivesOnSigtermAndTheBrokerExitsZero() async throws {
        let dir = try SystemdFixture.TempDirectory()
        let path = dir.file("bus.sock")
        let notify = try SystemdFixture.DatagramReceiver(path: dir.file("notify.sock"))
        let broker = try SystemdFixture.Child("systemd-socket-activate",
                                       ["-l", path, "-E", "NOTIFY_SOCKET=\(notify.path)", SystemdFixture.eventbusd], in: dir)
        try await SystemdFixture.waitForPath(path)
        let client = try SystemdFixture.LineClient(path)
        #expect(try notify.receive() == "READY=1")
        try client.send(#"{"op":"ping","req":1}"#)
        #expect(try client.readLine() == #"{"op":"ok","req":1}"#)
        kill(broker.pid, SIGTERM)
        let after = try notify.receiveAll(until: { $0 == "STOPPING=1" })
        #expect(after.last == "STOPPING=1", "got \(after)")
        let finished = try await broker.wait()
        #expect(finished.status == 0, "stderr: \(finished.stderr)")
        #expect(access(path, F_OK) == 0, "the broker unlinked a path it did not bind")
    }
}

/// Processes, sockets and files for these tests, kept in one private namespace so they
/// cannot clash with the helpers of other files in this target.
private enum SystemdFixture {
    /// The `eventbusd` built next to this test bundle.
    static let eventbusd: String = {
        let bundle = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: bundle).deletingLastPathComponent().appendingPathComponent("eventbusd").path
    }()

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func haveExecutable(_ name: String) -> Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").contains {
            access("\($0)/\(name)", X_OK) == 0
        }
    }

    static func createEmptyFile(_ path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil) else { throw Failure("cannot create \(path)") }
    }

    static func inode(_ path: String) throws -> UInt64 {
        var status = stat()
        guard stat(path, &status) == 0 else { throw Failure("stat \(path) failed: errno \(errno)") }
        return UInt64(status.st_ino)
    }

    /// Polls `condition` every 10 ms until it holds; throws after `timeout`.
    static func waitUntil(_ what: String, timeout: Duration = .seconds(10), _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            if ContinuousClock.now > deadline { throw Failure("\(what) did not happen within \(timeout)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    static func waitForPath(_ path: String) async throws {
        try await waitUntil("\(path) appearing") { access(path, F_OK) == 0 }
    }

    /// `poll(2)` for input on `fd` until `deadline`; false on timeout.
    static func waitReadable(_ fd: CInt, until deadline: ContinuousClock.Instant) throws -> Bool {
        while true {
            let left = deadline - ContinuousClock.now
            let milliseconds = max(0, Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            guard ready >= 0 else { throw Failure("poll failed: errno \(errno)") }
            return ready > 0
        }
    }

    static func withUnixAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) throws -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw Failure("path too long: \(path)") }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// A private directory under /tmp (short enough for `sun_path`), removed on deinit.
    final class TempDirectory {
        let path: String

        init() throws {
            var template = Array("/tmp/ebsa.XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { throw Failure("mkdtemp failed: errno \(errno)") }
            path = String(cString: made)
        }

        deinit { try? FileManager.default.removeItem(atPath: path) }

        func file(_ name: String) -> String { "\(path)/\(name)" }
    }

    struct Finished {
        /// The exit status, or 128 + the signal number.
        var status: Int32
        var stderr: String
    }

    /// A child started with `posix_spawnp(3)`, stdout and stderr in a file, reaped with
    /// `WNOHANG` polls. Not Foundation.Process: that starts children with the spawning
    /// dispatch thread's signal mask (SIGTERM blocked), and its exit monitor blocks for
    /// good in `waitpid` once a child closes the descriptors it inherited, as
    /// systemd-socket-activate does, hanging every other Process in the runner.
    final class Child {
        let pid: pid_t
        private let logPath: String
        private var exitStatus: Int32?

        init(_ executable: String, _ arguments: [String], in directory: TempDirectory) throws {
            logPath = directory.file("log.\(UUID().uuidString.prefix(8))")
            let skip: Set<String> = ["NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM"]
            let environment = ProcessInfo.processInfo.environment.filter { !skip.contains($0.key) }
            let argv = ([executable] + arguments).map { strdup($0) } + [nil]
            let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for pointer in argv + envp { free(pointer) } }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var none = sigset_t(), all = sigset_t()
            sigemptyset(&none)
            sigfillset(&all)
            posix_spawnattr_setsigmask(&attributes, &none)
            posix_spawnattr_setsigdefault(&attributes, &all)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
            var child = pid_t()
            let result = posix_spawnp(&child, executable, &actions, &attributes, argv, envp)
            guard result == 0 else { throw Failure("posix_spawnp \(executable) failed: errno \(result)") }
            pid = child
        }

        private func reaped() -> Bool {
            if exitStatus != nil { return true }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return false }
            let signal = raw & 0x7f
            exitStatus = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
            return true
        }

        func stderrSoFar() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

        /// Waits up to `timeout` for the exit (then SIGKILLs and throws).
        func wait(timeout: Duration = .seconds(10)) async throws -> Finished {
            let deadline = ContinuousClock.now + timeout
            while !reaped() {
                if ContinuousClock.now > deadline {
                    kill(pid, SIGKILL)
                    while !reaped() { try await Task.sleep(for: .milliseconds(10)) }
                    throw Failure("child \(pid) did not exit within \(timeout); output: \(stderrSoFar())")
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            return Finished(status: exitStatus ?? -1, stderr: stderrSoFar())
        }

        func stop(_ signal: Int32, timeout: Duration = .seconds(10)) async throws -> Finished {
            if !reaped() { kill(pid, signal) }
            return try await wait(timeout: timeout)
        }

        deinit {
            if exitStatus == nil {
                kill(pid, SIGKILL)
                var raw: Int32 = 0
                _ = waitpid(pid, &raw, 0)
            }
        }
    }

    /// A stream client speaking LF-terminated lines, closed on deinit.
    final class LineClient {
        let fd: CInt
        private var buffer: [UInt8] = []

        init(_ path: String) throws {
            fd = socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw Failure("socket failed: errno \(errno)") }
            let result = try withUnixAddress(path) { connect(fd, $0, $1) }
            guard result == 0 else {
                let code = errno
                close(fd)
                throw Failure("connect \(path) failed: errno \(code)")
            }
        }

        deinit { close(fd) }

        func send(_ line: String) throws {
            let bytes = Array((line + "\n").utf8)
            let written = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL)) }
            guard written == bytes.count else { throw Failure("send failed: errno \(errno)") }
        }

        func hasInput(within timeout: Duration) throws -> Bool {
            try !buffer.isEmpty || waitReadable(fd, until: ContinuousClock.now + timeout)
        }

        /// Reads one chunk into the buffer; false at EOF.
        private func fill(until deadline: ContinuousClock.Instant) throws -> Bool {
            guard try waitReadable(fd, until: deadline) else { throw Failure("nothing arrived in time; have \(String(decoding: buffer, as: UTF8.self))") }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            // A peer that closes with our request unread resets the connection: that is a close too.
            if count < 0 && errno == ECONNRESET { return false }
            guard count >= 0 else { throw Failure("read failed: errno \(errno)") }
            buffer += chunk[..<count]
            return count > 0
        }

        /// The next line without its LF; throws on EOF or after `timeout`.
        func readLine(timeout: Duration = .seconds(10)) throws -> String {
            let deadline = ContinuousClock.now + timeout
            while true {
                if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    defer { buffer.removeSubrange(...newline) }
                    return String(decoding: buffer[..<newline], as: UTF8.self)
                }
                guard try fill(until: deadline) else { throw Failure("EOF before a line; have \(String(decoding: buffer, as: UTF8.self))") }
            }
        }

        /// Everything until the peer closes (or resets).
        func readToEnd(timeout: Duration = .seconds(10)) throws -> String {
            let deadline = ContinuousClock.now + timeout
            while try fill(until: deadline) {}
            return String(decoding: buffer, as: UTF8.self)
        }
    }

    /// The test's own `NOTIFY_SOCKET`: an `AF_UNIX` datagram socket bound to a path.
    final class DatagramReceiver {
        let fd: CInt
        let path: String

        init(path: String) throws {
            self.path = path
            fd = socket(AF_UNIX, CInt(SOCK_DGRAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw Failure("socket failed: errno \(errno)") }
            guard try withUnixAddress(path, { bind(fd, $0, $1) }) == 0 else { throw Failure("bind \(path) failed: errno \(errno)") }
        }

        deinit { close(fd) }

        private func next(until deadline: ContinuousClock.Instant) throws -> String? {
            guard try waitReadable(fd, until: deadline) else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count >= 0 else { throw Failure("recv failed: errno \(errno)") }
            return String(decoding: buffer[..<count], as: UTF8.self)
        }

        /// The next datagram that is not `STATUS=` (those come on a timer); nil after `timeout`.
        func receive(timeout: Duration = .seconds(10)) throws -> String? {
            let deadline = ContinuousClock.now + timeout
            while let message = try next(until: deadline) {
                if !message.hasPrefix("STATUS=") { return message }
            }
            return nil
        }

        /// Every datagram arriving within `duration`, with its arrival time.
        func receiveStamped(for duration: Duration) throws -> [(text: String, at: ContinuousClock.Instant)] {
            let deadline = ContinuousClock.now + duration
            var messages: [(text: String, at: ContinuousClock.Instant)] = []
            while let message = try next(until: deadline) { messages.append((message, ContinuousClock.now)) }
            return messages
        }

        /// Every datagram arriving within `duration`.
        func receiveAll(for duration: Duration) throws -> [String] {
            try receiveStamped(for: duration).map(\.text)
        }

        /// Datagrams up to and including the first for which `stop` holds (at most `timeout`).
        func receiveAll(until stop: (String) -> Bool, timeout: Duration = .seconds(10)) throws -> [String] {
            let deadline = ContinuousClock.now + timeout
            var messages: [String] = []
            while let message = try next(until: deadline) {
                messages.append(message)
                if stop(message) { break }
            }
            return messages
        }
    }
}
