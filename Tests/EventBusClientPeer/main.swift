// Test helper: the "other process" of the client's integration tests. It
// joins the bus through the client library, plays one role, prints what it
// sees on stdout (one line each, unbuffered), and exits 0, or 1 with a
// message on stderr. A watchdog ends it with status 3 after 20 s.
//
//     eventbus-client-peer --socket PATH like-screen N     observe N post.like events
//     eventbus-client-peer --socket PATH search-backend N  answer N search.query events
//     eventbus-client-peer --socket PATH sensors           publish 3 temperatures, 2 humidities
//
// Roles that observe print `ready` once the broker has their subscription.
import EventBusClient
import Foundation

struct PostLikeChanged: BusEvent {
    static let eventType = "post.like"
    var post: Int
    var liked: Bool
    var by: String
}

struct SearchQueryChanged: BusEvent {
    static let eventType = "search.query"
    var text: String
}

struct SearchResultsReady: BusEvent {
    static let eventType = "search.results"
    var query: String
    var hits: Int
}

struct TemperatureChanged: BusEvent {
    static let eventType = "sensor.temperature"
    var value: Double
}

struct HumidityChanged: BusEvent {
    static let eventType = "sensor.humidity"
    var value: Double
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("eventbus-client-peer: \(message)\n".utf8))
    exit(1)
}

/// A screen in another app showing the same post.
@MainActor final class PostScreen {
    var seen = 0
}

@MainActor func likeScreen(_ bus: EventBus, count: Int) async throws {
    let screen = PostScreen()
    let (done, finish) = AsyncStream<Void>.makeStream()
    bus.subscribe(screen, to: PostLikeChanged.self) { screen, event in
        say("post \(event.post) liked=\(event.liked) by \(event.by)")
        screen.seen += 1
        if screen.seen == count { finish.yield() }
    }
    try await bus.ping()
    say("ready")
    for await _ in done { break }
}

func searchBackend(_ bus: EventBus, count: Int) async throws {
    let queries = bus.events(of: SearchQueryChanged.self)
    try await bus.ping()
    say("ready")
    var answered = 0
    for try await query in queries {
        let text = query.event.text
        try await bus.publish(SearchResultsReady(query: text, hits: text.count))
        say("answered \(text)")
        answered += 1
        if answered == count { return }
    }
}

func sensors(_ bus: EventBus) async throws {
    try await bus.publish(TemperatureChanged(value: 21.5))
    try await bus.publish(HumidityChanged(value: 40))
    try await bus.publish(TemperatureChanged(value: 22))
    try await bus.publish(HumidityChanged(value: 45))
    try await bus.publish(TemperatureChanged(value: 22.5))
    say("published 5")
}

Thread.detachNewThread {
    Thread.sleep(forTimeInterval: 20)
    FileHandle.standardError.write(Data("eventbus-client-peer: watchdog: still running after 20 s\n".utf8))
    exit(3)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 3, arguments[0] == "--socket" else { fail("usage: --socket PATH ROLE [N]") }
let role = arguments[2]
let count = arguments.count > 3 ? Int(arguments[3]) ?? 1 : 1
do {
    let bus = try await EventBus.connect(socketPath: arguments[1], clientName: role)
    switch role {
    case "like-screen": try await likeScreen(bus, count: count)
    case "search-backend": try await searchBackend(bus, count: count)
    case "sensors": try await sensors(bus)
    default: fail("unknown role \(role)")
    }
    bus.close()
} catch {
    fail("\(error)")
}
