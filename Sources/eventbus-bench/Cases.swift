// The benchmark cases of issue 6, run against one broker that is already
// listening: each spawns its subscriber and publisher processes, reads the
// broker's /proc entries, and prints one `key=value` result line.
//
// Before editing: every case is bounded in message count and in time, and
// aims only at the Unix socket it is given.
import Glibc

/// The cases, by the id `scripts/bench` passes and the report groups by.
enum BenchCase: String, CaseIterable {
    /// (1) 1→1 throughput, 64-byte payload; also (4) broker CPU per delivery.
    case oneToOne64 = "c1-64"
    /// (1) 1→1 throughput, 1 KiB payload.
    case oneToOne1K = "c1-1k"
    /// (2) 1→10 fan-out, 64-byte payload, deliveries/s.
    case fanOut = "c2"
    /// (3) latency at a fixed 10,000 msg/s, 64-byte payload.
    case latency = "c3"
    /// (5) broker RSS increase per idle subscriber connection (1,000 of them).
    case idle = "c5"
    /// (6) case 1 (64 B) with 10,000 unrelated subscriptions and patterns present.
    case routing = "c6"
    /// (7) a stalled subscriber next to a live one.
    case stalled = "c7"
    /// (8) one-shot shell publish: `eventbus publish` vs `redis-cli publish`.
    case shell = "c8"
}

/// How a case run is configured, from `eventbus-bench run` arguments.
struct RunOptions {
    var benchCase: BenchCase
    var wire: Wire
    var socket: String
    /// The broker's pid, for /proc/PID/stat and /proc/PID/status.
    var brokerPID: Int32
    /// Seconds of load per throughput run.
    var seconds = 3.0
    /// Messages per throughput run at most (the run ends at whichever bound
    /// comes first); a fixed count makes profiles (callgrind) comparable.
    var count = 50_000_000
    /// Seconds of paced load for the latency case.
    var latencySeconds = 5.0
    /// Runs of the CLI for the shell case.
    var shellRuns = 200
    /// The CLI binary for the shell case: `eventbus` or `redis-cli`.
    var cli = ""
}

/// Runs one case and prints its result line on stdout.
func runCase(_ options: RunOptions) {
    raiseFileLimit()
    let result: Fields
    switch options.benchCase {
    case .oneToOne64: result = throughput(options, payload: 64, subscribers: 1)
    case .oneToOne1K: result = throughput(options, payload: 1024, subscribers: 1)
    case .fanOut: result = throughput(options, payload: 64, subscribers: 10)
    case .latency: result = latency(options)
    case .idle: result = idleConnections(options, count: 1000)
    case .routing:
        let noise = holdUnrelatedSubscriptions(options, total: 10_000, perConnection: 1000)
        result = throughput(options, payload: 64, subscribers: 1)
        noise.forEach { close($0) }
    case .stalled: result = stalledSubscriber(options)
    case .shell: result = shellPublish(options)
    }
    writeAll(1, result.line + "\n")
}

/// Common command-line arguments for the child roles.
private func roleArguments(_ options: RunOptions) -> [String] {
    ["--proto", options.wire.rawValue, "--socket", options.socket]
}

/// Cases 1, 2, 4 and 6: `subscribers` live subscribers, one flooding
/// publisher, for `options.seconds`.
/// Result: `rate` (events delivered per second, all subscribers together,
/// first to last delivery), `loss` (sent × subscribers − delivered),
/// `dropped` (sum of `dropped` notices), `cpu_us` (broker CPU µs per
/// delivery), `sent`, `delivered`, `errors`, `disconnected` (subscribers the
/// broker closed, e.g. Redis's `client-output-buffer-limit pubsub`).
private func throughput(_ options: RunOptions, payload: Int, subscribers: Int) -> Fields {
    let subscriber = Child(name: "subscriber", arguments: ["sub"] + roleArguments(options) + ["--live", String(subscribers)])
    subscriber.expect("ready", timeoutMs: 30_000)
    let cpuBefore = processCPUMicros(pid: options.brokerPID) ?? 0
    let publisher = Child(name: "publisher", arguments: ["pub"] + roleArguments(options)
        + ["--payload", String(payload), "--seconds", String(options.seconds), "--count", String(options.count)])
    let published = publisher.readResult(timeoutMs: Int(options.seconds * 1000) + 90_000)
    reap(publisher.pid, timeoutMs: 5000)
    subscriber.send("drain")
    subscriber.expect("idle", timeoutMs: 60_000)
    let cpuAfter = processCPUMicros(pid: options.brokerPID) ?? 0
    subscriber.send("result")
    let received = subscriber.readResult(timeoutMs: 10_000)
    reap(subscriber.pid, timeoutMs: 5000)

    let sent = published.int("sent")
    let delivered = received.int("events")
    let span = received.int("t_last") - received.int("t_first")
    var fields = Fields()
    fields["rate"] = delivered > 1 && span > 0 ? String(Int64(Double(delivered - 1) * 1e9 / Double(span))) : "0"
    fields["loss"] = String(sent * Int64(subscribers) - delivered)
    fields["dropped"] = String(received.int("dropped"))
    fields["cpu_us"] = delivered > 0 ? fixed(Double(cpuAfter - cpuBefore) / Double(delivered), 3) : "0"
    fields["sent"] = String(sent)
    fields["delivered"] = String(delivered)
    fields["errors"] = String(published.int("errors") + received.int("other"))
    fields["disconnected"] = String(received.int("closed"))
    return fields
}

/// Case 3: one subscriber, one publisher at a fixed 10,000 msg/s with a send
/// stamp in each 64-byte payload, for `options.latencySeconds`.
/// Result: `p50_us`, `p99_us`, `p999_us`, `max_us`, `samples`, `loss`.
private func latency(_ options: RunOptions) -> Fields {
    let rate = 10_000
    let expected = Int(Double(rate) * options.latencySeconds)
    let subscriber = Child(name: "subscriber", arguments: ["sub"] + roleArguments(options)
        + ["--live", "1", "--latency-samples", String(expected + 16)])
    subscriber.expect("ready", timeoutMs: 30_000)
    let publisher = Child(name: "publisher", arguments: ["pub"] + roleArguments(options)
        + ["--payload", "64", "--rate", String(rate), "--seconds", String(options.latencySeconds)])
    let published = publisher.readResult(timeoutMs: Int(options.latencySeconds * 1000) + 60_000)
    reap(publisher.pid, timeoutMs: 5000)
    subscriber.send("drain")
    subscriber.expect("idle", timeoutMs: 60_000)
    subscriber.send("result")
    let received = subscriber.readResult(timeoutMs: 10_000)
    reap(subscriber.pid, timeoutMs: 5000)
    var fields = Fields()
    for key in ["p50_us", "p99_us", "p999_us", "max_us", "samples"] { fields[key] = received[key] ?? "0" }
    fields["loss"] = String(published.int("sent") - received.int("events"))
    fields["errors"] = String(published.int("errors") + received.int("other"))
    return fields
}

/// Case 5: opens `count` connections that each subscribe to their own type
/// `bench.idle.N` and then stay idle; measures the broker's VmRSS before and
/// after. Result: `rss_kib_per_conn`, `rss_before_kib`, `rss_after_kib`.
private func idleConnections(_ options: RunOptions, count: Int) -> Fields {
    let before = processStatusKiB(pid: options.brokerPID, field: "VmRSS") ?? 0
    var fds: [Int32] = []
    for index in 0..<count {
        let fd = connectUnix(options.socket)
        writeAll(fd, subscribeFrame(options.wire, type: "bench.idle.\(index)", req: 1))
        fds.append(fd)
    }
    for fd in fds {
        awaitSubscribed(fd, options.wire)
    }
    sleepMillis(100)
    let after = processStatusKiB(pid: options.brokerPID, field: "VmRSS") ?? 0
    fds.forEach { close($0) }
    var fields = Fields()
    fields["rss_kib_per_conn"] = fixed(Double(after - before) / Double(count), 2)
    fields["rss_before_kib"] = String(before)
    fields["rss_after_kib"] = String(after)
    return fields
}

/// Waits for the acknowledgement of one subscribe request.
private func awaitSubscribed(_ fd: Int32, _ wire: Wire) {
    readFrames(fd, wire) { frame in
        if frame.hasPrefix(#"{"op":"error""#) || frame.hasPrefix("-") { fail("subscribe refused: \(frame)") }
        return wire == .eventbus ? frame.hasPrefix(#"{"op":"ok""#) : frame.hasPrefix("subscribe ")
    }
}

/// Case 6 set-up: `total` subscriptions that never match `bench.t`, spread
/// over connections of `perConnection` each (under the broker's default
/// per-connection limit of 4096): nine in ten exact types `other.nI.created`,
/// one in ten patterns, cycling through `other.nI.*`, `other.nI.>`, `*.nI`
/// and `bench.*.nI` (redis: PSUBSCRIBE with the glob closest in meaning,
/// `>` becoming `*`). Returns once the broker acknowledged them all; the
/// caller closes the returned descriptors.
private func holdUnrelatedSubscriptions(_ options: RunOptions, total: Int, perConnection: Int) -> [Int32] {
    var fds: [Int32] = []
    var next = 0
    while next < total {
        let fd = connectUnix(options.socket)
        fds.append(fd)
        var exact: [String] = []
        var patterns: [String] = []
        let end = min(total, next + perConnection)
        for i in next..<end {
            if i % 10 != 9 {
                exact.append("other.n\(i).created")
            } else {
                switch (i / 10) % 4 {
                case 0: patterns.append("other.n\(i).*")
                case 1: patterns.append(options.wire == .eventbus ? "other.n\(i).>" : "other.n\(i).*")
                case 2: patterns.append("*.n\(i)")
                default: patterns.append("bench.*.n\(i)")
                }
            }
        }
        next = end
        var request: [UInt8] = []
        switch options.wire {
        case .eventbus:
            for type in exact + patterns { request += subscribeFrame(.eventbus, type: type, req: nil) }
        case .redis:
            request += respCommand(["SUBSCRIBE"] + exact)
            request += respCommand(["PSUBSCRIBE"] + patterns)
        }
        request += pingFrame(options.wire)
        writeAll(fd, request)
        readFrames(fd, options.wire, timeoutMs: 30_000) { frame in
            if frame.hasPrefix(#"{"op":"error""#) || frame.hasPrefix("-") { fail("subscribe refused: \(frame)") }
            return frame.hasPrefix(#"{"op":"ok""#) || frame.hasPrefix("pong")
        }
    }
    return fds
}

/// Case 7: a live subscriber and a stalled one (subscribed, reading nothing)
/// while one publisher floods 64-byte events for `options.seconds`. Then the
/// stalled one drains, one more event is published so that eventbus can
/// queue its `dropped` notice (PROTOCOL.md "Semantics": the notice comes
/// before the next event), and the stalled one drains again.
/// Result: `live_rate`, `live_loss`, `rss_peak_mib` (broker VmHWM),
/// `stalled_loss` (events it never got), `stalled_dropped` (sum of its
/// `dropped` notices), `stalled_closed` (1 if the broker disconnected it).
private func stalledSubscriber(_ options: RunOptions) -> Fields {
    let subscriber = Child(name: "subscriber", arguments: ["sub"] + roleArguments(options) + ["--live", "1", "--stalled", "1"])
    subscriber.expect("ready", timeoutMs: 30_000)
    let publisher = Child(name: "publisher", arguments: ["pub"] + roleArguments(options)
        + ["--payload", "64", "--seconds", String(options.seconds), "--count", String(options.count)])
    let published = publisher.readResult(timeoutMs: Int(options.seconds * 1000) + 90_000)
    reap(publisher.pid, timeoutMs: 5000)
    let peak = processStatusKiB(pid: options.brokerPID, field: "VmHWM") ?? 0
    subscriber.send("drain")
    subscriber.expect("idle", timeoutMs: 60_000)

    // One more event, acknowledged, so a pending `dropped` notice goes out.
    let fd = connectUnix(options.socket)
    switch options.wire {
    case .eventbus:
        writeAll(fd, Array(#"{"op":"publish","type":"bench.t","data":{"tail":true},"req":1}"#.utf8) + [0x0A])
        readFrames(fd, .eventbus) { $0.hasPrefix(#"{"op":"ok""#) || $0.hasPrefix(#"{"op":"error""#) }
    case .redis:
        writeAll(fd, respCommand(["PUBLISH", "bench.t", #"{"tail":true}"#]))
        readFrames(fd, .redis) { $0.hasPrefix(":") || $0.hasPrefix("-") }
    }
    close(fd)
    subscriber.send("drain")
    subscriber.expect("idle", timeoutMs: 60_000)
    subscriber.send("result")
    let received = subscriber.readResult(timeoutMs: 10_000)
    reap(subscriber.pid, timeoutMs: 5000)

    let sent = published.int("sent") + 1
    let delivered = received.int("events")
    let span = received.int("t_last") - received.int("t_first")
    var fields = Fields()
    fields["live_rate"] = delivered > 1 && span > 0 ? String(Int64(Double(delivered - 1) * 1e9 / Double(span))) : "0"
    fields["live_loss"] = String(sent - delivered)
    fields["rss_peak_mib"] = fixed(Double(peak) / 1024, 1)
    fields["stalled_loss"] = String(sent - received.int("stalled_events"))
    fields["stalled_dropped"] = String(received.int("stalled_dropped"))
    fields["stalled_closed"] = String(received.int("stalled_closed"))
    fields["sent"] = String(sent)
    return fields
}

/// Case 8: runs the CLI `options.shellRuns` times, one publish each, stdout
/// to /dev/null, and takes the wall time of each spawn-to-reap.
/// eventbus: `EVENTBUS_SOCKET=SOCK eventbus publish bench.shell {"n":1}`;
/// redis: `redis-cli -s SOCK publish bench.shell {"n":1}`.
/// Result: `ms` (median), `ms_min`, `ms_p90`, `failures`; or `skipped=REASON`
/// when the first run fails or publishes nothing a subscriber sees.
private func shellPublish(_ options: RunOptions) -> Fields {
    guard access(options.cli, X_OK) == 0 else { fail("shell case: \(options.cli) is not executable") }
    let arguments: [String]
    switch options.wire {
    case .eventbus:
        setenv("EVENTBUS_SOCKET", options.socket, 1)
        arguments = ["publish", "bench.shell", #"{"n":1}"#]
    case .redis:
        arguments = ["-s", options.socket, "publish", "bench.shell", #"{"n":1}"#]
    }
    let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
    blockChildSignal()
    // One visible run first, watched by a subscriber: a CLI that fails says
    // why, once, and one that exits 0 without publishing is caught.
    let watcher = connectUnix(options.socket)
    writeAll(watcher, subscribeFrame(options.wire, type: "bench.shell", req: 1))
    awaitSubscribed(watcher, options.wire)
    let firstStatus = reapPromptly(spawn(options.cli, arguments, stdout: devNull), timeoutMs: 10_000)
    var skipped: Fields?
    if firstStatus != 0 {
        printErr("shell case: \(options.cli) \(arguments.joined(separator: " ")) exited \(firstStatus)")
        skipped = Fields(parsing: "skipped=CLI_exited_\(firstStatus)")
    } else if !readFrames(watcher, options.wire, timeoutMs: 2000, failOnTimeout: false, until: { frame in
        frame.hasPrefix(#"{"op":"event""#) || frame.hasPrefix("message ")
    }) {
        printErr("shell case: \(options.cli) exited 0 but no event reached a subscriber within 2 s")
        skipped = Fields(parsing: "skipped=CLI_did_not_publish")
    }
    close(watcher)
    if let skipped {
        close(devNull)
        return skipped
    }
    var times: [Int64] = []
    var failures = 0
    for _ in 0..<options.shellRuns {
        let start = monotonicNanos()
        let status = reapPromptly(spawn(options.cli, arguments, stdout: devNull, stderr: devNull), timeoutMs: 10_000)
        times.append(monotonicNanos() - start)
        if status != 0 { failures += 1 }
    }
    close(devNull)
    times.sort()
    var fields = Fields()
    fields["ms"] = fixed(Double(times[times.count / 2]) / 1e6, 2)
    fields["ms_min"] = fixed(Double(times[0]) / 1e6, 2)
    fields["ms_p90"] = fixed(Double(times[times.count * 9 / 10]) / 1e6, 2)
    fields["failures"] = String(failures)
    return fields
}
