// Turns the result lines `scripts/bench` collected into the markdown table of
// docs/BENCHMARKS.md: median [min–max] per broker, the eventbus/redis ratio
// of the medians, and the issue-6 target for the row.
//
// Before editing: input lines look like
// `rep=1 case=c1-64 broker=eventbus rate=712345 loss=0 cpu_us=1.330 ...`;
// a line with `skipped=REASON` marks a case that could not run.
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

/// How a row's numbers are shown.
private enum Unit {
    case rate, count, micros, cpuMicros, kib, mib, millis, flag

    func format(_ v: Double) -> String {
        switch self {
        case .rate:
            if v >= 1e6 { return fixed(v / 1e6, 2) + "M" }
            if v >= 1e4 { return fixed(v / 1e3, 0) + "k" }
            if v >= 1e3 { return fixed(v / 1e3, 1) + "k" }
            return fixed(v, 0)
        case .count: return fixed(v, 0)
        case .micros: return fixed(v, v >= 100 ? 0 : 1)
        case .cpuMicros: return fixed(v, 3)
        case .kib: return fixed(v, 2)
        case .mib: return fixed(v, 1)
        case .millis: return fixed(v, 2)
        case .flag: return v >= 0.5 ? "yes" : "no"
        }
    }
}

/// The target from issue 6 a row is held to.
private enum Target {
    case none
    /// eventbus/redis ratio of medians at least this.
    case ratioAtLeast(Double)
    /// eventbus/redis ratio of medians at most this.
    case ratioAtMost(Double)
    /// eventbus median at most this, in the row's unit.
    case eventbusAtMost(Double, String)
    /// eventbus median zero.
    case eventbusZero

    var text: String {
        switch self {
        case .none: return ""
        case .ratioAtLeast(let r): return "≥ \(fixed(r, 1))×"
        case .ratioAtMost(let r): return "≤ \(fixed(r, 1))×"
        case .eventbusAtMost(let v, let unit): return "≤ \(fixed(v, 0)) \(unit)"
        case .eventbusZero: return "0"
        }
    }

    func met(eventbus: Double?, ratio: Double?) -> Bool? {
        switch self {
        case .none: return nil
        case .ratioAtLeast(let r): return ratio.map { $0 >= r }
        case .ratioAtMost(let r): return ratio.map { $0 <= r }
        case .eventbusAtMost(let v, _): return eventbus.map { $0 <= v }
        case .eventbusZero: return eventbus.map { $0 == 0 }
        }
    }
}

/// One row of the table: a metric of a case.
private struct Row {
    let number: String
    let caseID: String
    let key: String
    let label: String
    let unit: Unit
    let target: Target
}

private let rows: [Row] = [
    Row(number: "1", caseID: "c1-64", key: "rate", label: "1→1 64 B, msg/s delivered", unit: .rate, target: .ratioAtLeast(2)),
    Row(number: "1", caseID: "c1-64", key: "loss", label: "1→1 64 B, messages lost", unit: .count, target: .eventbusZero),
    Row(number: "1", caseID: "c1-1k", key: "rate", label: "1→1 1 KiB, msg/s delivered", unit: .rate, target: .ratioAtLeast(2)),
    Row(number: "1", caseID: "c1-1k", key: "loss", label: "1→1 1 KiB, messages lost", unit: .count, target: .eventbusZero),
    Row(number: "2", caseID: "c2", key: "rate", label: "1→10 64 B, deliveries/s", unit: .rate, target: .ratioAtLeast(2)),
    Row(number: "2", caseID: "c2", key: "loss", label: "1→10 64 B, deliveries lost", unit: .count, target: .eventbusZero),
    Row(number: "3", caseID: "c3", key: "p50_us", label: "latency at 10k msg/s, 64 B: p50 µs", unit: .micros, target: .none),
    Row(number: "3", caseID: "c3", key: "p99_us", label: "latency at 10k msg/s, 64 B: p99 µs", unit: .micros, target: .ratioAtMost(1)),
    Row(number: "3", caseID: "c3", key: "p999_us", label: "latency at 10k msg/s, 64 B: p99.9 µs", unit: .micros, target: .none),
    Row(number: "4", caseID: "c1-64", key: "cpu_us", label: "broker CPU per delivery, 1→1 64 B, µs", unit: .cpuMicros, target: .ratioAtMost(0.5)),
    Row(number: "4", caseID: "c2", key: "cpu_us", label: "broker CPU per delivery, 1→10 64 B, µs", unit: .cpuMicros, target: .ratioAtMost(0.5)),
    Row(number: "5", caseID: "c5", key: "rss_kib_per_conn", label: "idle subscriber connection, broker RSS KiB each (1,000)", unit: .kib, target: .eventbusAtMost(1, "KiB")),
    Row(number: "6", caseID: "c6", key: "rate", label: "1→1 64 B with 10,000 unrelated subscriptions, msg/s", unit: .rate, target: .ratioAtLeast(2)),
    Row(number: "6", caseID: "c6", key: "cpu_us", label: "broker CPU per delivery, same, µs", unit: .cpuMicros, target: .none),
    Row(number: "7", caseID: "c7", key: "live_rate", label: "stalled + live subscriber: live msg/s", unit: .rate, target: .ratioAtLeast(2)),
    Row(number: "7", caseID: "c7", key: "live_loss", label: "stalled + live subscriber: live messages lost", unit: .count, target: .eventbusZero),
    Row(number: "7", caseID: "c7", key: "rss_peak_mib", label: "stalled + live subscriber: broker peak RSS MiB", unit: .mib, target: .none),
    Row(number: "7", caseID: "c7", key: "stalled_loss", label: "stalled subscriber: events it never got", unit: .count, target: .none),
    Row(number: "7", caseID: "c7", key: "stalled_dropped", label: "stalled subscriber: `dropped` count it was told", unit: .count, target: .none),
    Row(number: "7", caseID: "c7", key: "stalled_closed", label: "stalled subscriber: disconnected by the broker", unit: .flag, target: .none),
    Row(number: "8", caseID: "c8", key: "ms", label: "one-shot shell publish, median ms of 200", unit: .millis, target: .ratioAtMost(0.5)),
]

/// Median of a non-empty list (mean of the middle two for an even count).
private func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/// Reads the result file at `path` and prints the markdown table on stdout.
func printReport(path: String) {
    guard let bytes = readSmallFile(path) else { fail("cannot read \(path)") }
    var values: [String: [Double]] = [:]
    var skipped: [String: String] = [:]
    var notes: [String] = []
    var reps = Set<String>()
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
        let fields = Fields(parsing: String(line))
        guard let caseID = fields["case"], let broker = fields["broker"] else { continue }
        if let rep = fields["rep"] { reps.insert(rep) }
        if let reason = fields["skipped"] {
            skipped["\(caseID)/\(broker)"] = reason.replacingOccurrences("_", " ")
            continue
        }
        for (key, value) in fields.pairs {
            guard let number = Double(value) else { continue }
            values["\(caseID)/\(key)/\(broker)", default: []].append(number)
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

    // Case 6 against case 1, per broker: the routing cost of 10,000 subscriptions.
    func share(_ broker: String) -> Double? {
        guard let with = values["c6/rate/\(broker)"], let without = values["c1-64/rate/\(broker)"],
              !with.isEmpty, !without.isEmpty, median(without) > 0 else { return nil }
        return median(with) / median(without)
    }
    func shareRow() -> String {
        let eventbusShare = share("eventbus")
        let shareText = { (v: Double?) in v.map { fixed($0 * 100, 0) + " %" } ?? "–" }
        var target = "≥ 90 %"
        if let eventbusShare { target += eventbusShare >= 0.9 ? " met" : " **missed**" }
        return "| 6 | case 6 rate as a share of case 1 (64 B) rate | \(shareText(eventbusShare)) | \(shareText(share("redis"))) | – | \(target) |\n"
    }

    var out = "| # | metric | eventbus | redis | eventbus/redis | target |\n|---|---|---|---|---|---|\n"
    for row in rows {
        func cell(_ broker: String) -> (String, Double?) {
            if let reason = skipped["\(row.caseID)/\(broker)"] { return ("skipped: \(reason)", nil) }
            guard let list = values["\(row.caseID)/\(row.key)/\(broker)"], !list.isEmpty else { return ("–", nil) }
            let m = median(list)
            if list.count == 1 || row.unit == .flag { return (row.unit.format(m), m) }
            return ("\(row.unit.format(m)) [\(row.unit.format(list.min()!))–\(row.unit.format(list.max()!))]", m)
        }
        let (eventbusText, eventbus) = cell("eventbus")
        let (redisText, redis) = cell("redis")
        var ratio: Double?
        if let eventbus, let redis, redis != 0, row.unit != .flag, row.unit != .count { ratio = eventbus / redis }
        let ratioText = ratio.map { fixed($0, 2) + "×" } ?? "–"
        var targetText = row.target.text
        if let met = row.target.met(eventbus: eventbus, ratio: ratio) { targetText += met ? " met" : " **missed**" }
        out += "| \(row.number) | \(row.label) | \(eventbusText) | \(redisText) | \(ratioText) | \(targetText) |\n"
        if row.caseID == "c6" && row.key == "cpu_us" { out += shareRow() }
    }
    out += "\nMedian [min–max] of \(reps.count) run\(reps.count == 1 ? "" : "s") per cell; the ratio is of the medians.\n"
    for note in notes { out += "\n- Note: \(note)." }
    if !notes.isEmpty { out += "\n" }
    writeAll(1, out)
}

extension String {
    /// `self` with every `target` replaced by `replacement` (no Foundation).
    func replacingOccurrences(_ target: Character, _ replacement: Character) -> String {
        String(map { $0 == target ? replacement : $0 })
    }
}
