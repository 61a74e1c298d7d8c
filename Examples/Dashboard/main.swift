// Example: a dashboard whose views observe `currency.changed`. Each view is
// an observer held weakly by the bus; the handler runs on the main actor.
// With `initial: .last` a view first shows the current currency (the one
// retained by the settings service), then every change.
//
//     dashboard [--socket PATH] [--count N]
//
// Prints `dashboard: ready` once subscribed, then one line per view and event;
// exits 0 after N events (default: runs until killed).
import EventBus
import Foundation

/// The event both programs agree on: its type name and its JSON shape.
struct CurrencyChanged: BusEvent {
    static let eventType = "currency.changed"
    var code: String
}

/// A view showing prices; it re-renders when the currency changes.
@MainActor final class PriceView {
    let name: String
    var currency = "USD"

    init(name: String, bus: EventBus, onChange: @escaping @MainActor () -> Void) {
        self.name = name
        bus.subscribe(self, to: CurrencyChanged.self, initial: .last) { view, event in
            view.currency = event.code
            say("dashboard: \(view.name) shows prices in \(event.code)")
            onChange()
        }
    }
}

/// Writes one line to stdout at once (no buffering, so a parent reading a pipe sees it).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

@MainActor func runDashboard() async throws {
    var arguments = Array(CommandLine.arguments.dropFirst())
    var configuration = EventBus.Configuration(clientName: "dashboard")
    var limit = Int.max
    if arguments.contains("--help") || arguments.contains("-h") {
        say("usage: dashboard [--socket PATH] [--count N]")
        exit(0)
    }
    while let option = arguments.first, arguments.count >= 2 {
        switch option {
        case "--socket": configuration.bus = .path(arguments[1])
        case "--count": limit = Int(arguments[1]) ?? limit
        default:
            FileHandle.standardError.write(Data("usage: dashboard [--socket PATH] [--count N]\n".utf8))
            exit(64)
        }
        arguments.removeFirst(2)
    }
    let bus = try await EventBus.connect(configuration)
    var seen = 0
    let (done, finish) = AsyncStream<Void>.makeStream()
    let onChange: @MainActor () -> Void = {
        seen += 1
        if seen / 2 >= limit { finish.yield() }  // two views see each change
    }
    let views = [PriceView(name: "totals", bus: bus, onChange: onChange), PriceView(name: "cart", bus: bus, onChange: onChange)]
    try await bus.ping()  // the broker has our subscription now
    say("dashboard: ready")
    for await _ in done { break }
    say("dashboard: done, \(views.map(\.currency).joined(separator: " "))")
    bus.close()
}

do {
    try await runDashboard()
} catch {
    FileHandle.standardError.write(Data("dashboard: \(error)\n".utf8))
    exit(1)
}
