// (issue 20, issue 37) Never-reading subscribers of another uid, parked out
// of the route lists while full (ParkedSubscribers.swift), for every overflow
// kind: what each one later reads (events plus the counts of its `dropped`
// notices) is exactly what matched its patterns (once per event with
// overlapping patterns), and `stats.dropped`, `clients` and the `types` op's
// per-type `dropped` agree with it. Written once (UIDBus.swift) and run in
// process (EventBusServerTests, no root) and against eventbusd with setpriv'd
// readers (EventBusIntegrationTests, root).
//
// Before editing: the readers read nothing while root publishes; a ping and
// then a sentinel event settle what they are owed. Uid 4201 (parkfair: and
// 4202, a publisher that is not root).
import EventBusTestSupport
import Foundation
import Testing

package let parkedScenarios: [BusScenario] = [
    BusScenario("Never-reading drop-new subscribers of another uid: their later dropped counts are exact",
                options: ["--max-outbound", "64K"]) { try neverReaders($0, overflow: "drop-new") },
    BusScenario("Never-reading wait subscribers of another uid: their later dropped counts are exact",
                options: ["--max-outbound", "64K"]) { try neverReaders($0, overflow: "wait") },
    // Stalled after 1 ms with their notice unread: parked almost at once.
    BusScenario("Never-reading drop-old subscribers of another uid: their later dropped counts are exact",
                options: ["--max-outbound", "64K", "--stall-timeout", "1ms"]) { try neverReaders($0, overflow: "drop-old") },
    // (parkfair) The publisher is uid 4202, not root: its events to uid
    // 4201's queues are charged to its fair share of them (half a queue), and
    // refused by it again the never-readers are parked against uid 4202.
    BusScenario("Never-reading subscribers of another uid, full to a publisher uid's fair share: parked against it, their dropped counts exact, the publisher's own reader gets every event",
                options: ["--max-outbound", "64K"]) { try fairShareNeverReaders($0) },
]

/// Twelve never-reading readers of uid 4201 under `overflow`, three shapes of patterns.
private func neverReaders(_ bus: any UIDBus, overflow: String) throws {
        let readers = try bus.connect(uid: 4201, count: 12)
        // Per reader: its patterns and how many of the published events match them.
        let shapes: [([String], [String: Int])] = [
            ([">"], ["a.b": 1500, "x.y": 1500]),
            ([">", "a.>", "a.b"], ["a.b": 1500, "x.y": 1500]),  // overlapping: each event once
            (["a.*"], ["a.b": 1500]),
        ]
        for (i, reader) in readers.enumerated() {
            try reader.ok(#"{"op":"hello","overflow":"\#(overflow)","req":"h"}"#)
            for pattern in shapes[i % 3].0 { try reader.ok(#"{"op":"subscribe","type":"\#(pattern)","req":"s"}"#) }
        }
        let root = try bus.connect(uid: 0)
        // The readers read nothing meanwhile: ~200 KiB in the kernel, 64 KiB queued, the rest dropped.
        let receipts = try root.publishMany("a.b", count: 1500, padding: 1000) + root.publishMany("x.y", count: 1500, padding: 1000)
        var read: [[String: Int]] = Array(repeating: [:], count: readers.count)
        var notices = Array(repeating: 0, count: readers.count)
        // Everything queued before the ping's reply, then a sentinel event
        // (its notice, if still pending, comes before it).
        for reader in readers { try reader.send(#"{"op":"ping","req":"drained"}"#) }
        for i in readers.indices {
            let (events, dropped) = try takeUntil(readers[i]) { $0.op == "ok" && $0.string("req") == "drained" }
            read[i] = events
            notices[i] = dropped
        }
        try root.publish("a.end")
        for i in readers.indices {
            let (events, dropped) = try takeUntil(readers[i]) { $0.op == "event" && $0.type == "a.end" }
            read[i].merge(events, uniquingKeysWith: +)
            notices[i] += dropped
        }

        var droppedByType: [String: Int] = [:]
        for (i, _) in readers.enumerated() {
            let matched = shapes[i % 3].1
            let got = read[i].values.reduce(0, +)
            #expect(got + notices[i] == matched.values.reduce(0, +), "reader \(i) (\(shapes[i % 3].0)): \(got) read + \(notices[i]) dropped")
            #expect(notices[i] > 0, "reader \(i) was full")
            for (type, count) in matched { droppedByType[type, default: 0] += count - read[i][type, default: 0] }
        }
        let totalDropped = notices.reduce(0, +)
        let delivered: Int = receipts.map(\.delivered).reduce(0, +)
        var readInAll = 0
        for counts in read { readInAll += counts.values.reduce(0, +) }
        // (drop-old drops queued events, which their publish counted as delivered)
        if overflow != "drop-old" { #expect(delivered == readInAll, "delivered as the publisher was told") }
        #expect(try root.stats().int("dropped") == totalDropped)
        let listed = try root.clientList().filter { $0.int("uid") == 4201 }.compactMap { $0.int("dropped") }
        #expect(listed.count == readers.count && listed.reduce(0, +) == totalDropped, "\(listed)")
        let types = try root.ok(#"{"op":"types","req":"t"}"#).array("types") as? [[String: Any]] ?? []
        for item in types {
            guard let type = item["type"] as? String, let want = droppedByType[type] else { continue }
            #expect((item["dropped"] as? Int) == want, "types: \(type) dropped")
        }
}

/// (parkfair) Twelve never-reading readers of uid 4201 (drop-new and wait)
/// on `>`, a publisher of uid 4202 and a reader of its own uid that reads:
/// in 50 rounds of 40 events (each fits the own reader's queue, so it
/// never holds the publisher) the never-readers fill to uid 4202's fair
/// share and are parked against it (`stats.parked_for_uids`); root's events
/// still reach them; what each later reads plus its notices is every event.
private func fairShareNeverReaders(_ bus: any UIDBus) throws {
    let readers = try bus.connect(uid: 4201, count: 12)
    for (i, reader) in readers.enumerated() {
        try reader.ok(#"{"op":"hello","overflow":"\#(i % 2 == 0 ? "drop-new" : "wait")","req":"h"}"#)
        try reader.ok(#"{"op":"subscribe","type":">","req":"s"}"#)
    }
    let publisher = try bus.connect(uid: 4202), own = try bus.connect(uid: 4202), root = try bus.connect(uid: 0)
    try own.ok(#"{"op":"subscribe","type":"a.>","req":"s"}"#)
    var published = 0, ownRead = 0
    for _ in 0..<50 {
        let receipts = try publisher.publishMany("a.b", count: 40, padding: 1000)
        published += receipts.count
        ownRead += try own.readFrames(count: 40).filter { $0.op == "event" && $0.type == "a.b" }.count
    }
    #expect(ownRead == published, "the publisher's own reader got every event")
    let stats = try root.stats()
    #expect(stats.int("parked_for_uids") == readers.count, "parked against uid 4202: \(stats.raw)")
    #expect(stats.int("parked") == 0, "not for every publisher")
    // Root's event fits under the connection's limit: it reaches each of them.
    let rootReceipt = try root.publish("r.x")
    #expect(rootReceipt.delivered == readers.count)
    var notices = Array(repeating: 0, count: readers.count)
    var read = Array(repeating: 0, count: readers.count)
    var sawRoot = Array(repeating: false, count: readers.count)
    func take(_ i: Int, until done: (Frame) -> Bool) throws {
        for frame in try readers[i].readFrames(until: done, timeout: .seconds(30)) {
            if frame.op == "event" && frame.type == "a.b" { read[i] += 1 }
            if frame.op == "event" && frame.type == "r.x" { sawRoot[i] = true }
            if frame.op == "dropped", let count = frame.int("count") { notices[i] += count }
        }
    }
    // Everything queued before the ping's reply, then a sentinel event of
    // uid 4202 (its notice, if still pending, comes before it).
    for reader in readers { try reader.send(#"{"op":"ping","req":"drained"}"#) }
    for i in readers.indices { try take(i) { $0.op == "ok" && $0.string("req") == "drained" } }
    try publisher.publish("a.end")
    for i in readers.indices {
        try take(i) { $0.op == "event" && $0.type == "a.end" }
        #expect(sawRoot[i], "reader \(i) got root's event")
        #expect(read[i] + notices[i] == published, "reader \(i): \(read[i]) read + \(notices[i]) dropped of \(published)")
        #expect(notices[i] > 0, "reader \(i) was full")
    }
    #expect(try root.stats().int("parked_for_uids") == 0, "back once they read")
    #expect(try root.stats().int("dropped") == notices.reduce(0, +))
    let listed = try root.clientList().filter { $0.int("uid") == 4201 }.compactMap { $0.int("dropped") }
    #expect(listed.count == readers.count && listed.reduce(0, +) == notices.reduce(0, +), "\(listed)")
}

/// Reads frames up to the one `done` accepts: events by type and the sum of `dropped` counts before it.
private func takeUntil(_ reader: RawClient, _ done: (Frame) -> Bool) throws -> ([String: Int], Int) {
    var events: [String: Int] = [:]
    var dropped = 0
    while true {
        let frame = try reader.readFrame(timeout: .seconds(30))
        if done(frame) { return (events, dropped) }
        if frame.op == "event", let type = frame.type { events[type, default: 0] += 1 }
        if frame.op == "dropped", let count = frame.int("count") { dropped += count }
    }
}
