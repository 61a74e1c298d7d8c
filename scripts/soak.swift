// Soak driver for eventbusd, compiled and run by scripts/soak: publishers and
// subscribers with connection churn and a mix of patterns for N minutes;
// samples the broker's RSS, descriptors and CPU every 10 s; at the end checks
// that every event acknowledged to a publisher reached every stable
// subscriber whose pattern matched it (counts per subscriber) and that RSS
// reached a plateau. Prints the samples as a Markdown table.
//
// Before editing: this is a standalone program (Foundation + Glibc only) so
// it needs nothing from the package; keep the publish rate capped: the soak
// is about time, not throughput, and the machine has 2 cores.
import Foundation
import Glibc
import Synchronization

// MARK: Options

struct Options {
    var minutes = 10.0
    var broker = ".build/release/eventbusd"
    var rate = 2000          // events per second over all publishers
    var sampleSeconds = 10.0
    var csv: String? = nil

    static func parse() -> Options {
        var o = Options()
        var args = Array(CommandLine.arguments.dropFirst())
        func value() -> String {
            guard args.count > 1 else { fail("option \(args[0]) needs a value") }
            args.removeFirst()
            return args[0]
        }
        while let arg = args.first {
            switch arg {
            case "--minutes": o.minutes = Double(value()) ?? { fail("--minutes takes a number") }()
            case "--broker": o.broker = value()
            case "--rate": o.rate = Int(value()) ?? { fail("--rate takes events per second") }()
            case "--sample-seconds": o.sampleSeconds = Double(value()) ?? { fail("--sample-seconds takes a number") }()
            case "--csv": o.csv = value()
            default: fail("unknown option \(arg)")
            }
            args.removeFirst()
        }
        return o
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("soak: \(message)\n".utf8))
    exit(2)
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

// MARK: Line client

/// Blocking line client over AF_UNIX with receive timeouts. One thread each.
final class LineClient: @unchecked Sendable {
    let fd: Int32
    var buffer: [UInt8] = []
    var start = 0

    init?(path: String) {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in for (i, b) in path.utf8.enumerated() { raw[i] = b } }
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if ok != 0 { Glibc.close(fd); return nil }
        var tv = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { Glibc.close(fd) }

    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { if errno == EINTR { continue }; return false }
            offset += n
        }
        return true
    }

    enum Line { case line([UInt8]), timeout, closed }

    /// Next line; `.timeout` after about 1 s without data.
    func readLine() -> Line {
        while true {
            if let lf = buffer[start...].firstIndex(of: 0x0A) {
                let line = Array(buffer[start..<lf])
                start = lf + 1
                if start > 1 << 16 { buffer.removeFirst(start); start = 0 }
                return .line(line)
            }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { buffer.append(contentsOf: chunk[0..<n]); continue }
            if n == 0 { return .closed }
            if errno == EINTR { continue }
            if errno == EAGAIN { return .timeout }
            return .closed
        }
    }
}

/// Cheap field extraction from frames the broker wrote (its own encoder:
/// `"op":"event","seq":N,"type":"T"` always come first, in that order).
func field(_ line: [UInt8], _ key: String) -> Substring? {
    let text = String(decoding: line.prefix(400), as: UTF8.self)
    guard let range = text.range(of: "\"\(key)\":") else { return nil }
    var rest = text[range.upperBound...]
    if rest.first == "\"" {
        rest = rest.dropFirst()
        return rest.prefix { $0 != "\"" }
    }
    return rest.prefix { $0.isNumber || $0 == "-" }
}

// MARK: Workload

let types = ["soak.a.b", "soak.a.c", "soak.b.b", "soak.c.d.e", "soak.a.b.c", "other.x", "other.y.z", "soak.c.x"]
let stablePatterns = [">", "soak.>", "soak.a.*", "soak.*.b", "soak.a.b", "other.>", "soak.c.>", "*.a.b"]
let churnPatterns = ["soak.*.*", "soak.a.>", "other.*", ">", "soak.b.b", "*.*.b"]

func matches(_ pattern: String, _ type: String) -> Bool {
    let p = pattern.split(separator: ".", omittingEmptySubsequences: false)
    let t = type.split(separator: ".", omittingEmptySubsequences: false)
    for (i, segment) in p.enumerated() {
        if segment == ">" { return t.count > i }
        guard i < t.count, segment == "*" || segment == t[i] else { return false }
    }
    return p.count == t.count
}

final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
    var value: Value { mutex.withLock { $0 } }
}

struct SubscriberState: Sendable {
    var received = 0
    var lastSeq = 0
    var outOfOrder = 0
    var wrongType = 0
    var dropNotices = 0
    var closed = false
}

struct Totals: Sendable {
    var ackedPerType: [String: Int] = [:]
    var publishConnections = 0
    var churnConnections = 0
    var churnEvents = 0
    var churnViolations = 0
    var errors: [String] = []
}

let stop = Atomic<Bool>(false)

// MARK: Broker process

final class Broker {
    let process = Process()
    let directory: String
    let socket: String

    init(path: String) {
        var template = Array("/tmp/ebsoak.XXXXXX".utf8CString)
        directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        socket = directory + "/bus.sock"
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["--socket", socket, "--log-level", "notice"]
        process.standardError = FileHandle(forWritingAtPath: "/dev/stderr")
        do { try process.run() } catch { fail("cannot start \(path): \(error)") }
        let deadline = now() + 10
        while LineClient(path: socket) == nil {
            if now() > deadline || !process.isRunning { fail("eventbusd did not start on \(socket)") }
            usleep(20_000)
        }
    }

    var pid: Int32 { process.processIdentifier }

    func rssKiB() -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    func fds() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1 }

    func cpuTicks() -> Int {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        guard let close = stat.lastIndex(of: ")") else { return 0 }
        let rest = stat[stat.index(after: close)...].split(separator: " ")
        return (Int(rest[11]) ?? 0) + (Int(rest[12]) ?? 0)
    }

    func stop() -> Int32 {
        kill(pid, SIGTERM)
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
        return process.terminationStatus
    }
}

// MARK: Main

let options = Options.parse()
let broker = Broker(path: options.broker)
let socketPath = broker.socket
let totals = Shared(Totals())
let threads = DispatchGroup()

func spawn(_ body: @escaping @Sendable () -> Void) {
    threads.enter()
    Thread { body(); threads.leave() }.start()
}

// Stable subscribers: connect first, subscribe, read until told to stop.
var stable: [(pattern: String, state: Shared<SubscriberState>)] = []
for pattern in stablePatterns {
    guard let client = LineClient(path: broker.socket) else { fail("cannot connect") }
    client.send(Array("{\"op\":\"subscribe\",\"type\":\"\(pattern)\",\"req\":1}\n".utf8))
    guard case .line(let reply) = client.readLine(), field(reply, "op") == "ok" else { fail("subscribe \(pattern) failed") }
    let state = Shared(SubscriberState())
    stable.append((pattern, state))
    spawn {
        while true {
            switch client.readLine() {
            case .line(let line):
                let op = field(line, "op")
                if op == "dropped" { state.withLock { $0.dropNotices += 1 } }
                guard op == "event", let seq = Int(field(line, "seq") ?? ""), let type = field(line, "type") else { continue }
                let ok = matches(pattern, String(type))
                state.withLock {
                    $0.received += 1
                    if seq <= $0.lastSeq { $0.outOfOrder += 1 }
                    $0.lastSeq = seq
                    if !ok { $0.wrongType += 1 }
                }
            case .timeout:
                if stop.load(ordering: .relaxed) { state.withLock { $0.closed = true }; return }
            case .closed:
                state.withLock { $0.closed = true }
                return
            }
        }
    }
}

// Publishers: pipelined batches with req, rate-capped, reconnecting every
// 20-200 batches; acks counted per type.
let publishers = 4
let batch = 20
for p in 0..<publishers {
    spawn {
        var rng = SystemRandomNumberGenerator()
        var sent = 0
        let perPublisherRate = Double(options.rate) / Double(publishers)
        let begin = now()
        while !stop.load(ordering: .relaxed) {
            guard let client = LineClient(path: socketPath) else {
                totals.withLock { $0.errors.append("publisher \(p) cannot connect") }
                usleep(100_000)
                continue
            }
            totals.withLock { $0.publishConnections += 1 }
            let batches = Int.random(in: 20...200, using: &rng)
            for _ in 0..<batches where !stop.load(ordering: .relaxed) {
                var frames: [UInt8] = []
                var batchTypes: [String] = []
                for _ in 0..<batch {
                    let type = types.randomElement(using: &rng)!
                    let size = [0, 16, 200, 1000, 4000].randomElement(using: &rng)!
                    batchTypes.append(type)
                    sent += 1
                    frames += Array("{\"op\":\"publish\",\"type\":\"\(type)\",\"req\":\(sent),\"data\":{\"p\":\(p),\"n\":\(sent),\"pad\":\"\(String(repeating: "x", count: size))\"}}\n".utf8)
                }
                guard client.send(frames) else { totals.withLock { $0.errors.append("publisher \(p): send failed") }; break }
                var acked: [String: Int] = [:]
                var replies = 0
                while replies < batch {
                    guard case .line(let line) = client.readLine() else {
                        totals.withLock { $0.errors.append("publisher \(p): no reply") }
                        break
                    }
                    if field(line, "op") == "ok", let req = Int(field(line, "req") ?? "") {
                        let type = batchTypes[req - (sent - batch) - 1]
                        acked[type, default: 0] += 1
                    } else {
                        totals.withLock { $0.errors.append("publisher \(p): \(String(decoding: line, as: UTF8.self))") }
                    }
                    replies += 1
                }
                totals.withLock { for (type, n) in acked { $0.ackedPerType[type, default: 0] += n } }
                // Rate cap: stay at or below the target average.
                let ahead = Double(sent) / perPublisherRate - (now() - begin)
                if ahead > 0 { usleep(UInt32(min(ahead, 1) * 1_000_000)) }
            }
        }
    }
}

// Churning subscribers: connect, subscribe, read 0.2-3 s (checking what
// arrives), then leave: cleanly, abruptly with unread data, or mid-frame.
for c in 0..<4 {
    spawn {
        var rng = SystemRandomNumberGenerator()
        while !stop.load(ordering: .relaxed) {
            guard let client = LineClient(path: socketPath) else { usleep(100_000); continue }
            let pattern = churnPatterns.randomElement(using: &rng)!
            client.send(Array("{\"op\":\"hello\",\"client\":\"churn-\(c)\"}\n{\"op\":\"subscribe\",\"type\":\"\(pattern)\"}\n".utf8))
            let until = now() + Double.random(in: 0.2...3, using: &rng)
            var events = 0
            var violations = 0
            var lastSeq = 0
            while now() < until {
                guard case .line(let line) = client.readLine() else { break }
                guard field(line, "op") == "event", let seq = Int(field(line, "seq") ?? ""), let type = field(line, "type") else { continue }
                if !matches(pattern, String(type)) || seq <= lastSeq { violations += 1 }
                lastSeq = seq
                events += 1
            }
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: client.send(Array("{\"op\":\"unsubscribe\",\"type\":\"\(pattern)\"}\n".utf8))
            case 1: client.send(Array("{\"op\":\"publish\",\"type\":\"soak.a.b\",\"data\":\"".utf8))  // left mid-frame
            default: break  // closed with events unread
            }
            totals.withLock {
                $0.churnConnections += 1
                $0.churnEvents += events
                $0.churnViolations += violations
            }
        }
    }
}

// Flash connections: connect, subscribe, ping, close, about 20 per second
// (descriptor and subscription-index churn).
spawn {
    var rng = SystemRandomNumberGenerator()
    while !stop.load(ordering: .relaxed) {
        if let client = LineClient(path: socketPath) {
            let pattern = churnPatterns.randomElement(using: &rng)!
            client.send(Array("{\"op\":\"subscribe\",\"type\":\"\(pattern)\"}\n{\"op\":\"ping\",\"req\":1}\n".utf8))
            while case .line(let line) = client.readLine(), field(line, "req") != "1" {}
            totals.withLock { $0.churnConnections += 1 }
        }
        usleep(50_000)
    }
}

// Sampling.
struct Sample { var t: Double; var rssKiB: Int; var fds: Int; var cpuPercent: Double; var stats: String }
var samples: [Sample] = []
let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
let observer = LineClient(path: broker.socket)!
func statsLine() -> String {
    observer.send(Array("{\"op\":\"stats\",\"req\":\"s\"}\n".utf8))
    while case .line(let line) = observer.readLine() {
        if field(line, "req") == "s" {
            let keys = ["connections", "subscriptions", "published", "delivered", "dropped", "queued_bytes"]
            return keys.map { String(field(line, $0) ?? "?") }.joined(separator: " | ")
        }
    }
    return "? | ? | ? | ? | ? | ?"
}
let start = now()
var lastTicks = broker.cpuTicks()
var lastTime = start
let end = start + options.minutes * 60
FileHandle.standardError.write(Data("soak: \(options.minutes) min against \(options.broker) (pid \(broker.pid)), \(options.rate) events/s\n".utf8))
while true {
    let wake = min(end, lastTime + options.sampleSeconds)
    while now() < wake { usleep(100_000) }
    let t = now()
    let cpu = broker.cpuTicks()
    let sample = Sample(t: t - start, rssKiB: broker.rssKiB(), fds: broker.fds(),
                        cpuPercent: Double(cpu - lastTicks) / ticks / (t - lastTime) * 100, stats: statsLine())
    samples.append(sample)
    FileHandle.standardError.write(Data("soak: \(Int(sample.t)) s  RSS \(sample.rssKiB) KiB  fds \(sample.fds)  CPU \(String(format: "%.1f", sample.cpuPercent))%  \(sample.stats)\n".utf8))
    lastTicks = cpu
    lastTime = t
    if t >= end { break }
}

// Stop publishing, let the stable subscribers drain, then check counts.
stop.store(true, ordering: .relaxed)
_ = threads.wait(timeout: .now() + 30)
let acked = totals.value.ackedPerType
var failures: [String] = []
print("\n## Delivery check (\(String(format: "%.1f", options.minutes)) minutes)\n")
print("| stable subscriber | expected (acked, matching) | received | drop notices | out of order | wrong type |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for (pattern, state) in stable {
    let expected = acked.filter { matches(pattern, $0.key) }.values.reduce(0, +)
    let s = state.value
    print("| `\(pattern)` | \(expected) | \(s.received) | \(s.dropNotices) | \(s.outOfOrder) | \(s.wrongType) |")
    if s.received != expected || s.outOfOrder > 0 || s.wrongType > 0 {
        failures.append("subscriber \(pattern): expected \(expected), received \(s.received), \(s.dropNotices) drop notices, \(s.outOfOrder) out of order, \(s.wrongType) wrong type")
    }
}
let t = totals.value
print("\nPublished and acknowledged: \(acked.values.reduce(0, +)) events over \(t.publishConnections) publisher connections; churn: \(t.churnConnections) subscriber connections, \(t.churnEvents) events, \(t.churnViolations) violations; errors: \(t.errors.count)")
if t.churnViolations > 0 { failures.append("\(t.churnViolations) events to churning subscribers broke order or pattern") }
if !t.errors.isEmpty { failures.append("client errors: \(t.errors.prefix(5))") }

print("\n## Samples every \(Int(options.sampleSeconds)) s\n")
print("| t (s) | RSS (KiB) | fds | CPU % | connections | subscriptions | published | delivered | dropped | queued_bytes |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for s in samples {
    print("| \(Int(s.t.rounded())) | \(s.rssKiB) | \(s.fds) | \(String(format: "%.1f", s.cpuPercent)) | \(s.stats) |")
}
if let csv = options.csv {
    var text = "t_s,rss_kib,fds,cpu_percent\n"
    for s in samples { text += String(format: "%.0f,%d,%d,%.1f\n", s.t, s.rssKiB, s.fds, s.cpuPercent) }
    try? text.write(toFile: csv, atomically: true, encoding: .utf8)
}

// Plateau: after the first quarter (warm-up), the highest RSS of the last
// half may exceed the highest RSS of the second quarter by at most 10% + 1 MiB.
let rss = samples.map(\.rssKiB)
if rss.count >= 8 {
    let quarter = rss.count / 4
    let settled = rss[quarter..<(2 * quarter)].max()!
    let late = rss[(rss.count / 2)...].max()!
    let plateau = Double(late) <= Double(settled) * 1.10 + 1024
    print("\nRSS plateau: peak \(rss.max()!) KiB; second quarter max \(settled) KiB, last half max \(late) KiB: \(plateau ? "PLATEAU" : "STILL GROWING")")
    if !plateau { failures.append("RSS still growing: \(settled) KiB -> \(late) KiB") }
} else {
    print("\nRSS plateau: too few samples to judge (\(rss.count))")
}

let status = broker.stop()
print("eventbusd exit status after SIGTERM: \(status)")
if status != 0 { failures.append("eventbusd exited \(status)") }
if failures.isEmpty {
    print("\nsoak: PASS")
} else {
    print("\nsoak: FAIL\n" + failures.map { "  - " + $0 }.joined(separator: "\n"))
    exit(1)
}
