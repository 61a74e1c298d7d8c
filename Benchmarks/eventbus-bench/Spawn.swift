// Child processes: the publisher and subscriber roles run as separate
// processes of this same binary (posix_spawn of /proc/self/exe), driven over
// two pipes with one-line commands and one-line `key=value` results.
//
// Before editing: every wait here is bounded; a child that does not answer
// in time is killed by its own pid and the run fails.
import CEventBusShims
import EventBusSystem
import Glibc

/// Blocks SIGCHLD in this process so `reapPromptly` can wait for it.
func blockChildSignal() {
    var signals: [Int32] = [SIGCHLD]
    _ = eventbus_block_signals(&signals, 1)
}

/// Waits for `pid` with sigtimedwait(2) on SIGCHLD (blocked by
/// `blockChildSignal`), so the wait ends within microseconds of the exit;
/// kills the child by its pid after `timeoutMs`.
/// - Returns: the exit status (0-255), or 128 + signal number.
func reapPromptly(_ pid: pid_t, timeoutMs: Int) -> Int32 {
    let deadline = monotonicNanos() + Int64(timeoutMs) * 1_000_000
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, SIGCHLD)
    var status: Int32 = 0
    while true {
        if waitpid(pid, &status, WNOHANG) == pid { break }
        let left = deadline - monotonicNanos()
        if left <= 0 { return reap(pid, timeoutMs: 0) }
        var timeout = timespec(tv_sec: Int(left / 1_000_000_000), tv_nsec: Int(left % 1_000_000_000))
        _ = sigtimedwait(&set, nil, &timeout)
    }
    let signal = status & 0x7f
    return signal == 0 ? (status >> 8) & 0xff : 128 + signal
}

/// Path of the running executable (readlink(2) of /proc/self/exe).
func selfExecutablePath() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard n > 0 else { fail("failed to read /proc/self/exe: \(errnoText())") }
    return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Spawns `path` with `arguments` (argv[0] is `path`), the given stdin and
/// stdout descriptors (-1 keeps ours) and stderr inherited.
/// - Returns: the child's pid; the caller must reap it.
func spawn(_ path: String, _ arguments: [String], stdin: Int32 = -1, stdout: Int32 = -1, stderr: Int32 = -1) -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if stdin >= 0 { posix_spawn_file_actions_adddup2(&actions, stdin, 0) }
    if stdout >= 0 { posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
    if stderr >= 0 { posix_spawn_file_actions_adddup2(&actions, stderr, 2) }
    let cArguments: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in cArguments { free(pointer) } }
    // The child starts with no blocked signals, whatever this process blocks
    // (the shell case blocks SIGCHLD to wait for it with sigtimedwait).
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
    var pid = pid_t()
    let rc = posix_spawn(&pid, path, &actions, &attributes, cArguments, environ)
    guard rc == 0 else { fail("failed to spawn \(path): \(String(cString: strerror(rc)))") }
    return pid
}

/// Waits for `pid` for up to `timeoutMs`, then kills it (SIGKILL, by its pid) and reaps it.
/// - Returns: the exit status (0-255), or 128 + signal number.
@discardableResult
func reap(_ pid: pid_t, timeoutMs: Int) -> Int32 {
    let deadline = monotonicNanos() + Int64(timeoutMs) * 1_000_000
    var status: Int32 = 0
    waiting: while true {
        switch systemCall(.retry, { waitpid(pid, &status, WNOHANG) }) {
        case .success(let rc) where rc == pid: break waiting
        case .failure: return -1
        case .success: break
        }
        if monotonicNanos() >= deadline {
            kill(pid, SIGKILL)
            _ = waitpid(pid, &status, 0)
            break
        }
        sleepMillis(1)
    }
    // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift does not import.
    let signal = status & 0x7f
    return signal == 0 ? (status >> 8) & 0xff : 128 + signal
}

/// A spawned role of this binary, talking over its stdin and stdout.
final class Child {
    let pid: pid_t
    let name: String
    private let input: Int32
    private let output: Int32
    private var pending: [UInt8] = []

    /// Spawns `eventbus-bench ARGUMENTS...` (or `executable ARGUMENTS...`, a
    /// program playing the same role, such as scripts/bench-client.c) with
    /// pipes on its stdin and stdout.
    init(name: String, arguments: [String], executable: String? = nil) {
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { fail("failed to create a pipe: \(errnoText())") }
        for fd in toChild + fromChild { setCloseOnExec(fd) }
        self.name = name
        pid = spawn(executable ?? selfExecutablePath(), arguments, stdin: toChild[0], stdout: fromChild[1])
        close(toChild[0])
        close(fromChild[1])
        input = toChild[1]
        output = fromChild[0]
    }

    deinit {
        close(input)
        close(output)
    }

    /// Sends one command line (LF added).
    func send(_ line: String) {
        writeAll(input, line + "\n")
    }

    /// The next line the child prints, waiting up to `timeoutMs`; fails the
    /// run (killing the child) on timeout or EOF.
    func readLine(timeoutMs: Int) -> String {
        let deadline = monotonicNanos() + Int64(timeoutMs) * 1_000_000
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let lf = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[0..<lf], as: UTF8.self)
                pending.removeFirst(lf + 1)
                return line
            }
            let left = Int((deadline - monotonicNanos()) / 1_000_000)
            if left <= 0 {
                kill(pid, SIGKILL)
                reap(pid, timeoutMs: 1000)
                fail("\(name) process did not answer within \(timeoutMs) ms")
            }
            var p = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, Int32(min(left, 1000))) <= 0 { continue }
            let result = chunk.withUnsafeMutableBytes { buffer in systemCall { read(output, buffer.baseAddress, buffer.count) } }
            guard case .success(let n) = result, n > 0 else {
                let status = reap(pid, timeoutMs: 1000)
                fail("\(name) process exited (status \(status)) before answering")
            }
            pending += chunk[0..<n]
        }
    }

    /// Reads a line and fails unless it is `expected`.
    func expect(_ expected: String, timeoutMs: Int) {
        let line = readLine(timeoutMs: timeoutMs)
        guard line == expected else { fail("\(name) process said \"\(line)\", expected \"\(expected)\"") }
    }

    /// Reads a `key=value key=value` result line.
    func readResult(timeoutMs: Int) -> Fields {
        Fields(parsing: readLine(timeoutMs: timeoutMs))
    }
}

/// `key=value` pairs separated by spaces, the format of every result line.
struct Fields {
    private(set) var pairs: [(String, String)] = []

    init() {}

    init(parsing line: String) {
        for token in line.split(separator: " ") {
            guard let eq = token.firstIndex(of: "=") else { continue }
            pairs.append((String(token[..<eq]), String(token[token.index(after: eq)...])))
        }
    }

    subscript(key: String) -> String? {
        get { pairs.last(where: { $0.0 == key })?.1 }
        set {
            pairs.removeAll { $0.0 == key }
            if let newValue { pairs.append((key, newValue)) }
        }
    }

    /// The value of `key` as an integer, or 0 when missing.
    func int(_ key: String) -> Int64 { Int64(self[key] ?? "") ?? 0 }

    /// The line form, `key=value ...` in insertion order.
    var line: String { pairs.map { "\($0.0)=\($0.1)" }.joined(separator: " ") }
}
