// (1.3) Queue groups through the library (PROTOCOL.md "Queue groups"):
// streams and observers in a group share the events, one member each; a
// member that leaves gets its whole share (every event queued to it before
// the broker's `ok`), then ends; invalid combinations are errors.
@testable import EventBus
import EventBusTestSupport
import Foundation
import Testing

struct Job: BusEvent, Equatable {
    static let eventType = "jobs.run"
    var n: Int
}

// A hang guard. The limit counts from when a test is started, and while
// synchronous tests hold the cooperative pool (2 threads on 2 CPUs) a started
// test can wait minutes for a thread (250 s in a CI run under load).
@Suite(.timeLimit(.minutes(10)))
struct QueueGroupTests {
    @Test func membersShareTheEventsAndALeavingMemberFinishesItsShare() async throws {
        let broker = try await BrokerProcess()
        let first = try await EventBus.connect(socketPath: broker.socketPath)
        let second = try await EventBus.connect(socketPath: broker.socketPath)
        let publisher = try await EventBus.connect(socketPath: broker.socketPath)
        let leaving = first.events(of: Job.self, group: "workers")
        let staying = second.events(of: Job.self, group: "workers")
        #expect(try await eventually { try await publisher.stats().subscriptions == 2 })
        for n in 0..<40 { try await publisher.publish(Job(n: n)) }
        try await publisher.ping()
        // Nothing taken yet from `leaving`: its share is queued to it; leave, then take it all.
        await leaving.leave()
        var share: [Int] = []
        for try await job in leaving { share.append(job.event.n) }
        #expect(!share.isEmpty, "round robin gave it a share")
        #expect(first.subscribedPatterns.isEmpty && first.core.state.withLock { $0.keyed.isEmpty }, "left")
        var rest: [Int] = []
        for try await job in staying {
            rest.append(job.event.n)
            if share.count + rest.count == 40 { break }
        }
        #expect((share + rest).sorted() == Array(0..<40), "every event once, none lost by the leave")
        first.close()
        second.close()
        publisher.close()
        await broker.stop()
    }

    @Test func observersInAGroupGetOneEventEach() async throws {
        let broker = try await BrokerProcess()
        let first = try await EventBus.connect(socketPath: broker.socketPath)
        let second = try await EventBus.connect(socketPath: broker.socketPath)
        let a = Counter(), b = Counter()
        first.subscribe(a, to: Job.self, group: "workers") { counter, job in counter.seen.append("\(job.n)") }
        second.subscribe(b, to: Job.self, group: "workers") { counter, job in counter.seen.append("\(job.n)") }
        #expect(try await eventually { try await first.stats().subscriptions == 2 })
        for n in 0..<10 { try first.post(Job(n: n)) }
        // Handlers run on the main actor, which the rest of a parallel suite
        // may keep busy: wait up to the suite's limit, not the default 10 s.
        #expect(await eventually(within: .seconds(50)) { a.seen.count + b.seen.count >= 10 })
        try await first.ping()
        let all = (a.seen.all + b.seen.all).compactMap(Int.init).sorted()
        #expect(all == Array(0..<10), "each once: \(a.seen.all) \(b.seen.all)")
        #expect(a.seen.all.isEmpty, "a process's own events never reach its group members (the broker shares them among the others)")
        first.close()
        second.close()
        await broker.stop()
    }

    @Test func invalidGroupsAreErrors() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        #expect(throws: EventBusError.invalidName("a b")) { try bus.events(matching: "jobs.>", group: "a b") }
        #expect(throws: EventBusError.protocolError(code: .badRequest, message: "initial: .last cannot be combined with group: a group shares live events only")) {
            try bus.events(matching: "jobs.>", initial: .last, group: "workers")
        }
        var iterator = bus.events(of: Job.self, initial: .last, group: "workers").makeAsyncIterator()
        await #expect(throws: EventBusError.self) { _ = try await iterator.next() }
        bus.close()
        await broker.stop()
    }
}
