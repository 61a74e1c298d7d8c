// The bridge right end to end (PROTOCOL.md "Bridged events (1.1)", "Access
// policy (1.1)"): a bridge running as a uid the policy does not allow `bridge`
// has every import refused (`forbidden`, counted `denied`, nothing delivered),
// and the same uid granted `allow bridge - user=4321` delivers them with
// `origin` and its own kernel-stamped uid.
//
// Before editing: needs root (setpriv runs the bridge as uid 4321, numeric,
// no /etc/passwd change); the brokers' directories are opened to 0755 so that
// uid can reach their 0666 sockets.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// The trust rule on the bus side (PROTOCOL.md "Bridged events (1.1)"): only a
/// connection the policy allows `bridge` may publish with `origin`.
extension BridgeSuites {
    @Suite("eventbus-bridge and the bridge right", .serialized,
           .enabled(if: NATSCluster.isAvailable && getuid() == 0 && findInPath("setpriv") != nil, "needs nats-server, root and setpriv"))
    struct BridgeRightTests {
        @Test(arguments: BridgeMode.allCases)
        func aBridgeWithoutTheBridgeRightHasItsImportsRefusedAndOneGrantedByThePolicyDeliversThem(mode: BridgeMode) throws {
            let cluster = try NATSCluster(count: 1)
            let directory = try TemporaryDirectory(prefix: "ebbr-")
            let a = try BrokerProcess()
            defer { a.cleanUp() }
            let policy = directory.file("policy.conf")
            try "allow bridge - user=4321\n".write(toFile: policy, atomically: false, encoding: .utf8)
            let bridgeA = try BridgeProcess(socket: a.socketPath, nats: cluster.url(0), node: "a", in: directory, extra: ["--export", "t.>"])
            // B and C: bridges running as uid 4321 (a process under setpriv, or the link inside the broker with --bridge-user 4321).
            let open: BrokerProcess                                     // no policy file: bridge is for uid 0 and the broker's uid
            let granting: BrokerProcess
            let refused: BridgeProcess
            let granted: BridgeProcess
            switch mode {
            case .process:
                open = try BrokerProcess()
                granting = try BrokerProcess(arguments: ["--policy", policy])
                for broker in [open, granting] { chmod(broker.directory.path, 0o755) }  // uid 4321 reaches the 0666 sockets
                refused = try BridgeProcess(socket: open.socketPath, nats: cluster.url(0), node: "b", in: directory, extra: ["--import", "t.>"], uid: 4321)
                granted = try BridgeProcess(socket: granting.socketPath, nats: cluster.url(0), node: "c", in: directory, extra: ["--import", "t.>"], uid: 4321)
            case .inBroker:
                refused = try BridgeProcess(nats: cluster.url(0), node: "b", in: directory, extra: ["--import", "t.>"], bridgeUser: 4321)
                granted = try BridgeProcess(brokerArguments: ["--policy", policy], nats: cluster.url(0), node: "c", in: directory, extra: ["--import", "t.>"], bridgeUser: 4321)
                open = refused.broker!
                granting = granted.broker!
            }
            defer {
                for bridge in [bridgeA, refused, granted] { bridge.kill() }
                open.cleanUp()
                granting.cleanUp()
            }
            for bridge in [bridgeA, refused, granted] { try bridge.waitUntilConnected() }
            if mode == .inBroker {
                // The link names its connection for what it is: a socketpair into its own broker, as the bridge user.
                #expect(granted.status()?["bus_path"] as? String == "this eventbusd over a socketpair, as uid 4321 gid 4321", "\(String(describing: granted.status()))")
            }

            let onGranting = try granting.connect()
            try onGranting.subscribe("t.>")
            let onOpen = try open.connect()
            try onOpen.subscribe("t.>")
            let publisher = try a.connect()
            try untilArrived("an event through the granted bridge") {
                try publisher.publish("t.x", data: #"{"n":1}"#)
                return (try? onGranting.readFrame(timeout: .milliseconds(300)))?.type == "t.x"
            }
            try refused.waitForStatus("imports counted denied") { _ in (refused.counter("dropped.denied") ?? 0) >= 1 }
            #expect(refused.counter("imported") == 0)
            #expect(refused.log.contains("bridge denied for uid 4321"), "\(refused.log)")
            try onOpen.expectNoFrame(within: .milliseconds(200))
            try publisher.publish("t.last")
            let last = try onGranting.readFrames(until: { $0.type == "t.last" }).last!
            #expect(last.int("uid") == 4321 && last.object("origin")?["node"] as? String == "a", "\(last)")
        }
    }
}
