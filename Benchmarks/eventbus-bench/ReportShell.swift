// The case 8 table of docs/BENCHMARKS.md: one row per one-shot shell
// publisher, `/bin/true` from the same loop as the floor, eventbus's ratio
// to each and issue 14's targets (at most 0.6× mosquitto_pub, below dbus-send).
//
// Before editing: the rows come from `case=c8 broker=TOOL` result lines,
// TOOL being a `ShellTool` name; NATS appears only as a `na=` reason.

/// One row of the shell table.
private struct ShellRow {
    let tool: String
    let label: String
    /// The most eventbus / this tool may be, and whether the bound is strict.
    var bound: (Double, strict: Bool)?
}

private let shellRows: [ShellRow] = [
    ShellRow(tool: "eventbus", label: "`eventbus publish`, as `scripts/install` installs it (static, stripped)"),
    ShellRow(tool: "redis", label: "`redis-cli publish`"),
    ShellRow(tool: "mosquitto", label: "`mosquitto_pub`", bound: (0.6, strict: false)),
    ShellRow(tool: "dbus", label: "`dbus-send --type=signal` (private dbus-daemon)", bound: (1.0, strict: true)),
    ShellRow(tool: "nats", label: "NATS"),
    ShellRow(tool: "floor", label: "`/bin/true` (the loop alone)"),
]

/// The markdown table for case 8, or "" when no tool ran.
func shellTable(_ results: Results) -> String {
    let present = shellRows.filter { row in
        results.values["c8/ms/\(row.tool)"] != nil
            || results.notApplicable["c8/\(row.tool)"] != nil || results.skipped["c8/\(row.tool)"] != nil
    }
    guard !present.isEmpty else { return "" }
    var out = "\n| 8 | one-shot shell publish | median ms | fastest ms | p90 ms | eventbus / this | target |\n"
    out += "|---|---|---|---|---|---|---|\n"
    let eventbus = results.median("c8", "ms", "eventbus")
    for row in present {
        if let reason = results.notApplicable["c8/\(row.tool)"] {
            out += "| 8 | \(row.label) | n/a: \(reason) | | | | |\n"
            continue
        }
        let median = results.cell("c8", "ms", row.tool, .millis)
        let fastest = results.median("c8", "ms_min", row.tool).map { fixed($0, 2) } ?? "–"
        let p90 = results.median("c8", "ms_p90", row.tool).map { fixed($0, 2) } ?? "–"
        var ratio: Double?
        if row.tool != "eventbus", let eventbus, let other = results.median("c8", "ms", row.tool), other > 0 {
            ratio = eventbus / other
        }
        var target = ""
        if let (limit, strict) = row.bound {
            target = (strict ? "< " : "≤ ") + trimmed(limit) + "×"
            if let ratio { target += (strict ? ratio < limit : ratio <= limit) ? " met" : " **missed**" }
        }
        out += "| 8 | \(row.label) | \(median) | \(fastest) | \(p90) | \(ratio.map { fixed($0, 2) + "×" } ?? "–") | \(target) |\n"
    }
    out += "\nEach tool: its median wall time from spawn to reap over the runs of one repetition, then the median [min–max] of those over the repetitions; fastest and p90 are medians of each repetition's.\n"
    return out
}
