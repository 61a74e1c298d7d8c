// Requests across machines end to end (issue 36; docs/BRIDGE.md "Requests
// across machines"): two brokers bridged through a real 3-node nats-server
// cluster on 127.0.0.1 (the bridges as processes, or the links inside the
// brokers: `BridgeMode`), a requester on A and servers on A or B, all raw
// clients. A request no server on A takes is answered by B's server; a local
// server goes first; nobody anywhere gives `no_responders`; the deadline
// travels and a silent remote server gives `timeout`; of two importing
// machines (B, and a third broker C) the one that serves the type answers.
//
// Before editing: the request subscriptions cross NATS routes like the event
// ones, so each test first asks until an answer comes back (`untilArrived`),
// never a sleep; absence is asserted after a request that took the same path.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

extension BridgeSuites {
    @Suite("eventbus-bridge: requests across machines", .serialized, .enabled(if: NATSCluster.isAvailable, "needs nats-server"))
    struct BridgeRequestTests {
        static let bridgeA = ["--export-requests", "svc.>,lone.>", "--import-requests", "svc.>"]
        static let bridgeB = ["--export-requests", "svc.>", "--import-requests", "svc.>"]

        /// A serving subscription of `pattern` on `broker`.
        static func server(on broker: BrokerProcess, _ pattern: String) throws -> RawClient {
            let server = try broker.connect()
            let ok = try server.request(#"{"op":"subscribe","type":"\#(pattern)","serve":true,"req":"s"}"#)
            try #require(ok.op == "ok", "\(ok)")
            return server
        }

        /// Asks `type` on `requester`; a request `server` gets is answered
        /// with `{"by":name}`. - Returns: the requester's answer and the request the server got, if any.
        static func ask(_ requester: RawClient, _ type: String, timeout: Int = 5000, req: String,
                        server: RawClient? = nil, name: String = "") throws -> (answer: Frame, served: Frame?) {
            try requester.send(#"{"op":"request","type":"\#(type)","data":{"q":1},"timeout":\#(timeout),"req":"\#(req)"}"#)
            var served: Frame? = nil
            if let server, let frame = try? server.readFrame(timeout: .milliseconds(2000)), frame.op == "request" {
                served = frame
                let token = try #require(frame.string("reply"))
                let ok = try server.request(#"{"op":"reply","to":"\#(token)","data":{"by":"\#(name)"},"req":"r-\#(req)"}"#)
                #expect(ok.bool("accepted") == true, "\(ok)")
            }
            let answer = try requester.readFrame(timeout: .seconds(10))
            #expect(answer.string("req") == req, "\(answer)")
            return (answer, served)
        }

        @Test(arguments: BridgeMode.allCases)
        func aRequestWithNoLocalServerIsAnsweredByAServerOnTheOtherBroker(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: Self.bridgeA, extraB: Self.bridgeB) { buses in
                let server = try Self.server(on: buses.b, "svc.echo")
                let requester = try buses.a.connect()
                var n = 0
                var last: (answer: Frame, served: Frame?)? = nil
                try untilArrived("a request on A answered by B's server") {
                    n += 1
                    last = try Self.ask(requester, "svc.echo", req: "e\(n)", server: server, name: "b")
                    return last!.answer.op == "ok"
                }
                let (answer, served) = last!
                let reply = try #require(answer.object("reply"))
                #expect((reply["data"] as? [String: Any])?["by"] as? String == "b", "\(answer)")
                // What B's server saw: the request's type and data, a deadline within the requester's.
                let request = try #require(served)
                #expect(request.string("type") == "svc.echo" && (request.object("data")?["q"] as? Int) == 1, "\(request)")
                let left = try #require(request.int("timeout"))
                #expect(left > 0 && left <= 5000, "\(request)")
                // The counters: A sent and relayed, B asked its bus and replied.
                func requests(_ bridge: BridgeProcess, _ name: String) -> Int {
                    ((bridge.status()?["requests"] as? [String: Any])?[name] as? NSNumber)?.intValue ?? -1
                }
                try buses.bridgeB.waitForStatus("B's request counters") { _ in requests(buses.bridgeB, "replied") >= 1 }
                try buses.bridgeA.waitForStatus("A's request counters") { _ in requests(buses.bridgeA, "answered") >= 1 }
                #expect(requests(buses.bridgeA, "sent") >= requests(buses.bridgeA, "answered") && requests(buses.bridgeB, "received") >= 1)
                #expect(requests(buses.bridgeA, "dropped") == 0 && requests(buses.bridgeB, "dropped") == 0)
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func aLocalServerIsAskedFirstAndTheRemoteOneGetsNothing(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: Self.bridgeA, extraB: Self.bridgeB) { buses in
                let remote = try Self.server(on: buses.b, "svc.where")
                let requester = try buses.a.connect()
                var n = 0
                try untilArrived("the remote path ready") {
                    n += 1
                    return try Self.ask(requester, "svc.where", req: "w\(n)", server: remote, name: "b").answer.op == "ok"
                }
                let local = try Self.server(on: buses.a, "svc.where")
                for i in 0..<5 {
                    let (answer, served) = try Self.ask(requester, "svc.where", req: "l\(i)", server: local, name: "a")
                    #expect(served != nil && answer.op == "ok", "\(answer)")
                    #expect((answer.object("reply")?["data"] as? [String: Any])?["by"] as? String == "a", "\(answer)")
                }
                // A sentinel over the remote path: the local server gone, the next request goes to B.
                let gone = try local.request(#"{"op":"unsubscribe","type":"svc.where","serve":true,"req":"u"}"#)
                #expect(gone.bool("removed") == true)
                let (answer, served) = try Self.ask(requester, "svc.where", req: "after", server: remote, name: "b")
                #expect((answer.object("reply")?["data"] as? [String: Any])?["by"] as? String == "b", "\(answer)")
                // B's server got exactly the sentinel: none of the five went out.
                #expect(served != nil)
                try remote.expectNoFrame(within: .milliseconds(200))
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func nobodyAnywhereGivesNoResponders(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: Self.bridgeA, extraB: Self.bridgeB) { buses in
                let server = try Self.server(on: buses.b, "svc.probe")
                let requester = try buses.a.connect()
                var n = 0
                try untilArrived("the remote path ready") {
                    n += 1
                    return try Self.ask(requester, "svc.probe", req: "p\(n)", server: server, name: "b").answer.op == "ok"
                }
                // B imports svc.> but nobody serves svc.none there: B's link is not
                // subscribed to it on NATS, so NATS answers no responders at once.
                let none = try Self.ask(requester, "svc.none", req: "none").answer
                #expect(none.op == "error" && none.string("code") == "no_responders", "\(none)")
                #expect(none.string("message")?.contains("NATS no responders") == true, "\(none)")
                // lone.x leaves A but no bridge imports it: NATS's 503.
                let lone = try Self.ask(requester, "lone.x", req: "lone").answer
                #expect(lone.op == "error" && lone.string("code") == "no_responders", "\(lone)")
                #expect(lone.string("message")?.contains("NATS no responders") == true, "\(lone)")
                // other.x is not exported: the broker's own no_responders, at once.
                let local = try Self.ask(requester, "other.x", req: "other").answer
                #expect(local.op == "error" && local.string("code") == "no_responders", "\(local)")
                #expect(local.string("message")?.contains("no connection serves") == true, "\(local)")
            }
        }

        /// A third broker C (NATS node 2) whose link imports `svc.>` requests,
        /// as B's does: a bridge process on a broker of its own, or a broker
        /// running the link. - Returns: the broker and its link.
        static func addBus(_ buses: BridgedBuses, node: String, extra: [String]) throws -> (BrokerProcess, BridgeProcess) {
            switch buses.mode {
            case .process:
                let broker = try BrokerProcess()
                do {
                    return (broker, try buses.addBridge(on: broker, node: node, nats: buses.cluster.url(1), extra: extra))
                } catch {
                    broker.cleanUp()
                    throw error
                }
            case .inBroker:
                let link = try BridgeProcess(nats: buses.cluster.url(1), node: node, in: buses.directory, extra: extra)
                buses.bridges.append(link)
                try link.waitUntilConnected()
                return (link.broker!, link)
            }
        }

        /// Issue 36's one-importing-machine limit, gone: B and C both import
        /// `svc.>` requests, only C serves `svc.third`; every request from A is
        /// answered by C (B's link does not take requests of a type its bus
        /// does not serve: it is not subscribed to them on NATS), and B's link
        /// never receives one.
        @Test(arguments: BridgeMode.allCases)
        func ofTwoImportingMachinesTheOneThatServesTheTypeAnswersEveryTime(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: Self.bridgeA, extraB: Self.bridgeB) { buses in
                let (c, _) = try Self.addBus(buses, node: "c", extra: ["--import-requests", "svc.>"])
                defer { if mode == .process { c.cleanUp() } }
                let server = try Self.server(on: c, "svc.third")
                let requester = try buses.a.connect()
                var n = 0
                try untilArrived("a request on A answered by C's server") {
                    n += 1
                    return try Self.ask(requester, "svc.third", req: "w\(n)", server: server, name: "c").answer.op == "ok"
                }
                for i in 0..<30 {
                    let (answer, served) = try Self.ask(requester, "svc.third", req: "n\(i)", server: server, name: "c")
                    #expect(answer.op == "ok" && served != nil, "request \(i): \(answer)")
                    #expect((answer.object("reply")?["data"] as? [String: Any])?["by"] as? String == "c", "\(answer)")
                }
                // B's link was never handed one (and B's bus was never asked).
                let status = try buses.bridgeB.freshStatus()
                let received = ((status["requests"] as? [String: Any])?["received"] as? NSNumber)?.intValue
                #expect(received == 0, "\(status)")
                // Once C's server is gone, nobody anywhere serves it: NATS's no responders, at once.
                server.close()
                try untilArrived("C's link to leave svc.third") {
                    let answer = try Self.ask(requester, "svc.third", req: "gone\(n)").answer
                    n += 1
                    return answer.op == "error" && answer.string("code") == "no_responders" && answer.string("message")?.contains("NATS no responders") == true
                }
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func theDeadlineTravelsAndASilentRemoteServerGivesTimeout(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: Self.bridgeA, extraB: Self.bridgeB) { buses in
                let server = try Self.server(on: buses.b, "svc.slow")
                let requester = try buses.a.connect()
                var n = 0
                try untilArrived("the remote path ready") {
                    n += 1
                    return try Self.ask(requester, "svc.slow", req: "s\(n)", server: server, name: "b").answer.op == "ok"
                }
                try requester.send(#"{"op":"request","type":"svc.slow","data":null,"timeout":1500,"req":"late"}"#)
                let request = try server.readFrame(timeout: .seconds(10))
                #expect(request.op == "request", "\(request)")
                let left = try #require(request.int("timeout"))
                #expect(left > 0 && left <= 1500, "the deadline carried: \(request)")
                let answer = try requester.readFrame(timeout: .seconds(10))
                #expect(answer.op == "error" && answer.string("code") == "timeout" && answer.string("req") == "late", "\(answer)")
                // A reply after the deadline is not accepted anywhere, and the requester gets nothing more.
                let token = try #require(request.string("reply"))
                try server.send(#"{"op":"reply","to":"\#(token)","data":1,"req":"too-late"}"#)
                _ = try server.readFrame(timeout: .seconds(10))
                let ping = try requester.request(#"{"op":"ping","req":"after"}"#, timeout: .seconds(10))
                #expect(ping.op == "ok", "\(ping)")
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func withTheNATSLinkDownARequestGetsNoRespondersAtOnce(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: Self.bridgeA, extraB: Self.bridgeB) { buses in
                let requester = try buses.a.connect()
                for node in 0..<3 { try buses.cluster.stop(node) }
                try buses.bridgeA.waitForStatus("NATS link down") { $0["link"] as? String == "down" }
                let answer = try Self.ask(requester, "svc.echo", timeout: 60_000, req: "down").answer
                #expect(answer.op == "error" && answer.string("code") == "no_responders", "\(answer)")
                #expect(answer.string("message")?.contains("NATS link is down") == true, "\(answer)")
            }
        }
    }
}
