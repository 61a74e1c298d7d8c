// The subscriber role: one process holding every subscriber connection of a
// run (live ones read from the start, stalled ones only once told to drain),
// counting event frames and `dropped` notices, optionally recording latency.
//
// Control, one line each way: it prints `ready` once every subscription is
// acknowledged; on `drain` it reads all connections (stalled ones too) and
// prints `idle` once nothing arrived for the idle time; on `result` it prints
// its `key=value` result line and exits. EOF on stdin ends it.
import EventBusSystem
import Glibc

/// What the subscriber process does, from its command line.
struct SubscriberOptions {
    var wire: Wire
    var socket: String
    var type = "bench.t"
    /// Connections that read from the start.
    var live = 1
    /// Connections that subscribe, then read nothing until `drain`.
    var stalled = 0
    /// Latency samples to make room for; 0 records none.
    var latencySamples = 0
    /// Quiet time that counts as idle after `drain`, in milliseconds.
    var idleMs = 300
    /// (issue 38) Every connection a member of this queue group.
    var group: String? = nil
    /// (nats) CONNECT with `"headers":true`, so HMSGs arrive with their
    /// headers (`--headers 1`; case 9's rows that carry the link's block).
    var natsHeaders = false
    /// Hard limit on the whole process life, in seconds.
    var deadlineSeconds = 300
}

/// One subscriber connection and its unconsumed bytes.
private final class Inbound {
    let fd: Int32
    let stalled: Bool
    let buffer: UnsafeMutablePointer<UInt8>
    let capacity = 1 << 18
    var used = 0
    var closed = false
    var tally = Tally()
    var firstEvent: Int64 = 0
    var lastEvent: Int64 = 0

    init(fd: Int32, stalled: Bool) {
        self.fd = fd
        self.stalled = stalled
        buffer = .allocate(capacity: capacity)
    }
}

/// Runs the subscriber role and exits.
func runSubscriber(_ options: SubscriberOptions) -> Never {
    SubscriberLoop(options).run()
}

/// The subscriber process: its connections, its control input (stdin) and
/// whether it drains.
private final class SubscriberLoop {
    let options: SubscriberOptions
    var connections: [Inbound] = []
    /// Latency samples, shared by the live connections (nil: none recorded).
    var samples: UnsafeMutablePointer<Int64>? = nil
    let eventbusScanner = EventBusScanner()
    let redisScanner = RedisScanner()
    let natsScanner = NATSScanner()
    let mqttScanner = MQTTScanner()
    let relayScanner = RelayScanner()
    var hardDeadline: Int64 = 0
    let idleNanos: Int64
    var draining = false
    var waitingForIdle = false
    var lastActivity: Int64 = 0
    var control: [UInt8] = []
    /// stdin, then `polled`.
    var pollSet: [pollfd] = []
    var polled: [Inbound] = []
    var needsRebuild = false

    /// Connects and subscribes every connection.
    init(_ options: SubscriberOptions) {
        self.options = options
        idleNanos = Int64(options.idleMs) * 1_000_000
        for index in 0..<(options.live + options.stalled) {
            let fd = openClient(options.wire, options.socket, natsHeaders: options.natsHeaders)
            subscribe(fd, options.wire, types: options.wire == .relay ? [] : [options.type], group: options.group)
            setNonBlocking(fd)
            connections.append(Inbound(fd: fd, stalled: index >= options.live))
        }
        if options.latencySamples > 0 {
            let samples = UnsafeMutablePointer<Int64>.allocate(capacity: options.latencySamples)
            self.samples = samples
            for c in connections where !c.stalled {
                c.tally.samples = samples
                c.tally.sampleCapacity = options.latencySamples
            }
        }
    }

    func run() -> Never {
        writeAll(1, "ready\n")
        hardDeadline = monotonicNanos() + Int64(options.deadlineSeconds) * 1_000_000_000
        lastActivity = monotonicNanos()
        rebuildPollSet()
        while true {
            let timeout = pollTimeout()
            guard case .success(let ready) = systemCall(.returnZero, { poll(&pollSet, nfds_t(pollSet.count), timeout) }) else {
                fail("subscriber: poll failed: \(errnoText())")
            }
            if ready <= 0 { continue }
            for index in 1..<pollSet.count where pollSet[index].revents != 0 { read(polled[index - 1]) }
            if pollSet[0].revents != 0 { readControl() }
            if needsRebuild { rebuildPollSet() }
        }
    }

    func rebuildPollSet() {
        polled = connections.filter { !$0.closed && (draining || !$0.stalled) }
        pollSet = [pollfd(fd: 0, events: Int16(POLLIN), revents: 0)]
            + polled.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        needsRebuild = false
    }

    /// The poll timeout, ms; prints `idle` once a drain has been quiet for the idle time.
    func pollTimeout() -> Int32 {
        let now = monotonicNanos()
        if now > hardDeadline { fail("subscriber: no `result` command within \(options.deadlineSeconds) s") }
        guard waitingForIdle else { return 1000 }
        let quietFor = now - lastActivity
        if quietFor >= idleNanos {
            waitingForIdle = false
            writeAll(1, "idle\n")
            return 1000
        }
        return Int32(max(1, (idleNanos - quietFor) / 1_000_000))
    }

    /// Reads a ready connection (up to four reads: fewer poll calls under load) and counts what arrived.
    func read(_ c: Inbound) {
        for _ in 0..<4 {
            let result = systemCall { Glibc.read(c.fd, c.buffer + c.used, c.capacity - c.used) }
            if case .failure(let e) = result, e == .wouldBlock { break }
            guard case .success(let n) = result, n > 0 else {  // EOF or reset: the broker closed us (redis: output buffer limit)
                c.closed = true
                needsRebuild = true
                break
            }
            let at = monotonicNanos()
            lastActivity = at
            c.used += n
            let before = c.tally.events
            c.tally.now = at
            let consumed = scan(c)
            while c.tally.pings > 0 {  // nats-server's keep-alive; we write nothing else
                writeAll(c.fd, NATS.pong)
                c.tally.pings -= 1
            }
            if c.tally.events != before {
                if c.firstEvent == 0 { c.firstEvent = at }
                c.lastEvent = at
            }
            if consumed > 0 {
                memmove(c.buffer, c.buffer + consumed, c.used - consumed)
                c.used -= consumed
            }
            if c.used == c.capacity { fail("subscriber: a frame longer than \(c.capacity) bytes") }
            if n < c.capacity / 4 { break }
        }
    }

    /// Counts the whole frames in `c`'s buffer. - Returns: the bytes they took.
    func scan(_ c: Inbound) -> Int {
        let latency = samples != nil
        switch options.wire {
        case .eventbus: return eventbusScanner.scan(c.buffer, c.used, into: &c.tally, latency: latency)
        case .redis: return redisScanner.scan(c.buffer, c.used, into: &c.tally, latency: latency)
        case .nats: return natsScanner.scan(c.buffer, c.used, into: &c.tally, latency: latency)
        case .mqtt: return mqttScanner.scan(c.buffer, c.used, into: &c.tally, latency: latency)
        case .relay: return relayScanner.scan(c.buffer, c.used, into: &c.tally, latency: latency)
        }
    }

    /// Reads the driver's commands: `drain`, `result`; EOF ends the process.
    func readControl() {
        var chunk = [UInt8](repeating: 0, count: 256)
        let result = chunk.withUnsafeMutableBytes { buffer in systemCall { Glibc.read(0, buffer.baseAddress, buffer.count) } }
        guard case .success(let n) = result, n > 0 else { exit(1) }  // the driver went away
        control += chunk[0..<n]
        while let lf = control.firstIndex(of: 0x0A) {
            let command = String(decoding: control[0..<lf], as: UTF8.self)
            control.removeFirst(lf + 1)
            switch command {
            case "drain":
                if !draining { draining = true; needsRebuild = true }
                waitingForIdle = true
                lastActivity = monotonicNanos()
            case "result":
                printResult(connections, samples: samples)
                exit(0)
            default:
                fail("subscriber: unknown command \(command)")
            }
        }
    }
}

/// Prints the result line: live totals (`events`, `dropped`, `drop_notices`,
/// `other`, `t_first`, `t_last` in CLOCK_MONOTONIC ns), stalled totals
/// (`stalled_events`, `stalled_dropped`, `stalled_closed`) and, when
/// recording, latency percentiles in microseconds (`p50_us`, `p99_us`,
/// `p999_us`, `max_us`, `samples`).
private func printResult(_ connections: [Inbound], samples: UnsafeMutablePointer<Int64>?) {
    var fields = Fields()
    let live = connections.filter { !$0.stalled }
    let stalled = connections.filter { $0.stalled }
    fields["events"] = String(live.reduce(0) { $0 + $1.tally.events })
    fields["dropped"] = String(live.reduce(0) { $0 + $1.tally.dropped })
    fields["drop_notices"] = String(live.reduce(0) { $0 + $1.tally.dropNotices })
    fields["other"] = String(connections.reduce(0) { $0 + $1.tally.other })
    fields["closed"] = String(live.filter(\.closed).count)
    let firsts = live.map(\.firstEvent).filter { $0 > 0 }
    fields["t_first"] = String(firsts.min() ?? 0)
    fields["t_last"] = String(live.map(\.lastEvent).max() ?? 0)
    fields["stalled_events"] = String(stalled.reduce(0) { $0 + $1.tally.events })
    fields["stalled_dropped"] = String(stalled.reduce(0) { $0 + $1.tally.dropped })
    fields["stalled_drop_notices"] = String(stalled.reduce(0) { $0 + $1.tally.dropNotices })
    fields["stalled_closed"] = String(stalled.filter(\.closed).count)
    fields["cpu_us"] = String(processCPUMicros(pid: getpid()) ?? 0)
    if let samples {
        let count = live.reduce(0) { $0 + $1.tally.sampleCount }
        var sorted = Array(UnsafeBufferPointer(start: samples, count: count))
        sorted.sort()
        func percentile(_ q: Double) -> String {
            guard !sorted.isEmpty else { return "0" }
            let rank = Int((q * Double(sorted.count)).rounded(.up)) - 1
            return fixed(Double(sorted[min(max(rank, 0), sorted.count - 1)]) / 1000, 1)
        }
        fields["samples"] = String(count)
        fields["p50_us"] = percentile(0.50)
        fields["p99_us"] = percentile(0.99)
        fields["p999_us"] = percentile(0.999)
        fields["max_us"] = percentile(1.0)
    }
    if let other = connections.compactMap(\.tally.firstOther).first {
        printErr("subscriber: first unexpected frame: \(other)")
    }
    writeAll(1, fields.line + "\n")
}
