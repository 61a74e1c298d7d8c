// Test helper: the "other process" of the client's integration tests. It
// joins the bus through the client library, plays one role, prints what it
// sees on stdout (one line each, unbuffered), and exits 0, or 1 with a
// message on stderr. A watchdog ends it with status 3 after 60 s.
//
//     eventbus-client-peer --socket PATH like-screen N     observe N post.like events
//     eventbus-client-peer --socket PATH search-backend N  answer N search.query events
//     eventbus-client-peer --socket PATH sensors           publish 3 temperatures, 2 humidities
//     eventbus-client-peer --socket PATH tapper NAME N P   publish taps every 10 ms until a
//                                                          retained taps.stop, then N more, while
//                                                          watching the taps of P tappers in all;
//                                                          print each
//     eventbus-client-peer --socket PATH poster N          post N taps from synchronous code
//
// Roles that observe print `ready` once the broker has their subscription.
import EventBus
import Foundation
import Synchronization

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

/// A tap of the restart scenario (issue 12): `from` tapper's `n`-th.
struct Tap: BusEvent {
    static let eventType = "taps.tap"
    var from: String
    var n: Int
}

/// The restart scenario's test says so once the new broker runs (retained,
/// so a tapper that resubscribes after it was published still sees it).
struct TapsStop: BusEvent {
    static let eventType = "taps.stop"
}

/// Set once a tapper has seen `taps.stop`.
final class StopFlag: Sendable {
    let value = Atomic<Bool>(false)
}

/// A tapper has published all its taps.
struct TapsDone: BusEvent {
    static let eventType = "taps.done"
    var from: String
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

/// Publishes `count` taps, 10 ms apart, printing `tap FROM N ID` for every tap
/// it sees (its own are delivered locally, with the id the broker gave them:
/// `<instance>-<seq>`), `lost N` for a publish lost with a connection, and
/// exits once every one of the `tappers` has said it is done.
func tapper(_ bus: EventBus, name: String, count: Int, tappers: Int) async throws {
    let taps = bus.events(of: Tap.self)
    let dones = bus.events(of: TapsDone.self)
    let stops = bus.events(of: TapsStop.self, initial: .last)
    try await bus.ping()
    say("ready")
    let watching = Task {
        for try await tap in taps { say("tap \(tap.event.from) \(tap.event.n) \(tap.metadata.id)") }
    }
    let finished = Task {
        var seen: Set<String> = []
        for try await done in dones {
            seen.insert(done.event.from)
            if seen.count == tappers { return }
        }
    }
    let stopped = StopFlag()
    let stopping = Task {
        for try await _ in stops {
            stopped.value.store(true, ordering: .relaxed)
            return
        }
    }
    try await publishTaps(bus, name: name, count: count, stopped: stopped)
    try await finished.value
    try await bus.ping()
    watching.cancel()
    stopping.cancel()
    say("finished")
}

/// Taps until the test says the new broker runs (`stopped`), then `count`
/// more: the restart always falls mid-way, however slow the machine; then
/// says it is done (`TapsDone`, retried until it is not lost).
func publishTaps(_ bus: EventBus, name: String, count: Int, stopped: StopFlag) async throws {
    var n = 0
    var left = count
    while left > 0 {
        do {
            try await bus.publish(Tap(from: name, n: n))
        } catch .connectionLost {
            say("lost \(n)")
        }
        n += 1
        if stopped.value.load(ordering: .relaxed) { left -= 1 }
        try await Task.sleep(for: .milliseconds(10))
    }
    while true {
        do {
            try await bus.publish(TapsDone(from: name))
            break
        } catch .connectionLost {
            continue  // done must arrive; taps need not
        }
    }
}

/// Posts `count` taps from one synchronous loop (`post`: no awaiting), then pings.
func poster(_ bus: EventBus, count: Int) async throws {
    func postAll() throws(EventBusError) {
        for n in 0..<count { try bus.post(Tap(from: "poster", n: n)) }
    }
    try postAll()
    try await bus.ping()
    say("posted \(count)")
}

Thread.detachNewThread {
    Thread.sleep(forTimeInterval: 60)
    FileHandle.standardError.write(Data("eventbus-client-peer: watchdog: still running after 60 s\n".utf8))
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
    case "tapper":
        guard arguments.count >= 6, let n = Int(arguments[4]), let tappers = Int(arguments[5]) else { fail("usage: tapper NAME N TAPPERS") }
        try await tapper(bus, name: arguments[3], count: n, tappers: tappers)
    case "poster": try await poster(bus, count: count)
    default: fail("unknown role \(role)")
    }
    bus.close()
} catch {
    fail("\(error)")
}
