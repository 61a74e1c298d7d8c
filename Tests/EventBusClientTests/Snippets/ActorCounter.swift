// snippet.hide
// docs/CLIENT.md "The seeds": an actor as an observer (as in
// Examples/ActorObserver/main.swift).
import EventBus

enum ActorCounterSnippet {
// snippet.show
struct Tick: BusEvent {
    static let eventType = "example.tick"
    var i: Int
}

actor Counter {
    var seen: [Int] = []

    func start(bus: EventBus) {
        // `counter` is the actor itself, `isolated`: no `await`, no capture of `self`.
        bus.subscribe(self, to: Tick.self) { counter, tick in counter.seen.append(tick.i) }
    }
}
// snippet.hide
}
