// Integration (issue 12): the library's 1.1 calls across processes against a
// real `eventbusd`: a view created after another process's retained change
// shows it at once; the three-process restart scenario loses no tap
// published after the new broker started (SIGTERM and SIGKILL); `post`
// keeps call order; `unsubscribe(observer)` ends every registration.
@testable import EventBus
import Foundation
import Testing

struct Tap: BusEvent, Equatable {
    static let eventType = "taps.tap"
    var from: String
    var n: Int
}

struct TapsStop: BusEvent {
    static let eventType = "taps.stop"
}

struct PriceTick: BusEvent {
    static let eventType = "price.tick"
    var value: Int
}

/// A `@MainActor` screen that removes itself in a plain (nonisolated) deinit.
@MainActor final class SelfRemovingScreen {
    let bus: EventBus
    let log: Log<String>

    init(bus: EventBus, log: Log<String>) {
        self.bus = bus
        self.log = log
        bus.subscribe(self, to: CurrencyChanged.self) { screen, event in screen.log.append("currency \(event.code)") }
        bus.subscribe(self, to: PriceTick.self) { screen, event in screen.log.append("tick \(event.value)") }
    }

    deinit { bus.unsubscribe(self) }
}

/// The same with Swift 6.2's `isolated deinit`.
@MainActor final class IsolatedDeinitScreen {
    let bus: EventBus

    init(bus: EventBus) {
        self.bus = bus
        bus.subscribe(self, to: PriceTick.self) { _, _ in }
    }

    isolated deinit { bus.unsubscribe(self) }
}

@Suite(.serialized) struct RetentionScenarioTests {
    @Test func aDashboardStartedAfterTheChangeShowsTheRetainedCurrencyBeforeAnyNewEvent() async throws {
        let broker = try await BrokerProcess()
        let settings = try await runProduct("settings-service", ["--socket", broker.socketPath, "EUR"])
        #expect(settings.status == 0, "stderr: \(settings.stderr)")
        // A new process: its views subscribe with initial: .last; nobody publishes again.
        let dashboard = try ChildProcess("dashboard", ["--socket", broker.socketPath, "--count", "1"])
        #expect(await dashboard.waitForExit() == 0, "stderr: \(dashboard.stderr)")
        let lines = dashboard.stdout.split(separator: "\n").map(String.init)
        #expect(Set(lines.filter { $0.contains("shows prices") }) == ["dashboard: totals shows prices in EUR", "dashboard: cart shows prices in EUR"])
        #expect(lines.last == "dashboard: done, EUR EUR")

        // In this process too, for a typed stream and `current`.
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "views")
        let now = try #require(try await bus.current(CurrencyChanged.self))
        #expect(now.event.code == "EUR" && now.metadata.isRetained && now.metadata.source == "settings-service")
        var stream = bus.events(of: CurrencyChanged.self, initial: .last).makeAsyncIterator()
        let first = try await stream.next()
        #expect(first?.event.code == "EUR" && first?.metadata.isRetained == true)
        #expect(try await bus.current(PriceTick.self) == nil)
        bus.close()
        await broker.stop()
    }

    /// Three processes tap and watch each other's taps while the broker is
    /// stopped mid-way with `signal` and started again on the same socket
    /// (issue 12: 0-12 taps per run used to be lost).
    func restartScenario(signal: Int32) async throws {
        let broker = try await BrokerProcess()
        let names = ["a", "b", "c"]
        let tappers = try names.map { try ChildProcess("eventbus-client-peer", ["--socket", broker.socketPath, "tapper", $0, "20", "3"]) }
        for tapper in tappers { #expect(await tapper.waitForLine("ready"), "stderr: \(tapper.stderr)") }
        // Mid-way: each has seen 15 of its own taps.
        for (name, tapper) in zip(names, tappers) {
            #expect(await eventually { tapper.stdout.contains("tap \(name) 15 ") }, "stderr: \(tapper.stderr)")
        }
        await broker.stop(signal: signal)
        try await broker.start()
        let restarted = try await EventBus.connect(socketPath: broker.socketPath, clientName: "probe")
        let newRun = try await restarted.stats().instance
        // From here each tapper publishes 20 more taps on the new broker.
        try await restarted.publish(TapsStop(), retain: true)
        restarted.close()
        for tapper in tappers { #expect(await tapper.waitForExit(within: .seconds(20)) == 0, "stderr: \(tapper.stderr)") }

        /// `tap FROM N ID` lines of one tapper.
        func taps(_ tapper: ChildProcess) -> [(from: String, n: Int, id: String)] {
            tapper.stdout.split(separator: "\n").compactMap { line in
                let words = line.split(separator: " ")
                guard words.count == 4, words[0] == "tap", let n = Int(words[2]) else { return nil }
                return (String(words[1]), n, String(words[3]))
            }
        }
        for (name, publisher) in zip(names, tappers) {
            // What `name` published on the new broker, as the broker numbered it.
            let published = Set(taps(publisher).filter { $0.from == name && $0.id.hasPrefix(newRun + "-") }.map(\.n))
            #expect(!published.isEmpty)
            for (other, watcher) in zip(names, tappers) where other != name {
                let seen = Set(taps(watcher).filter { $0.from == name }.map(\.n))
                let missed = published.subtracting(seen).sorted()
                #expect(missed.isEmpty, "\(other) missed taps \(missed) that \(name) published after the restart")
            }
        }
        await broker.stop()
    }

    @Test func theRestartScenarioLosesNoTapPublishedAfterTheNewBrokerStartedAfterSIGTERM() async throws {
        try await restartScenario(signal: SIGTERM)
    }

    @Test func theRestartScenarioLosesNoTapPublishedAfterTheNewBrokerStartedAfterSIGKILL() async throws {
        try await restartScenario(signal: SIGKILL)
    }

    @Test func postFromSynchronousCodeKeepsCallOrderAcrossProcesses() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "receiver")
        var taps = bus.events(of: Tap.self).makeAsyncIterator()
        try await bus.ping()
        let poster = try await runProduct("eventbus-client-peer", ["--socket", broker.socketPath, "poster", "1000"])
        #expect(poster.status == 0 && poster.stdout.contains("posted 1000"), "stderr: \(poster.stderr)")
        var received: [Int] = []
        while received.count < 1000, let tap = try await taps.next() { received.append(tap.event.n) }
        #expect(received == Array(0..<1000))
        bus.close()
        await broker.stop()
    }

    @Test @MainActor func unsubscribeEndsEveryRegistrationOfTheObserverEvenFromItsDeinit() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "screens")
        let log = Log<String>()
        var screen: SelfRemovingScreen? = SelfRemovingScreen(bus: bus, log: log)
        let kept = CurrencyView(name: "kept", bus: bus, log: log)
        try await bus.ping()
        #expect(bus.subscribedPatterns == ["currency.changed", "price.tick"])
        bus.unsubscribe(kept)
        #expect(bus.subscribedPatterns == ["currency.changed", "price.tick"], "the screen still observes both")
        screen = nil  // its deinit calls unsubscribe(self)
        #expect(screen == nil && bus.subscribedPatterns.isEmpty, "withdrawn at once, not at the next sweep")
        _ = IsolatedDeinitScreen(bus: bus)

        let settings = try await runProduct("settings-service", ["--socket", broker.socketPath, "GBP"])
        #expect(settings.status == 0, "stderr: \(settings.stderr)")
        try await bus.ping()
        #expect(log.all.isEmpty, "no handler of an unsubscribed observer ran")
        #expect(await eventually { bus.subscribedPatterns.isEmpty })
        bus.close()
        await broker.stop()
    }
}
