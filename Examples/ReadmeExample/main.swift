import EventBus
import Foundation

struct CurrencyChanged: BusEvent {              // the type name and the JSON shape
    static let eventType = "currency.changed"
    var code: String
}

// An observer is a Sendable class; its handler runs on the main actor (an actor's, on the actor).
@MainActor final class PriceView {
    var currency = "USD"
    init(bus: EventBus) {                       // held weakly: no unsubscribe needed
        bus.subscribe(self, to: CurrencyChanged.self) { view, event in
            view.currency = event.code
            print("price-view: the view shows prices in \(event.code)")
        }
    }
}

do {
    let bus = try await EventBus.connect()      // $EVENTBUS_SOCKET, else the user or system bus
    let view = PriceView(bus: bus)
    let changes = bus.events(of: CurrencyChanged.self)   // subscribed now, before the publish: nothing missed
    print("price-view: connected to \(bus.socketPath)")
    try await bus.publish(CurrencyChanged(code: "EUR"), from: view)   // everyone but `view` hears it
    print("price-view: published EUR; waiting for changes (Ctrl-C to stop)")
    for try await change in changes {           // its own publish first, then other processes'
        let origin = change.metadata.isLocal ? "this process" : "pid \(change.metadata.pid)"
        print("price-view: currency.changed to \(change.event.code) by \(origin), seq \(change.metadata.seq)")
    }
} catch {
    FileHandle.standardError.write(Data("price-view: \(error)\n".utf8))   // names the socket path tried
    exit(1)
}
