// eventbus-bridge end to end (issue 13 "Tests"): real brokers A and B on
// temporary sockets, a 3-node nats-server cluster on 127.0.0.1, bridge A on
// node 1 and bridge B on node 3, both exporting and importing `>`. One event
// crosses exactly once with its type, data bytes, source and origin, and never
// comes back; the wire carries the subject and CloudEvents headers; 10,000
// events keep their order; an oversized event is dropped without losing the
// link; a burst larger than every buffer of the bridge reaches a slow local
// subscriber whole (flow control: bus B holds bridge B, which stops reading
// NATS instead of dropping); a second pair of bridges makes no loop.
//
// Before editing: each test checks absence only after a sentinel that took the
// same path, then a short quiet window (RawClient.expectNoFrame).
import EventBusTestSupport
import Foundation
import Glibc
import Testing

extension BridgeSuites {
    @Suite("eventbus-bridge end to end", .serialized, .enabled(if: NATSCluster.isAvailable), .timeLimit(.minutes(2)))
    struct BridgeEndToEndTests {
        @Test(arguments: BridgeMode.allCases)
        func anEventCrossesOnceWithItsTypeDataSourceAndOriginAndNeverComesBack(mode: BridgeMode) throws {
            try withBridgedBuses(mode) { buses in
                let watcher = try NATSWatcher(port: buses.cluster.clientPorts[1], subject: "eventbus.evt.>")
                let publisher = try buses.a.connect()
                try untilArrived("the raw watcher's interest on node 2") {
                    try publisher.publish("probe.watch")
                    return (try? watcher.next(where: { $0 == "eventbus.evt.a.probe.watch" }, timeout: .milliseconds(200))) != nil
                }
                let onA = try buses.a.connect()
                try onA.subscribe("order.>")
                let onB = try buses.b.connect()
                try onB.subscribe("order.>")
                let instanceA = try #require(try onA.stats().string("instance"))

                // Odd spacing and escapes: the data must arrive byte for byte; the source carries CR LF.
                let data = #"{"n":1, "s":"caf\u00e9 \"q\"" ,"list":[1,2 ,3]}"#
                let source = "billing\r\nInjected: yes"
                let receipt = try publisher.publish("order.created", data: data, source: source)
                let seq = try #require(receipt.seq)

                let event = try onB.readFrame()
                #expect(event.op == "event" && event.type == "order.created", "\(event)")
                #expect(try onA.readFrame().seq == seq, "A's own subscriber gets the original, once")
                #expect(event.raw.contains(#""data":"# + data), "data not byte-identical: \(event.raw)")
                #expect(event.string("source") == source, "\(event)")
                #expect(event.string("id") == "\(instanceA)-\(seq)", "\(event)")
                #expect(event.int("pid") == Int(buses.bridgeB.pid), "pid is bridge B's (kernel-stamped): \(event)")
                #expect(event.int("uid") == Int(geteuid()), "\(event)")
                if let origin = event.object("origin") {
                    #expect(origin["node"] as? String == "a")
                    #expect(origin["instance"] as? String == instanceA)
                    #expect((origin["seq"] as? NSNumber)?.intValue == seq)
                    #expect((origin["pid"] as? NSNumber)?.intValue == Int(getpid()), "origin.pid is the publisher's on A")
                    #expect((origin["uid"] as? NSNumber)?.intValue == Int(geteuid()))
                    #expect(origin["time"] is String)
                } else {
                    Issue.record("no origin on the imported event (the broker must deliver it, PROTOCOL.md \"Bridged events\"): \(event)")
                }

                // The wire: subject, CloudEvents headers (percent-encoded), Nats-Msg-Id, the data as the body.
                let message = try watcher.next(where: { $0.hasSuffix(".order.created") })
                #expect(message.subject == "eventbus.evt.a.order.created")
                #expect(message.header("ce-specversion") == "1.0")
                #expect(message.header("ce-type") == "order.created")
                #expect(message.header("ce-source") == "billing%0D%0AInjected:%20yes", "\(message.headers)")
                #expect(message.header("ce-id") == "\(instanceA)-\(seq)")
                #expect(message.header("ce-datacontenttype") == "application/json")
                #expect(message.header("ce-ebnode") == "a" && message.header("ce-ebseq") == "\(seq)")
                #expect(message.header("ce-ebinstance") == instanceA && message.header("ce-ebpid") == "\(getpid())")
                #expect(message.header("Nats-Msg-Id") == "a:\(instanceA):\(seq)")
                #expect(message.payload == Array(data.utf8))

                // A message on a subject that is no eventbus type is dropped as bad_type, counted.
                try watcher.publish("eventbus.evt.z.bad$type", "1")
                try buses.bridgeA.waitForStatus("bad_type counted") { _ in buses.bridgeA.counter("dropped.bad_type") == 1 }

                // No loop: after a sentinel took the same path, nothing more arrives anywhere,
                // and the brokers' `published` counters move only by what we publish.
                try settle(buses, publisher: publisher, onA: onA, onB: onB)
                try onA.expectNoFrame(within: .milliseconds(300))
                try onB.expectNoFrame(within: .milliseconds(300))
                let before = (try publisher.published(), try onB.published())
                try settle(buses, publisher: publisher, onA: onA, onB: onB)
                try onB.expectNoFrame(within: .milliseconds(300))
                #expect(try publisher.published() == before.0 + 1 && onB.published() == before.1 + 1, "one sentinel published on A, one imported on B")
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func tenThousandEventsFromOnePublisherArriveInOrderAndAnOversizedOneIsDroppedWithoutLosingTheLink(mode: BridgeMode) throws {
            try withBridgedBuses(mode, natsConfig: "max_payload: 65536") { buses in
                let onB = try buses.b.connect()
                try onB.subscribe("seq.>")
                let publisher = try buses.a.connect()
                let count = 10_000
                var bytes: [UInt8] = []
                for n in 0..<count {
                    bytes += Array(#"{"op":"publish","type":"seq.n","data":{"n":\#(n)}}"#.utf8)
                    bytes.append(0x0A)
                }
                try publisher.sendBytes(bytes)
                let events = try onB.readFrames(count: count, timeout: .seconds(60))
                let numbers = events.map { ($0.object("data")?["n"] as? NSNumber)?.intValue ?? -1 }
                #expect(numbers == Array(0..<count), "first out of order at \(String(describing: zip(numbers, 0..<count).first { $0 != $1 }))")
                #expect(events.allSatisfy { $0.type == "seq.n" })

                // 70,000 bytes of data: over the servers' max_payload of 65,536 with the headers.
                let reconnectsBefore = buses.bridgeA.counter("reconnects")
                try publisher.publish("seq.big", data: "\"" + String(repeating: "x", count: 70_000) + "\"")
                try publisher.publish("seq.after", data: "1")
                let next = try onB.readFrame()
                #expect(next.type == "seq.after", "the oversized event must not arrive: \(next.raw.prefix(200))")
                try buses.bridgeA.waitForStatus("too_large counted") { _ in buses.bridgeA.counter("dropped.too_large") == 1 }
                #expect(buses.bridgeA.counter("reconnects") == reconnectsBefore, "the NATS connection stayed up")
                #expect(buses.bridgeA.log.contains("over the NATS server's max_payload of 65536"))
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func aSlowLocalSubscriberOfImportedEventsGetsEveryEventOfABurstLargerThanTheBridgesBuffers(mode: BridgeMode) throws {
            // Broker B's queue per connection is 64 KiB, so the slow subscriber holds bridge B
            // at once (same uid: PROTOCOL.md "Flow control (1.2)"); the burst, about 14 MB of
            // imports, is larger than the bridge's 4 MiB of imports waiting for the bus and its
            // old 8 MiB bound, beyond which the bridge used to drop imports.
            try withBridgedBuses(mode, brokerB: ["--max-outbound", "64K"]) { buses in
                let slow = try buses.b.connect()
                try slow.subscribe("burst.>")
                let publisher = try buses.a.connect()
                let count = 30_000
                let padding = String(repeating: "p", count: 200)
                var bytes: [UInt8] = []
                for n in 0..<count {
                    bytes += Array(#"{"op":"publish","type":"burst.n","data":{"n":\#(n),"pad":"\#(padding)"}}"#.utf8)
                    bytes.append(0x0A)
                }
                // Written from a thread of its own: the whole burst takes longer than the broker's
                // stall timeout to get in, and the subscriber must read meanwhile (else it is behind).
                let sender = BurstSender(publisher, bytes)
                Thread { sender.run() }.start()
                var numbers: [Int] = []
                numbers.reserveCapacity(count)
                while numbers.count < count {
                    let frame = try slow.readFrame(timeout: .seconds(30))
                    if frame.op == "dropped" {
                        Issue.record("the slow subscriber was told of a loss after \(numbers.count) events: \(frame.raw)\n--- broker B ---\n\(buses.b.stderrText().suffix(2000))")
                        break
                    }
                    guard frame.op == "event" else { continue }
                    numbers.append((frame.object("data")?["n"] as? NSNumber)?.intValue ?? -1)
                    // About 40 µs per event at best: slower than the path, never stalled for a second.
                    if numbers.count % 250 == 0 { usleep(10_000) }
                }
                let firstWrong = zip(numbers, 0..<count).first { $0 != $1 }
                #expect(numbers.count == count && firstWrong == nil, "\(numbers.count) events, first out of order: \(String(describing: firstWrong))")
                let status = try buses.bridgeB.freshStatus()
                #expect(buses.bridgeB.counter("dropped.local_bus") ?? 0 == 0, "bridge B dropped imports: \(status)")
                #expect((status["imported"] as? NSNumber)?.intValue ?? 0 >= count, "\(status)")
                #expect(buses.bridgeA.counter("dropped.buffer") ?? 0 == 0)
                try sender.wait()
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func aSecondPairOfBridgesMakesNoLoop(mode: BridgeMode) throws {
            try withBridgedBuses(mode) { buses in
                // Pair 2 on another prefix, both on node 2: every event now has two paths from A to B.
                try buses.addBridge(on: buses.a, node: "a2", nats: buses.cluster.url(1), extra: ["--export", ">", "--import", ">", "--prefix", "eb2"])
                try buses.addBridge(on: buses.b, node: "b2", nats: buses.cluster.url(1), extra: ["--export", ">", "--import", ">", "--prefix", "eb2"])
                let b2 = buses.bridges[3]
                let prober = try buses.a.connect()
                try untilArrived("a probe through pair 2") {
                    try prober.publish("probe.pair2")
                    return (try? b2.waitForStatus("an import", timeout: .milliseconds(1500)) { _ in (b2.counter("imported") ?? 0) >= 1 }) != nil
                }
                let onA = try buses.a.connect()
                try onA.subscribe("order.>")
                let onB = try buses.b.connect()
                try onB.subscribe("order.>")
                let publisher = try buses.a.connect()
                try publisher.publish("order.created", data: #"{"n":2}"#)
                let copies = try onB.readFrames(count: 2, timeout: .seconds(10))
                #expect(try onA.readFrame().type == "order.created", "A's own subscriber gets the original, once")
                let nodes = Set(copies.compactMap { $0.object("origin")?["node"] as? String })
                #expect(nodes == ["a", "a2"], "one copy per pair, each with its origin: \(copies.map(\.raw))")

                try settle(buses, publisher: publisher, onA: onA, onB: onB, copies: 2)
                try onA.expectNoFrame(within: .milliseconds(300))
                try onB.expectNoFrame(within: .milliseconds(300))
                let before = (try publisher.published(), try onB.published())
                try settle(buses, publisher: publisher, onA: onA, onB: onB, copies: 2)
                try onA.expectNoFrame(within: .milliseconds(300))
                try onB.expectNoFrame(within: .milliseconds(300))
                #expect(try publisher.published() == before.0 + 1, "A published only the sentinel: nothing came back")
                #expect(try onB.published() == before.1 + 2, "B imported the sentinel once per pair")
                // b2 came after the warm-ups from B: it saw every import of pair 1 on bus B and sent none on.
                let b2Status = try b2.freshStatus()
                #expect((b2Status["exported"] as? NSNumber)?.intValue == 0, "imports carry origin: \(b2Status)")
            }
        }

        /// Publishes `order.sentinel` on A and waits for its `copies` on B (and
        /// for the original on A's subscriber, when given).
        private func settle(_ buses: BridgedBuses, publisher: RawClient, onA: RawClient? = nil, onB: RawClient, copies: Int = 1) throws {
            try publisher.publish("order.sentinel")
            if let onA {
                let original = try onA.readFrame()
                guard original.type == "order.sentinel" else { throw TestFailure("expected the sentinel on A, got \(original.raw)") }
            }
            for _ in 0..<copies {
                let frame = try onB.readFrame()
                guard frame.type == "order.sentinel" else { throw TestFailure("expected the sentinel, got \(frame.raw)") }
            }
        }
    }
}

/// Writes a burst on a connection from another thread, and tells how that went.
private final class BurstSender: @unchecked Sendable {
    private let client: RawClient
    private let bytes: [UInt8]
    private let done = NSCondition()
    private var finished = false
    private var failure: (any Error)?

    init(_ client: RawClient, _ bytes: [UInt8]) {
        self.client = client
        self.bytes = bytes
    }

    func run() {
        do { try client.sendBytes(bytes) } catch { failure = error }
        done.lock()
        finished = true
        done.broadcast()
        done.unlock()
    }

    /// Waits for the end of the write (at most 60 s) and rethrows its error.
    func wait() throws {
        done.lock()
        defer { done.unlock() }
        let deadline = Date().addingTimeInterval(60)
        while !finished { if !done.wait(until: deadline) { throw TestFailure("the burst was not written within 60 s") } }
        if let failure { throw failure }
    }
}
