// PROTOCOL.md "Flow control (1.2)" against the real broker: `wait` as the
// default, a same-uid publisher held unrouted while a subscriber's queue is
// full and released once it is below half, other uids never held (their
// events dropped as under drop-new), the stall timeout and `behind`, cycles,
// the `hold` policy action, EOF while held, paced `last` and `since`
// replays (and the live events behind them), and the new `hello`, `stats`
// and `clients` fields.
//
// Before editing: a held publisher's writes block (its socket buffer fills),
// so every flooding publisher here writes from its own thread
// (`robustThread`, RobustnessSupport.swift) while the test thread reads the
// subscriber. --max-outbound is small (64 KiB) so that holds come at once.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Flow control (1.2)")
struct FlowControlTests {
    static let small = ["--max-outbound", "65536"]

    /// `count` publishes of `type` without `req` (silent), then one with
    /// `req` "last" as the marker (and the ok read).
    static func floodLines(_ type: String, count: Int, padding: Int = 40, from start: Int = 0) -> [UInt8] {
        var text = ""
        text.reserveCapacity(count * (padding + 60))
        let pad = String(repeating: "x", count: padding)
        for i in start..<start + count { text += #"{"op":"publish","type":"\#(type)","data":{"i":\#(i),"p":"\#(pad)"}}"# + "\n" }
        return Array(text.utf8)
    }

    /// Floods from its own thread: `count` events then a marker `<type>.end`
    /// with req; `done` is set once the marker's ok came back.
    static func flood(_ publisher: RawClient, _ type: String, count: Int, from start: Int = 0, group: DispatchGroup, done: RobustShared<Bool>) {
        let handoff = RobustHandoff(publisher)
        let bytes = floodLines(type, count: count, from: start)
        robustThread(group) {
            do {
                try handoff.client.sendBytes(bytes, timeout: .seconds(60))
                try handoff.client.send(#"{"op":"publish","type":"\#(type).end","req":"last"}"#)
                _ = try handoff.client.readFrames(until: { $0.req == .string("last") }, timeout: .seconds(60))
                done.withLock { $0 = true }
            } catch {
                Issue.record("publisher: \(error)")
            }
        }
    }

    /// Reads events until `<prefix>.end`, checking that the `i`s are 0..<count in order.
    static func readAll(_ subscriber: RawClient, _ prefix: String, count: Int, pace: Int = 0) throws -> (events: Int, dropped: Int) {
        var next = 0
        var dropped = 0
        while true {
            let frame = try subscriber.readFrame(timeout: .seconds(60))
            if frame.op == "dropped" { dropped += frame.int("count") ?? 0; continue }
            guard frame.op == "event" else { continue }
            if frame.type == "\(prefix).end" || frame.type == "\(prefix).x.end" { break }
            let i = frame.object("data")?["i"] as? Int
            if i != next { Issue.record("expected event \(next), got \(frame.raw.prefix(120))"); return (next, dropped) }
            next += 1
            if pace > 0 && next % pace == 0 { usleep(2_000) }
        }
        return (next, dropped)
    }

    @Test("hello's ok carries the broker's pid and the feature flow; a connection that says nothing about overflow gets wait; stats and clients have the new fields")
    func helloStatsAndClientsFields() throws {
        try withBroker { broker in
            let client = try broker.connect()
            let hello = try client.ok(#"{"op":"hello","req":1}"#)
            #expect(hello.int("pid") == Int(broker.pid))
            #expect((hello.array("features") as? [String])?.contains("flow") == true, "\(hello.raw)")
            let stats = try client.stats()
            #expect(stats.int("held") == 0 && stats.int("holds") == 0 && stats.int("stalls") == 0, "\(stats.raw)")
            let other = try broker.connect()
            try other.subscribe("x")
            let clients = try client.ok(#"{"op":"clients","req":2}"#).array("clients") as? [[String: Any]] ?? []
            #expect(clients.count == 2)
            for entry in clients {
                #expect(entry["overflow"] as? String == "wait" && entry["holding"] as? Int == 0 && entry["held"] as? Bool == false
                            && entry["behind"] as? Bool == false, "\(entry)")
            }
            let bad = try client.request(#"{"op":"hello","overflow":"block","req":3}"#)
            #expect(bad.code == "bad_request")
        }
    }

    @Test("A same-uid subscriber that keeps reading, slower than its publisher, gets every event in order: the publisher is held, nothing is dropped, no queue passes its limit")
    func sameUIDFloodLosesNothing() throws {
        try withBroker(FlowControlTests.small) { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("flood.>")
            let publisher = try broker.connect()
            let group = DispatchGroup()
            let done = RobustShared(false)
            let count = 20_000
            FlowControlTests.flood(publisher, "flood.x", count: count, group: group, done: done)
            let got = try FlowControlTests.readAll(subscriber, "flood", count: count, pace: 500)
            group.wait()
            #expect(got.events == count && got.dropped == 0, "\(got)")
            #expect(done.value)
            let observer = try broker.connect()
            let stats = try observer.stats()
            #expect(stats.int("dropped") == 0 && (stats.int("holds") ?? 0) > 0 && stats.int("held") == 0, "\(stats.raw)")
        }
    }

    @Test("While held, the publisher's event is not routed (no seq, no subscriber gets it) and clients shows who holds whom; reading releases it")
    func heldPublisherIsVisibleAndReleased() throws {
        try withBroker(FlowControlTests.small + ["--stall-timeout", "60s"]) { broker in
            let subscriber = try broker.connect()
            try subscriber.ok(#"{"op":"hello","client":"slow","req":0}"#)
            try subscriber.subscribe("h.x")
            let watcher = try broker.connect()  // another subscriber, reading: gets nothing while the publisher is held
            try watcher.ok(#"{"op":"hello","overflow":"drop-new","req":0}"#)
            try watcher.subscribe("h.x")
            let publisher = try broker.connect()
            try publisher.ok(#"{"op":"hello","client":"fast","req":0}"#)
            // More than the queue takes, less than the queue and the socket buffers together.
            let flood = FlowControlTests.floodLines("h.x", count: 1_500)
            let sent = try publisher.sendWithoutReading(flood, stall: .milliseconds(500))
            #expect(sent == flood.count)
            let observer = try broker.connect()
            // Held for good once the subscriber's socket buffer is full too (before
            // that, the first writes to it may release an early hold): the same
            // count of published events, held, in two polls in a row.
            var last = -1
            try waitUntil("the publisher to be held") {
                let stats = try observer.stats()
                defer { last = stats.int("published") ?? -1 }
                return stats.int("held") == 1 && stats.int("published") == last
            }
            let clients = try observer.ok(#"{"op":"clients","req":1}"#).array("clients") as? [[String: Any]] ?? []
            let slow = clients.first { $0["client"] as? String == "slow" }, fast = clients.first { $0["client"] as? String == "fast" }
            #expect(slow?["holding"] as? Int == 1 && fast?["held"] as? Bool == true, "\(clients)")
            #expect((slow?["queued_bytes"] as? Int ?? .max) <= 65536, "a hold never makes a queue pass its limit: \(slow ?? [:])")
            let published = try observer.stats().int("published") ?? 0
            let watched = try watcher.settle().filter { $0.op == "event" }.count
            #expect(watched == published, "the watcher got \(watched) of \(published) routed events: a held event is routed to no one")
            #expect(published < 1_500)
            // The subscriber reads: the publisher is released and everything comes through.
            try publisher.send(#"{"op":"publish","type":"h.x","data":{"i":1500},"req":"last"}"#)
            var next = 0
            while next <= 1_500 {
                let frame = try subscriber.readFrame(timeout: .seconds(30))
                guard frame.op == "event" else { Issue.record("unexpected \(frame.raw)"); break }
                #expect(frame.object("data")?["i"] as? Int == next)
                next += 1
            }
            _ = try publisher.readFrames(until: { $0.req == .string("last") }, timeout: .seconds(30))
            #expect(try observer.stats().int("held") == 0)
        }
    }

    @Test("Another uid's publisher is never held: its events that do not fit a full wait subscriber are dropped and told with dropped, its pings answered at once")
    func otherUIDIsNotHeld() throws {
        try withSharedBroker(FlowControlTests.small) { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("o.>")
            guard let foreign = try connectAs(uid: 4321, path: broker.socketPath).first else { return }
            let sent = try foreign.sendWithoutReading(FlowControlTests.floodLines("o.x", count: 3_000), stall: .seconds(2))
            let total = FlowControlTests.floodLines("o.x", count: 3_000).count
            #expect(sent == total, "the other uid's publisher was held: \(sent) of \(total) bytes taken")
            let pong = try foreign.request(#"{"op":"ping","req":"p"}"#, timeout: .seconds(10))
            #expect(pong.op == "ok")
            let stats = try broker.connect().stats()
            #expect(stats.int("holds") == 0 && (stats.int("dropped") ?? 0) > 0, "\(stats.raw)")
            // Reading drains the queue below half its limit, which queues the
            // `dropped` notice (PROTOCOL-NOTES "Backpressure and drops"). Only
            // then is there room for a further event: sent while the queue is
            // still full, `o.end` would itself be dropped (or not, by a few
            // bytes of room), so it waits for the notice.
            let told = try subscriber.readFrames(until: { $0.op == "dropped" }, timeout: .seconds(20))
            #expect(told.allSatisfy { $0.op == "dropped" || $0.type == "o.x" })
            #expect((told.last?.int("count") ?? 0) > 0)
            try foreign.send(#"{"op":"publish","type":"o.end","req":"e"}"#)
            let rest = try subscriber.readFrames(until: { $0.type == "o.end" }, timeout: .seconds(20))
            #expect(rest.allSatisfy { $0.op != "dropped" }, "nothing dropped once the queue had room")
        }
    }

    @Test("A same-uid subscriber that stops reading holds the publisher once, for about the stall timeout; then it is behind and the publisher runs on")
    func stalledSubscriberIsBehindAfterTheStallTimeout() throws {
        try withBroker(FlowControlTests.small + ["--stall-timeout", "300ms"]) { broker in
            let stalled = try broker.connect()
            try stalled.ok(#"{"op":"hello","client":"stalled","req":0}"#)
            try stalled.subscribe("s.>")
            let live = try broker.connect()
            try live.subscribe("s.>")
            let publisher = try broker.connect()
            let group = DispatchGroup()
            let done = RobustShared(false)
            let started = ContinuousClock.now
            FlowControlTests.flood(publisher, "s.x", count: 20_000, group: group, done: done)
            let got = try FlowControlTests.readAll(live, "s", count: 20_000)
            group.wait()
            let elapsed = ContinuousClock.now - started
            #expect(done.value && got.events == 20_000 && got.dropped == 0, "the reading subscriber lost nothing: \(got)")
            #expect(elapsed < .seconds(20), "\(elapsed)")
            let stats = try live.stats()
            #expect(stats.int("stalls") == 1 && (stats.int("dropped") ?? 0) > 0, "\(stats.raw)")
            let clients = try live.ok(#"{"op":"clients","req":1}"#).array("clients") as? [[String: Any]] ?? []
            let entry = clients.first { $0["client"] as? String == "stalled" }
            #expect(entry?["behind"] as? Bool == true && entry?["holding"] as? Int == 0, "\(entry ?? [:])")
            // It reads again: what it lost is told, and once its queue is empty it is itself again.
            let told = try stalled.readFrames(until: { $0.op == "dropped" }, timeout: .seconds(30))
            #expect((told.last?.int("count") ?? 0) > 0)
            try waitUntil("the stalled subscriber to be itself again") {
                let now = try live.ok(#"{"op":"clients","req":2}"#).array("clients") as? [[String: Any]] ?? []
                return now.first { $0["client"] as? String == "stalled" }?["behind"] as? Bool == false
            }
        }
    }

    @Test("Two connections of one uid that each publish to the other without reading both finish within the stall timeout")
    func cycleIsReleasedByTheStallTimeout() throws {
        try withBroker(FlowControlTests.small + ["--stall-timeout", "300ms"]) { broker in
            let a = try broker.connect(), b = try broker.connect()
            try a.subscribe("to.a")
            try b.subscribe("to.b")
            let total = FlowControlTests.floodLines("to.b", count: 10_000).count
            let group = DispatchGroup()
            let results = RobustShared<[Int]>([])
            for (client, type) in [(a, "to.b"), (b, "to.a")] {
                let handoff = RobustHandoff(client)
                let bytes = FlowControlTests.floodLines(type, count: 10_000)
                robustThread(group) {
                    let n = (try? handoff.client.sendWithoutReading(bytes, stall: .seconds(5))) ?? -1
                    results.withLock { $0.append(n) }
                }
            }
            group.wait()
            #expect(results.value == [total, total], "both wrote everything (\(results.value) of \(total))")
            let observer = try broker.connect()
            #expect(try observer.stats().int("stalls") ?? 0 >= 1)
        }
    }

    @Test("A publisher that shuts down its writing side while held: every frame it sent before EOF is still routed, in order")
    func endOfInputWhileHeld() throws {
        try withBroker(FlowControlTests.small) { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("eof.>")
            let publisher = try broker.connect()
            let bytes = FlowControlTests.floodLines("eof.x", count: 3_000) + Array(#"{"op":"publish","type":"eof.end"}"#.utf8) + [0x0A]
            let handoff = RobustHandoff(publisher)
            let group = DispatchGroup()
            robustThread(group) {
                do {
                    try handoff.client.sendBytes(bytes, timeout: .seconds(60))
                    try handoff.client.shutdownWrite()
                } catch { Issue.record("publisher: \(error)") }
            }
            let got = try FlowControlTests.readAll(subscriber, "eof", count: 3_000, pace: 200)
            group.wait()
            #expect(got.events == 3_000 && got.dropped == 0, "\(got)")
        }
    }

    @Test("Policy hold: allow hold lets a connection hold another uid's publisher (nothing lost); deny hold stops it holding its own uid's (drop-new)")
    func holdPolicyAction() throws {
        let policy = try AccessPolicyTests.PolicyFile("allow hold - user=4322\ndeny hold - user=4323\n")
        try withSharedBroker(FlowControlTests.small + ["--policy", policy.path]) { broker in
            guard let trusted = try connectAs(uid: 4322, path: broker.socketPath).first,
                  let refused = try connectAs(uid: 4323, path: broker.socketPath).first else { return }
            try trusted.subscribe("p.>")
            let publisher = try broker.connect()  // uid 0
            let group = DispatchGroup()
            let done = RobustShared(false)
            FlowControlTests.flood(publisher, "p.x", count: 10_000, group: group, done: done)
            let got = try FlowControlTests.readAll(trusted, "p", count: 10_000, pace: 500)
            group.wait()
            #expect(got.events == 10_000 && got.dropped == 0, "\(got)")

            try refused.subscribe("q.>")
            let own = try connectAs(uid: 4323, path: broker.socketPath)[0]
            let sent = try own.sendWithoutReading(FlowControlTests.floodLines("q.x", count: 3_000), stall: .seconds(2))
            #expect(sent == FlowControlTests.floodLines("q.x", count: 3_000).count, "deny hold: its own uid's publisher is not held")
            #expect((try own.stats().int("dropped") ?? 0) > 0)
        }
    }

    @Test("--check-policy takes hold rules; default hold and a hold rule with a pattern are errors with file:line")
    func checkPolicyHold() throws {
        let good = try AccessPolicyTests.PolicyFile("allow hold - user=4322\ndeny hold - group=4390\n")
        let run = try runProcess(try builtProduct("eventbusd"), ["--check-policy", good.path], timeout: .seconds(10))
        #expect(run.status == .exited(0) && run.stdout.contains("allow hold - user=4322"), "\(run.stdout)\(run.stderr)")
        for (text, message) in [("default hold allow\n", "hold has no default"), ("allow hold a.b user=1\n", "take \"-\"")] {
            let bad = try AccessPolicyTests.PolicyFile(text)
            let result = try runProcess(try builtProduct("eventbusd"), ["--check-policy", bad.path], timeout: .seconds(10))
            #expect(result.status == .exited(78) && result.stderr.contains("\(bad.path):1") && result.stderr.contains(message), "\(result.stderr)")
        }
    }

    @Test("since 0 replays the whole ring at the subscriber's pace under wait: nothing dropped, however small its queue, and a same-uid publisher waits behind the replay")
    func pacedHistoryReplay() throws {
        try withBroker(FlowControlTests.small + ["--history-events", "8000"]) { broker in
            let publisher = try broker.connect()
            _ = try publisher.sendWithoutReading(FlowControlTests.floodLines("r.x", count: 5_000), stall: .seconds(5))
            let last = try publisher.publish("r.mark", req: 7)
            #expect(last.seq == 5_001)
            let subscriber = try broker.connect()
            try subscriber.send(#"{"op":"subscribe","type":"r.>","since":0,"req":"s"}"#)
            #expect(try subscriber.readFrame().op == "ok")
            // Live events published now come after the replay, and lose nothing.
            let group = DispatchGroup()
            let done = RobustShared(false)
            FlowControlTests.flood(publisher, "r.x", count: 2_000, from: 5_000, group: group, done: done)
            var next = 0, replayed = 0
            var seqs: [Int] = []
            while true {
                let frame = try subscriber.readFrame(timeout: .seconds(60))
                guard frame.op == "event" else { Issue.record("unexpected \(frame.raw)"); break }
                if frame.type == "r.x.end" { break }
                seqs.append(frame.seq ?? 0)
                if frame.bool("replayed") == true { replayed += 1 }
                if frame.type == "r.mark" { continue }
                guard frame.object("data")?["i"] as? Int == next else { Issue.record("expected \(next): \(frame.raw.prefix(100))"); break }
                next += 1
                if next % 500 == 0 { usleep(2_000) }
            }
            group.wait()
            #expect(next == 7_000 && replayed == 5_001 && done.value, "\(next) events, \(replayed) replayed")
            #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 })
        }
    }

    @Test("last: true with more retained events than fit the queue sends them all at the subscriber's pace under wait")
    func pacedRetainedReplay() throws {
        try withBroker(["--max-outbound", "16384"]) { broker in
            let publisher = try broker.connect()
            let pad = String(repeating: "r", count: 400)
            let count = 300
            var text = ""
            for i in 0..<count { text += #"{"op":"publish","type":"k.t\#(i)","retain":true,"data":{"i":\#(i),"p":"\#(pad)"}}"# + "\n" }
            try publisher.sendRaw(text)
            _ = try publisher.ok(#"{"op":"ping","req":"p"}"#)
            let subscriber = try broker.connect()
            let ok = try subscriber.ok(#"{"op":"subscribe","type":"k.>","last":true,"req":"s"}"#)
            #expect(ok.int("retained") == count)
            let frames = try subscriber.readFrames(count: count, timeout: .seconds(30))
            #expect(frames.allSatisfy { $0.op == "event" && $0.bool("retained") == true }, "\(frames.first { $0.op != "event" }?.raw ?? "")")
            #expect(Set(frames.compactMap { $0.object("data")?["i"] as? Int }).count == count)
            try subscriber.expectNoFrame()
        }
    }

    @Test("A paced replay that the subscriber stops reading is cut after the stall timeout: the rest is told with dropped, and live events flow")
    func stalledPacedReplayIsDropped() throws {
        try withBroker(FlowControlTests.small + ["--history-events", "4000", "--stall-timeout", "300ms"]) { broker in
            let publisher = try broker.connect()
            _ = try publisher.sendWithoutReading(FlowControlTests.floodLines("z.x", count: 4_000), stall: .seconds(5))
            _ = try publisher.publish("z.mark", req: 1)
            let subscriber = try broker.connect()
            try subscriber.ok(#"{"op":"subscribe","type":"z.>","since":0,"req":"s"}"#)
            try waitUntil("the replay to stall", timeout: .seconds(10)) { try publisher.stats().int("stalls") == 1 }
            // It reads again: what was sent of the replay (of a ring of 4,000), then what it lost.
            let frames = try subscriber.readFrames(until: { $0.op == "dropped" }, timeout: .seconds(20))
            let replayed = frames.filter { $0.bool("replayed") == true }.count, lost = frames.last?.int("count") ?? 0
            let gaps = frames.filter { $0.op == "gap" }.count
            #expect(gaps == 0, "since 0 with this instance: the whole ring, no gap, though the ring dropped its oldest")
            #expect(replayed + lost == 4_000 && lost > 0, "\(replayed) replayed + \(lost) told lost")
            // Live events flow once its queue is empty.
            try subscriber.expectNoFrame()
            let after = try publisher.publish("z.after", req: 2)
            #expect(try subscriber.readFrame().seq == after.seq)
        }
    }
}

