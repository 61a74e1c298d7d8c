// PROTOCOL.md "Per-type counters (1.2)" against the real broker, one test per
// rule: the `types` op's objects and order, `limit`, drops counted for the
// type dropped (drop-new and drop-old), retained types (also restored from
// --state-dir, never published in this run), and the policy for the CLI run
// as another uid (that a uid sees nothing of a type it may not receive is a
// scenario, EventBusScenarios/TypeCounterScenarios.swift). The 65,536 bound and its
// least-recently-published eviction are Core tests (TypeCountersTests).
//
// Before editing: counts are compared with the broker's own totals (`stats`,
// `clients`), which are exact, not with guesses about the kernel's socket
// buffers; each test's own types begin with a prefix of its own.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Per-type counters (PROTOCOL.md 1.2)")
struct TypesTests {
    /// The `types` reply's objects, by type, in the broker's order.
    static func types(_ client: RawClient, limit: Int? = nil) throws -> [(type: String, fields: [String: Any])] {
        let reply = try client.ok(#"{"op":"types","req":"t"\#(limit.map { ",\"limit\":\($0)" } ?? "")}"#)
        guard let list = reply.array("types") as? [[String: Any]] else { throw TestFailure("types reply has no list of objects: \(reply.raw)") }
        return list.map { ($0["type"] as? String ?? "?", $0) }
    }

    static func int(_ fields: [String: Any], _ key: String) -> Int? { (fields[key] as? NSNumber)?.intValue }

    @Test("hello announces types; each published type is listed most recently published first with its counters")
    func typesListsPublishedTypesByRecency() throws {
        try withBroker { broker in
            let wide = try broker.connect()
            let hello = try wide.ok(#"{"op":"hello","req":0}"#)
            #expect((hello.array("features") as? [String])?.contains("types") == true, "\(hello.raw)")
            try wide.subscribe("t.>")
            let narrow = try broker.connect()
            try narrow.subscribe("t.a")
            let publisher = try broker.connect()
            try publisher.publish("t.a")
            let lastA = try publisher.publish("t.a")
            let b = try publisher.publish("t.b")
            let listed = try Self.types(publisher).filter { $0.type.hasPrefix("t.") }
            #expect(listed.map(\.type) == ["t.b", "t.a"])
            let a = try #require(listed.last?.fields)
            #expect(Self.int(a, "published") == 2 && Self.int(a, "delivered") == 4 && Self.int(a, "dropped") == 0, "\(a)")
            #expect(Self.int(a, "subscribers") == 2 && a["retained"] as? Bool == false && Self.int(a, "last_seq") == lastA.seq, "\(a)")
            let time = try #require(a["last_time"] as? String)
            #expect(time.count == 24 && time.hasSuffix("Z") && time.contains("T"), "\(time)")
            let bFields = try #require(listed.first?.fields)
            #expect(Self.int(bFields, "published") == 1 && Self.int(bFields, "delivered") == 1 && Self.int(bFields, "subscribers") == 1, "\(bFields)")
            #expect(Self.int(bFields, "last_seq") == b.seq)
            // Publishing t.a again puts it first.
            try publisher.publish("t.a")
            #expect(try Self.types(publisher).filter { $0.type.hasPrefix("t.") }.map(\.type) == ["t.a", "t.b"])
        }
    }

    @Test("limit bounds the list (default 1000); a limit that is no non-negative integer is bad_request")
    func limitBoundsTheList() throws {
        try withBroker { broker in
            let client = try broker.connect()
            for i in 0..<5 { try client.publish("l.t\(i)") }
            #expect(try Self.types(client, limit: 2).map(\.type) == ["l.t4", "l.t3"])
            #expect(try Self.types(client, limit: 0).isEmpty)
            #expect(try Self.types(client).filter { $0.type.hasPrefix("l.") }.count == 5)
            for bad in [#""3""#, "-1", "1.5"] {
                let error = try client.error(#"{"op":"types","req":1,"limit":\#(bad)}"#)
                #expect(error.code == "bad_request", "\(error.raw)")
            }
        }
    }

    @Test("dropped counts each drop for the type dropped: drop-new the new event's, drop-old the queued events'")
    func droppedCountsTheDroppedType() throws {
        try withBroker(["--max-outbound", "262144"]) { broker in
            let newest = try broker.connect()
            try newest.ok(#"{"op":"hello","overflow":"drop-new","req":0}"#)
            try newest.subscribe("dn.>")
            let oldest = try broker.connect()
            try oldest.ok(#"{"op":"hello","overflow":"drop-old","req":0}"#)
            try oldest.subscribe("do.>")
            let publisher = try broker.connect()
            // drop-new: the queue (and the socket buffer) overflow with dn.x (2 MiB, as in OverflowTests).
            let sent = try publisher.publishMany("dn.x", count: 512, padding: 4096)
            // drop-old: do.a fills the queue, do.b pushes the oldest do.a out.
            _ = try publisher.publishMany("do.a", count: 512, padding: 4096)
            _ = try publisher.publishMany("do.b", count: 20, padding: 4096)
            let stats = try publisher.stats()
            let listed = Dictionary(uniqueKeysWithValues: try Self.types(publisher).map { ($0.type, $0.fields) })
            let x = try #require(listed["dn.x"]), a = try #require(listed["do.a"]), b = try #require(listed["do.b"])
            let dropNew = Self.int(x, "dropped") ?? -1
            #expect(dropNew > 0 && dropNew == 512 - sent.filter { $0.delivered == 1 }.count, "\(x)")
            #expect(Self.int(x, "delivered") == sent.filter { $0.delivered == 1 }.count)
            #expect((Self.int(a, "dropped") ?? 0) > 0 && Self.int(b, "dropped") == 0, "\(a) \(b)")
            #expect(Self.int(a, "delivered") == 512 && Self.int(b, "delivered") == 20, "drop-old queues every new event")
            #expect(stats.int("dropped") == dropNew + (Self.int(a, "dropped") ?? 0), "\(stats.raw)")
        }
    }

    @Test("A retained type is listed with retained true, also after a restart that published nothing of it")
    func retainedTypesAreListed() throws {
        let state = try TemporaryDirectory(prefix: "ebstate-")
        defer { state.remove() }
        let first = try BrokerProcess(arguments: ["--state-dir", state.path])
        let client = try first.connect()
        try client.ok(#"{"op":"publish","type":"r.kept","retain":true,"req":1,"data":1}"#)
        try client.publish("r.plain")
        let listed = try Self.types(client).filter { $0.type.hasPrefix("r.") }
        #expect(listed.map(\.type) == ["r.plain", "r.kept"] && listed.map { $0.fields["retained"] as? Bool } == [false, true])
        first.terminate(signal: SIGTERM)
        first.cleanUp()
        try withBroker(["--state-dir", state.path]) { second in
            let client = try second.connect()
            try client.publish("r.new")
            let listed = try Self.types(client).filter { $0.type.hasPrefix("r.") }
            #expect(listed.map(\.type) == ["r.new", "r.kept"], "published first, then the retained types not published in this run")
            let kept = try #require(listed.last?.fields)
            #expect(kept["retained"] as? Bool == true && Self.int(kept, "published") == 0 && kept["last_seq"] is NSNull && kept["last_time"] is NSNull, "\(kept)")
        }
    }
}

@Suite("Per-type counters and the access policy (PROTOCOL.md 1.2)",
       .enabled(if: getuid() == 0 && findInPath("setpriv") != nil && findInPath("socat") != nil, "needs root, setpriv and socat"))
struct TypesPolicyTests {
    @Test("types, top --json and stats --prometheus run as that uid show nothing of a denied type")
    func theCLIShowsNothingOfADeniedType() throws {
        let policy = try AccessPolicyTests.PolicyFile("deny subscribe secret.> user=4321\n")
        try withBroker(["--policy", policy.path]) { broker in
            _ = try AccessPolicyTests.OtherUsers(broker)  // makes the socket reachable for other uids
            let root = try broker.connect()
            try root.publish("secret.x")
            try root.publish("open.y")
            let cli = productsDirectory() + "/eventbus"
            for arguments in [["types", "--json"], ["top", "--json", "--count", "1"], ["stats", "--prometheus"]] {
                let run = try SpawnedProcess("setpriv", ["--reuid", "4321", "--regid", "4321", "--clear-groups", cli, "--socket", broker.socketPath] + arguments,
                                             in: broker.directory).waitBlocking(timeout: .seconds(20))
                #expect(run.status.exitCode == 0 && run.stdout.contains("open.y") && !run.stdout.contains("secret"), "\(arguments): \(run.stdout) \(run.stderr)")
            }
        }
    }
}
