// (1.3) Request/reply through the library against the real broker
// (PROTOCOL.md "Request/reply"): a typed request returns the typed reply of
// a structured server, an actor server, a main-actor server; each failure is
// its typed error (no responders, service error, timeout); a cancelled
// request stops waiting at once and leaves the bus in step; servers in a
// group share the requests, one server each.
import EventBus
import EventBusTestSupport
import Foundation
import Testing

struct Square: BusRequest, Equatable {
    static let requestType = "math.square"
    typealias Reply = Int
    var n: Int
}

struct Fail: BusRequest {
    static let requestType = "math.fail"
    typealias Reply = Int
    var why: String
}

struct SquareFailure: Error, CustomStringConvertible {
    var why: String
    var description: String { "refused: \(why)" }
}

/// An actor that serves squares and counts what it served.
actor SquareServer {
    var served: [Int] = []
}

/// A main-actor server.
@MainActor final class SquarePanel {
    var served: [Int] = []
}

/// Runs `serve` in a task until the test cancels it.
private func serving(_ bus: EventBus, group: String? = nil, log: Log<Int>? = nil, _ body: @escaping @Sendable (Int) async throws -> Int = { $0 * $0 }) -> Task<Void, any Error> {
    Task {
        try await bus.serve(Square.self, group: group) { request in
            log?.append(request.n)
            return try await body(request.n)
        }
    }
}

// A hang guard. The limit counts from when a test is started, and while
// synchronous tests hold the cooperative pool (2 threads on 2 CPUs) a started
// test can wait minutes for a thread (250 s in a CI run under load).
@Suite(.timeLimit(.minutes(10)))
struct RequestReplyTests {
    @Test func aTypedRequestGetsTheTypedReplyAndWhoAnswered() async throws {
        let broker = try await BrokerProcess()
        let server = try await EventBus.connect(socketPath: broker.socketPath, clientName: "server")
        let client = try await EventBus.connect(socketPath: broker.socketPath, clientName: "client")
        let task = serving(server)
        #expect(try await eventually { try await client.stats().subscriptions == 1 })
        #expect(try await client.request(Square(n: 7)) == 49)
        let answer = try await client.answer(to: Square(n: 3))
        #expect(answer.reply == 9)
        #expect(answer.server.pid == Int64(getpid()) && answer.server.uid == Int64(getuid()), "the server's credentials")
        task.cancel()
        try await task.value
        #expect(await eventually { await Self.noResponders(client) }, "the cancelled server's subscription is withdrawn")
        server.close()
        client.close()
        await broker.stop()
    }

    static func noResponders(_ bus: EventBus) async -> Bool {
        do {
            _ = try await bus.request(Square(n: 1))
            return false
        } catch {
            return error == .noResponders(type: "math.square")
        }
    }

    @Test func eachFailureIsItsTypedError() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let server = try await EventBus.connect(socketPath: broker.socketPath)
        await #expect(throws: EventBusError.noResponders(type: "math.square")) { try await bus.request(Square(n: 2)) }
        #expect("\(EventBusError.noResponders(type: "math.square"))"
                == "no server of math.square (nobody serves it, the policy lets no server take it, or none can take it now)")
        let failing = Task {
            try await server.serve(Fail.self) { request in throw SquareFailure(why: request.why) }
        }
        let slow = serving(server) { n in
            try await Task.sleep(for: .seconds(3600))
            return n
        }
        #expect(try await eventually { try await bus.stats().subscriptions == 2 })
        await #expect(throws: EventBusError.serviceError(type: "math.fail", message: "refused: odd")) { try await bus.request(Fail(why: "odd")) }
        await #expect(throws: EventBusError.timeout(type: "math.square")) { try await bus.request(Square(n: 2), timeout: .milliseconds(100)) }
        await #expect(throws: EventBusError.invalidName("bad name")) { try await bus.request(type: "bad name", data: 1) }
        failing.cancel()
        slow.cancel()
        server.close()
        bus.close()
        await broker.stop()
    }

    @Test func aCancelledRequestStopsWaitingAtOnceAndTheBusStaysInStep() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let server = try await EventBus.connect(socketPath: broker.socketPath)
        let asked = Log<Int>()
        let hanging = serving(server, log: asked) { n in
            if n == 1 { try await Task.sleep(for: .seconds(3600)) }
            return n * n
        }
        #expect(try await eventually { try await bus.stats().subscriptions == 1 })
        let request = Task { () async -> EventBusError? in
            do throws(EventBusError) {
                _ = try await bus.request(Square(n: 1), timeout: .seconds(300))
                return nil
            } catch {
                return error
            }
        }
        #expect(await eventually { asked.all == [1] }, "the server has it")
        request.cancel()
        #expect(await request.value == .cancelled)
        hanging.cancel()
        let second = serving(server)
        #expect(await eventually { (try? await bus.request(Square(n: 5), timeout: .seconds(5))) == 25 }, "answers are matched by req after the cancelled one")
        try await bus.ping()
        second.cancel()
        bus.close()
        server.close()
        await broker.stop()
    }

    @Test func actorAndMainActorObserversServeWhileTheyLive() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let client = try await EventBus.connect(socketPath: broker.socketPath)
        var actor: SquareServer? = SquareServer()
        try bus.serve(actor!, Square.self) { server, request in
            server.assertIsolated()
            server.served.append(request.n)
            return request.n * request.n
        }
        #expect(try await eventually { try await client.stats().subscriptions == 1 })
        #expect(try await client.request(Square(n: 4)) == 16)
        #expect(await actor?.served == [4])
        actor = nil
        #expect(await eventually { await Self.noResponders(client) }, "gone with its observer")
        let panel = SquarePanel()
        let token = try bus.serve(panel, Square.self) { panel, request in
            MainActor.assertIsolated()
            panel.served.append(request.n)
            return -request.n
        }
        #expect(try await eventually { try await client.request(Square(n: 6)) == -6 })
        #expect(await panel.served.last == 6)
        token.cancel()
        #expect(await eventually { await Self.noResponders(client) }, "cancelled")
        bus.close()
        client.close()
        await broker.stop()
    }

    @Test func serversInAGroupShareTheRequestsOneServerEach() async throws {
        let broker = try await BrokerProcess()
        let client = try await EventBus.connect(socketPath: broker.socketPath)
        let first = try await EventBus.connect(socketPath: broker.socketPath)
        let second = try await EventBus.connect(socketPath: broker.socketPath)
        let firstLog = Log<Int>(), secondLog = Log<Int>()
        let a = serving(first, group: "squarers", log: firstLog)
        let b = serving(second, group: "squarers", log: secondLog)
        #expect(try await eventually { try await client.stats().subscriptions == 2 })
        for n in 0..<20 { #expect(try await client.request(Square(n: n)) == n * n) }
        #expect((firstLog.all + secondLog.all).sorted() == Array(0..<20), "each request served once")
        #expect(!firstLog.all.isEmpty && !secondLog.all.isEmpty, "both members served")
        await #expect(throws: EventBusError.invalidName("no spaces")) { try await client.serve(Square.self, group: "no spaces") { $0.n } }
        a.cancel()
        b.cancel()
        client.close()
        first.close()
        second.close()
        await broker.stop()
    }
}
