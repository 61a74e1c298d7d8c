// eventbus-bridge when things go away (issue 13 "Tests"): NATS node 1 killed
// (bridge A fails over from `connect_urls`), the whole cluster stopped while
// more events are published than the buffer holds (the first ones arrive in
// order, then the `dropped` report with the right count), the local broker
// restarted (the bridge reconnects, subscribes again, and counts the imports
// it could not deliver meanwhile), and two bridges claiming one node id.
//
// Before editing: during the cluster outage bridge A is held with SIGSTOP
// while the cluster comes back, so its buffered events cannot be flushed
// before bridge B's subscription and the raw watcher are in place again:
// the test then never depends on who reconnects first.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

extension BridgeSuites {
    @Suite("eventbus-bridge outages", .serialized, .enabled(if: NATSCluster.isAvailable), .timeLimit(.minutes(2)))
    struct BridgeOutageTests {
        @Test(arguments: BridgeMode.allCases)
        func killingNodeOneMakesBridgeAFailOverAndEventsPublishedAfterwardsArrive(mode: BridgeMode) throws {
            try withBridgedBuses(mode) { buses in
                let onB = try buses.b.connect()
                try onB.subscribe("fail.>")
                let publisher = try buses.a.connect()
                try buses.cluster.kill(0)
                let node1 = buses.cluster.url(0)
                try buses.bridgeA.waitForStatus("linked to another node") { status in
                    status["link"] as? String == "up" && (status["reconnects"] as? NSNumber)?.intValue == 1 && status["server"] as? String != node1
                }
                for n in 0..<100 { try publisher.publish("fail.n", data: "\(n)", req: n) }
                let events = try onB.readFrames(count: 100, timeout: .seconds(20))
                #expect(events.map { ($0["data"] as? NSNumber)?.intValue ?? -1 } == Array(0..<100))
                #expect(buses.bridgeA.log.contains("lost the NATS link"))
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func afterAWholeClusterOutageTheHeldEventsArriveInOrderThenTheDropReport(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: ["--buffer-events", "50"]) { buses in
                let onB = try buses.b.connect()
                try onB.subscribe("out.>")
                let publisher = try buses.a.connect()
                for node in 0..<3 { try buses.cluster.stop(node) }
                try buses.bridgeA.waitForStatus("NATS link down") { $0["link"] as? String == "down" }
                var seqs: [Int] = []
                for n in 0..<80 { seqs.append(try #require(try publisher.publish("out.n", data: "\(n)", req: n).seq)) }
                try buses.bridgeA.waitForStatus("50 held, 30 dropped") { _ in
                    buses.bridgeA.counter("buffered") == 50 && buses.bridgeA.counter("dropped.buffer") == 30
                }
                // Hold bridge A until bridge B and a watcher are subscribed on the restarted cluster.
                kill(buses.bridgeA.pid, SIGSTOP)
                defer { kill(buses.bridgeA.pid, SIGCONT) }
                try buses.cluster.startAll()
                try buses.bridgeB.waitForStatus("NATS link back") { $0["link"] as? String == "up" && ($0["reconnects"] as? NSNumber)?.intValue == 1 }
                let watcher = try NATSWatcher(port: buses.cluster.clientPorts[1], subject: "eventbus.>")
                let probe = try buses.b.connect()
                try probe.subscribe("probe.back")
                for port in buses.cluster.clientPorts {
                    // Interest of bridge B and of the watcher has reached every node once a probe from it arrives.
                    let sender = try NATSWatcher(port: port, subject: "unused.probe")
                    try untilArrived("a probe from node port \(port)") {
                        try sender.publish("eventbus.evt.z.probe.back", "\(port)")
                        guard (try? probe.readFrame(timeout: .milliseconds(200)))?.type == "probe.back" else { return false }
                        return (try? watcher.next(where: { $0 == "eventbus.evt.z.probe.back" }, timeout: .milliseconds(500))) != nil
                    }
                }
                kill(buses.bridgeA.pid, SIGCONT)

                let events = try onB.readFrames(count: 50, timeout: .seconds(20))
                #expect(events.map { ($0["data"] as? NSNumber)?.intValue ?? -1 } == Array(0..<50), "the first 50, in order")
                var order: [String] = []
                var report: NATSWatcher.Received?
                while report == nil {
                    let message = try watcher.next(where: { $0.hasPrefix("eventbus.evt.a.") || $0 == "eventbus.ctl.a.dropped" })
                    if message.subject == "eventbus.ctl.a.dropped" { report = message } else { order.append(String(decoding: message.payload, as: UTF8.self)) }
                }
                #expect(order == (0..<50).map(String.init), "the held events reach NATS before the report")
                let body = try #require(try JSONSerialization.jsonObject(with: Data(report!.payload)) as? [String: Any])
                #expect((body["count"] as? NSNumber)?.intValue == 30)
                #expect((body["since_seq"] as? NSNumber)?.intValue == seqs[50], "the first lost event's seq")
                #expect(body["node"] as? String == "a")
                try buses.bridgeB.waitForStatus("the report counted") { _ in buses.bridgeB.counter("remote_lost") == 30 }
                #expect(buses.bridgeB.log.contains("node a reports 30 exported events lost"))
                try onB.expectNoFrame(within: .milliseconds(300))
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func aRestartedBrokerIsReconnectedSubscribedAgainAndImportsMeanwhileAreCounted(mode: BridgeMode) throws {
            try withBridgedBuses(mode) { buses in
                let publisher = try buses.a.connect()
                let path = buses.b.socketPath
                let restarted: BrokerProcess
                switch mode {
                case .process:
                    buses.b.terminate()
                    try buses.bridgeB.waitForStatus("bus down") { $0["bus"] as? String == "down" }
                    for n in 0..<5 { try publisher.publish("lost.n", data: "\(n)", req: n) }
                    try buses.bridgeB.waitForStatus("5 imports lost") { _ in buses.bridgeB.counter("dropped.local_bus") == 5 }
                    restarted = try BrokerProcess(socketPath: path)
                    try buses.bridgeB.waitForStatus("bus back") { $0["bus"] as? String == "up" && ($0["bus_reconnects"] as? NSNumber)?.intValue == 1 }
                case .inBroker:
                    // The link stops with its broker (a clean stop removes the status
                    // file); the restarted broker reads the same --bridge file and links again.
                    #expect(buses.b.terminate() == .exited(0))
                    #expect(buses.bridgeB.status() == nil, "the stopped link removed its status file")
                    for n in 0..<5 { try publisher.publish("lost.n", data: "\(n)", req: n) }
                    restarted = try BrokerProcess(arguments: Array(buses.b.arguments.dropFirst(2)), socketPath: path)
                    try waitUntil("the restarted broker's link up", timeout: .seconds(20)) {
                        buses.bridgeB.status().map { $0["bus"] as? String == "up" && $0["link"] as? String == "up" } ?? false
                    }
                }
                defer { restarted.cleanUp() }
                // Imports flow again, and so do exports: the export patterns were subscribed again.
                let onB = try restarted.connect()
                try onB.subscribe("back.>")
                try untilArrived("an event from A on the restarted B") {
                    try publisher.publish("back.in")
                    return (try? onB.readFrame(timeout: .milliseconds(200)))?.type == "back.in"
                }
                let onA = try buses.a.connect()
                try onA.subscribe("back.>")
                try restarted.connect().publish("back.out", data: #"{"from":"b"}"#)
                let event = try onA.readFrame()
                #expect(event.type == "back.out" && event.raw.contains(#""data":{"from":"b"}"#), "\(event)")
                if mode == .process { #expect(buses.bridgeB.log.contains("reconnected to the bus at \(path)")) }
                if mode == .inBroker { #expect(restarted.terminate() == .exited(0)) }
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func twoBridgesClaimingOneNodeStopExportingLoudly(mode: BridgeMode) throws {
            let cluster = try NATSCluster(count: 1)
            let broker = try BrokerProcess()
            defer { broker.cleanUp() }
            let directory = try TemporaryDirectory(prefix: "ebbr-")
            // In `.inBroker` mode the first link is inside a broker of its own, the second a process on `broker`.
            let first = try BridgeProcess.start(mode, socket: mode == .process ? broker.socketPath : nil, nats: cluster.url(0), node: "same", in: directory, extra: ["--export", ">"])
            try first.waitUntilConnected()
            let second = try BridgeProcess(socket: broker.socketPath, nats: cluster.url(0), node: "same", in: directory, extra: ["--export", ">"])
            defer {
                first.kill()
                second.kill()
            }
            for bridge in [first, second] {
                try bridge.waitForStatus("exporting stopped") { $0["exporting"] as? Bool == false }
                #expect(bridge.log.contains("claims node same on this NATS system: exporting has stopped"), "\(bridge.log)")
            }
            try first.stop()
            try second.stop()
        }
    }
}
