// eventbus-bridge's export side across bus reconnects (issue 13's open
// point; PROTOCOL.md "Retained events and history (1.1)"): the bridge
// resubscribes with `since` from the last seq it read, so the exports
// published while it was away reach NATS; after a broker restart (a new run,
// history is per run) the broker says so with a `gap`, the bridge counts it,
// and what the new run published before the bridge was back is exported; a
// history too short for the time away is a `gap` too, and what it still
// holds is exported.
//
// Before editing: the bridge reaches the broker through a one-connection
// `socat` relay, so killing the relay drops the bridge's bus connection
// while the broker keeps running (the same run: a plain resume, no gap), and
// the relay is started again only after the events "published while away"
// were accepted: the test never depends on how fast the bridge reconnects.
// A process only: the link inside eventbusd (`--bridge`) has no socket path
// to its broker that could be cut while the broker runs; its broker restart
// is BridgeOutageTests' `aRestartedBroker...` in `.inBroker` mode.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

extension BridgeSuites {
    @Suite("eventbus-bridge resume", .serialized, .enabled(if: NATSCluster.isAvailable && findInPath("socat") != nil), .timeLimit(.minutes(2)))
    struct BridgeResumeTests {
        /// `socat UNIX-LISTEN:PATH UNIX-CONNECT:TARGET`: one connection, relayed until either side ends it.
        private static func relay(_ path: String, to target: String, in directory: TemporaryDirectory) throws -> SpawnedProcess {
            try SpawnedProcess("socat", ["UNIX-LISTEN:\(path),unlink-early", "UNIX-CONNECT:\(target)"], in: directory)
        }

        /// Kills the relay (both ends of the bridge's bus connection close) and waits until the bridge saw it.
        private static func cut(_ relay: SpawnedProcess, _ bridge: BridgeProcess) throws {
            relay.send(signal: SIGKILL)
            _ = try relay.waitBlocking()
            try bridge.waitForStatus("bus down") { $0["bus"] as? String == "down" }
        }

        /// The next `count` exports the watcher gets, as `TYPE=DATA`.
        private static func exports(_ watcher: NATSWatcher, _ count: Int) throws -> [String] {
            try (0..<count).map { _ in
                let message = try watcher.next(where: { $0.hasPrefix("eventbus.evt.a.") })
                return "\(message.subject.dropFirst("eventbus.evt.a.".count))=\(String(decoding: message.payload, as: UTF8.self))"
            }
        }

        @Test func aBusReconnectResumesAfterTheLastSeqReadAndARestartOrAShortHistoryIsACountedGap() throws {
            let cluster = try NATSCluster(count: 1)
            defer { try? cluster.killAll() }
            let directory = try TemporaryDirectory(prefix: "ebbr-")
            defer { directory.remove() }
            let broker = try BrokerProcess()
            defer { broker.cleanUp() }
            let path = directory.file("relay")
            var relay = try Self.relay(path, to: broker.socketPath, in: directory)
            defer { relay.send(signal: SIGKILL) }
            let bridge = try BridgeProcess(socket: path, nats: cluster.url(0), node: "a", in: directory, extra: ["--export", "resume.>"])
            defer { bridge.kill() }
            try bridge.waitUntilConnected()
            let watcher = try NATSWatcher(port: cluster.clientPorts[0], subject: "eventbus.evt.a.>")
            let publisher = try broker.connect()
            try publisher.publish("resume.live", data: "0")
            #expect(try Self.exports(watcher, 1) == ["resume.live=0"])

            // Same run: exactly what was published while away, then live events (nothing twice).
            try Self.cut(relay, bridge)
            for n in 1...5 { try publisher.publish("resume.away", data: "\(n)", req: n) }
            relay = try Self.relay(path, to: broker.socketPath, in: directory)
            try bridge.waitForStatus("bus back") { $0["bus"] as? String == "up" && ($0["bus_reconnects"] as? NSNumber)?.intValue == 1 }
            #expect(try Self.exports(watcher, 5) == (1...5).map { "resume.away=\($0)" })
            try publisher.publish("resume.after", data: "6")
            #expect(try Self.exports(watcher, 1) == ["resume.after=6"])
            var status = try bridge.freshStatus()
            #expect(status["bus_replayed"] as? NSNumber == 5 && status["bus_gaps"] as? NSNumber == 0, "\(status)")

            // A new run: a gap, counted and logged; the new run's events from before the bridge was back are exported.
            try Self.cut(relay, bridge)
            _ = broker.terminate()
            let restarted = try BrokerProcess(arguments: ["--history-events", "4"])
            defer { restarted.cleanUp() }
            let second = try restarted.connect()
            for n in 1...3 { try second.publish("resume.new", data: "\(n)", req: n) }
            relay = try Self.relay(path, to: restarted.socketPath, in: directory)
            try bridge.waitForStatus("bus back again") { $0["bus"] as? String == "up" && ($0["bus_reconnects"] as? NSNumber)?.intValue == 2 }
            #expect(try Self.exports(watcher, 3) == (1...3).map { "resume.new=\($0)" })
            try second.publish("resume.after", data: "4")
            #expect(try Self.exports(watcher, 1) == ["resume.after=4"])
            status = try bridge.freshStatus()
            #expect(status["bus_replayed"] as? NSNumber == 8 && status["bus_gaps"] as? NSNumber == 1, "\(status)")
            #expect(bridge.log.contains("is a new run"), "\(bridge.log.suffix(2000))")

            // The same run again, but its history (4 events) no longer reaches back: a gap; the 4 it holds are exported.
            try Self.cut(relay, bridge)
            for n in 1...6 { try second.publish("resume.short", data: "\(n)", req: n) }
            relay = try Self.relay(path, to: restarted.socketPath, in: directory)
            try bridge.waitForStatus("bus back a third time") { $0["bus"] as? String == "up" && ($0["bus_reconnects"] as? NSNumber)?.intValue == 3 }
            #expect(try Self.exports(watcher, 4) == (3...6).map { "resume.short=\($0)" })
            status = try bridge.freshStatus()
            #expect(status["bus_replayed"] as? NSNumber == 12 && status["bus_gaps"] as? NSNumber == 2, "\(status)")
            #expect(bridge.log.contains("history no longer reaches back"), "\(bridge.log.suffix(2000))")
            try bridge.stop()
        }
    }
}
