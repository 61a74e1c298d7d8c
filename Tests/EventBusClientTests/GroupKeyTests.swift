// (1.3) `key:` through the library against the real broker (PROTOCOL.md
// "Queue groups", keys): the events of one key, published by `publish`,
// `post` or `enqueue`, all reach one member of a group, in order; the
// requests of one key reach one server of a serving group; a key that is not
// 1-255 bytes is refused before anything is sent.
//
// Each key's events are published as one block, one after the other: round
// robin (what an event without a key gets) would spread a block over the
// three members, so the test fails when the key does not reach the broker.
import EventBus
import EventBusTestSupport
import Foundation
import Testing

// A hang guard. The limit counts from when a test is started, and while
// synchronous tests hold the cooperative pool (2 threads on 2 CPUs) a started
// test can wait minutes for a thread (250 s in a CI run under load).
@Suite(.timeLimit(.minutes(10)))  // a hang guard: 36 round trips in turn took 230 s once in a full suite run on a loaded machine
struct GroupKeyTests {
    @Test func theEventsOfOneKeyGoToOneMemberInOrder() async throws {
        let broker = try await BrokerProcess()
        let publisher = try await EventBus.connect(socketPath: broker.socketPath)
        var members: [EventBus] = []
        var readers: [Task<Void, Never>] = []
        let received = Log<(member: Int, n: Int)>()
        let carried = Log<String>()
        for member in 0..<3 {
            let bus = try await EventBus.connect(socketPath: broker.socketPath)
            members.append(bus)
            readers.append(drain(bus.events(of: Job.self, group: "workers")) { delivery in
                received.append((member, delivery.event.n))
                carried.append("\(delivery.event.n / 100)=\(delivery.metadata.key ?? "none")")
            })
        }
        #expect(try await eventually { try await publisher.stats().subscriptions == 3 })
        // Key k's events are 100k + i; each call form with its own keys.
        let perKey = 8
        for i in 0..<perKey { try await publisher.publish(Job(n: i), key: "album-0") }
        for i in 0..<perKey { try await publisher.publish(type: Job.eventType, data: Job(n: 100 + i), key: "album-1") }
        for i in 0..<perKey { try publisher.post(Job(n: 200 + i), key: "album-2") }
        for i in 0..<perKey { try publisher.post(type: Job.eventType, data: Job(n: 300 + i), key: "album-3") }
        for i in 0..<perKey { try publisher.enqueue(Job(n: 400 + i), key: "album-4") }
        for i in 0..<perKey { try publisher.enqueue(type: Job.eventType, data: Job(n: 500 + i), key: "album-5") }
        for i in 0..<perKey { try await publisher.publish(type: Job.eventType, json: Array(#"{"n":\#(600 + i)}"#.utf8), key: "album-6") }
        let keys = 7
        #expect(await eventually(within: .seconds(50)) { received.count >= keys * perKey })
        // The last event of each key has come (the `eventually` above), and
        // nothing more was published: no settling needed for the count.
        let all = received.all
        #expect(all.count == keys * perKey, "each event once: \(all.count)")
        for k in 0..<keys {
            let ofKey = all.filter { $0.n / 100 == k }
            let holders = Set(ofKey.map(\.member))
            #expect(holders.count == 1, "key album-\(k) went to one member, not \(holders.sorted())")
            #expect(ofKey.map(\.n) == (0..<perKey).map { 100 * k + $0 }, "key album-\(k) in order: \(ofKey.map(\.n))")
        }
        #expect(Set(carried.all) == Set((0..<keys).map { "\($0)=album-\($0)" }), "each event carries its key (metadata.key)")
        for reader in readers { reader.cancel() }
        for bus in members { bus.close() }
        publisher.close()
        await broker.stop()
    }

    @Test func theRequestsOfOneKeyGoToOneServerOfTheGroup() async throws {
        let broker = try await BrokerProcess()
        let client = try await EventBus.connect(socketPath: broker.socketPath)
        var servers: [EventBus] = []
        var tasks: [Task<Void, any Error>] = []
        for name in 1...2 {
            let bus = try await EventBus.connect(socketPath: broker.socketPath)
            servers.append(bus)
            // Each server answers with its own number: who took the request.
            tasks.append(Task { try await bus.serve(Square.self, group: "squares") { _ in name } })
        }
        #expect(try await eventually { try await client.stats().subscriptions == 2 })
        var answers: [String: Set<Int>] = [:]
        for key in ["a", "b", "c"] {
            for n in 0..<6 {
                answers[key, default: []].insert(try await client.request(Square(n: n), key: key))
                let raw = try await client.request(type: Square.requestType, data: Square(n: n), key: key)
                answers[key, default: []].insert(Int(String(decoding: raw.data, as: UTF8.self)) ?? -1)
            }
        }
        for (key, servers) in answers {
            #expect(servers.count == 1, "the requests of key \(key) went to one server, not \(servers.sorted())")
        }
        for task in tasks { task.cancel() }
        for bus in servers { bus.close() }
        client.close()
        await broker.stop()
    }

    @Test func aKeyOutside1To255BytesIsRefusedBeforeAnythingIsSent() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let subscriber = try await EventBus.connect(socketPath: broker.socketPath)
        let seen = Log<Int>()
        let keyed = Log<String?>()
        let reader = drain(subscriber.events(of: Job.self)) { delivery in
            seen.append(delivery.event.n)
            keyed.append(delivery.metadata.key)
        }
        #expect(try await eventually { try await bus.stats().subscriptions == 1 })
        for bad in ["", String(repeating: "k", count: 256), String(repeating: "é", count: 128)] {
            let refusal = EventBusError.protocolError(code: .badRequest, message: "key must be a string of 1-255 bytes, not \(bad.utf8.count)")
            await #expect(throws: refusal) { try await bus.publish(Job(n: 1), key: bad) }
            #expect(throws: refusal) { try bus.post(Job(n: 1), key: bad) }
            #expect(throws: refusal) { try bus.enqueue(Job(n: 1), key: bad) }
            await #expect(throws: refusal) { try await bus.request(Square(n: 1), key: bad) }
        }
        // 255 bytes (of a multi-byte character too) is a key; a sentinel after
        // it shows nothing else was sent.
        try await bus.publish(Job(n: 2), key: String(repeating: "k", count: 255))
        try await bus.publish(Job(n: 3), key: String(repeating: "é", count: 127) + "k")
        try await bus.publish(Job(n: 4))
        #expect(await eventually { seen.count >= 3 })
        #expect(keyed.all == [String(repeating: "k", count: 255), String(repeating: "é", count: 127) + "k", nil], "metadata.key as published")
        #expect(seen.all == [2, 3, 4], "only the valid ones were published: \(seen.all)")
        reader.cancel()
        bus.close()
        subscriber.close()
        await broker.stop()
    }
}
