// snippet.hide
// docs/CLIENT.md "The seeds": a view that appears after the change shows
// the current value. (DocSnippetTests: the shown lines are the doc's block.)
import EventBus

enum RetainedValueSnippet {
    static func settings(bus: EventBus) async throws {
// snippet.show
// settings process
try await bus.publish(CurrencyChanged(code: "EUR"), retain: true)
// snippet.hide
    }

// snippet.show

// any other process, any time later
@MainActor final class PriceView {
    let bus: EventBus
    var currency = "USD"
    init(bus: EventBus) {
        self.bus = bus
        bus.subscribe(self, to: CurrencyChanged.self, initial: .last) { view, event in view.currency = event.code }
    }
    deinit { bus.unsubscribe(self) }           // optional: weak observers go away by themselves
}
// snippet.hide

    static func ask(bus: EventBus) async throws {
// snippet.show

// or just ask
if let now = try await bus.current(CurrencyChanged.self) { print(now.event.code, now.metadata.isRetained) }
for try await change in bus.events(of: CurrencyChanged.self, initial: .last) {   // streams too
    print(change.event.code)
}
// snippet.hide
    }
}
