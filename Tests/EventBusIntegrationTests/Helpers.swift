// Small helpers shared by the integration tests (the requests, `ok`,
// `publish`, `publishMany`, `clients`, are EventBusScenarios'
// RawClient+Scenarios.swift): padding, and checking drop accounting against PROTOCOL.md (Semantics).
//
// Before editing: helpers throw instead of recording issues, so a failing
// step stops the test at once and `withBroker` attaches the broker's stderr.
import EventBusScenarios
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// A JSON string literal body of `count` bytes for padding frames.
func padding(_ count: Int) -> String { String(repeating: "x", count: count) }

/// A `publish` frame of exactly `size` bytes (without its LF), valid JSON.
func publishFrame(ofSize size: Int, type: String = "big.frame", req: Int = 1) -> String {
    let head = #"{"op":"publish","type":"\#(type)","req":\#(req),"data":""#
    let tail = #""}"#
    return head + padding(size - head.utf8.count - tail.utf8.count) + tail
}

/// Checks a subscriber's frames against what was published (PROTOCOL.md,
/// Semantics: drops are counted and announced before the next event).
///
/// - `published`: seqs of every matching event published, in order.
/// - `frames`: everything the subscriber read, in order (events and `dropped`).
/// - `notQueued`: seqs whose publish reply said `delivered: 0` (drop-new), if known.
///
/// Rules checked: events arrive in increasing `seq` and only published ones;
/// every lost seq is covered by `dropped` notices, in order, each `since_seq`
/// naming the first lost event it covers, all before any later event; counts
/// plus received events equal the published count.
/// - Returns: the problems found (empty when all is well) and the total dropped count.
func lossProblems(published: [Int], frames: [Frame], notQueued: Set<Int>? = nil) -> (problems: [String], dropped: Int) {
    var problems: [String] = []
    let publishedSet = Set(published)
    var receivedSet = Set<Int>()
    var lastSeq = Int.min
    for frame in frames where frame.op == "event" {
        guard let seq = frame.seq else {
            problems.append("event without integer seq: \(frame.raw.prefix(200))")
            continue
        }
        if seq <= lastSeq { problems.append("seq \(seq) after \(lastSeq): not increasing") }
        lastSeq = seq
        if !publishedSet.contains(seq) { problems.append("event seq \(seq) was never published") }
        receivedSet.insert(seq)
    }
    let missing = published.filter { !receivedSet.contains($0) }
    if let notQueued, Set(missing) != notQueued {
        problems.append("lost seqs \(rangeSummary(missing)) differ from the publishes answered delivered 0: \(rangeSummary(notQueued.sorted()))")
    }
    var next = 0  // index in `missing` of the first loss not yet announced
    var droppedTotal = 0
    for frame in frames {
        switch frame.op {
        case "event":
            if let seq = frame.seq, next < missing.count, missing[next] < seq {
                problems.append("event seq \(seq) arrived before a dropped notice for lost seq \(missing[next])")
                problems.append("timeline: " + timeline(frames))
                return (problems, droppedTotal)
            }
        case "dropped":
            guard let count = frame.int("count"), let since = frame.int("since_seq"), count > 0 else {
                problems.append("dropped frame without positive count and integer since_seq: \(frame.raw)")
                continue
            }
            droppedTotal += count
            if next >= missing.count {
                problems.append("dropped notice \(frame.raw) but no further event was lost")
            } else if missing[next] != since {
                problems.append("dropped notice since_seq \(since), but the first unannounced lost seq is \(missing[next])")
            }
            next += count
        default:
            problems.append("unexpected frame on a subscriber: \(frame.raw.prefix(300))")
        }
    }
    if droppedTotal != missing.count {
        problems.append("dropped counts sum to \(droppedTotal) but \(missing.count) of \(published.count) events were not received")
    }
    if !problems.isEmpty { problems.append("timeline: " + timeline(frames)) }
    return (problems, droppedTotal)
}

/// `events 1...60, dropped(340 since 61), events 401...512`: what a subscriber read, compactly.
func timeline(_ frames: [Frame]) -> String {
    var parts: [String] = []
    var run: [Int] = []
    var drops: [(count: Int, since: Int)] = []
    func flush() {
        if !run.isEmpty { parts.append("events " + rangeSummary(run).dropFirst().dropLast()) }
        run = []
        if drops.count == 1 {
            parts.append("dropped(\(drops[0].count) since \(drops[0].since))")
        } else if drops.count > 1 {
            let total = drops.reduce(0) { $0 + $1.count }
            parts.append("\(drops.count) dropped notices in a row (total \(total), since_seq \(drops[0].since)...\(drops[drops.count - 1].since))")
        }
        drops = []
    }
    for frame in frames {
        if frame.op == "event", let seq = frame.seq {
            if !drops.isEmpty { flush() }
            run.append(seq)
        } else if frame.op == "dropped" {
            if !run.isEmpty { flush() }
            drops.append((frame.int("count") ?? -1, frame.int("since_seq") ?? -1))
        } else {
            flush()
            parts.append(String(frame.raw.prefix(120)))
        }
    }
    flush()
    return parts.joined(separator: ", ")
}

/// `[1...5, 9]`-style summary of sorted integers, for messages.
func rangeSummary(_ values: [Int]) -> String {
    var parts: [String] = []
    var i = 0
    while i < values.count {
        var j = i
        while j + 1 < values.count && values[j + 1] == values[j] + 1 { j += 1 }
        parts.append(i == j ? "\(values[i])" : "\(values[i])...\(values[j])")
        i = j + 1
    }
    return "[" + parts.prefix(20).joined(separator: ", ") + (parts.count > 20 ? ", …]" : "]")
}

/// The mode bits (`st_mode & 0o7777`) and file type of `path` via lstat(2), or nil.
func fileMode(_ path: String) -> (permissions: UInt32, isSocket: Bool, isDirectory: Bool)? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    let type = st.st_mode & S_IFMT
    return (st.st_mode & 0o7777, type == S_IFSOCK, type == S_IFDIR)
}

/// Whether `path` exists (lstat(2) succeeds: a dangling socket file counts).
func pathExists(_ path: String) -> Bool { fileMode(path) != nil }

/// RFC 3339 UTC with exactly three fractional digits, e.g. `2026-11-29T13:00:00.123Z`.
func isRFC3339UTCMillis(_ text: String) -> Bool {
    text.range(of: #"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"#, options: .regularExpression) != nil
}
