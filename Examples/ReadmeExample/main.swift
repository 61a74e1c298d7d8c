import EventBus
import Foundation

struct CurrencyChanged: BusEvent {              // the type name and the JSON shape
    static let eventType = "currency.changed"
    var code: String
}

// Observers must be Sendable classes: @MainActor classes (like this one) and actors are.
@MainActor final class PriceView {
    var currency = "USD"
    init(bus: EventBus) {                       // held weakly: no unsubscribe needed
        bus.subscribe(self, to: CurrencyChanged.self) { view, event in view.currency = event.code }
    }
}

do {
    let bus = try await EventBus.connect()      // $EVENTBUS_SOCKET, else the user or system bus
    let view = PriceView(bus: bus)
    try await bus.publish(CurrencyChanged(code: "EUR"), from: view)   // everyone but `view` hears it
    for try await change in bus.events(of: CurrencyChanged.self) { print(change.event.code, change.metadata.seq) }
} catch {
    FileHandle.standardError.write(Data("price-view: \(error)\n".utf8))   // names the socket path tried
    exit(1)
}
