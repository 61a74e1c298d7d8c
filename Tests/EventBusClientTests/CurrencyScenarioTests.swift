// Integration: the currency-change scenario across processes, with the
// Examples (`settings-service`, `dashboard`) as the other processes and a
// real `eventbusd` between them.
import EventBus
import Foundation
import Testing

struct CurrencyChanged: BusEvent, Equatable {
    static let eventType = "currency.changed"
    var code: String
}

/// A view that shows prices; registered as a weak observer, never unregistered.
@MainActor final class CurrencyView {
    let name: String
    var shown = "USD"

    init(name: String, bus: EventBus, log: Log<String>) {
        self.name = name
        bus.subscribe(self, to: CurrencyChanged.self) { view, event in
            MainActor.assertIsolated("handlers run where they were registered")
            view.shown = event.code
            log.append("\(view.name):\(event.code)")
        }
    }
}

@Suite(.serialized) struct CurrencyScenarioTests {
    @Test func theDashboardProcessSeesEveryChangeTheSettingsServiceProcessPublishes() async throws {
        let broker = try await BrokerProcess()
        defer { _ = broker }
        let dashboard = try ChildProcess("dashboard", ["--socket", broker.socketPath, "--count", "2"])
        #expect(await dashboard.waitForLine("dashboard: ready"), "stderr: \(dashboard.stderr)")

        let settings = try await runProduct("settings-service", ["--socket", broker.socketPath, "EUR", "GBP"])
        #expect(settings.status == 0, "stderr: \(settings.stderr)")
        #expect(settings.stdout.contains("currency is now EUR (seq "))

        #expect(await dashboard.waitForExit() == 0, "stderr: \(dashboard.stderr)")
        // Each view sees the changes in order; the two views are independent.
        let lines = dashboard.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "dashboard: ready")
        #expect(lines.last == "dashboard: done, GBP GBP")
        for view in ["totals", "cart"] {
            #expect(lines.filter { $0.hasPrefix("dashboard: \(view) ") } == [
                "dashboard: \(view) shows prices in EUR",
                "dashboard: \(view) shows prices in GBP",
            ])
        }
        #expect(lines.count == 6)
        await broker.stop()
    }

    @Test @MainActor func aViewThatGoesAwayWithoutUnregisteringIsReleasedAndNeverCalled() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "views")
        let log = Log<String>()
        let header = CurrencyView(name: "header", bus: bus, log: log)
        let cart = CurrencyView(name: "cart", bus: bus, log: log)
        var checkout: CurrencyView? = CurrencyView(name: "checkout", bus: bus, log: log)
        weak let released = checkout
        try await bus.ping()

        checkout = nil  // the screen goes away; nobody calls cancel()
        #expect(released == nil, "the bus must not keep an observer alive")

        let settings = try await runProduct("settings-service", ["--socket", broker.socketPath, "EUR"])
        #expect(settings.status == 0, "stderr: \(settings.stderr)")
        #expect(await eventually { log.count == 2 })
        #expect(Set(log.all) == ["header:EUR", "cart:EUR"])
        #expect(header.shown == "EUR" && cart.shown == "EUR")
        // Both live views are served by one broker subscription.
        #expect(bus.subscribedPatterns == ["currency.changed"])
        #expect(try await bus.stats().subscriptions == 1)

        try await bus.ping()
        #expect(!log.all.contains { $0.hasPrefix("checkout") })
        bus.close()
        await broker.stop()
    }
}
