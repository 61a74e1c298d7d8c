// The client against real nats-server processes (Debian 12's 2.9.10 in CI):
// a header round trip through a 3-node cluster, echo:false, -ERRs that keep
// the connection, the max_payload refusal, failover from connect_urls and
// lame duck mode, and a whole-cluster outage with the buffer overflowing.
//
// Before editing: absence is asserted only after a sentinel that travelled
// the same path; interest takes a moment to cross routes, so a subscription
// on another node is settled with probes before the real messages go out.
@testable import EventBusNATS
import EventBusTestSupport
import Glibc
import Synchronization
import Testing

/// Collects every effect a client reports.
final class Recorder: Sendable {
    private let log = Mutex<[Effect]>([])

    var handler: Client.Handler { { [self] effect in log.withLock { $0.append(effect) } } }

    var effects: [Effect] { log.withLock { $0 } }

    /// Messages received on `subject`.
    func messages(_ subject: String) -> [Message] {
        effects.compactMap { if case .message(let m) = $0, m.subject == subject { m } else { nil } }
    }

    /// Messages received whose subject starts with `prefix`.
    func messages(prefix: String) -> [Message] {
        effects.compactMap { if case .message(let m) = $0, m.subject.hasPrefix(prefix) { m } else { nil } }
    }

    var linkUps: [(server: ServerAddress, info: ServerInfo, isReconnect: Bool)] {
        effects.compactMap { if case .linkUp(let s, let i, let r) = $0 { (s, i, r) } else { nil } }
    }

    var linkDowns: Int { effects.filter { if case .linkDown = $0 { true } else { false } }.count }

    var attemptsFailed: Int { effects.filter { if case .attemptFailed = $0 { true } else { false } }.count }

    var serverErrors: [(String, Bool)] {
        effects.compactMap { if case .serverError(let text, let closes) = $0 { (text, closes) } else { nil } }
    }
}

/// A started client on `urls` (no shuffling, fast backoff) and its recorder.
func startClient(_ urls: [String], name: String, echo: Bool = false, _ configure: (inout ClientConfiguration) -> Void = { _ in }) throws -> (Client, Recorder) {
    var configuration = ClientConfiguration(servers: urls.map { ServerAddress(url: $0)! }, connect: ConnectOptions(name: name, echo: echo))
    configuration.randomize = false
    configuration.backoff = Backoff(initial: .milliseconds(20), maximum: .milliseconds(200))
    configure(&configuration)
    let recorder = Recorder()
    let client = try Client(configuration: configuration, handler: recorder.handler)
    client.start()
    return (client, recorder)
}

/// Publishes probes on `subject` from `client` until `recorder` has one: the
/// subscription behind `recorder` is then known on the publisher's node.
func settle(_ client: Client, _ recorder: Recorder, _ subject: String) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while recorder.messages(subject).isEmpty {
        guard ContinuousClock.now < deadline else { throw TestFailure("no probe on \(subject) arrived within 10 s") }
        _ = client.publish(OutgoingMessage(subject: Subject(subject)!, payload: []))
        try await Task.sleep(for: .milliseconds(20))
    }
}

func text(_ message: Message) -> String { String(decoding: message.payload, as: UTF8.self) }

@Suite(.serialized, .enabled(if: NATSCluster.isAvailable, "nats-server is not installed (scripts/deps installs it)"))
struct LiveServerTests {
    @Test func headersAndPayloadCrossAThreeNodeClusterIntactAndEchoFalseIsHonoured() async throws {
        let cluster = try NATSCluster()
        let (a, ra) = try startClient([cluster.url(0)], name: "a")
        let (b, rb) = try startClient([cluster.url(2)], name: "b")
        defer { a.close(); b.close() }
        try await pollUntil("both links up") { ra.linkUps.count == 1 && rb.linkUps.count == 1 }
        #expect(ra.linkUps.first?.server.port == cluster.clientPorts[0] && rb.linkUps.first?.server.port == cluster.clientPorts[2])
        a.subscribe(Subject(pattern: "rt.>")!)
        b.subscribe(Subject(pattern: "rt.>")!)
        // A raw subscriber on node 2 sees the wire form.
        let raw = try TCPLineClient(port: cluster.clientPorts[1])
        _ = try raw.readLine()
        try raw.send("CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"protocol\":1}\r\nSUB rt.x 1\r\nPING\r\n")
        _ = try raw.readLine(until: { $0 == "PONG" })
        try await settle(a, rb, "rt.probe")
        try await settle(b, ra, "rt.probe2")

        var headers = Headers()
        headers.append("ce-source", "line\r\nInjected: yes")
        headers.append("ce-id", "50% \"off\" caf\u{E9}")
        headers.append("Nats-Msg-Id", "host-a:abc:1")
        let payload = bytes(#"{"n":1,"s":"caf\u00e9 ✓"}"#) + [0x0D, 0x0A, 0x00, 0xFF]
        #expect(a.publish(OutgoingMessage(subject: Subject("rt.x")!, headers: headers, payload: payload)) == .queued)
        #expect(b.publish(OutgoingMessage(subject: Subject("rt.sentinel")!, payload: bytes("s"))) == .queued)
        try await pollUntil("rt.x at b and the sentinel at a") { !rb.messages("rt.x").isEmpty && !ra.messages("rt.sentinel").isEmpty }

        let received = try #require(rb.messages("rt.x").first)
        #expect(received.headers == headers, "same names, case and values (CR LF included)")
        #expect(received.payload == payload, "payload byte for byte")
        #expect(rb.messages("rt.x").count == 1)
        #expect(ra.messages("rt.x").isEmpty && ra.messages("rt.probe").isEmpty, "echo:false: a never saw its own messages")
        #expect(rb.messages("rt.sentinel").isEmpty && rb.messages("rt.probe2").isEmpty)

        let line = try raw.readLine(until: { $0.hasPrefix("HMSG rt.x 1 ") }).line
        let sizes = line.split(separator: " ").suffix(2).compactMap { Int($0) }
        let body = try raw.readBytes(sizes[1] + 2)
        let block = String(decoding: body.prefix(sizes[0]), as: UTF8.self)
        #expect(block == "NATS/1.0\r\nce-source: line%0D%0AInjected:%20yes\r\nce-id: 50%25%20%22off%22%20caf%C3%A9\r\nNats-Msg-Id: host-a:abc:1\r\n\r\n")
        #expect(a.statistics.reconnects == 0 && a.statistics.published >= 2)
    }

    @Test func errorsThatKeepTheConnectionKeepItAndTheMaxPayloadIsEnforcedLocally() async throws {
        let cluster = try NATSCluster(count: 1, extraConfig: """
        max_payload: 4096
        authorization {
          users = [
            { user: "bridge", password: "pw", permissions: { publish: { deny: ["forbidden.>"] }, subscribe: { deny: ["secret.>"] } } }
          ]
        }
        """)
        let (client, recorder) = try startClient([cluster.url(0)], name: "errors", echo: true) {
            $0.connect.user = "bridge"
            $0.connect.password = "pw"
        }
        defer { client.close() }
        try await pollUntil("link up") { recorder.linkUps.count == 1 }
        let clientID = try #require(recorder.linkUps.first?.info.clientID)
        #expect(recorder.linkUps.first?.info.maxPayload == 4096)

        client.subscribe(Subject(unchecked: "foo..bar"))
        client.subscribe(Subject(pattern: "secret.x")!)
        _ = client.publish(OutgoingMessage(subject: Subject("forbidden.x")!, payload: bytes("no")))
        var headers = Headers()
        headers.append("k", "v")
        let block = headers.encoded().count
        let over = OutgoingMessage(subject: Subject("ok.big")!, headers: headers, payload: [UInt8](repeating: 0x41, count: 4097 - block))
        #expect(client.publish(over) == .tooLarge(size: 4097, limit: 4096))
        client.subscribe(Subject(pattern: "ok.>")!)
        let fits = OutgoingMessage(subject: Subject("ok.big")!, headers: headers, payload: [UInt8](repeating: 0x42, count: 4096 - block))
        #expect(client.publish(fits) == .queued)
        try await pollUntil("the message at exactly max_payload came back") { !recorder.messages("ok.big").isEmpty }
        try await pollUntil("three -ERRs") { recorder.serverErrors.count == 3 }

        #expect(recorder.serverErrors.map(\.0) == [
            "Invalid Subject",
            "Permissions Violation for Subscription to \"secret.x\"",
            "Permissions Violation for Publish to \"forbidden.x\"",
        ])
        #expect(recorder.serverErrors.allSatisfy { !$0.1 }, "none of them closes the connection")
        #expect(recorder.messages("ok.big").first?.payload.count == 4096 - block)
        #expect(recorder.linkUps.count == 1 && recorder.linkDowns == 0 && client.statistics.reconnects == 0)
        #expect(client.statistics.refusedTooLarge == 1)
        // Still the same connection: the server's client id has not changed.
        _ = client.publish(OutgoingMessage(subject: Subject("ok.after")!, payload: bytes("1")))
        try await pollUntil("a message after the errors") { !recorder.messages("ok.after").isEmpty }
        #expect(recorder.linkUps.map(\.info.clientID) == [clientID])

        // A wrong password is an error that closes the connection; the client keeps trying.
        let (intruder, intruderLog) = try startClient([cluster.url(0)], name: "intruder") {
            $0.connect.user = "bridge"
            $0.connect.password = "wrong"
        }
        defer { intruder.close() }
        try await pollUntil("two refused attempts") { intruderLog.serverErrors.count >= 2 }
        #expect(intruderLog.serverErrors.first?.0 == "Authorization Violation" && intruderLog.serverErrors.first?.1 == true)
        #expect(intruderLog.linkUps.isEmpty && !intruder.link.isClosedForTest)
    }

    @Test func killingTheConnectedNodeFailsOverToOneFromConnectURLsAndResubscribes() async throws {
        let cluster = try NATSCluster()
        // Seeded with node 1 only: nodes 2 and 3 are learnt from INFO.
        let (client, recorder) = try startClient([cluster.url(0)], name: "failover", echo: true)
        let (peer, _) = try startClient([cluster.url(1), cluster.url(2)], name: "peer")
        defer { client.close(); peer.close() }
        try await pollUntil("link up") { recorder.linkUps.count == 1 }
        #expect(Set(client.pool.entries.map(\.address.port)) == Set(cluster.clientPorts))
        client.subscribe(Subject(pattern: "fo.>")!)
        try await settle(peer, recorder, "fo.probe")

        try cluster.kill(0)
        try await pollUntil("the link went down") { recorder.linkDowns == 1 }
        for i in 1...20 { _ = client.publish(OutgoingMessage(subject: Subject("fo.gap")!, payload: bytes("\(i)"))) }
        try await pollUntil("reconnected") { recorder.linkUps.count == 2 }
        let second = recorder.linkUps[1]
        #expect(second.isReconnect && second.server.port != cluster.clientPorts[0])
        try await pollUntil("the messages held during the gap came back") { recorder.messages("fo.gap").count == 20 }
        #expect(recorder.messages("fo.gap").map(text) == (1...20).map(String.init), "in order")

        // The subscription was re-sent: the peer's messages reach it again.
        try await settle(peer, recorder, "fo.probe-after")
        for i in 1...10 { _ = peer.publish(OutgoingMessage(subject: Subject("fo.after")!, payload: bytes("\(i)"))) }
        try await pollUntil("the peer's messages after the failover") { recorder.messages("fo.after").count == 10 }
        #expect(recorder.messages("fo.after").map(text) == (1...10).map(String.init))

        // Lame duck mode on the node it moved to: it moves again, at once.
        let node = try #require(cluster.clientPorts.firstIndex(of: second.server.port))
        cluster.signal(node, SIGUSR2)
        try await pollUntil("moved away from the lame duck") { recorder.linkUps.count == 3 }
        #expect(recorder.effects.contains(.lameDuck(second.server)))
        #expect(recorder.linkUps[2].server.port != second.server.port && recorder.linkUps[2].server.port != cluster.clientPorts[0])
    }

    @Test func afterAWholeClusterOutageTheHeldMessagesArriveInOrderThenTheGapReport() async throws {
        let cluster = try NATSCluster()
        let (client, recorder) = try startClient([cluster.url(0), cluster.url(1), cluster.url(2)], name: "outage", echo: true) {
            $0.bufferLimitMessages = 50
            $0.gapReport = { OutgoingMessage(subject: Subject("out.dropped")!, payload: bytes("\($0.count) \($0.firstTag ?? 0)")) }
        }
        defer { client.close() }
        try await pollUntil("link up") { recorder.linkUps.count == 1 }
        client.subscribe(Subject(pattern: "out.>")!)

        try cluster.killAll()
        // It may fail over to a node not killed yet; once all are dead, attempts fail.
        try await pollUntil("connection attempts refused") { recorder.attemptsFailed >= 3 && !client.statistics.linkUp }
        let outcomes = (1...80).map { client.publish(OutgoingMessage(subject: Subject("out.e")!, payload: bytes("\($0)"), tag: UInt64($0))) }
        #expect(outcomes == Array(repeating: .held, count: 50) + Array(repeating: .dropped, count: 30))
        #expect(client.statistics.bufferedMessages == 50 && client.statistics.droppedBufferFull == 30)
        // Many failed passes go by while everything is down; the client never gives up.
        try await pollUntil("more than 30 failed attempts") { client.statistics.connectAttempts > 30 }
        #expect(!client.statistics.linkUp)

        try cluster.startAll()
        try await pollUntil("the report arrived") { !recorder.messages("out.dropped").isEmpty }
        let received = recorder.messages(prefix: "out.")
        #expect(received.map(\.subject) == Array(repeating: "out.e", count: 50) + ["out.dropped"])
        #expect(received.prefix(50).map(text) == (1...50).map(String.init), "held messages in publish order")
        #expect(received.last.map(text) == "30 51", "30 dropped, the first of them tagged 51")
        #expect(client.statistics.bufferedMessages == 0 && client.statistics.linkUp)
    }
}

extension LinkState {
    var isClosedForTest: Bool { self == .closed }
}
