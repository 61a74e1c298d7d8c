// PROTOCOL.md, Semantics: the per-connection outbound limit, the overflow
// modes (drop-new, drop-old, disconnect), `dropped` notices, replies never
// dropped, --max-queued, and a publisher never blocked by a slow subscriber.
//
// Before editing: a subscriber that "never reads" simply does not call read
// until the publisher is done; the kernel buffers ~200 KiB of it, the broker
// the rest up to its limit. A `dropped` notice only has to come before the
// *next* event, so every test publishes a marker event after draining.
import EventBusScenarios
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Semantics: outbound limit and overflow")
struct OverflowTests {
    @Test("A subscriber that never reads while a publisher sends 100 MiB: the publisher is not blocked, broker memory stays bounded, and the reader is told what it lost")
    func slowSubscriberDoesNotBlockPublisherNorGrowBroker() throws {
        let maxOutbound = 8 << 20
        try withBroker(["--max-outbound", "\(maxOutbound)"]) { broker in
            let slow = try broker.connect()
            try slow.subscribe("bulk.>")
            let publisher = try broker.connect()
            let baselineKiB = try broker.rssKiB()
            var peakKiB = baselineKiB
            let eventBytes = 32 * 1024
            let count = (100 << 20) / eventBytes  // 3,200 events, 100 MiB
            let receipts = try publisher.publishMany(
                "bulk.data", count: count, padding: eventBytes - 64, timeout: .seconds(150)
            ) { peakKiB = max(peakKiB, try broker.rssKiB()) }
            // Not blocked: every publish was answered, and the publisher is still served.
            try publisher.ok(#"{"op":"ping","req":"after"}"#)
            peakKiB = max(peakKiB, try broker.rssKiB())
            let allowedKiB = maxOutbound / 1024 + 24 * 1024  // limit + generous fixed overhead (measured: limit + ~0.7 MiB)
            #expect(peakKiB - baselineKiB < allowedKiB, "broker RSS grew \(peakKiB - baselineKiB) KiB (baseline \(baselineKiB) KiB)")

            let drained = try slow.settle(timeout: .seconds(60))
            let marker = try publisher.publish("bulk.end", req: 999_999)
            let tail = try slow.readFrames(until: { $0.op == "event" && $0.type == "bulk.end" })
            let notQueued = Set(receipts.filter { $0.delivered == 0 }.map(\.seq))
            let (problems, dropped) = lossProblems(
                published: receipts.map(\.seq) + [marker.seq], frames: drained + tail, notQueued: notQueued)
            #expect(problems.isEmpty, "\(problems)")
            #expect(dropped > 0 && dropped < count, "dropped \(dropped) of \(count)")
            #expect(try publisher.stats().int("dropped") == dropped)
        }
    }

    @Test("drop-new drops the new event for that connection only and announces the count")
    func dropNewDropsNewEvents() throws {
        try withBroker(["--max-outbound", "262144"]) { broker in
            let slow = try broker.connect()
            try slow.ok(#"{"op":"hello","overflow":"drop-new","req":0}"#)
            try slow.subscribe("ov.>")
            let fast = try broker.connect()
            try fast.subscribe("ov.>")
            let publisher = try broker.connect()
            let receipts = try publishWhileFastReads(publisher, fast, count: 512)
            #expect(receipts.contains { $0.delivered == 1 } && receipts.contains { $0.delivered == 2 }, "no drop happened")
            let drained = try slow.settle()
            let marker = try publisher.publish("ov.end", req: 999_999)
            let tail = try slow.readFrames(until: { $0.type == "ov.end" })
            let (problems, dropped) = lossProblems(
                published: receipts.map(\.seq) + [marker.seq], frames: drained + tail,
                notQueued: Set(receipts.filter { $0.delivered < 2 }.map(\.seq)))
            #expect(problems.isEmpty, "\(problems)")
            #expect(dropped > 0)
            // drop-new keeps the oldest: what arrived is a prefix.
            let received = (drained + tail).filter { $0.op == "event" && $0.type != "ov.end" }.compactMap(\.seq)
            #expect(received == Array(receipts.map(\.seq).prefix(received.count)))
        }
    }

    @Test("drop-old drops the oldest whole queued events to make room and announces the count")
    func dropOldDropsOldestEvents() throws {
        try withBroker(["--max-outbound", "262144"]) { broker in
            let slow = try broker.connect()
            try slow.ok(#"{"op":"hello","overflow":"drop-old","req":0}"#)
            try slow.subscribe("ov.>")
            let publisher = try broker.connect()
            let receipts = try publisher.publishMany("ov.x", count: 512, padding: 4096)
            #expect(receipts.allSatisfy { $0.delivered == 1 }, "drop-old queues every new event")
            let drained = try slow.settle()  // every line must parse: no partly written event was dropped
            let marker = try publisher.publish("ov.end", req: 999_999)
            let tail = try slow.readFrames(until: { $0.type == "ov.end" })
            let (problems, dropped) = lossProblems(published: receipts.map(\.seq) + [marker.seq], frames: drained + tail)
            #expect(problems.isEmpty, "\(problems)")
            #expect(dropped > 0)
            // drop-old keeps the newest: the last event published before the marker arrived.
            let received = drained.filter { $0.op == "event" }.compactMap(\.seq)
            #expect(received.last == receipts.last?.seq)
        }
    }

    @Test("drop-old between queued replies (issue 20): an echo connection sending publish-to-self + ping pairs without reading, and a second publisher; the broker stays responsive, counts the drops, and keeps every reply in order")
    func dropOldBetweenRepliesStaysResponsive() throws {
        try withBroker(["--max-outbound", "1048576"]) { broker in
            let echo = try broker.connect()
            try echo.ok(#"{"op":"hello","overflow":"drop-old","echo":true,"req":0}"#)
            try echo.subscribe("loop.self")
            // 30,000 pairs: the queue fills with (event, reply) pairs and every further event drops the oldest.
            var pairs: [UInt8] = []
            for k in 1...30_000 {
                pairs += Array(#"{"op":"publish","type":"loop.self","data":"0123456789abcdef"}"#.utf8) + [0x0A]
                pairs += Array(#"{"op":"ping","req":\#(k)}"#.utf8) + [0x0A]
            }
            let taken = try echo.sendWithoutReading(pairs)
            #expect(taken > 0)
            let publisher = try broker.connect()
            let burst = String(repeating: #"{"op":"publish","type":"loop.self","data":"0123456789abcdef"}"# + "\n", count: 20_000)
            try publisher.sendRaw(burst)
            try publisher.ok(#"{"op":"ping","req":"after"}"#, timeout: .seconds(60))
            // Another connection is answered while all of that is queued.
            let root = try broker.connect()
            try root.ok(#"{"op":"ping","req":"root"}"#, timeout: .seconds(10))
            #expect(try root.stats().int("dropped") ?? 0 > 0, "drop-old dropped events")
            // The echo connection reads all: its replies are all there, in order, and every line parses.
            try echo.sendBytes(Array(pairs[taken...]) + Array(#"{"op":"ping","req":"end"}"#.utf8) + [0x0A], timeout: .seconds(120))
            let frames = try echo.readFrames(until: { $0.req == .string("end") }, timeout: .seconds(120))
            let pongs = frames.filter { $0.op == "ok" }.compactMap { frame -> Int? in
                if case .integer(let k) = frame.req { return k } else { return nil }
            }
            #expect(pongs == Array(1...30_000), "replies never dropped, in order (got \(pongs.count))")
            let noticed = frames.filter { $0.op == "dropped" }.reduce(0) { $0 + ($1.int("count") ?? 0) }
            #expect(noticed > 0, "the drops were announced")
        }
    }

    @Test("disconnect closes a slow consumer; others are unaffected")
    func disconnectClosesSlowConsumer() throws {
        try withBroker(["--max-outbound", "262144"]) { broker in
            let slow = try broker.connect()
            try slow.ok(#"{"op":"hello","overflow":"disconnect","req":0}"#)
            try slow.subscribe("ov.>")
            let publisher = try broker.connect()
            _ = try publisher.publishMany("ov.x", count: 512, padding: 4096)
            // The broker may have to close in the middle of a frame the kernel half took.
            let frames = try slow.readUntilEOF(allowingPartialLastLine: true)
            let errors = frames.filter { $0.op != "event" }
            // The slow_consumer error is only "tried"; if it came, it is the last frame.
            #expect(errors.allSatisfy { $0.op == "error" && $0.code == "slow_consumer" }, "\(errors.map(\.raw))")
            if !errors.isEmpty { #expect(frames.last?.code == "slow_consumer") }
            #expect(frames.count < 512)
            try waitUntil("the slow consumer to vanish") {
                let stats = try publisher.stats()
                return stats.int("connections") == 1 && stats.int("subscriptions") == 0
            }
            try publisher.ok(#"{"op":"ping","req":"fine"}"#)
        }
    }

    @Test("Replies are never dropped while a connection's queue is over its limit")
    func repliesAreNeverDropped() throws {
        try withBroker(["--max-outbound", "262144"]) { broker in
            let slow = try broker.connect()
            try slow.subscribe("ov.>")
            let publisher = try broker.connect()
            _ = try publisher.publishMany("ov.x", count: 256, padding: 4096)
            // Pipeline requests at the full connection without reading.
            try slow.sendRaw((0..<50).map { #"{"op":"ping","req":\#($0)}"# }.joined(separator: "\n") + "\n")
            _ = try publisher.publishMany("ov.y", count: 128, padding: 4096)
            let frames = try slow.readFrames(until: { $0.op == "ok" && $0.req == .integer(49) }, timeout: .seconds(20))
            let replies = frames.filter { $0.op == "ok" }
            #expect(replies.map(\.req) == (0..<50).map { .integer($0) })
        }
    }

    @Test("--max-queued bounds all outbound queues together")
    func maxQueuedBoundsAllQueues() throws {
        let maxQueued = 512 * 1024
        try withBroker(["--max-outbound", "\(4 << 20)", "--max-queued", "\(maxQueued)"]) { broker in
            let slowA = try broker.connect()
            try slowA.subscribe("q.>")
            let slowB = try broker.connect()
            try slowB.subscribe("q.>")
            let publisher = try broker.connect()
            let observer = try broker.connect()
            var peakQueued = 0
            let receipts = try publisher.publishMany("q.x", count: 512, padding: 4096, batch: 16) {
                peakQueued = max(peakQueued, try observer.stats().int("queued_bytes") ?? .max)
            }
            let stats = try publisher.stats()
            #expect(peakQueued <= maxQueued, "queued_bytes reached \(peakQueued)")
            #expect((stats.int("dropped") ?? 0) > 0, "\(stats)")
            let drained = try slowA.settle()
            let marker = try publisher.publish("q.end", req: 999_999)
            let tail = try slowA.readFrames(until: { $0.type == "q.end" })
            let (problems, _) = lossProblems(published: receipts.map(\.seq) + [marker.seq], frames: drained + tail)
            #expect(problems.isEmpty, "\(problems)")
        }
    }

    /// Publishes `count` 4 KiB events of type `ov.x` from `publisher` while
    /// `fast` keeps reading, so only the non-reading subscriber overflows.
    private func publishWhileFastReads(_ publisher: RawClient, _ fast: RawClient, count: Int) throws -> [Receipt] {
        var receipts: [Receipt] = []
        var fastEvents = 0
        for start in stride(from: 0, to: count, by: 32) {
            let batch = try publisher.publishMany("ov.x", count: min(32, count - start), padding: 4096)
            receipts += batch
            fastEvents += try fast.readFrames(count: batch.count).count
        }
        #expect(fastEvents == count)
        return receipts
    }
}
