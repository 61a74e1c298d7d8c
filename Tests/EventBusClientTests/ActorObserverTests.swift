// Actors as observers (EventBus+ActorObservers.swift): the handler runs
// isolated to the actor (it mutates the actor's state without `await`), in
// order, with the actor held weakly; and the example Examples/ActorObserver
// builds and runs against a real broker.
import EventBus
import EventBusTestSupport
import Foundation
import Testing

struct Counted: BusEvent, Equatable {
    static let eventType = "actor.counted"
    var i: Int
}

/// The observer of issue 23: this handler did not compile with the closure-isolated overload.
actor Tally {
    var seen: [Int] = []
    let deinits: Log<Int>?

    init(deinits: Log<Int>? = nil) { self.deinits = deinits }
    deinit { deinits?.append(1) }

    @discardableResult
    func start(bus: EventBus, initial: EventBus.Initial = .none) -> Subscription {
        bus.subscribe(self, to: Counted.self, initial: initial) { tally, event in
            tally.assertIsolated()
            tally.seen.append(event.i)
        }
    }
}

// A hang guard. The limit counts from when a test is started, and while
// synchronous tests hold the cooperative pool (2 threads on 2 CPUs) a started
// test can wait minutes for a thread (250 s in a CI run under load).
@Suite(.timeLimit(.minutes(10)))
struct ActorObserverTests {
    @Test func anActorObserverSeesEveryEventInOrderIsolatedToItself() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "tally")
        let publisher = try await EventBus.connect(socketPath: broker.socketPath, clientName: "publisher")
        let tally = Tally()
        await tally.start(bus: bus)
        try await bus.ping()
        for i in 1...500 { try publisher.post(Counted(i: i)) }
        try await publisher.ping()
        #expect(await eventually { await tally.seen.count >= 500 })
        #expect(await tally.seen == Array(1...500))
        publisher.close()
        bus.close()
        await broker.stop()
    }

    @Test func anActorObserverGetsTheRetainedEventFirstWithInitialLast() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        try await bus.publish(Counted(i: 7), retain: true)
        let tally = Tally()
        await tally.start(bus: bus, initial: .last)
        try await bus.publish(Counted(i: 8))
        #expect(await eventually { await tally.seen.count >= 2 })
        #expect(await tally.seen == [7, 8])
        bus.close()
        await broker.stop()
    }

    @Test func anActorObserverIsHeldWeaklyAndItsRegistrationEndsWithIt() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let deinits = Log<Int>()
        var tally: Tally? = Tally(deinits: deinits)
        let subscription = await tally!.start(bus: bus)
        try await bus.publish(Counted(i: 1))
        #expect(await eventually { await tally!.seen == [1] })
        #expect(bus.subscribedPatterns == ["actor.counted"])
        tally = nil
        // Neither the delivery task nor the bus keeps it (the task holds it only during a call).
        #expect(await eventually { deinits.count == 1 }, "something holds the actor observer strongly")
        #expect(!subscription.isActive)
        #expect(await eventually { bus.subscribedPatterns.isEmpty }, "the broker subscription was not withdrawn")
        bus.close()
        await broker.stop()
    }

    @Test func theActorObserverExampleRunsAgainstABroker() async throws {
        let broker = try await BrokerProcess()
        let run = try await SpawnedProcess(productsDirectory() + "/actor-observer", [], in: broker.directory,
                                           environment: ["EVENTBUS_SOCKET": broker.socketPath])
            .wait(timeout: .seconds(20))  // awaits: blocking here would hold a thread of the shared pool
        #expect(run.status == 0, "stderr: \(run.stderr)")
        #expect(run.stdout == "seen 100 ticks, in order: true\nthe counter is gone and so is its subscription\n")
        await broker.stop()
    }
}
