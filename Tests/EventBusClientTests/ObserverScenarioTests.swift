// Integration: the observer pattern's classic scenarios across processes
// (PROTOCOL.md "Semantics": no echo, weak subscriptions, order). The other
// process is `eventbus-client-peer` (Tests/EventBusClientPeer), a second
// program built on the client library.
import EventBus
import Foundation
import Testing

struct PostLikeChanged: BusEvent, Equatable {
    static let eventType = "post.like"
    var post: Int
    var liked: Bool
    var by: String
}

struct SearchQueryChanged: BusEvent, Equatable {
    static let eventType = "search.query"
    var text: String
}

struct SearchResultsReady: BusEvent, Equatable {
    static let eventType = "search.results"
    var query: String
    var hits: Int
}

/// Two payloads with the same shape, so only routing can keep them apart.
struct TemperatureChanged: BusEvent, Equatable {
    static let eventType = "sensor.temperature"
    var value: Double
}

struct HumidityChanged: BusEvent, Equatable {
    static let eventType = "sensor.humidity"
    var value: Double
}

/// A screen showing a post's like state.
@MainActor final class PostScreen {
    let name: String
    var seen: [PostLikeChanged] = []

    init(name: String, bus: EventBus) {
        self.name = name
        bus.subscribe(self, to: PostLikeChanged.self) { screen, event in screen.seen.append(event) }
    }
}

/// A screen that lists search results while it is on screen.
@MainActor final class ResultsScreen {
    let name: String
    var results: [SearchResultsReady] = []
    init(name: String) { self.name = name }
}

/// Keeps result listeners registered only while their screen is visible.
@MainActor final class SearchManager {
    let bus: EventBus
    private var listeners: [ObjectIdentifier: Subscription] = [:]

    init(bus: EventBus) { self.bus = bus }

    func screenAppeared(_ screen: ResultsScreen) {
        listeners[ObjectIdentifier(screen)] = bus.subscribe(screen, to: SearchResultsReady.self) { screen, results in
            screen.results.append(results)
        }
    }

    func screenDisappeared(_ screen: ResultsScreen) {
        listeners.removeValue(forKey: ObjectIdentifier(screen))?.cancel()
    }

    func search(_ text: String) async throws {
        try await bus.publish(SearchQueryChanged(text: text))
    }
}

@Suite struct ObserverScenarioTests {
    @Test @MainActor func likeAndUnlikeReachEveryOtherScreenAsSentButNotTheScreenThatTapped() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "feed")
        let tapped = PostScreen(name: "feed", bus: bus)
        let detail = PostScreen(name: "detail", bus: bus)
        try await bus.ping()
        // Another app shows the same post on a screen of its own.
        let otherApp = try ChildProcess("eventbus-client-peer", ["--socket", broker.socketPath, "like-screen", "2"])
        #expect(await otherApp.waitForLine("ready"), "stderr: \(otherApp.stderr)")

        try await bus.publish(PostLikeChanged(post: 7, liked: true, by: "feed"), from: tapped)
        try await bus.publish(PostLikeChanged(post: 7, liked: false, by: "feed"), from: tapped)

        #expect(await eventually { detail.seen.count == 2 })
        #expect(detail.seen.map(\.liked) == [true, false], "the unlike must arrive as an unlike, after the like")
        #expect(await otherApp.waitForExit() == 0, "stderr: \(otherApp.stderr)")
        #expect(otherApp.stdout == "ready\npost 7 liked=true by feed\npost 7 liked=false by feed\n")
        try await bus.ping()
        #expect(tapped.seen.isEmpty, "the screen that tapped already knows")
        bus.close()
        await broker.stop()
    }

    @Test @MainActor func searchResultListenersFollowScreensAppearingAndDisappearing() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "search-ui")
        let manager = SearchManager(bus: bus)
        // The search backend runs in another process and answers two queries.
        let backend = try ChildProcess("eventbus-client-peer", ["--socket", broker.socketPath, "search-backend", "2"])
        #expect(await backend.waitForLine("ready"), "stderr: \(backend.stderr)")

        let list = ResultsScreen(name: "list")
        let grid = ResultsScreen(name: "grid")
        #expect(bus.subscribedPatterns == [])
        manager.screenAppeared(list)
        #expect(bus.subscribedPatterns == ["search.results"])
        try await manager.search("swift")
        #expect(await eventually { list.results.count == 1 })

        manager.screenAppeared(grid)
        manager.screenDisappeared(list)
        try await manager.search("linux!")
        #expect(await eventually { grid.results.count == 1 })
        #expect(grid.results == [SearchResultsReady(query: "linux!", hits: 6)])
        #expect(list.results == [SearchResultsReady(query: "swift", hits: 5)], "a listener removed on disappear hears nothing more")

        manager.screenDisappeared(grid)
        #expect(bus.subscribedPatterns == [], "no listener left: the broker subscription is withdrawn")
        #expect(await backend.waitForExit() == 0, "stderr: \(backend.stderr)")
        #expect(try await bus.stats().subscriptions == 0)
        bus.close()
        await broker.stop()
    }

    @Test func twoEventTypesWithTheSameShapeNeverCross() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "climate")
        let temperatures = Log<Double>()
        let humidities = Log<Double>()
        let temperatureToken = drain(bus.events(of: TemperatureChanged.self)) { temperatures.append($0.event.value) }
        let humidityToken = drain(bus.events(of: HumidityChanged.self)) { humidities.append($0.event.value) }
        let everything = try bus.events(matching: "sensor.>")
        try await bus.ping()

        let sensors = try await runProduct("eventbus-client-peer", ["--socket", broker.socketPath, "sensors"])
        #expect(sensors.status == 0, "stderr: \(sensors.stderr)")
        try await bus.publish(HumidityChanged(value: 50))  // local delivery follows the same rule

        var types: [String] = []
        for try await event in everything {
            types.append(event.type)
            if types.count == 6 { break }
        }
        #expect(types == ["sensor.temperature", "sensor.humidity", "sensor.temperature", "sensor.humidity", "sensor.temperature", "sensor.humidity"])
        #expect(await eventually { temperatures.count == 3 && humidities.count == 3 })
        #expect(temperatures.all == [21.5, 22, 22.5])
        #expect(humidities.all == [40, 45, 50])
        try await bus.ping()
        #expect(temperatures.count == 3 && humidities.count == 3)
        withExtendedLifetime((temperatureToken, humidityToken)) {}
        bus.close()
        await broker.stop()
    }
}
