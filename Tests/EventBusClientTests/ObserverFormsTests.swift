// Issue 34's API rules, against a real broker: one token rule (a
// registration lives as long as its observer; a dropped token ends nothing,
// `cancel()` ends it early), the handler forms of raw patterns for class
// (main actor) and actor observers, invalid names as errors (never a trap),
// `post(type:data:)` and the non-blocking `enqueue` in call order, `run()`
// owning the bus in a task group, and notices and errors that print readably.
@testable import EventBus
import EventBusTestSupport
import Foundation
import Testing

struct Ordered: BusEvent, Equatable {
    static let eventType = "forms.ordered"
    var n: Int
}

/// An event type whose name breaks PROTOCOL.md "Names and patterns".
struct Misnamed: BusEvent {
    static let eventType = "bad..name"
    var n: Int
}

/// A main-actor observer of raw events.
@MainActor final class RawLog {
    var types: [String] = []
}

/// An actor observer of raw events.
actor RawTally {
    var types: [String] = []
}

// A hang guard. The limit counts from when a test is started, and while
// synchronous tests hold the cooperative pool (2 threads on 2 CPUs) a started
// test can wait minutes for a thread (250 s in a CI run under load).
@Suite(.timeLimit(.minutes(10)))
struct ObserverFormsTests {
    @Test func aDroppedTokenEndsNothingTheObserverDoesAndCancelEndsItEarly() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        var kept: Counter? = Counter()
        let dropped = Counter()
        bus.subscribe(dropped, to: CurrencyChanged.self) { counter, event in counter.seen.append(event.code) }   // token dropped
        let token = bus.subscribe(kept!, to: CurrencyChanged.self) { counter, event in counter.seen.append(event.code) }
        try await bus.publish(CurrencyChanged(code: "EUR"))
        #expect(await eventually { dropped.seen.all == ["EUR"] && kept?.seen.all == ["EUR"] }, "a dropped token ends nothing")
        token.cancel()
        #expect(!token.isActive)
        try await bus.publish(CurrencyChanged(code: "GBP"))
        #expect(await eventually { dropped.seen.all == ["EUR", "GBP"] })
        #expect(kept?.seen.all == ["EUR"], "cancel() ended it early")
        kept = nil
        withExtendedLifetime(dropped) {}
        bus.close()
        await broker.stop()
    }

    @Test func rawPatternsHaveHandlerFormsForClassAndActorObservers() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let log = RawLog()
        let tally = RawTally()
        try bus.subscribe(log, matching: "forms.>") { log, event in
            MainActor.assertIsolated()
            log.types.append(event.metadata.type)
        }
        try bus.subscribe(tally, matching: "forms.*") { tally, event in
            tally.assertIsolated()
            tally.types.append(event.metadata.type)
        }
        #expect(throws: EventBusError.invalidName("forms.>.x")) { try bus.subscribe(log, matching: "forms.>.x") { _, _ in } }
        try await bus.publish(Ordered(n: 1))
        try bus.post(type: "forms.note", data: ["text": "raw"])
        try bus.post(type: "other.note", data: ["text": "not matched"])
        #expect(await eventually { await log.types == ["forms.ordered", "forms.note"] })
        #expect(await eventually { await tally.types == ["forms.ordered", "forms.note"] })
        bus.close()
        await broker.stop()
    }

    @Test func anInvalidEventTypeIsAnErrorEverywhereNeverATrap() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let notices = NoticeLog(bus)
        await #expect(throws: EventBusError.invalidName("bad..name")) { try await bus.publish(Misnamed(n: 1)) }
        #expect(throws: EventBusError.invalidName("bad..name")) { try bus.post(Misnamed(n: 1)) }
        #expect(throws: EventBusError.invalidName("bad..name")) { try bus.enqueue(Misnamed(n: 1)) }
        await #expect(throws: EventBusError.invalidName("bad..name")) { try await bus.current(Misnamed.self) }
        #expect(throws: EventBusError.invalidName("no spaces")) { try bus.post(type: "no spaces", data: 1) }
        let observer = Counter()
        let token = bus.subscribe(observer, to: Misnamed.self) { _, _ in }
        #expect(!token.isActive, "ended at once")
        #expect(await eventually { notices.contains { $0 == .subscriptionRefused(pattern: "bad..name", .invalidName("bad..name")) } })
        var iterator = bus.events(of: Misnamed.self).makeAsyncIterator()
        await #expect(throws: EventBusError.invalidName("bad..name")) { _ = try await iterator.next() }
        #expect(bus.subscribedPatterns.isEmpty)
        bus.close()
        await broker.stop()
    }

    @Test func enqueueAndPostFromTheMainActorKeepTheirOrder() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let watcher = try await EventBus.connect(socketPath: broker.socketPath)
        let seen = watcher.events(of: Ordered.self)
        try await watcher.ping()
        try await MainActor.run {
            for n in 0..<1000 {
                if n % 10 == 9 { try bus.post(Ordered(n: n)) } else { try bus.enqueue(Ordered(n: n)) }
            }
        }
        var received: [Int] = []
        for try await delivery in seen {
            received.append(delivery.event.n)
            if received.count == 1000 { break }
        }
        #expect(received == Array(0..<1000))
        watcher.close()
        bus.close()
        await broker.stop()
    }

    @Test func enqueueIsBoundedWhileTheWriterIsBusy() async throws {
        let broker = try await BrokerProcess(arguments: ["--max-outbound", "64K", "--stall-timeout", "60s"])
        let stuck = try RawClient(path: broker.socketPath)
        _ = try stuck.request(#"{"op":"hello","client":"stuck","req":0}"#)
        _ = try stuck.request(#"{"op":"subscribe","type":"forms.ordered","req":1}"#)
        var configuration = EventBus.Configuration(bus: .path(broker.socketPath))
        configuration.maxEnqueued = 5
        let bus = try await EventBus.connect(configuration)
        let notices = NoticeLog(bus)
        // Until the broker holds us and the writer queue backs up: then enqueue refuses.
        var refused: EventBusError?
        for n in 0..<100_000 {
            do {
                try bus.enqueue(Ordered(n: n))
            } catch {
                refused = error
                break
            }
        }
        guard case .unavailable(_, let reason)? = refused else { Issue.record("never refused: \(String(describing: refused))"); return }
        #expect(reason.contains("Configuration.maxEnqueued"))
        stuck.close()
        try await bus.ping()
        #expect(!notices.contains { if case .postFailed = $0 { true } else { false } }, "everything enqueued was published")
        bus.close()
        await broker.stop()
    }

    @Test func runOwnsTheBusInATaskGroupAndShutsItDownGracefully() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let watcher = try await EventBus.connect(socketPath: broker.socketPath)
        let seen = watcher.events(of: Ordered.self)
        try await watcher.ping()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await bus.run() }
            for n in 0..<100 { try bus.enqueue(Ordered(n: n)) }
            group.cancelAll()
            try await group.waitForAll()
        }
        #expect(!bus.isConnected, "run() returned after closing the bus")
        var received: [Int] = []
        for try await delivery in seen {
            received.append(delivery.event.n)
            if received.count == 100 { break }
        }
        #expect(received == Array(0..<100), "what was enqueued before the cancellation was written first")
        await #expect(throws: EventBusError.closed) { try await bus.ping() }
        watcher.close()
        await broker.stop()
    }

    @Test func runThrowsWhyTheBusClosedByItself() async throws {
        let broker = try await BrokerProcess()
        var configuration = EventBus.Configuration(bus: .path(broker.socketPath))
        configuration.reconnect = EventBus.ReconnectPolicy(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(10), maxAttempts: 1)
        let bus = try await EventBus.connect(configuration)
        let running = Task { () async -> EventBusError? in
            do throws(EventBusError) {
                try await bus.run()
                return nil
            } catch {
                return error
            }
        }
        await broker.stop()
        let error = await running.value
        guard case .unavailable(let path, let reason)? = error else { Issue.record("\(String(describing: error))"); return }
        #expect(path == broker.socketPath)
        #expect(reason.contains("is eventbusd running? start it with 'eventbusd --socket \(broker.socketPath)'"), "\(reason)")
        // And close() elsewhere ends run() normally.
        let other = try await BrokerProcess()
        let second = try await EventBus.connect(socketPath: other.socketPath)
        let closing = Task { try await second.run() }
        second.close()
        try await closing.value
        await other.stop()
    }

    @Test func noticesAndErrorsPrintAsOneReadableLine() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let info = try #require(bus.connectionInfo)
        let connected = BusNotice.connected(info).description
        #expect(connected.hasPrefix("connected to eventbusd ") && connected.contains("instance \(info.instance)"), "\(connected)")
        #expect(!connected.contains("EventBusSession") && !connected.contains("ConnectionInfo("))
        #expect(BusNotice.gap(BusGap(sinceSeq: 41, firstSeq: 1, brokerRestarted: true)).description
            == "gap: events after seq 41 could not be recovered (the broker restarted; its history starts at seq 1)")
        #expect(BusNotice.postFailed(type: "a.b", .closed).description == "a post of a.b failed: the event bus connection was closed")
        #expect("\(EventBusError.cancelled)" == "the task was cancelled while waiting for the event bus")
        bus.close()
        await broker.stop()
    }
}
