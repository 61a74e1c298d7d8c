// Issue 34: every async call of the library stops waiting at once when its
// task is cancelled, with `EventBusError.cancelled`, and leaves nothing
// behind: a publish the broker holds, a `current`, `ping` and `connect`
// against a broker that does not answer (stopped with SIGSTOP), a publish
// waiting for a connection (never sent afterwards), a stream whose
// consuming task is cancelled (its broker subscription withdrawn).
@testable import EventBus
import EventBusTestSupport
import Foundation
import Testing

struct Held: BusEvent, Equatable {
    static let eventType = "cancel.held"
    var n: Int
    /// 8 KiB: a subscriber that does not read fills its socket and queue in a few dozen.
    var padding = ""
}

/// Runs `body` in a task, waits until `started` holds, cancels the task and
/// returns what it threw (nil: it returned).
private func cancelled<T: Sendable>(
    _ body: @escaping @Sendable () async throws(EventBusError) -> T,
    once started: @escaping () async throws -> Bool
) async throws -> EventBusError? {
    let task = Task { () async -> EventBusError? in
        do throws(EventBusError) {
            _ = try await body()
            return nil
        } catch {
            return error
        }
    }
    #expect(try await eventually(within: .seconds(30), started), "the call started waiting")
    task.cancel()
    return await task.value
}

// A hang guard. The limit counts from when a test is started, and while
// synchronous tests hold the cooperative pool (2 threads on 2 CPUs) a started
// test can wait minutes for a thread (250 s in a CI run under load).
@Suite(.timeLimit(.minutes(10)))
struct CancellationTests {
    @Test func aPublishTheBrokerHoldsStopsWaitingWhenCancelledAndTheBusStaysInStep() async throws {
        let broker = try await BrokerProcess(arguments: ["--max-outbound", "64K", "--stall-timeout", "60s"])
        // A subscriber of this uid that never reads: the broker holds our publisher.
        let stuck = try RawClient(path: broker.socketPath)
        _ = try stuck.request(#"{"op":"hello","client":"stuck","req":0}"#)
        _ = try stuck.request(#"{"op":"subscribe","type":"cancel.held","req":1}"#)
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "held-publisher")
        let observer = try await EventBus.connect(socketPath: broker.socketPath, clientName: "observer")
        let published = Log<Int>()
        let error = try await cancelled({ () async throws(EventBusError) -> Void in
            for n in 0... {
                try await bus.publish(Held(n: n, padding: String(repeating: "x", count: 8192)), id: "held-\(n)")
                published.append(n)
            }
        }, once: { try await observer.stats().held > 0 })
        #expect(error == .cancelled, "stopped waiting at once: \(String(describing: error))")
        let accepted = published.count
        // Release the broker's hold: the held publish's answer comes and is ignored.
        stuck.close()
        try await bus.ping()
        let receipt = try await bus.publish(Held(n: -1))
        #expect(receipt.seq > UInt64(accepted), "the bus matches replies in step after the cancelled one")
        #expect(try await observer.stats().held == 0)
        observer.close()
        bus.close()
        await broker.stop()
    }

    @Test func currentPingAndConnectAgainstABrokerThatDoesNotAnswerStopWaitingWhenCancelled() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        broker.send(signal: SIGSTOP)
        defer { broker.send(signal: SIGCONT) }
        // Written and waiting for the answer when cancelled: the session's requests in flight grew.
        func inFlight() -> Int { bus.core.state.withLock { $0.pending.count } }
        let current = try await cancelled({ () async throws(EventBusError) -> Delivery<Held>? in
            try await bus.current(Held.self)
        }, once: { inFlight() >= 1 })
        #expect(current == .cancelled)
        let before = inFlight()
        let ping = try await cancelled({ () async throws(EventBusError) in
            try await bus.ping()
        }, once: { inFlight() > before })
        #expect(ping == .cancelled)
        let waiting = Log<String>()
        let path = broker.socketPath
        let connect = try await cancelled({ () async throws(EventBusError) -> EventBus in
            waiting.append("connect")
            return try await EventBus.connect(socketPath: path)
        }, once: { waiting.count == 1 })
        #expect(connect == .cancelled)
        broker.send(signal: SIGCONT)
        // The broker answers the forgotten requests now; the bus ignores them and stays in step.
        try await bus.publish(Held(n: 1), retain: true)
        #expect(try await bus.current(Held.self)?.event == Held(n: 1))
        #expect(try await eventually { try await bus.stats().connections == 1 }, "the cancelled connect's connection is closed")
        bus.close()
        await broker.stop()
    }

    @Test func aTaskCancelledBeforeTheCallNeverSendsIt() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let watcher = try await EventBus.connect(socketPath: broker.socketPath)
        let seen = watcher.events(of: Held.self)
        try await watcher.ping()
        let task = Task { () async -> EventBusError? in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(EventBusError) {
                try await bus.publish(Held(n: 1))
                return nil
            } catch {
                return error
            }
        }
        #expect(await task.value == .cancelled)
        try await bus.publish(Held(n: 2))
        var iterator = seen.makeAsyncIterator()
        #expect(try await iterator.next()?.event == Held(n: 2), "the cancelled publish was never sent")
        watcher.close()
        bus.close()
        await broker.stop()
    }

    @Test func aPublishWaitingForAConnectionIsForgottenWhenCancelled() async throws {
        let broker = try await BrokerProcess()
        let path = broker.socketPath
        var configuration = EventBus.Configuration(bus: .path(path), whileDisconnected: .wait(upTo: .seconds(60), maxWaiting: 10))
        configuration.reconnect = EventBus.ReconnectPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200))
        let bus = try await EventBus.connect(configuration)
        await broker.stop()
        #expect(await eventually { !bus.isConnected })
        let error = try await cancelled({ () async throws(EventBusError) in
            try await bus.publish(Held(n: 1))
        }, once: { bus.core.state.withLock { $0.earliestWaitingDeadline != nil } })
        #expect(error == .cancelled)
        #expect(bus.core.state.withLock { $0.earliestWaitingDeadline == nil }, "forgotten at once")
        try await broker.start()
        let watcher = try await EventBus.connect(socketPath: path)
        let seen = watcher.events(of: Held.self)
        try await watcher.ping()
        #expect(await eventually { bus.isConnected })
        try await bus.publish(Held(n: 2))
        var iterator = seen.makeAsyncIterator()
        #expect(try await iterator.next()?.event == Held(n: 2), "the cancelled publish was not sent on reconnect")
        watcher.close()
        bus.close()
        await broker.stop()
    }

    @Test func aStreamWhoseConsumerTaskIsCancelledEndsAndUnsubscribes() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let received = Log<Int>()
        let consumer = Task {
            for try await delivery in bus.events(of: Held.self) { received.append(delivery.event.n) }
            return "ended"
        }
        #expect(await eventually { bus.subscribedPatterns == ["cancel.held"] })
        try await bus.publish(Held(n: 1))
        #expect(await eventually { received.count == 1 })
        consumer.cancel()
        #expect(try await consumer.value == "ended", "the iteration ends (nil), it does not throw")
        #expect(await eventually { bus.subscribedPatterns.isEmpty })
        try await bus.ping()
        #expect(try await bus.stats().subscriptions == 0, "withdrawn at the broker")
        bus.close()
        await broker.stop()
    }
}
