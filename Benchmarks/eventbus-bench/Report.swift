// Turns the result lines `scripts/bench` collected into the markdown tables
// of docs/BENCHMARKS.md: median [min–max] per broker, eventbusd's ratio to
// the best peer of each row, and the target of issue 14 (or of issue 6 for
// rows issue 14 says nothing about), met or missed. Case 8 gets a table of
// its own, one row per shell tool (ReportShell.swift).
//
// Before editing: input lines look like
// `rep=1 case=c1-64 broker=eventbus rate=712345 loss=0 cpu_us=1.330 ...`;
// `skipped=REASON` marks a run that failed, `na=REASON` a case that does not
// apply to that broker; `case=c1-64@c` is the same case driven by the C
// yardstick client (scripts/bench-client.c), for the fairness table
// (ReportFairness.swift). Peers are redis, nats and mosquitto; the relay is
// the ceiling, never the "best peer".
import Glibc

/// Formats `value` with exactly `decimals` digits after the point (no Foundation).
func fixed(_ value: Double, _ decimals: Int) -> String {
    guard value.isFinite else { return "n/a" }
    var scale: Int64 = 1
    for _ in 0..<decimals { scale *= 10 }
    let scaled = Int64((abs(value) * Double(scale)).rounded())
    let sign = value < 0 && scaled != 0 ? "-" : ""
    var text = sign + String(scaled / scale)
    if decimals > 0 {
        let fraction = String(scaled % scale)
        text += "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }
    return text
}

/// `value` with up to two decimals and no trailing zeros: 1.5, 0.67, 2000.
func trimmed(_ value: Double) -> String {
    var text = fixed(value, 2)
    while text.hasSuffix("0") && text.contains(".") { text.removeLast() }
    if text.hasSuffix(".") { text.removeLast() }
    return text
}

/// The broker columns, in order, and which of them are peers.
let brokerColumns = ["eventbus", "redis", "nats", "mosquitto", "relay"]
let peerBrokers = ["redis", "nats", "mosquitto"]

/// How a row's numbers are shown.
enum Unit {
    case rate, count, micros, cpuMicros, instructions, kib, mib, millis, flag

    func format(_ v: Double) -> String {
        switch self {
        case .rate:
            if v >= 999_500 { return fixed(v / 1e6, 2) + "M" }  // not "1000k"
            if v >= 1e4 { return fixed(v / 1e3, 0) + "k" }
            if v >= 1e3 { return fixed(v / 1e3, 1) + "k" }
            return fixed(v, 0)
        case .count: return fixed(v, 0)
        case .instructions: return group(Int(v.rounded()))
        case .micros: return fixed(v, v >= 100 ? 0 : 1)
        case .cpuMicros: return fixed(v, 3)
        case .kib: return fixed(v, 2)
        case .mib: return fixed(v, 1)
        case .millis: return fixed(v, 2)
        case .flag: return v >= 0.5 ? "yes" : "no"
        }
    }
}

/// Which way a row's figure is better, for picking the best peer.
private enum Better { case higher, lower, neither }

/// The target a row is held to.
private enum Target {
    case none
    /// eventbus / best peer at least this.
    case bestPeerAtLeast(Double)
    /// eventbus / best peer at most this.
    case bestPeerAtMost(Double)
    /// eventbus / the named peer at most this.
    case peerAtMost(String, Double)
    /// eventbus at most this, in the row's unit (text: the unit's name).
    case atMost(Double, String)
    /// eventbus zero.
    case zero
}

/// One row of the main table: a metric of a case.
private struct Row {
    let number: String
    let caseID: String
    let key: String
    let label: String
    let unit: Unit
    let better: Better
    let target: Target
    /// The target is issue 6's, which issue 14 left standing.
    var fromIssue6 = false
    /// The target is issue 13's (the bridge).
    var fromIssue13 = false
    /// For a loss row: the key of the delivered count shown next to it
    /// (`0 [0–0] of 10.1M`: lost, of how many delivered).
    var ofKey: String?
    /// The case this row is a floor of (case 9's NATS rows on the link's
    /// wire: `c9`): the ratio column divides that case's eventbus figure by
    /// this row's best peer, and the target column gives this row against
    /// that case's best peer (how far the wire alone is from the yardstick).
    var floorOf: String?
}

private let rows: [Row] = [
    Row(number: "1", caseID: "c1-64", key: "rate", label: "1→1 64 B, msg/s", unit: .rate, better: .higher, target: .bestPeerAtLeast(1.5)),
    Row(number: "1", caseID: "c1-64", key: "loss", label: "1→1 64 B, messages lost of delivered", unit: .count, better: .neither, target: .zero, fromIssue6: true, ofKey: "delivered"),
    Row(number: "1", caseID: "c1-1k", key: "rate", label: "1→1 1 KiB, msg/s", unit: .rate, better: .higher, target: .bestPeerAtLeast(1.5)),
    Row(number: "1", caseID: "c1-1k", key: "loss", label: "1→1 1 KiB, messages lost of delivered", unit: .count, better: .neither, target: .zero, fromIssue6: true, ofKey: "delivered"),
    Row(number: "2", caseID: "c2-64", key: "rate", label: "1→10 64 B, deliveries/s", unit: .rate, better: .higher, target: .bestPeerAtLeast(1.5)),
    Row(number: "2", caseID: "c2-64", key: "loss", label: "1→10 64 B, deliveries lost of delivered", unit: .count, better: .neither, target: .zero, fromIssue6: true, ofKey: "delivered"),
    Row(number: "2", caseID: "c2-1k", key: "rate", label: "1→10 1 KiB, deliveries/s", unit: .rate, better: .higher, target: .bestPeerAtLeast(1.5)),
    Row(number: "2", caseID: "c2-1k", key: "loss", label: "1→10 1 KiB, deliveries lost of delivered", unit: .count, better: .neither, target: .zero, fromIssue6: true, ofKey: "delivered"),
    Row(number: "3", caseID: "c3", key: "p50_us", label: "latency 64 B at 10k msg/s, all on one CPU: p50 µs", unit: .micros, better: .lower, target: .none),
    Row(number: "3", caseID: "c3", key: "p99_us", label: "latency, same: p99 µs", unit: .micros, better: .lower, target: .bestPeerAtMost(0.8)),
    Row(number: "3", caseID: "c3", key: "p999_us", label: "latency, same: p99.9 µs", unit: .micros, better: .lower, target: .none),
    Row(number: "3", caseID: "c3", key: "loss", label: "latency, same: messages lost of delivered", unit: .count, better: .neither, target: .none, ofKey: "delivered"),
    Row(number: "4", caseID: "c1-64", key: "cpu_us", label: "broker CPU per delivery, 1→1 64 B, µs", unit: .cpuMicros, better: .lower, target: .peerAtMost("nats", 0.67)),
    Row(number: "4", caseID: "c2-64", key: "cpu_us", label: "broker CPU per delivery, 1→10 64 B, µs", unit: .cpuMicros, better: .lower, target: .none),
    Row(number: "4", caseID: "cg", key: "ir", label: "callgrind instructions per delivery, 1→1 64 B (`scripts/profile`)", unit: .instructions, better: .lower, target: .atMost(2000, "")),
    Row(number: "5", caseID: "c5", key: "rss_kib_per_conn", label: "idle subscriber connection, broker RSS KiB each (1,000)", unit: .kib, better: .lower, target: .atMost(1, "KiB"), fromIssue6: true),
    Row(number: "6", caseID: "c6", key: "rate", label: "1→1 64 B with 10,000 unrelated subscriptions, msg/s", unit: .rate, better: .higher, target: .none),
    Row(number: "6", caseID: "c6", key: "loss", label: "same, messages lost of delivered", unit: .count, better: .neither, target: .none, ofKey: "delivered"),
    Row(number: "6", caseID: "c6", key: "cpu_us", label: "broker CPU per delivery, same, µs", unit: .cpuMicros, better: .lower, target: .none),
    Row(number: "7", caseID: "c7", key: "live_rate", label: "stalled + live subscriber: live msg/s", unit: .rate, better: .higher, target: .none),
    Row(number: "7", caseID: "c7", key: "live_loss", label: "stalled + live subscriber: live messages lost of delivered", unit: .count, better: .neither, target: .zero, fromIssue6: true, ofKey: "live_delivered"),
    Row(number: "7", caseID: "c7", key: "rss_peak_mib", label: "stalled + live subscriber: broker peak RSS MiB", unit: .mib, better: .lower, target: .none),
    Row(number: "7", caseID: "c7", key: "stalled_loss", label: "stalled subscriber: events it never got", unit: .count, better: .neither, target: .none),
    Row(number: "7", caseID: "c7", key: "stalled_dropped", label: "stalled subscriber: `dropped` count it was told", unit: .count, better: .neither, target: .none),
    Row(number: "7", caseID: "c7", key: "stalled_closed", label: "stalled subscriber: disconnected by the broker", unit: .flag, better: .neither, target: .none),
    Row(number: "9", caseID: "c9", key: "rate", label: "1→1 64 B across machines, flooding: bus A → bridge → NATS node 1 ⇢ node 3 → bridge → bus B (eventbus); NATS node 1 → node 3 (nats), msg/s", unit: .rate, better: .higher, target: .bestPeerAtLeast(0.5), fromIssue13: true),
    Row(number: "9", caseID: "c9", key: "loss", label: "same, flooding: messages lost of delivered (past saturation)", unit: .count, better: .neither, target: .none, ofKey: "delivered"),
    Row(number: "9", caseID: "c9", key: "cpu_us", label: "same: CPU per delivery of every process on the path (brokers, bridges, NATS nodes), µs", unit: .cpuMicros, better: .lower, target: .none),
    Row(number: "9", caseID: "c9", key: "nodes_cpu_us", label: "same: of which the three NATS nodes, µs", unit: .cpuMicros, better: .lower, target: .none),
    Row(number: "9", caseID: "c9-half", key: "rate", label: "same, paced at half the eventbus flooding rate: msg/s delivered", unit: .rate, better: .higher, target: .none),
    Row(number: "9", caseID: "c9-half", key: "loss", label: "same, paced at half the eventbus flooding rate: messages lost of delivered", unit: .count, better: .neither, target: .zero, fromIssue13: true, ofKey: "delivered"),
    Row(number: "9‡", caseID: "c9-ce", key: "rate", label: "NATS node 1 → node 3 carrying the link's CloudEvents headers: each 64 B message an HPUB on the link's subject with the block the link writes for it (13 headers, ~326 B), flooding, msg/s", unit: .rate, better: .higher, target: .none, floorOf: "c9"),
    Row(number: "9‡", caseID: "c9-ce", key: "loss", label: "same, messages lost of delivered", unit: .count, better: .neither, target: .none, ofKey: "delivered"),
    Row(number: "9‡", caseID: "c9-ce", key: "cpu_us", label: "same: CPU per delivery of the three NATS nodes, µs", unit: .cpuMicros, better: .lower, target: .none, floorOf: "c9"),
    Row(number: "9‡", caseID: "c9-ce4", key: "rate", label: "hypothetical, **not what eventbus sends**: the same with only the 4 required CloudEvents attributes (`ce-specversion`, `ce-id`, `ce-source`, `ce-type`, ~105 B), msg/s", unit: .rate, better: .higher, target: .none, floorOf: "c9"),
    Row(number: "9‡", caseID: "c9-ce4", key: "cpu_us", label: "same: CPU per delivery of the three NATS nodes, µs", unit: .cpuMicros, better: .lower, target: .none, floorOf: "c9"),
    Row(number: "10", caseID: "c10", key: "rate", label: "queue group of 3, 1 publisher 64 B: deliveries/s (each event to one member)", unit: .rate, better: .higher, target: .bestPeerAtLeast(1.5)),
    Row(number: "10", caseID: "c10", key: "loss", label: "same: events lost (sent − delivered)", unit: .count, better: .neither, target: .zero, ofKey: "delivered"),
    Row(number: "10", caseID: "c10", key: "dup", label: "same: duplicates at least (delivered − sent)", unit: .count, better: .neither, target: .zero),
    Row(number: "10", caseID: "c10", key: "spread", label: "same: spread between members, (max − min) / mean %", unit: .count, better: .lower, target: .none),
    Row(number: "10", caseID: "c10-stop", key: "rate", label: "same, one member SIGSTOPped for the middle third: deliveries/s", unit: .rate, better: .higher, target: .bestPeerAtLeast(1.5)),
    Row(number: "10", caseID: "c10-stop", key: "loss", label: "same, one member stopped: events lost", unit: .count, better: .neither, target: .none, ofKey: "delivered"),
    Row(number: "10", caseID: "c10-stop", key: "dup", label: "same, one member stopped: duplicates at least", unit: .count, better: .neither, target: .zero),
    Row(number: "10", caseID: "c10-stop", key: "stopped", label: "same, one member stopped: deliveries to the stopped member", unit: .count, better: .neither, target: .none),
]

/// Median of a non-empty list (mean of the middle two for an even count).
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/// Everything read from a results file.
struct Results {
    /// `case/key/broker` → one value per repetition.
    var values: [String: [Double]] = [:]
    /// `case/key/broker` → the value of each repetition, by its `rep`.
    var byRep: [String: [String: Double]] = [:]
    /// `case/broker` → why the run failed.
    var skipped: [String: String] = [:]
    /// `case/broker` → why the case does not apply.
    var notApplicable: [String: String] = [:]
    var notes: [String] = []
    var reps = Set<String>()
    /// The runs of case 3 (`rep.k`: scripts/bench runs it more often, its p99 is a tail).
    var latencyRuns = Set<String>()
    /// Brokers (and shell tools) that appear at all.
    var brokers = Set<String>()

    init(path: String) {
        guard let bytes = readSmallFile(path) else { fail("cannot read \(path)") }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let fields = Fields(parsing: String(line))
            guard let caseID = fields["case"], let broker = fields["broker"] else { continue }
            brokers.insert(broker)
            if let rep = fields["rep"] {
                // Case 3 runs several times per repetition ("1.2"): counted apart.
                if caseID == "c3" { latencyRuns.insert(rep) } else if caseID != "cg" { reps.insert(rep) }
            }
            if let reason = fields["na"] {
                notApplicable["\(caseID)/\(broker)"] = reason.replacingOccurrences("_", " ")
                continue
            }
            if let reason = fields["skipped"] {
                skipped["\(caseID)/\(broker)"] = reason.replacingOccurrences("_", " ")
                continue
            }
            for (key, value) in fields.pairs {
                guard let number = Double(value) else { continue }
                values["\(caseID)/\(key)/\(broker)", default: []].append(number)
                if let rep = fields["rep"] { byRep["\(caseID)/\(key)/\(broker)", default: [:]][rep] = number }
            }
            let errors = fields.int("errors") + fields.int("failures")
            if errors > 0 {
                notes.append("run \(fields["rep"] ?? "?") of \(caseID) on \(broker) saw \(errors) error replies or failed runs")
            }
            let disconnected = fields.int("disconnected")
            if disconnected > 0 {
                notes.append("run \(fields["rep"] ?? "?") of \(caseID) on \(broker): the broker disconnected \(disconnected) live subscriber\(disconnected == 1 ? "" : "s") (its loss counts what never arrived)")
            }
        }
    }

    /// The median of `case/key/broker`, if measured.
    func median(_ caseID: String, _ key: String, _ broker: String) -> Double? {
        guard let list = values["\(caseID)/\(key)/\(broker)"], !list.isEmpty else { return nil }
        return eventbus_bench.median(list)
    }

    /// The cell text: `median [min–max]`, `n/a`, `skipped: …` or `–`.
    func cell(_ caseID: String, _ key: String, _ broker: String, _ unit: Unit) -> String {
        if notApplicable["\(caseID)/\(broker)"] != nil { return "n/a" }
        if let reason = skipped["\(caseID)/\(broker)"] { return "skipped: \(reason)" }
        guard let list = values["\(caseID)/\(key)/\(broker)"], !list.isEmpty else { return "–" }
        let m = eventbus_bench.median(list)
        if list.count == 1 || unit == .flag { return unit.format(m) }
        return "\(unit.format(m)) [\(unit.format(list.min()!))–\(unit.format(list.max()!))]"
    }
}

/// Reads the result file at `path` and prints the markdown tables on stdout.
func printReport(path: String) {
    let results = Results(path: path)
    let columns = brokerColumns.filter { results.brokers.contains($0) }
    let peers = peerBrokers.filter { columns.contains($0) }

    var out = "| # | metric | " + columns.joined(separator: " | ") + " | eventbus / best peer | target |\n"
    out += "|---|---|" + String(repeating: "---|", count: columns.count) + "---|---|\n"
    for row in rows {
        // A row no broker has a figure or a reason for (e.g. no profile run) is left out.
        let known = columns.contains { b in
            results.median(row.caseID, row.key, b) != nil || results.notApplicable["\(row.caseID)/\(b)"] != nil
                || results.skipped["\(row.caseID)/\(b)"] != nil
        }
        guard known else { continue }
        out += tableRow(row, results, columns: columns, peers: peers)
        if row.caseID == "c6" && row.key == "cpu_us" { out += shareRow(results, columns) }
    }
    out += footnotes(results, peers: peers)
    out += fairnessTable(results, columns)
    out += shellTable(results)
    writeAll(1, out)
}

/// One row of the main table: each broker's cell, eventbus against the best peer, the target.
private func tableRow(_ row: Row, _ results: Results, columns: [String], peers: [String]) -> String {
    let cells = columns.map { broker in
        let cell = results.cell(row.caseID, row.key, broker, row.unit)
        guard let ofKey = row.ofKey, let delivered = results.median(row.caseID, ofKey, broker) else { return cell }
        return cell + " of " + Unit.rate.format(delivered)
    }
    let eventbus = results.median(row.floorOf ?? row.caseID, row.key, "eventbus")
    var best: (String, Double)?
    if row.better != .neither {
        for peer in peers {
            guard let v = results.median(row.caseID, row.key, peer) else { continue }
            if let current = best, row.better == .higher ? v <= current.1 : v >= current.1 { continue }
            best = (peer, v)
        }
    }
    var ratio: Double?
    if let eventbus, let best, best.1 != 0 { ratio = eventbus / best.1 }
    let ratioText = ratio.map { "\(fixed($0, 2))× \(best!.0)" + (row.floorOf.map { " (eventbus's \($0))" } ?? "") } ?? "–"
    return "| \(row.number) | \(row.label) | " + cells.joined(separator: " | ")
        + " | \(ratioText) | \(targetText(row, eventbus: eventbus, bestRatio: ratio, results: results)) |\n"
}

/// What the table's figures are, the cases that do not apply and the run's notes.
private func footnotes(_ results: Results, peers: [String]) -> String {
    var out = "\nMedian [min–max] of \(results.reps.count) run\(results.reps.count == 1 ? "" : "s") per cell"
    if !results.latencyRuns.isEmpty && results.latencyRuns.count != results.reps.count {
        out += " (case 3: \(results.latencyRuns.count) runs)"
    }
    out += ";"
    out += " ratios are of the medians; the best peer is the best of \(peers.joined(separator: ", ")) on that row"
    out += " (the relay is the ceiling, not a peer). Targets are issue 14's; those marked ⁶ are issue 6's, which issue 14 left standing;"
    out += " those marked ¹³ are issue 13's (the bridge, case 9).\n"
    if results.brokers.contains("nats") && results.values.keys.contains(where: { $0.hasPrefix("c9-ce") }) {
        out += "\n‡ Case 9's yardstick (issues 13 and 36: rate ≥ 0.5×, CPU per event ≤ 3×) is the plain row above, NATS's own"
        out += " 64-byte PUBs. The rows marked ‡ are NATS alone carrying eventbus's wire (the link's subject and header"
        out += " block on every message, docs/BENCHMARKS.md \"Issue 36, third pass\"): the floor of any design that keeps"
        out += " this wire; their ratio is eventbus's case 9 figure to theirs. The 4-attribute row is a hypothetical lighter wire.\n"
    }
    var reasons: [String] = []
    for (key, reason) in results.notApplicable.sorted(by: { $0.key < $1.key }) where !key.hasPrefix("c8/") {
        let parts = key.split(separator: "/")
        reasons.append("case \(parts[0].dropFirst()) on \(parts[1]): \(reason)")
    }
    if !reasons.isEmpty { out += "\nn/a: " + reasons.joined(separator: "; ") + ".\n" }
    for note in results.notes { out += "\n- Note: \(note)." }
    if !results.notes.isEmpty { out += "\n" }
    return out
}

/// The target cell of a row: the target and whether eventbus meets it.
private func targetText(_ row: Row, eventbus: Double?, bestRatio: Double?, results: Results) -> String {
    let mark = row.fromIssue6 ? "⁶" : row.fromIssue13 ? "¹³" : ""
    func verdict(_ met: Bool?) -> String { met.map { $0 ? " met" : " **missed**" } ?? "" }
    if let yardstick = row.floorOf {
        // No target of its own: how this floor compares with the yardstick's best peer.
        for peer in peerBrokers {
            guard let floor = results.median(row.caseID, row.key, peer),
                  let plain = results.median(yardstick, row.key, peer), plain != 0 else { continue }
            return "none; this row / \(peer)'s \(yardstick): \(fixed(floor / plain, 2))×"
        }
    }
    switch row.target {
    case .none:
        return ""
    case .bestPeerAtLeast(let r):
        return "≥ \(trimmed(r))× best peer" + mark + verdict(bestRatio.map { $0 >= r })
    case .bestPeerAtMost(let r):
        return "≤ \(trimmed(r))× best peer" + mark + verdict(bestRatio.map { $0 <= r })
    case .peerAtMost(let peer, let r):
        guard let eventbus, let other = results.median(row.caseID, row.key, peer), other != 0 else {
            return "≤ \(trimmed(r))× \(peer)" + mark
        }
        let ratio = eventbus / other
        return "≤ \(trimmed(r))× \(peer): \(fixed(ratio, 2))×" + mark + verdict(ratio <= r)
    case .atMost(let v, let unit):
        return "≤ \(row.unit == .instructions ? group(Int(v)) : trimmed(v))\(unit.isEmpty ? "" : " " + unit)" + mark
            + verdict(eventbus.map { $0 <= v })
    case .zero:
        return "0" + mark + verdict(eventbus.map { $0 == 0 })
    }
}

/// `1234567` as `1,234,567`.
func group(_ value: Int) -> String {
    let digits = Array(String(abs(value)))
    var out = ""
    for (index, digit) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { out += "," }
        out.append(digit)
    }
    return (value < 0 ? "-" : "") + out
}

/// Case 6 against case 1, per broker: the routing cost of 10,000 subscriptions.
private func shareRow(_ results: Results, _ columns: [String]) -> String {
    func share(_ broker: String) -> String {
        if results.notApplicable["c6/\(broker)"] != nil { return "n/a" }
        guard let with = results.median("c6", "rate", broker), let without = results.median("c1-64", "rate", broker),
              without > 0 else { return "–" }
        return fixed(with / without * 100, 0) + " %"
    }
    var target = "≥ 90 %⁶"
    if let with = results.median("c6", "rate", "eventbus"), let without = results.median("c1-64", "rate", "eventbus"), without > 0 {
        target += with / without >= 0.9 ? " met" : " **missed**"
    }
    return "| 6 | case 6 rate as a share of case 1 (64 B) rate | " + columns.map(share).joined(separator: " | ") + " | – | \(target) |\n"
}

extension String {
    /// `self` with every `target` replaced by `replacement` (no Foundation).
    func replacingOccurrences(_ target: Character, _ replacement: Character) -> String {
        String(map { $0 == target ? replacement : $0 })
    }
}
