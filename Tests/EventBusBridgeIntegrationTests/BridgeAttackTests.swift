// Hostile local users against the link to NATS (docs/RELIABILITY.md "Hostile
// users, fifth round"): what another uid can make the bridge spend through
// what it may do on its own bus. Two brokers bridged through a real NATS
// cluster (the bridges as processes, or the links inside the brokers), the
// attacker's connections on A made as uid 4321 through setpriv.
//
// Before editing: "the link is not stalled" is asserted as things that must
// cross it (a request reaching the attacker's server, root's events), each
// waited for with `untilArrived`; the bound is that wait's timeout, far
// beyond the milliseconds the link needs and far below the minutes the
// quadratic pattern minimisation took.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

extension BridgeSuites {
    @Suite("eventbus-bridge under a hostile local user", .serialized,
           .enabled(if: NATSCluster.isAvailable && getuid() == 0 && findInPath("setpriv") != nil, "needs nats-server, root and setpriv"))
    struct BridgeAttackTests {
        /// Serving patterns the attacker holds (its per-connection limit is 4,096).
        static let patterns = 4_000

        /// The attacker's `i`th serving pattern: long, none covering another.
        static func pattern(_ i: Int) -> String { "svc.p\(i).\(String(repeating: "x", count: 200))" }

        @Test(arguments: BridgeMode.allCases)
        func anotherUIDsThousandsOfServingPatternsDoNotStallTheLink(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: ["--import-requests", "svc.>"], extraB: ["--export-requests", "svc.>"]) { buses in
                chmod(buses.a.directory.path, 0o755)  // uid 4321 reaches the 0666 socket
                let attacker = try #require(try connectAs(uid: 4321, path: buses.a.socketPath).first)
                var frames = ""
                for i in 0..<Self.patterns {
                    frames += #"{"op":"subscribe","type":"\#(Self.pattern(i))","serve":true}"# + "\n"
                }
                try attacker.sendRaw(frames)
                #expect(try attacker.settle(timeout: .seconds(60)).isEmpty, "every serving subscription taken, silently")

                // A's link watches svc.> and learns the 4,000 patterns: a request
                // for the last one, asked on B, reaches the attacker's server.
                let requester = try buses.b.connect()
                let last = Self.pattern(Self.patterns - 1)
                var asked = 0
                try untilArrived("a request for the last serving pattern to reach uid 4321's server through A's link", timeout: .seconds(30)) {
                    asked += 1
                    try requester.send(#"{"op":"request","type":"\#(last)","timeout":2000,"req":"q\#(asked)"}"#)
                    let answer = try requester.readFrame(timeout: .seconds(10))
                    #expect(answer.string("req") == "q\(asked)", "\(answer)")
                    guard let request = try? attacker.readFrame(timeout: .milliseconds(300)) else { return false }
                    #expect(request.op == "request" && request.type == last, "\(request)")
                    return true
                }

                // Churning one more serving pattern makes the link list all of them
                // again each time; root's events still cross.
                var churn = ""
                for _ in 0..<50 {
                    churn += #"{"op":"subscribe","type":"svc.churn","serve":true}"# + "\n"
                    churn += #"{"op":"unsubscribe","type":"svc.churn","serve":true}"# + "\n"
                }
                try attacker.sendRaw(churn)
                try buses.warmUp(from: buses.a, to: buses.b, type: "probe.after")
                _ = try attacker.settle(timeout: .seconds(60))
                try buses.warmUp(from: buses.a, to: buses.b, type: "probe.settled")
            }
        }

        /// (attacker7) Requests another uid on B asks of A's servers take
        /// room in A's link: it asks A's broker for them on one connection,
        /// whose pending requests are bounded (`--max-pending-requests`,
        /// 1024). uid 4321 on B asks 1,200 requests A's server leaves
        /// unanswered, with a deadline two minutes away; root's request on B
        /// to another server of A must still be answered (before: A's broker
        /// refused it, `limit`, until the attacker's deadlines passed).
        @Test(arguments: BridgeMode.allCases)
        func anotherUIDsUnansweredRemoteRequestsLeaveRoomForOthers(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: ["--import-requests", "svc.>"], extraB: ["--export-requests", "svc.>"]) { buses in
                let silent = try buses.a.connect()  // serves svc.slow, never reads
                let ok = try silent.request(#"{"op":"subscribe","type":"svc.slow","serve":true,"req":"s"}"#)
                try #require(ok.op == "ok", "\(ok)")
                let server = try buses.a.connect()
                try #require(try server.request(#"{"op":"subscribe","type":"svc.fast","serve":true,"req":"s"}"#).op == "ok")
                let requester = try buses.b.connect()
                var n = 0
                func askFast(serverWait: Duration = .seconds(2)) throws -> Frame {
                    n += 1
                    try requester.send(#"{"op":"request","type":"svc.fast","timeout":30000,"req":"f\#(n)"}"#)
                    if let request = try? server.readFrame(timeout: serverWait), request.op == "request", let token = request.string("reply") {
                        try server.send(#"{"op":"reply","to":"\#(token)","data":"fast"}"#)
                    }
                    return try requester.readFrame(timeout: .seconds(40))
                }
                try untilArrived("root's request on B answered by A's server") { try askFast().op == "ok" }
                try untilArrived("svc.slow served on A as seen from B") {
                    try requester.send(#"{"op":"request","type":"svc.slow","timeout":2000,"req":"probe"}"#)
                    return try requester.readFrame(timeout: .seconds(15)).code == "timeout"
                }

                chmod(buses.b.directory.path, 0o755)  // uid 4321 reaches the 0666 socket
                let attackers = try connectAs(uid: 4321, path: buses.b.socketPath, count: 2)
                let perConnection = 600
                for (c, attacker) in attackers.enumerated() {
                    var frames = ""
                    for i in 0..<perConnection {
                        frames += #"{"op":"request","type":"svc.slow","timeout":120000,"req":"a\#(c)-\#(i)"}"# + "\n"
                    }
                    try attacker.sendRaw(frames)
                }
                // B's broker has routed all 1,200 to its link: root's request is behind them on the same path.
                var limited = 0
                for attacker in attackers {
                    for frame in try attacker.settle(timeout: .seconds(60)) {
                        #expect(frame.code == "limit" && frame.string("message")?.contains("on node a") == true, "only A refuses: \(frame)")
                        limited += 1
                    }
                }
                let answer = try askFast(serverWait: .seconds(20))
                #expect(answer.op == "ok", "root's request on B, behind 1,200 of uid 4321's: \(answer)")
                // The attacker's own requests past its share of A's link are refused at once.
                try untilArrived("uid 4321's requests past its share refused", timeout: .seconds(60)) {
                    for attacker in attackers {
                        if let frame = try? attacker.readFrame(timeout: .milliseconds(200)), frame.code == "limit" { limited += 1 }
                    }
                    return limited >= 2 * perConnection - 1024 / 2
                }
            }
        }
        /// (attacker7) Another uid's request whose data is over NATS's
        /// `max_payload` never reaches NATS (which would close the link's
        /// whole connection): the requester is answered at once, and the
        /// next request crosses on the same connection.
        @Test(arguments: BridgeMode.allCases)
        func anotherUIDsOversizedRequestIsRefusedAndTheLinkStaysUp(mode: BridgeMode) throws {
            try withBridgedBuses(mode, natsConfig: "max_payload: 65536", extraA: ["--import-requests", "svc.>"], extraB: ["--export-requests", "svc.>"]) { buses in
                let server = try buses.a.connect()
                try #require(try server.request(#"{"op":"subscribe","type":"svc.echo","serve":true,"req":"s"}"#).op == "ok")
                chmod(buses.b.directory.path, 0o755)  // uid 4321 reaches the 0666 socket
                let attacker = try #require(try connectAs(uid: 4321, path: buses.b.socketPath).first)
                var n = 0
                /// Asks svc.echo with `data` as uid 4321; A's server echoes what it gets.
                func ask(_ data: String) throws -> Frame {
                    n += 1
                    try attacker.send(#"{"op":"request","type":"svc.echo","timeout":20000,"data":\#(data),"req":"q\#(n)"}"#)
                    if let request = try? server.readFrame(timeout: .milliseconds(500)), request.op == "request", let token = request.string("reply") {
                        try server.send(#"{"op":"reply","to":"\#(token)","data":"echo"}"#)
                    }
                    return try attacker.readFrame(timeout: .seconds(25))
                }
                try untilArrived("uid 4321's request on B answered by A's server") { try ask("1").op == "ok" }
                let reconnectsBefore = buses.bridgeB.counter("reconnects")
                let big = try ask("\"" + String(repeating: "x", count: 70_000) + "\"")
                #expect(big.op == "error" && big.string("message")?.contains("over the NATS server's max_payload of 65536") == true, "\(big.raw.prefix(300))")
                #expect(try ask("2").op == "ok", "the next request crosses")
                #expect(buses.bridgeB.counter("reconnects") == reconnectsBefore, "the NATS connection stayed up")
                try server.expectNoFrame()
            }
        }
    }
}
