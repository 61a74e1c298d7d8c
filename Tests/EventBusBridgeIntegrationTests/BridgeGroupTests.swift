// Queue groups across machines end to end (issue 36; docs/BRIDGE.md "Queue
// groups across machines"): two brokers bridged through a real 3-node
// nats-server cluster on 127.0.0.1 (the bridges as processes, or the links
// inside the brokers: `BridgeMode`), both with `--export-group` and
// `--import-group work:job.>` beside the fixture's `--export >` and
// `--import >`, members of group `work` on A and B, all raw clients. Each
// event of A reaches one member across the two brokers: A's member while
// there is one, B's only when A has none; nothing is lost when A's member
// leaves; a plain subscriber on B still gets every event (the plain export),
// and B's member never gets the plain copy. With a third broker C, of two
// importing machines only the one with a member is subscribed on NATS (the
// watch of the group's members), so no event is lost on a machine without one.
//
// Before editing: the group subscriptions cross NATS routes like the event
// ones, so each test first publishes until B's member gets one
// (`untilArrived`), never a sleep; absence is asserted with a sentinel that
// took the same path after the events in question (one bridge, one NATS
// subject space, one order).
import EventBusTestSupport
import Foundation
import Glibc
import Testing

extension BridgeSuites {
    @Suite("eventbus-bridge: queue groups across machines", .serialized, .enabled(if: NATSCluster.isAvailable, "needs nats-server"))
    struct BridgeGroupTests {
        static let groups = ["--export-group", "work:job.>", "--import-group", "work:job.>"]

        /// Joins group `work` on `job.>`.
        static func member(on broker: BrokerProcess) throws -> RawClient {
            let member = try broker.connect()
            let ok = try member.request(#"{"op":"subscribe","type":"job.>","group":"work","req":"j"}"#)
            try #require(ok.op == "ok", "\(ok)")
            return member
        }

        /// Publishes `job.warm` on `publisher` until `member` (on the other broker) gets one,
        /// then drains it up to a `job.ready` sentinel that took the same path.
        static func warmUp(_ publisher: RawClient, to member: RawClient) throws {
            var n = 0
            try untilArrived("a group event of A to reach B's member") {
                n += 1
                try publisher.send(#"{"op":"publish","type":"job.warm","data":{"n":\#(n)}}"#)
                return (try? member.readFrame(timeout: .milliseconds(300)))?.type == "job.warm"
            }
            try publisher.send(#"{"op":"publish","type":"job.ready","data":{}}"#)
            while try member.readFrame(timeout: .seconds(10)).type != "job.ready" {}
        }

        /// The `data.i` of the `job.run` events read from `client` up to the event of type `until`.
        static func runs(_ client: RawClient, until: String) throws -> [Int] {
            var seen: [Int] = []
            while true {
                let frame = try client.readFrame(timeout: .seconds(10))
                if frame.type == until { return seen }
                if frame.op == "event" && frame.type == "job.run", let i = frame.object("data")?["i"] as? Int { seen.append(i) }
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func eachEventGoesToOneMemberAcrossTheBrokersLocalFirst(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: Self.groups, extraB: Self.groups) { buses in
                let memberB = try Self.member(on: buses.b)
                let plainB = try buses.b.connect()
                try plainB.subscribe("job.>")
                let publisher = try buses.a.connect()
                // A has no member: A's events go to B's member.
                try Self.warmUp(publisher, to: memberB)
                // A's member goes first: 0..<10 all stay on A.
                let memberA = try Self.member(on: buses.a)
                for i in 0..<10 { try publisher.send(#"{"op":"publish","type":"job.run","data":{"i":\#(i)}}"#) }
                try publisher.send(#"{"op":"publish","type":"job.mark","data":{}}"#)
                // A's member leaves: its ok comes after every event queued to it.
                try memberA.send(#"{"op":"unsubscribe","type":"job.>","group":"work","req":"bye"}"#)
                var onA: [Int] = []
                while true {
                    let frame = try memberA.readFrame(timeout: .seconds(10))
                    if frame.op == "ok" && frame.string("req") == "bye" { break }
                    if frame.type == "job.run", let i = frame.object("data")?["i"] as? Int { onA.append(i) }
                }
                // Nobody on A now: 10..<20 go to B's member, then the sentinel.
                for i in 10..<20 { try publisher.send(#"{"op":"publish","type":"job.run","data":{"i":\#(i)}}"#) }
                try publisher.send(#"{"op":"publish","type":"job.end","data":{}}"#)
                let onB = try Self.runs(memberB, until: "job.end")
                #expect(onA == Array(0..<10), "A's member: \(onA)")
                #expect(onB == Array(10..<20), "B's member: \(onB) (none of A's ten, and none of the plain copies)")
                // The plain subscriber on B got every event once, through the plain export.
                let plain = try Self.runs(plainB, until: "job.end")
                #expect(plain == Array(0..<20), "plain subscriber on B: \(plain)")
                // The counters: A sent the warm-ups, the ready and the ten to B, and B received them.
                func groups(_ bridge: BridgeProcess, _ name: String) -> Int {
                    ((bridge.status()?["groups"] as? [String: Any])?[name] as? NSNumber)?.intValue ?? -1
                }
                // (Each status file is rewritten once a second: wait for both.)
                try buses.bridgeB.waitForStatus("B's group counters") { _ in groups(buses.bridgeB, "received") >= 12 }
                try buses.bridgeA.waitForStatus("A's group counters") { _ in groups(buses.bridgeA, "sent") >= 12 }
                #expect(groups(buses.bridgeA, "dropped") == 0 && groups(buses.bridgeB, "dropped") == 0)
                // (attacker6) Groups without @USER: warned once, at start, naming the @USER form.
                for bridge in buses.bridges {
                    #expect(bridge.log.components(separatedBy: "without @USER, every local user's group named work takes part").count == 2, "\(bridge.log)")
                    #expect(bridge.log.contains("NAME:PATTERN@USER"))
                }
            }
        }

        /// (attacker6) With `@root` on both machines, root's group `work` is
        /// the group across machines: uid 4321's group of that name on A
        /// (joined, never read) no longer keeps root's events from crossing
        /// (before: every event went to it, none crossed), and on B uid
        /// 4321's group gets each event once, as a local group gets an
        /// imported event (the plain `--import >`), never a second copy from
        /// the group publish, which reaches root's member only. No warning.
        @Test(arguments: BridgeMode.allCases)
        func anotherUsersGroupOfTheNameNeitherHoldsBackNorTakesTheGroupsEvents(mode: BridgeMode) throws {
            let rootGroups = ["--export-group", "work:job.>@root", "--import-group", "work:job.>@root"]
            try withBridgedBuses(mode, extraA: rootGroups, extraB: rootGroups) { buses in
                chmod(buses.a.directory.path, 0o755)  // uid 4321 reaches the 0666 sockets
                chmod(buses.b.directory.path, 0o755)
                let squatter = try #require(try connectAs(uid: 4321, path: buses.a.socketPath).first)
                try #require(try squatter.request(#"{"op":"subscribe","type":"job.>","group":"work","req":"j"}"#).op == "ok")  // and never reads again
                let otherB = try #require(try connectAs(uid: 4321, path: buses.b.socketPath).first)
                try #require(try otherB.request(#"{"op":"subscribe","type":"job.>","group":"work","req":"j"}"#).op == "ok")
                let memberB = try Self.member(on: buses.b)
                let publisher = try buses.a.connect()
                try Self.warmUp(publisher, to: memberB)  // before: never (uid 4321's member on A took each one)
                for i in 0..<10 { try publisher.send(#"{"op":"publish","type":"job.run","data":{"i":\#(i)}}"#) }
                try publisher.send(#"{"op":"publish","type":"job.end","data":{}}"#)
                #expect(try Self.runs(memberB, until: "job.end") == Array(0..<10), "root's member on B has every one")
                // Every group publish on B came before root's member read job.end: a sentinel
                // published on B now reaches uid 4321's group after any copy they gave it.
                try buses.b.connect().send(#"{"op":"publish","type":"job.sentinel","data":{}}"#)
                var seen: [Int] = [], ends = 0
                while ends < 2 {
                    let frame = try otherB.readFrame(timeout: .seconds(10))
                    if frame.type == "job.end" || frame.type == "job.sentinel" { ends += 1 }
                    if frame.type == "job.run", let i = frame.object("data")?["i"] as? Int { seen.append(i) }
                }
                #expect(seen.sorted() == Array(0..<10), "uid 4321's group on B: each once, the plain import's copy: \(seen)")
                for bridge in buses.bridges { #expect(!bridge.log.contains("without @USER"), "\(bridge.log)") }
            }
        }

        /// Issue 36's limit for groups, gone: B and C both import group
        /// `work`, only C has a member; every event of A reaches C's member
        /// once and B's link never receives one (it is not subscribed on NATS
        /// while its bus has no member). C's member leaves and B's joins:
        /// the events go to B.
        @Test(arguments: BridgeMode.allCases)
        func ofTwoImportingMachinesOnlyOneWithAMemberIsGivenTheGroupsEvents(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: ["--export-group", "work:job.>"], extraB: Self.groups) { buses in
                let (c, bridgeC) = try BridgeRequestTests.addBus(buses, node: "c", extra: Self.groups)
                defer { if mode == .process { c.cleanUp() } }
                let memberC = try Self.member(on: c)
                let publisher = try buses.a.connect()
                try Self.warmUp(publisher, to: memberC)
                for i in 0..<30 { try publisher.send(#"{"op":"publish","type":"job.run","data":{"i":\#(i)}}"#) }
                try publisher.send(#"{"op":"publish","type":"job.end","data":{}}"#)
                let onC = try Self.runs(memberC, until: "job.end")
                #expect(onC == Array(0..<30), "C's member: \(onC)")
                func received(_ status: [String: Any]) -> Int {
                    ((status["groups"] as? [String: Any])?["received"] as? NSNumber)?.intValue ?? -1
                }
                #expect(received(try buses.bridgeB.freshStatus()) == 0, "B's link was handed none")
                #expect(!buses.bridgeB.log.contains("taking group work's events"), "B's link never subscribed: \(buses.bridgeB.log.suffix(2000))")
                // C's member leaves; once C's link has left NATS, B's member joins.
                memberC.close()
                let pacer = try c.connect()
                let deadline = ContinuousClock.now + .seconds(30)
                while !bridgeC.log.contains("no longer taking group work's events") {
                    guard ContinuousClock.now < deadline else { throw TestFailure("C's link did not leave NATS in 30 s: \(bridgeC.log.suffix(2000))") }
                    _ = try pacer.request(#"{"op":"ping","req":"p"}"#)  // a round trip between looks, no sleep
                }
                let memberB = try Self.member(on: buses.b)
                try Self.warmUp(publisher, to: memberB)
                for i in 30..<40 { try publisher.send(#"{"op":"publish","type":"job.run","data":{"i":\#(i)}}"#) }
                try publisher.send(#"{"op":"publish","type":"job.end","data":{}}"#)
                let onB = try Self.runs(memberB, until: "job.end")
                #expect(onB == Array(30..<40), "B's member: \(onB)")
            }
        }

        @Test(arguments: BridgeMode.allCases)
        func aKeyedEventCrossesWithItsKeyAndStaysWithOneMember(mode: BridgeMode) throws {
            try withBridgedBuses(mode, extraA: Self.groups, extraB: Self.groups) { buses in
                let first = try Self.member(on: buses.b)
                let publisher = try buses.a.connect()
                try Self.warmUp(publisher, to: first)
                let second = try Self.member(on: buses.b)
                for i in 0..<12 {
                    try publisher.send(#"{"op":"publish","type":"job.run","key":"k\#(i % 3)","data":{"i":\#(i)}}"#)
                }
                try publisher.send(#"{"op":"publish","type":"job.end","key":"k0","data":{}}"#)
                try publisher.send(#"{"op":"publish","type":"job.end","key":"k1","data":{}}"#)
                try publisher.send(#"{"op":"publish","type":"job.end","key":"k2","data":{}}"#)
                // Read both members until three sentinels came (one per key, each after its key's events).
                var keysOf: [String: Set<String>] = ["first": [], "second": []]
                var got: [Int] = []
                var ends = 0
                let deadline = ContinuousClock.now + .seconds(30)
                while ends < 3 {
                    guard ContinuousClock.now < deadline else { throw TestFailure("only \(ends) of 3 sentinels after 30 s; got \(got)") }
                    for (name, member) in [("first", first), ("second", second)] {
                        guard let frame = try? member.readFrame(timeout: .milliseconds(100)), frame.op == "event" else { continue }
                        let key = try #require(frame.string("key"), "a crossed keyed event keeps its key: \(frame)")
                        keysOf[name]!.insert(key)
                        if frame.type == "job.end" { ends += 1 } else if let i = frame.object("data")?["i"] as? Int { got.append(i) }
                    }
                }
                #expect(got.sorted() == Array(0..<12), "\(got)")
                #expect(keysOf["first"]!.isDisjoint(with: keysOf["second"]!), "one member per key: \(keysOf)")
            }
        }
    }
}
