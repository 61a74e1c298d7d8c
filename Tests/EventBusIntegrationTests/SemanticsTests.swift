// PROTOCOL.md, Semantics: weak subscriptions, echo, ordering, unsubscribe,
// half-close, EOF handling (socat), and the connection/subscription limits.
// The outbound limit and overflow modes are in OverflowTests.swift.
//
// Before editing: a disconnect is seen by the broker asynchronously, so tests
// poll `stats` with `waitUntil` (bounded) for it; absence is shown by settling.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Semantics")
struct SemanticsTests {
    @Test("Two publishers and three subscribers: each subscriber gets exactly its events, in publish order and one seq order")
    func twoPublishersThreeSubscribers() throws {
        try withBroker { broker in
            let s1 = try broker.connect()
            try s1.subscribe("orders.>")
            let s2 = try broker.connect()
            try s2.subscribe("orders.paid", "users.*")
            let s3 = try broker.connect()
            try s3.subscribe(">")
            let p1 = try broker.connect()
            try p1.ok(#"{"op":"hello","client":"p1","req":0}"#)
            let p2 = try broker.connect()
            try p2.ok(#"{"op":"hello","client":"p2","req":0}"#)
            let n = 200
            let first = (0..<n).map { #"{"op":"publish","type":"orders.created","data":{"i":\#($0)}}"# }
            let second = (0..<n).map { #"{"op":"publish","type":"\#($0 % 2 == 0 ? "orders.paid" : "users.signup")","data":{"i":\#($0)}}"# }
            for start in stride(from: 0, to: n, by: 20) {
                try p1.sendRaw(first[start..<start + 20].joined(separator: "\n") + "\n")
                try p2.sendRaw(second[start..<start + 20].joined(separator: "\n") + "\n")
            }
            try p1.ok(#"{"op":"ping","req":"done"}"#)
            try p2.ok(#"{"op":"ping","req":"done"}"#)

            let expected: [(RawClient, Int, [String: [Int]])] = [
                (s1, n + n / 2, ["p1": Array(0..<n), "p2": stride(from: 0, to: n, by: 2).map { $0 }]),
                (s2, n, ["p2": Array(0..<n)]),
                (s3, 2 * n, ["p1": Array(0..<n), "p2": Array(0..<n)]),
            ]
            var seqLists: [[Int]] = []
            for (index, (subscriber, count, perSource)) in expected.enumerated() {
                let events = try subscriber.readFrames(count: count)
                try subscriber.expectNoFrame()
                let seqs = events.compactMap(\.seq)
                #expect(seqs.count == count && zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "subscriber \(index + 1): seq not increasing")
                for (source, indexes) in perSource {
                    let got = events.filter { $0.string("source") == source }.compactMap { $0.object("data")?["i"] as? Int }
                    #expect(got == indexes, "subscriber \(index + 1), events from \(source) not all there in publish order")
                }
                seqLists.append(seqs)
            }
            // One broker-wide order: every subscriber's seqs are a sub-sequence of the `>` subscriber's.
            let all = Set(seqLists[2])
            #expect(seqLists[0].allSatisfy(all.contains) && seqLists[1].allSatisfy(all.contains))
        }
    }

    @Test("A subscriber that disconnects loses its subscriptions: they vanish from stats")
    func disconnectedSubscriptionsVanishFromStats() throws {
        try withBroker { broker in
            let observer = try broker.connect()
            try waitUntil("only the observer connected") { try observer.stats().int("connections") == 1 }
            let baselineFds = try broker.fdCount()
            let subscriber = try broker.connect()
            try subscriber.subscribe("gone.a", "gone.b", "gone.>")
            let during = try observer.stats()
            #expect(during.int("connections") == 2 && during.int("subscriptions") == 3, "\(during)")
            #expect(try observer.publish("gone.a").delivered == 1)
            _ = try subscriber.readFrame()
            subscriber.close()
            try waitUntil("the subscriber's connection and subscriptions to vanish") {
                let stats = try observer.stats()
                return stats.int("connections") == 1 && stats.int("subscriptions") == 0
            }
            #expect(try observer.publish("gone.a", req: 2).delivered == 0)
            try waitUntil("the broker to close the subscriber's descriptor") { try broker.fdCount() <= baselineFds }
        }
    }

    @Test("Subscriptions vanish when a subscriber resets its connection with events unread")
    func subscriptionsVanishOnReset() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("reset.x")
            let publisher = try broker.connect()
            // 1 MiB queued for a subscriber that never reads, then it closes: ECONNRESET/EPIPE on the broker's side.
            _ = try publisher.publishMany("reset.x", count: 128, padding: 8 * 1024)
            subscriber.close()
            try waitUntil("the reset subscriber to vanish") {
                let stats = try publisher.stats()
                return stats.int("connections") == 1 && stats.int("subscriptions") == 0
            }
            #expect(try publisher.publish("reset.x", req: 9).delivered == 0)
        }
    }

    @Test("No echo: a connection does not receive its own publications by default, nor with echo false", arguments: [nil, false] as [Bool?])
    func noEchoUnlessAsked(echo: Bool?) throws {
        try withBroker { broker in
            let client = try broker.connect()
            if let echo { try client.ok(#"{"op":"hello","echo":\#(echo),"req":0}"#) }
            try client.subscribe("echo.x")
            let other = try broker.connect()
            try other.subscribe("echo.x")
            #expect(try client.publish("echo.x").delivered == 1)
            try client.expectNoFrame()
            #expect(try other.readFrame().type == "echo.x")
        }
    }

    @Test("hello with echo true receives its own publications")
    func echoTrueReceivesOwnEvents() throws {
        try withBroker { broker in
            let client = try broker.connect()
            try client.ok(#"{"op":"hello","echo":true,"req":0}"#)
            try client.subscribe("echo.x")
            var events: [Frame] = []
            let reply = try client.request(#"{"op":"publish","type":"echo.x","req":1}"#, skippingEventsInto: &events)
            #expect(reply.op == "ok" && reply.int("delivered") == 1, "\(reply)")
            if events.isEmpty { events.append(try client.readFrame()) }
            #expect(events.count == 1 && events[0].type == "echo.x" && events[0].seq == reply.seq)
            try client.expectNoFrame()
        }
    }

    @Test("Requests on one connection are handled and answered in order")
    func requestsAreHandledInOrder() throws {
        try withBroker { broker in
            let client = try broker.connect()
            let ops = [
                #""op":"ping""#, #""op":"subscribe","type":"ord.x""#, #""op":"stats""#,
                #""op":"publish","type":"ord.y""#, #""op":"unsubscribe","type":"ord.x""#,
            ]
            let lines = (0..<100).map { "{\(ops[$0 % ops.count]),\"req\":\($0)}" }
            try client.sendRaw(lines.joined(separator: "\n") + "\n")
            let replies = try client.readFrames(count: 100)
            #expect(replies.allSatisfy { $0.op == "ok" })
            #expect(replies.map(\.req) == (0..<100).map { .integer($0) })
            // The unsubscribes after each subscribe really removed it: order was kept.
            #expect(replies.enumerated().filter { $0.offset % 5 == 4 }.allSatisfy { $0.element.bool("removed") == true })
        }
    }

    @Test("Events queued before an unsubscribe arrive before its ok")
    func eventsQueuedBeforeUnsubscribeArriveBeforeItsOk() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("uns.x")
            let publisher = try broker.connect()
            let seqs = try (0..<5).map { try publisher.publish("uns.x", req: $0).seq }
            try subscriber.send(#"{"op":"unsubscribe","type":"uns.x","req":"bye"}"#)
            let frames = try subscriber.readFrames(count: 6)
            #expect(frames.prefix(5).compactMap(\.seq) == seqs)
            #expect(frames[5].op == "ok" && frames[5].req == .string("bye"), "\(frames[5])")
        }
    }

    @Test("After the ok of an unsubscribe, no event arrives that only the removed pattern matched")
    func noEventAfterUnsubscribeOk() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("race.x", "keep.x")
            let publisher = try broker.connect()
            let racing = (0..<400).map { #"{"op":"publish","type":"race.x","data":\#($0)}"# }.joined(separator: "\n") + "\n"
            try publisher.sendRaw(racing)
            try subscriber.send(#"{"op":"unsubscribe","type":"race.x","req":"bye"}"#)
            let before = try subscriber.readFrames(until: { $0.op == "ok" })
            #expect(before.last?.req == .string("bye"))
            #expect(before.dropLast().allSatisfy { $0.op == "event" && $0.type == "race.x" })
            try publisher.sendRaw(racing)
            try publisher.ok(#"{"op":"publish","type":"keep.x","req":"keep"}"#)
            // Only the kept pattern's event may follow the ok.
            let after = try subscriber.settle()
            #expect(after.map(\.type) == ["keep.x"], "after the unsubscribe ok: \(after.map(\.raw))")
        }
    }

    @Test("unsubscribe removes exactly that pattern")
    func unsubscribeRemovesExactlyThatPattern() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("v.*", "v.x")
            #expect(try subscriber.ok(#"{"op":"unsubscribe","type":"v.x","req":1}"#).bool("removed") == true)
            let publisher = try broker.connect()
            #expect(try publisher.stats().int("subscriptions") == 1)
            #expect(try publisher.publish("v.x").delivered == 1)
            #expect(try subscriber.readFrame().type == "v.x")
        }
    }

    @Test("Half-close: after SHUT_WR every request still gets its reply, then a connection without subscriptions is closed")
    func halfClosedClientGetsEveryReply() throws {
        try withBroker { broker in
            let client = try broker.connect()
            let requests = (1...50).map { #"{"op":"ping","req":\#($0)}"# } + [#"{"op":"stats","req":51}"#, #"{"op":"publish","type":"hc.x","req":52}"#]
            try client.sendRaw(requests.joined(separator: "\n") + "\n")
            try client.shutdownWrite()
            let replies = try client.readUntilEOF()
            #expect(replies.map(\.req) == (1...52).map { .integer($0) })
            #expect(replies.allSatisfy { $0.op == "ok" })
        }
    }

    @Test("Half-close: a connection with subscriptions keeps receiving events until it closes completely")
    func halfClosedSubscriberKeepsReceiving() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.send(#"{"op":"subscribe","type":"hc.>","req":"s"}"#)
            try subscriber.shutdownWrite()
            let ack = try subscriber.readFrame()
            #expect(ack.op == "ok" && ack.req == .string("s"))
            let publisher = try broker.connect()
            for i in 0..<3 {
                #expect(try publisher.publish("hc.x", data: "\(i)", req: i).delivered == 1)
                #expect(try subscriber.readFrame().int("data") == i)
            }
            #expect(try publisher.stats().int("subscriptions") == 1)
            subscriber.close()
            try waitUntil("the closed subscriber to vanish") { try publisher.stats().int("subscriptions") == 0 }
        }
    }

    @Test("printf … | socat -t 5 - UNIX-CONNECT:$SOCK loses nothing")
    func socatPipelineLosesNothing() throws {
        let socat = try #require(findInPath("socat"), "socat is needed (scripts/deps installs it)")
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("sh.x")
            let script = """
                { i=1; while [ $i -le 200 ]; do printf '{"op":"publish","type":"sh.x","data":%d}\\n' $i; i=$((i+1)); done
                  printf '{"op":"ping","req":"done"}\\n'; } | "$1" -t 5 - UNIX-CONNECT:"$0"
                """
            let run = try runProcess("/bin/sh", ["-c", script, broker.socketPath, socat], timeout: .seconds(30))
            #expect(run.status == .exited(0), "stderr: \(run.stderr)")
            #expect(run.stdout.contains(#""done""#) && run.stdout.contains(#""ok""#), "stdout: \(run.stdout)")
            let events = try subscriber.readFrames(count: 200)
            #expect(events.compactMap { $0.int("data") } == Array(1...200))
            try subscriber.expectNoFrame()
        }
    }

    @Test("A publisher that writes 10,000 events and closes at once has every one delivered")
    func tenThousandEventsThenCloseAllDelivered() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("burst.x")
            let publisher = try broker.connect()
            var bytes: [UInt8] = []
            for i in 0..<10_000 {
                bytes += Array(#"{"op":"publish","type":"burst.x","data":{"i":\#(i),"pad":"0123456789abcdef"}}"#.utf8)
                bytes.append(0x0A)
            }
            try publisher.sendBytes(bytes)
            publisher.close()
            let events = try subscriber.readFrames(count: 10_000, timeout: .seconds(90))
            let indexes = events.compactMap { $0.object("data")?["i"] as? Int }
            #expect(indexes == Array(0..<10_000))
            try subscriber.expectNoFrame()
        }
    }

    @Test("--max-connections: one more connection gets error limit and is closed")
    func maxConnectionsLimit() throws {
        try withBroker(["--max-connections", "3"]) { broker in
            let c1 = try broker.connect()
            try waitUntil("the readiness probe's connection to be gone") { try c1.stats().int("connections") == 1 }
            let c2 = try broker.connect()
            try c2.ok(#"{"op":"ping","req":2}"#)
            let c3 = try broker.connect()
            try c3.ok(#"{"op":"ping","req":3}"#)
            let c4 = try broker.connect()
            let frames = try c4.readUntilEOF()
            #expect(frames.count == 1 && frames.first?.op == "error" && frames.first?.code == "limit", "\(frames.map(\.raw))")
            c1.close()
            try waitUntil("a slot to free up") { try c2.stats().int("connections") == 2 }
            try broker.connect().ok(#"{"op":"ping","req":5}"#)
        }
    }

    @Test("--max-subscriptions: one more subscription per connection is error limit")
    func maxSubscriptionsLimit() throws {
        try withBroker(["--max-subscriptions", "3"]) { broker in
            let client = try broker.connect()
            try client.subscribe("m.1", "m.2", "m.*")
            #expect(try client.error(#"{"op":"subscribe","type":"m.4","req":4}"#).code == "limit")
            try client.ok(#"{"op":"subscribe","type":"m.1","req":5}"#)  // idempotent: not a new one
            #expect(try client.ok(#"{"op":"unsubscribe","type":"m.2","req":6}"#).bool("removed") == true)
            try client.ok(#"{"op":"subscribe","type":"m.4","req":7}"#)
            // The limit is per connection.
            try broker.connect().subscribe("n.1", "n.2", "n.3")
        }
    }
}
