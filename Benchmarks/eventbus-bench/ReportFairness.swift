// The harness-fairness table of docs/BENCHMARKS.md (issue 24): for the
// throughput cases, the load generator's own CPU per delivery next to the
// broker's, and the rate each broker reached with eventbus-bench's roles
// against the rate with scripts/bench-client.c, a minimal raw-socket client
// in C, run right after it in the same repetition. A generator that is the
// slow stage for a broker shows here as a large CPU share or a ratio below
// the bound; the rates of the main table are only worth quoting when it
// does not.
//
// Before editing: the C client's runs are `case=CASE@c` result lines
// (scripts/bench, unless --no-fairness); each run of either generator
// carries `pub_cpu_us`, `sub_cpu_us` (per delivery, from the two
// processes' /proc/PID/stat) and `cpu_us` (the broker's).

/// The cases the fairness table covers, with their labels.
private let fairnessCases: [(id: String, label: String)] = [
    ("c1-64", "1→1 64 B"), ("c1-1k", "1→1 1 KiB"), ("c2-64", "1→10 64 B"), ("c2-1k", "1→10 1 KiB"),
]

/// The least rate with eventbus-bench as a share of the rate with the C client.
let fairRateRatio = 0.9

/// The markdown fairness table, or "" when no case of it ran.
func fairnessTable(_ results: Results, _ columns: [String]) -> String {
    let present = fairnessCases.filter { c in columns.contains { results.median(c.id, "gen_cpu_us", $0) != nil } }
    guard !present.isEmpty else { return "" }
    var out = "\n| # | harness fairness (issue 24) | " + columns.joined(separator: " | ") + " | bound |\n"
    out += "|---|---|" + String(repeating: "---|", count: columns.count) + "---|\n"
    for c in present {
        let number = String(c.id.dropFirst().prefix(1))
        out += "| \(number) | \(c.label): eventbus-bench CPU per delivery, µs, publisher + subscriber (share of the broker's) | "
            + columns.map { cpuCell(results, c.id, $0) }.joined(separator: " | ") + " |  |\n"
        guard columns.contains(where: { results.median(c.id + "@c", "gen_cpu_us", $0) != nil }) else { continue }
        out += "| \(number) | same with scripts/bench-client.c (C) | "
            + columns.map { cpuCell(results, c.id + "@c", $0) }.joined(separator: " | ") + " |  |\n"
        var misses: [String] = []
        let ratios = columns.map { broker -> String in
            let list = pairedRatios(results, c.id, broker)
            guard !list.isEmpty else { return results.notApplicable["\(c.id)/\(broker)"] != nil ? "n/a" : "–" }
            let m = median(list)
            if m < fairRateRatio && peerBrokers.contains(broker) { misses.append("\(broker) \(fixed(m, 2))×") }
            let range = list.count > 1 ? " [\(fixed(list.min()!, 2))–\(fixed(list.max()!, 2))]" : ""
            return "\(fixed(m, 2))×" + range
        }
        let verdict = misses.isEmpty ? " met" : " **missed**: " + misses.joined(separator: ", ")
        out += "| \(number) | \(c.label): rate with eventbus-bench / rate with the C client, same repetition | "
            + ratios.joined(separator: " | ") + " | ≥ \(trimmed(fairRateRatio))× for the peers\(verdict) |\n"
    }
    out += "\nPublisher and subscriber CPU: each process's utime+stime (/proc/PID/stat, all of its life: set-up, flood, drain) divided by the deliveries of its run, median of the repetitions in which the broker disconnected no subscriber; the share is of the broker's CPU per delivery in the same runs. The C client (scripts/bench-client.c) plays the same two roles with the same frames, big writes and 256 KiB reads, and counts by lengths; its runs follow eventbus-bench's in each repetition. Ratios are per repetition (leaving out a repetition in which the broker disconnected a subscriber of either run), then the median [min–max]; the bound holds for the peers (for eventbus a run that drops events is not a rate to compare, and the relay, which does no work of its own, is meant to have the generator as its slow stage).\n"
    return out
}

/// `pub + sub (share %)` for one case and broker: medians of the repetitions.
private func cpuCell(_ results: Results, _ caseID: String, _ broker: String) -> String {
    if results.notApplicable["\(caseID)/\(broker)"] != nil { return "n/a" }
    // Per delivery means little once the broker closed the subscriber: leave those runs out.
    func kept(_ key: String) -> [Double] {
        (results.byRep["\(caseID)/\(key)/\(broker)"] ?? [:]).filter { !disconnected(results, caseID, broker, rep: $0.key) }
            .map(\.value)
    }
    let pubs = kept("pub_cpu_us"), subs = kept("sub_cpu_us")
    guard !pubs.isEmpty, !subs.isEmpty else { return "–" }
    let pub = median(pubs), sub = median(subs)
    var text = "\(fixed(pub, 3)) + \(fixed(sub, 3))"
    let shares = pairedValues(results, caseID, "gen_cpu_us", caseID, "cpu_us", broker).compactMap {
        $0.second > 0 && !disconnected(results, caseID, broker, rep: $0.rep) ? $0.first / $0.second : nil
    }
    if !shares.isEmpty { text += " (\(fixed(median(shares) * 100, 0)) %)" }
    return text
}

/// eventbus-bench's rate over the C client's, one ratio per repetition that
/// has both and in which the broker disconnected no subscriber of either
/// (Redis past its pubsub output limit: what such a run counts is not a rate).
private func pairedRatios(_ results: Results, _ caseID: String, _ broker: String) -> [Double] {
    pairedValues(results, caseID, "rate", caseID + "@c", "rate", broker).compactMap { rep, ours, theirs in
        guard !disconnected(results, caseID, broker, rep: rep), !disconnected(results, caseID + "@c", broker, rep: rep),
              theirs > 0 else { return nil }
        return ours / theirs
    }
}

/// Whether the broker disconnected a subscriber in that run.
private func disconnected(_ results: Results, _ caseID: String, _ broker: String, rep: String) -> Bool {
    (results.byRep["\(caseID)/disconnected/\(broker)"]?[rep] ?? 0) > 0
}

/// The values of `case1/key1` and `case2/key2` of one broker, by repetition,
/// in the repetitions that have both.
private func pairedValues(_ results: Results, _ case1: String, _ key1: String, _ case2: String, _ key2: String,
                          _ broker: String) -> [(rep: String, first: Double, second: Double)] {
    guard let first = results.byRep["\(case1)/\(key1)/\(broker)"], let second = results.byRep["\(case2)/\(key2)/\(broker)"] else {
        return []
    }
    return first.keys.sorted().compactMap { rep in second[rep].map { (rep, first[rep]!, $0) } }
}
