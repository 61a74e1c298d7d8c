// PROTOCOL.md "Retained events and history (1.1)" against the real broker:
// retained events survive SIGTERM, SIGKILL and idle exit under --state-dir
// (fields kept, new seq), a damaged state file keeps what can be read, and
// `since` replays are exact while events are being published, with `gap`
// frames when the ring no longer reaches back or the broker restarted, and
// the no-echo rule.
import EventBusScenarios
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Retained events and history")
struct RetentionTests {
    static let fields = ["type", "time", "source", "id", "pid", "uid", "gid"]

    /// Publishes two retained events (b first, then a) and returns them as a
    /// subscriber with `last` sees them.
    /// The clients are closed on return.
    func publishRetained(_ broker: BrokerProcess) throws -> [Frame] {
        let publisher = try RawClient(path: broker.socketPath)
        defer { publisher.close() }
        try publisher.ok(#"{"op":"hello","client":"settings","req":0}"#)
        try publisher.ok(#"{"op":"publish","type":"b.state","retain":true,"id":"b-1","req":1,"data":{"on":true}}"#)
        try publisher.ok(#"{"op":"publish","type":"other","req":2}"#)
        try publisher.ok(#"{"op":"publish","type":"a.state","retain":true,"source":"panel","req":3,"data":[1, 2.50]}"#)
        return try currentRetained(broker)
    }

    /// The retained events a new subscriber with `last: true` on `>` gets.
    func currentRetained(_ broker: BrokerProcess) throws -> [Frame] {
        let reader = try RawClient(path: broker.socketPath)
        defer { reader.close() }
        let ok = try reader.ok(#"{"op":"subscribe","type":">","last":true,"req":1}"#)
        let events = try reader.readFrames(count: ok.int("retained") ?? 0)
        #expect(events.allSatisfy { $0.bool("retained") == true })
        return events
    }

    func expectSameEventsWithNewSeqs(_ before: [Frame], _ after: [Frame], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(after.map(\.type) == before.map(\.type), "old order kept", sourceLocation: sourceLocation)
        #expect(after.map(\.seq) == [1, 2], "new seqs, in the old order", sourceLocation: sourceLocation)
        for (b, a) in zip(before, after) {
            for key in Self.fields { #expect("\(b.fields[key]!)" == "\(a.fields[key]!)", "\(key) kept", sourceLocation: sourceLocation) }
            #expect(b.raw.split(separator: #""data":"#).last == a.raw.split(separator: #""data":"#).last, "data byte for byte", sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: [SIGTERM, SIGKILL])
    func retainedEventsSurviveARestartWithTheirFieldsAndNewSeqs(_ signal: Int32) throws {
        let state = try TemporaryDirectory(prefix: "ebstate-")
        defer { state.remove() }
        let first = try BrokerProcess(arguments: ["--state-dir", state.path])
        let before = try publishRetained(first)
        #expect(before.map(\.seq) == [1, 3])
        if signal == SIGKILL {
            // A change reaches the file within a second; SIGKILL gives no chance to write more.
            try waitUntil("the state file holds both events") {
                (try? String(contentsOfFile: state.file("retained.jsonl"), encoding: .utf8))?.contains("a.state") == true
            }
        }
        first.terminate(signal: signal)
        first.cleanUp()
        try withBroker(["--state-dir", state.path]) { second in
            expectSameEventsWithNewSeqs(before, try currentRetained(second))
            let client = try second.connect()
            #expect(try client.ok(#"{"op":"publish","type":"x","req":1}"#).seq == 3, "new events follow the restored seqs")
            #expect(try client.stats().int("retained") == 2)
        }
    }

    /// (1.3) Before, the state file's reader refused the `key` the broker
    /// itself wrote: a keyed retained event was skipped ("unexpected key")
    /// at every restart, and lost.
    @Test func aKeyedRetainedEventSurvivesARestartWithItsKey() throws {
        let state = try TemporaryDirectory(prefix: "ebstate-")
        defer { state.remove() }
        let first = try BrokerProcess(arguments: ["--state-dir", state.path])
        let publisher = try first.connect()
        try publisher.ok(#"{"op":"publish","type":"k.state","retain":true,"key":"customer-7","req":1,"data":7}"#)
        let before = try currentRetained(first)
        #expect(before.map { $0.string("key") } == ["customer-7"])
        publisher.close()
        first.terminate(signal: SIGTERM)
        first.cleanUp()
        try withBroker(["--state-dir", state.path]) { second in
            let after = try currentRetained(second)
            #expect(after.map(\.type) == ["k.state"], "restored: \(second.stderrText())")
            #expect(after.map { $0.string("key") } == ["customer-7"], "with its key")
            #expect(!second.stderrText().contains("skipped"), "\(second.stderrText())")
        }
    }

    @Test func idleExitWritesTheRetainedEvents() throws {
        let state = try TemporaryDirectory(prefix: "ebstate-")
        defer { state.remove() }
        let first = try BrokerProcess(arguments: ["--state-dir", state.path, "--exit-idle-time", "1s"])
        defer { first.cleanUp() }
        let before = try publishRetained(first)
        // Every client is gone: the broker exits on its own, writing the file on the way out.
        #expect(first.waitForExit(timeout: .seconds(10)) == .exited(0))
        try withBroker(["--state-dir", state.path]) { broker in
            expectSameEventsWithNewSeqs(before, try currentRetained(broker))
        }
    }

    @Test func aDamagedStateFileNeverStopsTheBrokerAndWhatCanBeReadIsKept() throws {
        let state = try TemporaryDirectory(prefix: "ebstate-")
        defer { state.remove() }
        let good = #"{"op":"event","seq":7,"type":"kept","time":"2026-11-29T13:00:00.123Z","source":"s","id":"i-7","pid":5,"uid":1000,"gid":1000,"data":{"v":1}}"#
        let text = #"{"op":"eventbus-state","format":1}"# + "\n" + "\u{00}\u{FF}garbage\n" + good + "\n"
            + #"{"op":"event","seq":8,"type":"cut","time":"2026-11-29T13:00:00.123Z","source":"s","id":"i"#
        try Data(text.utf8).write(to: URL(fileURLWithPath: state.file("retained.jsonl")))
        try withBroker(["--state-dir", state.path]) { broker in
            let events = try currentRetained(broker)
            #expect(events.map(\.type) == ["kept"] && events.first?.seq == 1 && events.first?.string("id") == "i-7")
            let log = broker.stderrText()
            #expect(log.contains("line 2") && log.contains("line 4") && log.contains("restored 1 retained event"), "\(log)")
        }
    }

    @Test func aStateFileThatCannotBeWrittenIsLoggedRetriedAndTheBrokerKeepsServing() throws {
        let state = try TemporaryDirectory(prefix: "ebstate-")
        defer { state.remove() }
        // A directory where the temporary file must go: open(2) fails (EISDIR), even for root.
        let blocker = state.file("retained.jsonl.tmp")
        try FileManager.default.createDirectory(atPath: blocker, withIntermediateDirectories: false)
        try withBroker(["--state-dir", state.path]) { broker in
            let client = try broker.connect()
            try client.ok(#"{"op":"publish","type":"kept","retain":true,"req":1}"#)
            try waitUntil("the failed write is logged") { broker.stderrText().contains("failed to write state file") }
            #expect(try client.publish("still.serving", req: 2).seq == 2)
            try FileManager.default.removeItem(atPath: blocker)
            try waitUntil("the retry writes the file") {
                (try? String(contentsOfFile: state.file("retained.jsonl"), encoding: .utf8))?.contains("\"kept\"") == true
            }
            try waitUntil("the recovery is logged") { broker.stderrText().contains("wrote state file") }
        }
    }

    @Test func sinceReplaysExactlyWhileEventsArePublished() throws {
        try withBroker { broker in
            let publisher = try broker.connect()
            let early = try (1...20).map { try publisher.publish("load.tick", req: $0).seq }
            let since = early[9]
            // Publish more from another thread while the subscriber subscribes.
            let background = BackgroundPublisher(path: broker.socketPath, type: "load.tick", count: 300)
            let subscriber = try broker.connect()
            try subscriber.send(#"{"op":"subscribe","type":"load.*","since":\#(since),"req":"s"}"#)
            let late = try background.receipts()
            let last = try #require(late.last?.seq)
            let frames = try subscriber.readFrames(until: { $0.seq == last })
            #expect(frames.first?.op == "ok")
            let events = frames.filter { $0.op == "event" }
            let expected = (early.filter { $0 > since } + late.map(\.seq)).sorted()
            #expect(events.map(\.seq) == expected, "every event after since, once, in order")
            let replayed = events.filter { $0.bool("replayed") == true }.map(\.seq!)
            #expect(!replayed.isEmpty && replayed == Array(expected.prefix(replayed.count)), "replayed first")
            #expect(events.dropFirst(replayed.count).allSatisfy { $0.has("replayed") == false }, "then live")
        }
    }

    @Test func aGapFrameComesFirstWhenTheRingNoLongerReachesBackOrTheBrokerRestarted() throws {
        try withBroker(["--history-events", "5"]) { broker in
            let publisher = try broker.connect()
            for req in 1...10 { try publisher.publish("g.x", req: req) }
            let instance = try #require(try publisher.stats().string("instance"))
            let behind = try broker.connect()
            try behind.ok(#"{"op":"subscribe","type":"g.x","since":2,"instance":"\#(instance)","req":1}"#)
            let frames = try behind.readFrames(count: 6)
            #expect(frames[0].op == "gap" && frames[0].type == "g.x" && frames[0].int("since_seq") == 2 && frames[0].int("first_seq") == 6)
            #expect(frames.dropFirst().map(\.seq) == [6, 7, 8, 9, 10])
            // A broker run that is not this one: since_seq 0, the whole ring.
            let foreign = try broker.connect()
            try foreign.ok(#"{"op":"subscribe","type":"g.x","since":9,"instance":"0123456789abcdef","req":1}"#)
            let replay = try foreign.readFrames(count: 6)
            #expect(replay[0].op == "gap" && replay[0].int("since_seq") == 0 && replay[0].int("first_seq") == 6)
            #expect(replay.dropFirst().allSatisfy { $0.bool("replayed") == true })
        }
    }

    /// docs/PROTOCOL-NOTES.md "`since: 0`": with this run's instance (or
    /// none) the whole ring, no `gap`, also once the ring has dropped its
    /// oldest events by count or by bytes.
    @Test(arguments: [["--history-events", "5"], ["--history-bytes", "1K"]])
    func sinceZeroOfThisRunReplaysTheWholeRingWithoutAGapAfterTheRingDroppedItsOldest(_ bound: [String]) throws {
        try withBroker(bound) { broker in
            let publisher = try broker.connect()
            let published = try (1...40).map { try publisher.publish("z.x", req: $0).seq }
            let instance = try #require(try publisher.stats().string("instance"))
            for subscribe in [#""since":0,"instance":"\#(instance)""#, #""since":0"#] {
                let subscriber = try broker.connect()
                try subscriber.ok(#"{"op":"subscribe","type":"z.x",\#(subscribe),"req":1}"#)
                let frames = try subscriber.settle()
                #expect(!frames.contains { $0.op == "gap" }, "no gap for \(subscribe): \(frames.map(\.raw))")
                let seqs = frames.compactMap(\.seq)
                #expect(!seqs.isEmpty && seqs.first! > published.first!, "the ring dropped its oldest (\(seqs))")
                #expect(seqs == Array(published.suffix(seqs.count)), "the ring's events in order, up to the newest")
                #expect(frames.allSatisfy { $0.op == "event" && $0.bool("replayed") == true })
                if bound[0] == "--history-events" { #expect(seqs.count == 5) }
            }
        }
    }

    @Test func aReplayLeavesOutTheConnectionsOwnEventsUnlessItSaidEcho() throws {
        try withBroker { broker in
            let me = try broker.connect()
            let other = try broker.connect()
            try me.publish("echo.x", req: 1)
            try other.publish("echo.x", req: 2)
            try me.ok(#"{"op":"subscribe","type":"echo.x","since":0,"req":3}"#)
            #expect(try me.settle().map(\.seq) == [2])
            let echo = try broker.connect()
            try echo.ok(#"{"op":"hello","echo":true,"req":0}"#)
            try echo.publish("echo.x", req: 1)
            try echo.ok(#"{"op":"subscribe","type":"echo.x","since":0,"req":3}"#)
            #expect(try echo.settle().map(\.seq) == [1, 2, 3])
        }
    }
}

/// Publishes `count` events from a thread of its own, on its own connection.
final class BackgroundPublisher: @unchecked Sendable {
    // Written by the thread before `done` is signalled, read after `wait`.
    private var result: Result<[Receipt], any Error> = .success([])
    private let done = DispatchSemaphore(value: 0)

    init(path: String, type: String, count: Int) {
        Thread.detachNewThread { [self] in
            result = Result {
                let client = try RawClient(path: path)
                defer { client.close() }
                return try client.publishMany(type, count: count, padding: 10, batch: 10)
            }
            done.signal()
        }
    }

    /// Waits for the thread; its receipts in order.
    func receipts() throws -> [Receipt] {
        done.wait()
        return try result.get()
    }
}
