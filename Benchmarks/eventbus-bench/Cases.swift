// The benchmark cases of issues 6 and 14, run against brokers that are
// already listening: each spawns its subscriber and publisher processes,
// reads the brokers' /proc entries, and prints one `key=value` result line.
// The one-shot shell case (8) is Shell.swift.
//
// Before editing: every case is bounded in message count and in time, and
// aims only at the addresses it is given (a Unix socket, or loopback TCP).
// Publisher and subscribers may talk to different brokers (`--sub-proto`,
// `--sub-socket`): a case through a bridge measures both ends that way.
import Glibc

/// The cases, by the id `scripts/bench` passes and the report groups by.
enum BenchCase: String, CaseIterable {
    /// (1) 1→1 throughput, 64-byte payload; also (4) broker CPU per delivery.
    case oneToOne64 = "c1-64"
    /// (1) 1→1 throughput, 1 KiB payload.
    case oneToOne1K = "c1-1k"
    /// (2) 1→10 fan-out, 64-byte payload, deliveries/s.
    case fanOut64 = "c2-64"
    /// (2) 1→10 fan-out, 1 KiB payload, deliveries/s.
    case fanOut1K = "c2-1k"
    /// (3) latency at a fixed 10,000 msg/s, 64-byte payload (scripts/bench
    /// runs it with the broker and both clients on one CPU).
    case latency = "c3"
    /// (5) broker RSS increase per idle subscriber connection (1,000 of them).
    case idle = "c5"
    /// (6) case 1 (64 B) with 10,000 unrelated subscriptions and patterns present.
    case routing = "c6"
    /// (7) a stalled subscriber next to a live one.
    case stalled = "c7"
    /// (9, issue 13) 1→1 64 B from one machine's bus to another's: publisher
    /// and subscriber on different brokers (`--sub-socket`), through the
    /// bridges and a NATS cluster, or from one NATS node to another.
    case acrossMachines64 = "c9"
    /// (9, issue 36) case 9's NATS row on the link's wire: node 1's publisher
    /// sends each message as an HPUB on the link's subject with the header
    /// block the link writes for it (`c9-ce`), or, a hypothetical, with only
    /// CloudEvents' four required attributes (`c9-ce4`); node 3's subscriber
    /// subscribes as the link does, headers on (WireCloudEvents.swift). NATS only.
    case acrossMachinesLinkHeaders64 = "c9-ce"
    case acrossMachinesRequiredHeaders64 = "c9-ce4"
    /// (10, issue 38) 1 publisher, a queue group of 3 members (each its own
    /// subscriber process), 64 B; `c10-stop`: one member SIGSTOPped for the
    /// run's middle third.
    case group64 = "c10"
    case groupStopped64 = "c10-stop"

    /// The header block the case's NATS publisher sends, nil for a plain PUB.
    var natsHeaders: NATSHeaderSet? {
        switch self {
        case .acrossMachinesLinkHeaders64: return .link
        case .acrossMachinesRequiredHeaders64: return .required
        default: return nil
        }
    }
}

/// How a case run is configured, from `eventbus-bench run` arguments.
struct RunOptions {
    var benchCase: BenchCase
    /// The publisher's protocol and broker address (`--proto`, `--socket`).
    var wire: Wire
    var socket: String
    /// The subscribers' protocol and address (`--sub-proto`, `--sub-socket`;
    /// the publisher's unless given).
    var subscriberWire: Wire
    var subscriberSocket: String
    /// The brokers' pids (`--pid 12,34`), for /proc/PID/stat and /proc/PID/status;
    /// CPU and memory figures are their sums.
    var brokerPIDs: [Int32]
    /// Some of `brokerPIDs` whose CPU is also given apart (`--node-pid`;
    /// case 9: the NATS nodes), as `nodes_cpu_us`.
    var nodePIDs: [Int32] = []
    /// Seconds of load per throughput run.
    var seconds = 3.0
    /// Messages per throughput run at most (the run ends at whichever bound
    /// comes first); a fixed count makes profiles (callgrind) comparable.
    var count = 50_000_000
    /// Seconds of paced load for the latency case.
    var latencySeconds = 5.0
    /// Messages per second for the throughput cases (0: flood).
    var rate = 0
    /// Another program to run as the publisher and subscriber roles of a
    /// throughput case (`--client`; scripts/bench-client.c, the C yardstick
    /// of "Harness fairness"); nil runs this binary's own roles.
    var client: String?
}

/// Runs one case and prints its result line on stdout.
func runCase(_ options: RunOptions) {
    raiseFileLimit()
    if options.client != nil && [.latency, .idle, .stalled, .group64, .groupStopped64, .acrossMachinesLinkHeaders64,
                                 .acrossMachinesRequiredHeaders64].contains(options.benchCase) {
        fail("--client applies to the throughput cases only (c1-64 c1-1k c2-64 c2-1k c6 c9)")
    }
    if options.benchCase.natsHeaders != nil && (options.wire != .nats || options.subscriberWire != .nats) {
        fail("\(options.benchCase.rawValue) is NATS alone: --proto nats (and --sub-proto nats)")
    }
    let result: Fields
    switch options.benchCase {
    case .oneToOne64: result = throughput(options, payload: 64, subscribers: 1)
    case .oneToOne1K: result = throughput(options, payload: 1024, subscribers: 1)
    case .fanOut64: result = throughput(options, payload: 64, subscribers: 10)
    case .fanOut1K: result = throughput(options, payload: 1024, subscribers: 10)
    case .latency: result = latency(options)
    case .idle: result = idleConnections(options, count: 1000)
    case .routing:
        let noise = holdUnrelatedSubscriptions(options, total: 10_000, perConnection: 1000)
        result = throughput(options, payload: 64, subscribers: 1)
        noise.forEach { close($0) }
    case .stalled: result = stalledSubscriber(options)
    case .acrossMachines64, .acrossMachinesLinkHeaders64, .acrossMachinesRequiredHeaders64:
        result = throughput(options, payload: 64, subscribers: 1)
    case .group64: result = groupThroughput(options, members: 3, stopOne: false)
    case .groupStopped64: result = groupThroughput(options, members: 3, stopOne: true)
    }
    writeAll(1, result.line + "\n")
}

/// Command-line arguments of the publisher role (case 9's header rows: the
/// link's subject and block).
private func publisherArguments(_ options: RunOptions) -> [String] {
    let headers = options.benchCase.natsHeaders.map { ["--type", LinkWire.exportSubject, "--headers", $0.rawValue] } ?? []
    return ["pub", "--proto", options.wire.rawValue, "--socket", options.socket] + headers
}

/// Command-line arguments of the subscriber role (case 9's header rows: the
/// link's import subscription, headers on).
private func subscriberArguments(_ options: RunOptions) -> [String] {
    let headers = options.benchCase.natsHeaders != nil ? ["--type", LinkWire.importSubject, "--headers", "1"] : []
    return ["sub", "--proto", options.subscriberWire.rawValue, "--socket", options.subscriberSocket] + headers
}

/// CPU time all the brokers used so far, in µs (0 for a pid that is gone).
private func brokersCPUMicros(_ options: RunOptions) -> Int64 {
    cpuMicros(options.brokerPIDs)
}

/// CPU time the processes `pids` used so far, in µs (0 for a pid that is gone).
private func cpuMicros(_ pids: [Int32]) -> Int64 {
    pids.reduce(0) { $0 + (processCPUMicros(pid: $1) ?? 0) }
}

/// A `/proc/PID/status` field summed over the brokers, in KiB.
private func brokersStatusKiB(_ options: RunOptions, field: String) -> Int {
    options.brokerPIDs.reduce(0) { $0 + (processStatusKiB(pid: $1, field: field) ?? 0) }
}

/// Cases 1, 2, 4 and 6: `subscribers` live subscribers, one flooding
/// publisher, for `options.seconds`.
/// Result: `rate` (events delivered per second, all subscribers together,
/// first to last delivery), `loss` (sent × subscribers − delivered),
/// `dropped` (sum of `dropped` notices), `cpu_us` (broker CPU µs per
/// delivery), `sent`, `delivered`, `errors`, `disconnected` (subscribers the
/// broker closed, e.g. Redis's `client-output-buffer-limit pubsub`), and
/// with `nodePIDs` `nodes_cpu_us` (their CPU µs per delivery, a part of
/// `cpu_us`); case 9's header rows add `header_bytes` (the block's size).
private func throughput(_ options: RunOptions, payload: Int, subscribers: Int) -> Fields {
    let subscriber = Child(name: "subscriber", arguments: subscriberArguments(options) + ["--live", String(subscribers)],
                           executable: options.client)
    subscriber.expect("ready", timeoutMs: 30_000)
    // Across brokers the subscription must first reach the publisher's side
    // (NATS routes carry interest asynchronously): give it half a second.
    if options.subscriberSocket != options.socket { sleepMillis(500) }
    let cpuBefore = brokersCPUMicros(options)
    let nodesBefore = cpuMicros(options.nodePIDs)
    let publisher = Child(name: "publisher", arguments: publisherArguments(options)
        + ["--payload", String(payload), "--seconds", String(options.seconds), "--count", String(options.count)]
        + (options.rate > 0 ? ["--rate", String(options.rate)] : []), executable: options.client)
    let published = publisher.readResult(timeoutMs: Int(options.seconds * 1000) + 90_000)
    reap(publisher.pid, timeoutMs: 5000)
    subscriber.send("drain")
    subscriber.expect("idle", timeoutMs: 60_000)
    let cpuAfter = brokersCPUMicros(options)
    let nodesAfter = cpuMicros(options.nodePIDs)
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
    if let headers = options.benchCase.natsHeaders { fields["header_bytes"] = String(headers.block.count) }
    if !options.nodePIDs.isEmpty {
        fields["nodes_cpu_us"] = delivered > 0 ? fixed(Double(nodesAfter - nodesBefore) / Double(delivered), 3) : "0"
    }
    fields["sent"] = String(sent)
    fields["delivered"] = String(delivered)
    fields["errors"] = String(published.int("errors") + received.int("other"))
    fields["disconnected"] = String(received.int("closed"))
    addGeneratorCPU(&fields, published: published, received: received, delivered: delivered)
    return fields
}

/// The load generator's own CPU (the fairness figures, docs/BENCHMARKS.md
/// "Harness fairness"): `pub_cpu_us` and `sub_cpu_us`, the publisher's and
/// the subscriber process's utime+stime (their `cpu_us`, from /proc) per
/// delivery, and `gen_cpu_us`, their sum: comparable with the broker's
/// `cpu_us` per delivery.
private func addGeneratorCPU(_ fields: inout Fields, published: Fields, received: Fields, delivered: Int64) {
    guard delivered > 0 else { return }
    let pub = Double(published.int("cpu_us")) / Double(delivered)
    let sub = Double(received.int("cpu_us")) / Double(delivered)
    fields["pub_cpu_us"] = fixed(pub, 3)
    fields["sub_cpu_us"] = fixed(sub, 3)
    fields["gen_cpu_us"] = fixed(pub + sub, 3)
}

/// Case 3: one subscriber, one publisher at a fixed 10,000 msg/s with a send
/// stamp in each 64-byte payload, for `options.latencySeconds`.
/// Result: `p50_us`, `p99_us`, `p999_us`, `max_us`, `samples`, `loss`, `delivered`.
private func latency(_ options: RunOptions) -> Fields {
    let rate = 10_000
    let expected = Int(Double(rate) * options.latencySeconds)
    let subscriber = Child(name: "subscriber", arguments: subscriberArguments(options)
        + ["--live", "1", "--latency-samples", String(expected + 16)])
    subscriber.expect("ready", timeoutMs: 30_000)
    let publisher = Child(name: "publisher", arguments: publisherArguments(options)
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
    fields["delivered"] = String(received.int("events"))
    fields["errors"] = String(published.int("errors") + received.int("other"))
    return fields
}

/// Case 5: opens `count` connections that each subscribe to their own type
/// `bench.idle.N` and then stay idle; measures the broker's VmRSS before and
/// after. Result: `rss_kib_per_conn`, `rss_before_kib`, `rss_after_kib`.
private func idleConnections(_ options: RunOptions, count: Int) -> Fields {
    let before = brokersStatusKiB(options, field: "VmRSS")
    var fds: [Int32] = []
    for index in 0..<count {
        let fd = openClient(options.subscriberWire, options.subscriberSocket)
        subscribe(fd, options.subscriberWire, types: ["bench.idle.\(index)"])
        fds.append(fd)
    }
    sleepMillis(100)
    let after = brokersStatusKiB(options, field: "VmRSS")
    fds.forEach { close($0) }
    var fields = Fields()
    fields["rss_kib_per_conn"] = fixed(Double(after - before) / Double(count), 2)
    fields["rss_before_kib"] = String(before)
    fields["rss_after_kib"] = String(after)
    return fields
}

/// Case 6 set-up: `total` subscriptions that never match `bench.t`, spread
/// over connections of `perConnection` each (under the broker's default
/// per-connection limit of 4096): nine in ten exact types `other.nI.created`,
/// one in ten patterns, cycling through `other.nI.*`, `other.nI.>`, `*.nI`
/// and `bench.*.nI` (redis: PSUBSCRIBE with the glob closest in meaning,
/// `>` becoming `*`; mqtt: `+` and `#` filters; see `subscribe`). Returns
/// once the broker acknowledged them all; the caller closes the descriptors.
private func holdUnrelatedSubscriptions(_ options: RunOptions, total: Int, perConnection: Int) -> [Int32] {
    var fds: [Int32] = []
    var next = 0
    while next < total {
        let fd = openClient(options.subscriberWire, options.subscriberSocket)
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
                case 1: patterns.append("other.n\(i).>")
                case 2: patterns.append("*.n\(i)")
                default: patterns.append("bench.*.n\(i)")
                }
            }
        }
        next = end
        subscribe(fd, options.subscriberWire, types: exact, patterns: patterns)
    }
    return fds
}

/// Case 7: a live subscriber and a stalled one (subscribed, reading nothing)
/// while one publisher floods 64-byte events for `options.seconds`. Then the
/// stalled one drains, one more event is published so that eventbus can
/// queue its `dropped` notice (PROTOCOL.md "Semantics": the notice comes
/// before the next event), and the stalled one drains again.
/// Result: `live_rate`, `live_loss`, `live_delivered`, `rss_peak_mib` (broker VmHWM),
/// `stalled_loss` (events it never got), `stalled_dropped` (sum of its
/// `dropped` notices), `stalled_closed` (1 if the broker disconnected it).
private func stalledSubscriber(_ options: RunOptions) -> Fields {
    let subscriber = Child(name: "subscriber", arguments: subscriberArguments(options) + ["--live", "1", "--stalled", "1"])
    subscriber.expect("ready", timeoutMs: 30_000)
    let publisher = Child(name: "publisher", arguments: publisherArguments(options)
        + ["--payload", "64", "--seconds", String(options.seconds), "--count", String(options.count)])
    let published = publisher.readResult(timeoutMs: Int(options.seconds * 1000) + 90_000)
    reap(publisher.pid, timeoutMs: 5000)
    let peak = brokersStatusKiB(options, field: "VmHWM")
    subscriber.send("drain")
    subscriber.expect("idle", timeoutMs: 60_000)

    // One more event, acknowledged, so a pending `dropped` notice goes out.
    publishOnce(options.wire, options.socket, type: "bench.t", data: #"{"tail":true}"#)
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
    fields["live_delivered"] = String(delivered)
    fields["rss_peak_mib"] = fixed(Double(peak) / 1024, 1)
    fields["stalled_loss"] = String(sent - received.int("stalled_events"))
    fields["stalled_dropped"] = String(received.int("stalled_dropped"))
    fields["stalled_closed"] = String(received.int("stalled_closed"))
    fields["sent"] = String(sent)
    return fields
}

/// Case 10 (issue 38): `members` queue-group members, each a subscriber
/// process of its own with one connection (so one can be SIGSTOPped), and
/// one flooding 64 B publisher for `options.seconds`; with `stopOne`, the
/// first member is stopped (SIGSTOP) for the run's middle third and
/// continued (SIGCONT) after it, then every member drains.
/// Result: `rate` (deliveries per second, all members together, from the
/// first delivery to the last), `sent`, `delivered`, `loss` (sent −
/// delivered, when positive), `dup` (delivered − sent, when positive: at
/// least that many duplicates; frames are identical, so no finer count),
/// `dropped` (the broker's own loss notices, eventbus), `member_min` and
/// `member_max` (deliveries of the members with the fewest and the most),
/// `spread` ((max − min) / mean, %), `stopped` (the stopped member's
/// deliveries, `stopOne`), `cpu_us` (broker CPU per delivery).
private func groupThroughput(_ options: RunOptions, members: Int, stopOne: Bool) -> Fields {
    let children = (0..<members).map { _ in
        Child(name: "member", arguments: subscriberArguments(options) + ["--live", "1", "--group", "bench"])
    }
    for child in children { child.expect("ready", timeoutMs: 30_000) }
    let cpuBefore = brokersCPUMicros(options)
    let publisher = Child(name: "publisher", arguments: publisherArguments(options)
        + ["--payload", "64", "--seconds", String(options.seconds), "--count", String(options.count)])
    if stopOne {
        let third = Int(options.seconds * 1000 / 3)
        sleepMillis(third)
        kill(children[0].pid, SIGSTOP)
        sleepMillis(third)
        kill(children[0].pid, SIGCONT)
    }
    let published = publisher.readResult(timeoutMs: Int(options.seconds * 1000) + 90_000)
    reap(publisher.pid, timeoutMs: 5000)
    for child in children { child.send("drain") }
    for child in children { child.expect("idle", timeoutMs: 60_000) }
    let cpuAfter = brokersCPUMicros(options)
    var received: [Fields] = []
    for child in children {
        child.send("result")
        received.append(child.readResult(timeoutMs: 10_000))
        reap(child.pid, timeoutMs: 5000)
    }
    var fields = groupFields(published: published, received: received, stopOne: stopOne)
    let delivered = fields.int("delivered")
    fields["cpu_us"] = delivered > 0 ? fixed(Double(cpuAfter - cpuBefore) / Double(delivered), 3) : "0"
    return fields
}

/// `groupThroughput`'s result from the publisher's and the members' results (all but `cpu_us`).
private func groupFields(published: Fields, received: [Fields], stopOne: Bool) -> Fields {
    let sent = published.int("sent")
    let counts = received.map { $0.int("events") }
    let delivered = counts.reduce(0, +)
    let firsts = received.map { $0.int("t_first") }.filter { $0 > 0 }
    let span = received.map { $0.int("t_last") }.max().map { $0 - (firsts.min() ?? $0) } ?? 0
    var fields = Fields()
    fields["rate"] = delivered > 1 && span > 0 ? String(Int64(Double(delivered - 1) * 1e9 / Double(span))) : "0"
    fields["sent"] = String(sent)
    fields["delivered"] = String(delivered)
    fields["loss"] = String(max(0, sent - delivered))
    fields["dup"] = String(max(0, delivered - sent))
    fields["dropped"] = String(received.reduce(0) { $0 + $1.int("dropped") })
    let low = counts.min() ?? 0, high = counts.max() ?? 0
    fields["member_min"] = String(low)
    fields["member_max"] = String(high)
    fields["spread"] = delivered > 0 ? fixed(Double(high - low) * 100 / (Double(delivered) / Double(received.count)), 1) : "0"
    if stopOne { fields["stopped"] = String(counts[0]) }
    fields["errors"] = String(published.int("errors") + received.reduce(0) { $0 + $1.int("other") })
    fields["disconnected"] = String(received.reduce(0) { $0 + $1.int("closed") })
    return fields
}
