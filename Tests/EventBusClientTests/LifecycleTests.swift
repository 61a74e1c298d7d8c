// Integration: lifetimes and failures against a real `eventbusd`: weak
// observers released without a retain cycle and their broker subscription
// withdrawn, streams that unsubscribe when iteration ends, reconnecting
// across a broker restart, `dropped` notices, typed errors.
import EventBus
import EventBusTestSupport
import Foundation
import Testing

/// A plain observer: `Sendable`, not tied to an actor.
final class Counter: Sendable {
    let seen = Log<String>()
}

@Suite struct LifecycleTests {
    @Test func aReleasedObserverIsFreedAndItsBrokerSubscriptionCountDrops() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "lifetimes")
        var first: Counter? = Counter()
        var second: Counter? = Counter()
        let keeper = Counter()
        weak let firstReleased = first
        weak let secondReleased = second
        bus.subscribe(first!, to: CurrencyChanged.self) { counter, event in counter.seen.append(event.code) }
        bus.subscribe(second!, to: CurrencyChanged.self) { counter, event in counter.seen.append(event.code) }
        bus.subscribe(keeper, to: PostLikeChanged.self) { counter, event in counter.seen.append("\(event.post)") }
        try await bus.ping()
        // Two observers of currency.changed share one broker subscription.
        #expect(try await bus.stats().subscriptions == 2)

        first = nil
        second = nil
        #expect(firstReleased == nil && secondReleased == nil, "the bus holds observers weakly: no retain cycle")
        // Within the sweep interval (250 ms) the library withdraws the pattern.
        #expect(try await eventually { try await bus.stats().subscriptions == 1 })
        #expect(bus.subscribedPatterns == ["post.like"])
        bus.close()
        await broker.stop()
    }

    @Test func aStreamUnsubscribesWhenItsIterationEnds() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "streams")
        let publisher = try await EventBus.connect(socketPath: broker.socketPath, clientName: "publisher")
        let orders = try bus.events(matching: "order.>")
        let typed = bus.events(of: CurrencyChanged.self)
        try await bus.ping()
        #expect(try await bus.stats().subscriptions == 2)

        let consumer = Task {
            var seen: [String] = []
            for try await event in orders {
                seen.append("\(event.type) \(event.dataString) from \(event.metadata.source)")
                if seen.count == 2 { break }
            }
            return seen
        }
        try await publisher.publish(type: "order.created", json: Array(#"{"id": 1}"#.utf8))
        try await publisher.publish(type: "order.paid.card", data: ["id": 1])
        #expect(try await consumer.value == [#"order.created {"id": 1} from publisher"#, #"order.paid.card {"id":1} from publisher"#])
        #expect(await eventually { bus.subscribedPatterns == ["currency.changed"] })

        let reader = Task { () throws(EventBusError) -> Delivery<CurrencyChanged>? in
            for try await delivery in typed { return delivery }
            return nil
        }
        let receipt = try await publisher.publish(CurrencyChanged(code: "CHF"), source: "settings", id: "change-1")
        let delivery = try await reader.value
        #expect(delivery?.event == CurrencyChanged(code: "CHF"))
        #expect(delivery?.metadata.seq == receipt.seq)
        #expect(delivery?.metadata.source == "settings" && delivery?.metadata.id == "change-1")
        #expect(delivery?.metadata.pid == getpid() && delivery?.metadata.uid == getuid())
        #expect(try await eventually { try await bus.stats().subscriptions == 0 })
        publisher.close()
        bus.close()
        await broker.stop()
    }

    @Test func itReconnectsAfterTheBrokerRestartsResubscribesAndSendsWaitingPublishes() async throws {
        let broker = try await BrokerProcess()
        var configuration = EventBus.Configuration(bus: .path(broker.socketPath), clientName: "survivor")
        configuration.reconnect = EventBus.ReconnectPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200))
        configuration.whileDisconnected = .wait(upTo: .seconds(30), maxWaiting: 10)
        let bus = try await EventBus.connect(configuration)
        let notices = NoticeLog(bus)
        let view = Counter()
        bus.subscribe(view, to: CurrencyChanged.self) { view, event in view.seen.append(event.code) }
        let firstInstance = bus.connectionInfo?.instance
        try await bus.ping()

        await broker.stop()
        #expect(await eventually { notices.contains { if case .disconnected = $0 { true } else { false } } })
        #expect(!bus.isConnected)
        let waiting = Task { try await bus.publish(type: "audit.note", data: ["text": "written while the broker was down"]) }
        await #expect(throws: EventBusError.self) { try await bus.ping() }

        try await broker.start()
        #expect(await eventually { bus.isConnected })
        #expect(bus.connectionInfo?.instance != firstInstance, "a new broker run")
        let receipt = try await waiting.value
        #expect(receipt.seq >= 1)
        try await bus.ping()
        #expect(try await bus.stats().subscriptions == 1, "subscribed again after the restart")

        let settings = try await runProduct("settings-service", ["--socket", broker.socketPath, "JPY"])
        #expect(settings.status == 0, "stderr: \(settings.stderr)")
        #expect(await eventually { view.seen.all == ["JPY"] })
        #expect(await eventually { notices.log.all.filter { if case .connected = $0 { true } else { false } }.count == 1 }, "one reconnect notice")
        bus.close()
        await broker.stop()
    }

    @Test func publishingWhileDisconnectedFailsAtOnceUnderPolicyFail() async throws {
        let broker = try await BrokerProcess()
        var configuration = EventBus.Configuration(bus: .path(broker.socketPath))
        configuration.whileDisconnected = .fail
        configuration.reconnect = EventBus.ReconnectPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(100))
        let bus = try await EventBus.connect(configuration)
        await broker.stop()
        #expect(await eventually { !bus.isConnected })
        await #expect {
            try await bus.publish(CurrencyChanged(code: "EUR"))
        } throws: { error in
            guard case .unavailable(let path, _) = error as? EventBusError else { return false }
            return path == broker.socketPath
        }
        bus.close()
        await #expect(throws: EventBusError.closed) { try await bus.publish(CurrencyChanged(code: "EUR")) }
    }

    @Test func connectingWhereNoBrokerListensNamesThePathTried() async {
        let path = "/tmp/ebc-missing-\(UInt32.random(in: 0...UInt32.max))/bus.sock"
        await #expect {
            try await EventBus.connect(socketPath: path)
        } throws: { error in
            guard case .unavailable(let tried, let reason) = error as? EventBusError else { return false }
            return tried == path && reason.contains("No such file or directory") && "\(error)".contains(path)
        }
        await #expect(throws: EventBusError.invalidClientName("bad name")) {
            try await EventBus.connect(socketPath: path, clientName: "bad name")
        }
    }

    /// Issue 23: root resolves to the system bus (PROTOCOL.md "Transport")
    /// even with a user bus at `$XDG_RUNTIME_DIR`; the error says it is there.
    @Test(.enabled(if: geteuid() == 0 && access("/run/eventbus/bus.sock", F_OK) != 0, "needs root and no system bus"))
    func rootFailingTheSystemBusIsToldOfTheUserBus() async throws {
        let directory = try TemporaryDirectory(prefix: "ebc-")
        let runtime = directory.path
        try FileManager.default.createDirectory(atPath: runtime + "/eventbus", withIntermediateDirectories: false)
        let broker = try EventBusTestSupport.BrokerProcess(arguments: ["--log-level", "warning"], socketPath: runtime + "/eventbus/bus.sock")
        defer { _ = broker.terminate(timeout: .seconds(5)) }
        await #expect {
            try await EventBus.connect(EventBus.Configuration(bus: .automatic, environment: ["XDG_RUNTIME_DIR": runtime]))
        } throws: { error in
            "\(error)".hasSuffix("(a user bus is at \(runtime)/eventbus/bus.sock, but root gets the system bus unless it asks: use Configuration(bus: .user))")
        }
        let bus = try await EventBus.connect(EventBus.Configuration(bus: .user, environment: ["XDG_RUNTIME_DIR": runtime]))
        bus.close()
    }

    /// What a socket-activated broker that failed to start looks like: the
    /// connection is accepted and closed without a byte.
    @Test func aBrokerThatClosesAtOnceIsReportedWithWhereToLook() async throws {
        let directory = try TemporaryDirectory(prefix: "ebc-")
        let custom = try ClosingListener(path: directory.file("bus.sock"))
        defer { custom.stop() }
        await #expect {
            try await EventBus.connect(socketPath: custom.path)
        } throws: { error in
            "\(error)" == "event bus unavailable at \(custom.path): the broker closed the connection before answering: it may have exited (see its standard error or log)"
        }

        try FileManager.default.createDirectory(atPath: directory.file("eventbus"), withIntermediateDirectories: false)
        let user = try ClosingListener(path: directory.file("eventbus/bus.sock"))
        defer { user.stop() }
        let configuration = EventBus.Configuration(bus: .user, environment: ["XDG_RUNTIME_DIR": directory.path])
        await #expect {
            try await EventBus.connect(configuration)
        } throws: { error in
            "\(error)".hasSuffix("before answering: it may have failed to start (see 'systemctl --user status eventbus.service' and 'journalctl --user -u eventbus')")
        }
    }

    @Test func theBrokersDroppedNoticesAndRefusalsSurfaceWithTheirCode() async throws {
        let broker = try await BrokerProcess(arguments: ["--max-outbound", "1024", "--max-frame", "4096"])
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "slow")
        let notices = NoticeLog(bus)
        let blobs = try bus.events(matching: "blob.*")
        let publisher = try await EventBus.connect(socketPath: broker.socketPath, clientName: "fast")
        try await bus.ping()

        // An event bigger than the subscriber's outbound limit is dropped for it.
        try await publisher.publish(type: "blob.big", data: String(repeating: "x", count: 2000))
        try await publisher.publish(type: "blob.small", data: 1)
        var iterator = blobs.makeAsyncIterator()
        let next = try await iterator.next()
        #expect(next?.type == "blob.small")
        #expect(await eventually { notices.contains { if case .dropped(count: 1, _) = $0 { true } else { false } } })

        // A request over --max-frame is answered without `req`: it fails the publish that caused it.
        await #expect {
            try await publisher.publish(type: "blob.huge", data: String(repeating: "y", count: 8000))
        } throws: { error in
            guard case .protocolError(let code, _) = error as? EventBusError else { return false }
            return code == .frameTooLarge
        }
        try await publisher.ping()
        await #expect(throws: EventBusError.invalidName("eventbus.stats")) { try await publisher.publish(type: "eventbus.stats", data: 1) }
        #expect(throws: EventBusError.invalidName("order.>.x")) { try bus.events(matching: "order.>.x") }
        publisher.close()
        bus.close()
        await broker.stop()
    }

    @Test func anEventThatDoesNotDecodeIsSkippedAndReported() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath, clientName: "strict")
        let notices = NoticeLog(bus)
        let view = Counter()
        bus.subscribe(view, to: CurrencyChanged.self) { view, event in view.seen.append(event.code) }
        let publisher = try await EventBus.connect(socketPath: broker.socketPath, clientName: "sloppy")
        try await bus.ping()

        try await publisher.publish(type: "currency.changed", json: Array(#"{"code": 978}"#.utf8))
        try await publisher.publish(CurrencyChanged(code: "EUR"))
        #expect(await eventually { view.seen.all == ["EUR"] })
        #expect(await eventually {
            notices.contains {
                if case .undecodable(.decodingFailed(type: "currency.changed", let reason)) = $0 { reason.contains("code") } else { false }
            }
        })
        publisher.close()
        bus.close()
        await broker.stop()
    }
}
