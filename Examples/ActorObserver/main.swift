// An actor as an observer (docs/CLIENT.md "Actors as observers"): the handler
// runs isolated to the actor, so it may change the actor's state; events
// arrive in order; the actor is held weakly, and dropping it ends the
// registration. Run against a bus: `EVENTBUS_SOCKET=/tmp/bus.sock actor-observer`.
import EventBus
import Foundation

struct Tick: BusEvent {
    static let eventType = "example.tick"
    var i: Int
}

actor Counter {
    var seen: [Int] = []

    func start(bus: EventBus) -> Subscription {
        // `counter` is the actor itself, `isolated`: no `await`, no capture of `self`.
        bus.subscribe(self, to: Tick.self) { counter, tick in counter.seen.append(tick.i) }
    }
}

/// Polls `condition` every 10 ms for up to 5 s.
func eventually(_ condition: () async -> Bool) async -> Bool {
    let clock = ContinuousClock(), deadline = clock.now + .seconds(5)
    while clock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return false
}

do {
    let bus = try await EventBus.connect()      // $EVENTBUS_SOCKET, else the user or system bus
    var counter: Counter? = Counter()
    let subscription = await counter!.start(bus: bus)
    for i in 1...100 { try await bus.publish(Tick(i: i)) }
    guard await eventually({ await counter!.seen.count == 100 }) else { throw EventBusError.closed }
    let seen = await counter!.seen
    print("seen \(seen.count) ticks, in order: \(seen == Array(1...100))")
    counter = nil                               // held weakly: this ends the registration
    guard await eventually({ !subscription.isActive && bus.subscribedPatterns.isEmpty }) else { throw EventBusError.closed }
    print("the counter is gone and so is its subscription")
} catch {
    FileHandle.standardError.write(Data("actor-observer: \(error)\n".utf8))
    exit(1)
}
