// The client state machine, driven by hand: the handshake order, the order
// after a reconnect (SUBs, held messages, gap report, announcements, then new
// messages), the outbox bounds (drop-new, counted, first tag kept), the
// max_payload refusal at publish and at release, PING/PONG both ways and
// stale links, -ERR that closes or keeps the connection, lame duck mode, and
// the reconnect schedule (immediate failover, backoff after a failed pass,
// forever).
@testable import EventBusNATS
import Testing

/// A `ClientState` with a hand-turned clock and a view of what it writes.
struct Harness {
    var state: ClientState
    var now: Int64 = 1_000_000_000_000

    static let info = #"INFO {"server_id":"S","version":"2.9.10","proto":1,"headers":true,"max_payload":1048576,"client_id":1}"# + "\r\n"

    static func info(maxPayload: Int = 1_048_576, urls: [String] = [], ldm: Bool = false, headers: Bool = true) -> String {
        let list = urls.map { "\"\($0)\"" }.joined(separator: ",")
        return #"INFO {"server_id":"S","proto":1,"headers":\#(headers),"max_payload":\#(maxPayload),"connect_urls":[\#(list)],"ldm":\#(ldm)}"# + "\r\n"
    }

    init(servers: [String] = ["a:1", "b:2", "c:3"], _ configure: (inout ClientConfiguration) -> Void = { _ in }) {
        var configuration = ClientConfiguration(servers: servers.map { ServerAddress(url: $0)! }, connect: ConnectOptions(name: "test"))
        configuration.randomize = false
        configuration.randomSeed = 42
        configure(&configuration)
        state = ClientState(configuration: configuration)
    }

    mutating func advance(_ duration: Duration) { now += duration.nanoseconds }

    mutating func feed(_ text: String) -> [Effect] {
        state.received(Array(text.utf8).span.bytes, now: now).effects
    }

    /// Everything writable, marked written.
    mutating func written() -> String {
        var out: [UInt8] = []
        while state.hasWritableBytes {
            let chunk = state.writable(limit: 7)  // small pieces: partial writes across chunk boundaries
            state.didWrite(chunk.count)
            out += chunk
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// TCP up, INFO in, CONNECT+PING out, PONG in: the link is up.
    mutating func handshake(info: String = Harness.info) -> [Effect] {
        var effects = state.connectionEstablished(now: now).effects
        effects += feed(info)
        let out = written()
        #expect(out.hasPrefix("CONNECT {") && out.hasSuffix("}\r\nPING\r\n"), "handshake wrote \(out.debugDescription)")
        effects += feed("PONG\r\n")
        return effects
    }

    mutating func up() {
        #expect(state.start(now: now).effects == [.connect(address("a:1"))])
        let effects = handshake()
        #expect(effects.contains { if case .linkUp = $0 { true } else { false } })
    }
}

func message(_ subject: String, _ payload: String, tag: UInt64? = nil, headers: [(String, String)] = []) -> OutgoingMessage {
    var block: Headers? = nil
    if !headers.isEmpty {
        var h = Headers()
        for (name, value) in headers { h.append(name, value) }
        block = h
    }
    return OutgoingMessage(subject: Subject(subject)!, headers: block, payload: bytes(payload), tag: tag)
}

func isLinkUp(_ effect: Effect, reconnect: Bool) -> Bool {
    if case .linkUp(_, _, let isReconnect) = effect { return isReconnect == reconnect }
    return false
}

@Suite struct NATSClientStateTests {
    @Test func nothingIsWrittenBeforeInfoAndNothingButTheHandshakeBeforePong() {
        var h = Harness()
        #expect(h.state.start(now: h.now).effects == [.connect(address("a:1"))])
        #expect(h.state.connectionEstablished(now: h.now).effects.isEmpty)
        let sid = h.state.subscribe(Subject(pattern: "x.>")!)
        #expect(h.state.publish(message("x.a", "1")) == .held)
        #expect(h.written() == "", "nothing before INFO")
        #expect(h.feed(Harness.info).isEmpty)
        let handshake = h.written()
        #expect(handshake.hasSuffix("\r\nPING\r\n") && !handshake.contains("SUB") && !handshake.contains("PUB"))
        let effects = h.feed("PONG\r\n")
        #expect(effects.count == 1 && isLinkUp(effects[0], reconnect: false))
        #expect(h.written() == "SUB x.> \(sid)\r\nPUB x.a 1\r\n1\r\n")
        #expect(h.state.publish(message("x.b", "2")) == .queued)
        #expect(h.written() == "PUB x.b 1\r\n2\r\n")
        #expect(h.state.statistics.linkUp && h.state.statistics.server == address("a:1"))
    }

    @Test func afterAReconnectSubsComeFirstThenHeldMessagesInOrderThenTheGapReportThenAnnouncementsThenNewMessages() {
        var h = Harness {
            $0.bufferLimitMessages = 3
            $0.gapReport = { summary in message("ctl.dropped", "\(summary.count):\(summary.firstTag ?? 0)") }
            $0.announcements = [message("ctl.hello", "hi")]
        }
        h.up()
        _ = h.state.subscribe(Subject(pattern: "a.>")!)
        _ = h.state.subscribe(Subject(pattern: "b.*")!)
        #expect(h.written() == "PUB ctl.hello 2\r\nhi\r\nSUB a.> 1\r\nSUB b.* 2\r\n", "the announcement follows every link-up")
        h.advance(.seconds(5))
        let lost = h.state.connectionLost(reason: "reset", now: h.now).effects
        #expect(lost == [.linkDown(reason: "reset"), .connect(address("b:2"))], "a healthy link fails over at once")
        let outcomes = (1...5).map { h.state.publish(message("e.x", "\($0)", tag: UInt64($0))) }
        #expect(outcomes == [.held, .held, .held, .dropped, .dropped])
        #expect(h.state.statistics.droppedBufferFull == 2 && h.state.statistics.bufferedMessages == 3)
        let effects = h.handshake()
        #expect(effects.contains { isLinkUp($0, reconnect: true) })
        #expect(h.state.publish(message("e.x", "6", tag: 6)) == .dropped, "the released messages still fill the outbox until written")
        #expect(h.written() == [
            "SUB a.> 1", "SUB b.* 2",
            "PUB e.x 1", "1", "PUB e.x 1", "2", "PUB e.x 1", "3",
            "PUB ctl.dropped 3", "2:4",
            "PUB ctl.hello 2", "hi", "",
        ].joined(separator: "\r\n"))
        #expect(h.state.publish(message("e.x", "7", tag: 7)) == .queued)
        #expect(h.written() == "PUB ctl.dropped 3\r\n1:6\r\nPUB e.x 1\r\n7\r\n")
        #expect(h.state.statistics.reconnects == 1 && h.state.statistics.bufferedMessages == 0)
    }

    @Test func theByteBoundDropsNewMessagesTooAndTheNextThatFitsIsPrecededByTheReport() {
        var h = Harness {
            $0.bufferLimitBytes = 44
            $0.gapReport = { summary in message("gap", "\(summary.count):\(summary.firstTag ?? 0)") }
        }
        h.up()
        // Connected, but the socket takes nothing: the outbox fills.
        #expect(h.state.publish(message("s", String(repeating: "x", count: 20), tag: 1)) == .queued)  // 32 bytes encoded
        #expect(h.state.publish(message("s", String(repeating: "y", count: 20), tag: 2)) == .dropped)
        #expect(h.state.publish(message("s", "z", tag: 3)) == .queued)  // 12 bytes: fits (44)
        #expect(h.state.publish(message("s", "w", tag: 4)) == .dropped)
        #expect(h.written() == "PUB s 20\r\n\(String(repeating: "x", count: 20))\r\nPUB gap 3\r\n1:2\r\nPUB s 1\r\nz\r\n")
        #expect(h.state.publish(message("s", "v", tag: 5)) == .queued)
        #expect(h.written() == "PUB gap 3\r\n1:4\r\nPUB s 1\r\nv\r\n")
        #expect(h.state.statistics.droppedBufferFull == 2 && h.state.statistics.published == 3)
    }

    @Test func aMessageOverMaxPayloadHeadersIncludedIsRefusedAndTheConnectionStays() {
        var h = Harness()
        #expect(h.state.start(now: h.now).effects.count == 1)
        _ = h.handshake(info: Harness.info(maxPayload: 100))
        var headers = Headers()
        headers.append("k", "v")
        let blockSize = headers.encoded().count
        let fits = message("s", String(repeating: "x", count: 100 - blockSize), headers: [("k", "v")])
        let over = message("s", String(repeating: "x", count: 101 - blockSize), headers: [("k", "v")])
        #expect(h.state.publish(over) == .tooLarge(size: 101, limit: 100))
        #expect(h.state.publish(fits) == .queued)
        #expect(h.written().hasPrefix("HPUB s \(blockSize) 100\r\n"))
        #expect(h.state.statistics.refusedTooLarge == 1 && h.state.isConnected)
    }

    @Test func aHeldMessageTooLargeForTheNextServerIsRefusedAtRelease() {
        var h = Harness()
        h.up()
        h.advance(.seconds(5))
        _ = h.state.connectionLost(reason: "gone", now: h.now)
        #expect(h.state.publish(message("s", String(repeating: "x", count: 500), tag: 9)) == .held)
        #expect(h.state.publish(message("s", "small", tag: 10)) == .held)
        let effects = h.handshake(info: Harness.info(maxPayload: 100))
        #expect(effects.contains(.refusedTooLarge(subject: Subject("s")!, size: 500, limit: 100, tag: 9)))
        #expect(h.written() == "PUB s 5\r\nsmall\r\n")
        #expect(h.state.statistics.refusedTooLarge == 1)
    }

    @Test func pingsAreAnsweredAndSentAndTwoUnansweredCloseTheLink() {
        var h = Harness { $0.pingInterval = .seconds(10) }
        h.up()
        #expect(h.feed("PING\r\n").isEmpty)
        #expect(h.written() == "PONG\r\n")
        #expect(h.state.nextDeadline == h.now + Duration.seconds(10).nanoseconds)
        h.advance(.seconds(10))
        #expect(h.state.tick(now: h.now).effects.isEmpty)
        #expect(h.written() == "PING\r\n")
        #expect(h.feed("PONG\r\n").isEmpty, "a PONG resets the count")
        for _ in 0..<2 {
            h.advance(.seconds(10))
            #expect(h.state.tick(now: h.now).effects.isEmpty)
            #expect(h.written() == "PING\r\n")
        }
        h.advance(.seconds(10))
        #expect(h.state.tick(now: h.now).effects == [
            .closeConnection, .linkDown(reason: "stale connection: 2 PINGs unanswered"), .connect(address("b:2")),
        ])
    }

    @Test func aServerThatPingsWithoutReadingThePongsIsLeft() {
        var h = Harness()
        h.up()
        h.advance(.seconds(5))
        let effects = h.feed(String(repeating: "PING\r\n", count: 200_000))
        #expect(effects.contains(.linkDown(reason: "the server sends PINGs faster than it reads the PONGs")))
        #expect(effects.last == .connect(address("b:2")))
    }

    @Test(arguments: [
        ("Invalid Subject", false), ("Invalid Publish Subject", false),
        ("Permissions Violation for Subscription to \"x.y\"", false), ("Permissions Violation for Publish to \"x\"", false),
        ("Maximum Payload Violation", true), ("maximum control line exceeded", true), ("Unknown Protocol Operation", true),
        ("Authorization Violation", true), ("Stale Connection", true), ("Slow Consumer", true), ("Parser Error", true),
        ("Something New", true),
    ])
    func errorsAreSortedIntoThoseThatCloseTheConnectionAndThoseThatDoNot(text: String, closes: Bool) {
        #expect(ErrorClassification.closesConnection(text) == closes)
        var h = Harness()
        h.up()
        h.advance(.seconds(5))
        let effects = h.feed("-ERR '\(text)'\r\n")
        #expect(effects.first == .serverError(text, closesConnection: closes))
        #expect(h.state.isConnected == !closes)
        if closes { #expect(effects.dropFirst().first == .closeConnection && effects.last == .connect(address("b:2"))) }
    }

    @Test func lameDuckModeMovesToAnotherServer() {
        var h = Harness(servers: ["a:1"])
        h.up()
        #expect(h.feed(Harness.info(urls: ["a:1", "n2:2", "n3:3"])) == [.discovered([address("n2:2"), address("n3:3")])])
        h.advance(.seconds(5))
        let effects = h.feed(Harness.info(urls: ["n2:2", "n3:3"], ldm: true))
        #expect(effects == [
            .lameDuck(address("a:1")), .closeConnection, .linkDown(reason: "nats://a:1 entered lame duck mode"), .connect(address("n2:2")),
        ])
        #expect(h.state.pool.entries.map(\.address.hostPort) == ["n2:2", "n3:3", "a:1"], "the seed stays, at the end")
    }

    @Test func failoverIsImmediateWithinAPassAndBacksOffAfterAWholePassFailedForever() {
        var h = Harness { $0.backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(3), jitter: 0) }
        #expect(h.state.start(now: h.now).effects == [.connect(address("a:1"))])
        var delays: [Int64] = []
        for pass in 1...200 {
            for server in ["a:1", "b:2", "c:3"] {
                let effects = h.state.connectFailed(reason: "refused", now: h.now)
                #expect(effects.effects.first == .attemptFailed(address(server), reason: "refused"))
                if server != "c:3" {
                    #expect(effects.effects.last == .connect(address(server == "a:1" ? "b:2" : "c:3")), "pass \(pass)")
                } else {
                    #expect(effects.effects.count == 1, "after the last server of the pass: wait")
                }
            }
            guard let deadline = h.state.nextDeadline else { Issue.record("no deadline"); return }
            delays.append((deadline - h.now) / 1_000_000)
            #expect(h.state.tick(now: deadline - 1).effects.isEmpty)
            h.now = deadline
            #expect(h.state.tick(now: h.now).effects == [.connect(address("a:1"))])
        }
        #expect(Array(delays.prefix(7)) == [100, 200, 400, 800, 1600, 3000, 3000])
        #expect(delays.last == 3000 && !h.state.isClosed, "still trying after 600 failed attempts")
        #expect(h.state.statistics.connectAttempts == 601)
    }

    @Test func aHealthyLinkStartsTheBackoffAfreshAndAFlappingOneDoesNot() {
        var h = Harness { $0.backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(30), jitter: 0) }
        h.up()
        // Flapping: every server accepts and drops at once, so passes fail and delays grow.
        var delays: [Int64] = []
        for _ in 0..<3 {
            for _ in 0..<3 {
                h.advance(.milliseconds(10))
                let effects = h.state.connectionLost(reason: "reset", now: h.now).effects
                if let next = effects.last, case .connect = next {
                    _ = h.handshake()
                    continue
                }
                delays.append((h.state.nextDeadline! - h.now) / 1_000_000)
                h.now = h.state.nextDeadline!
                _ = h.state.tick(now: h.now)
                _ = h.handshake()
            }
        }
        #expect(delays == [100, 200, 400])
        // Up for longer than healthyLinkDuration: the next loss fails over at once and the next failed pass waits 100 ms again.
        h.advance(.seconds(2))
        let afterHealthy = h.state.connectionLost(reason: "reset", now: h.now).effects
        #expect(afterHealthy.count == 2 && afterHealthy[0] == .linkDown(reason: "reset"))
        _ = h.state.connectFailed(reason: "x", now: h.now)
        _ = h.state.connectFailed(reason: "x", now: h.now)
        #expect(h.state.connectFailed(reason: "x", now: h.now).effects.count == 1)
        #expect((h.state.nextDeadline! - h.now) / 1_000_000 == 100)
    }

    @Test func aProtocolViolationDropsTheConnectionAndMessagesBeforeItAreDelivered() {
        var h = Harness()
        h.up()
        let sid = h.state.subscribe(Subject(pattern: ">")!)
        let effects = h.feed("MSG a \(sid) 2\r\nhi\r\nBOGUS\r\nPING\r\n")
        #expect(effects.first == .message(Message(subject: "a", sid: sid, payload: bytes("hi"))))
        #expect(effects.contains(.closeConnection))
        #expect(effects.contains(.linkDown(reason: "protocol violation: unknown operation \"BOGUS\"")))
        #expect(h.state.statistics.received == 1)
    }

    @Test func aHandshakeThatDoesNotFinishInTimeIsAFailedAttempt() {
        var h = Harness { $0.connectTimeout = .seconds(2) }
        _ = h.state.start(now: h.now)
        _ = h.state.connectionEstablished(now: h.now)
        _ = h.feed(Harness.info)
        h.advance(.seconds(2))
        let effects = h.state.tick(now: h.now).effects
        #expect(effects.first == .closeConnection)
        #expect(effects.last == .connect(address("b:2")))
    }

    @Test func aServerWithoutHeadersIsLeft() {
        var h = Harness()
        _ = h.state.start(now: h.now)
        _ = h.state.connectionEstablished(now: h.now)
        let effects = h.feed(Harness.info(headers: false))
        #expect(effects.first == .closeConnection && effects.last == .connect(address("b:2")))
        #expect(h.written() == "", "no CONNECT to a server that cannot take HPUB")
    }

    @Test func messagesOverThePayloadBoundAreSkippedAndCounted() {
        var h = Harness()
        _ = h.state.start(now: h.now)
        _ = h.handshake(info: Harness.info(maxPayload: 10))
        let effects = h.feed("MSG big 1 11\r\n01234567890\r\nMSG ok 1 1\r\nx\r\n")
        #expect(effects == [.skippedOversized(subject: "big", bytes: 11), .message(Message(subject: "ok", sid: SubscriptionID(1), payload: bytes("x")))])
        #expect(h.state.statistics.skippedOversized == 1 && h.state.isConnected)
    }

    @Test func unsubscribingSendsUnsubAndTheSubscriptionIsNotResent() {
        var h = Harness()
        h.up()
        let keep = h.state.subscribe(Subject(pattern: "k")!)
        let gone = h.state.subscribe(Subject(pattern: "g")!)
        h.state.unsubscribe(gone)
        #expect(h.written() == "SUB k \(keep)\r\nSUB g \(gone)\r\nUNSUB \(gone)\r\n")
        h.advance(.seconds(5))
        _ = h.state.connectionLost(reason: "x", now: h.now)
        _ = h.handshake()
        #expect(h.written() == "SUB k \(keep)\r\n")
    }

    @Test func aPartlyWrittenMessageIsSentAgainWholeAfterAReconnect() {
        var h = Harness()
        h.up()
        _ = h.state.publish(message("s", "0123456789"))
        let part = h.state.writable(limit: 5)
        h.state.didWrite(part.count)
        h.advance(.seconds(5))
        _ = h.state.connectionLost(reason: "x", now: h.now)
        #expect(h.state.statistics.bufferedMessages == 1)
        _ = h.handshake()
        #expect(h.written() == "PUB s 10\r\n0123456789\r\n")
    }

    @Test func closingStopsEverything() {
        var h = Harness()
        h.up()
        _ = h.state.publish(message("s", "x"))
        #expect(h.state.close().effects == [.closeConnection])
        #expect(h.state.publish(message("s", "y")) == .closed)
        #expect(!h.state.hasWritableBytes && h.state.nextDeadline == nil)
        #expect(h.state.connectionLost(reason: "late", now: h.now).effects.isEmpty)
    }
}
