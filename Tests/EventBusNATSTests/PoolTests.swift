// The server pool as nats.go keeps it (seeds always kept; discovered servers
// added and removed by later INFOs; new ones shuffled in behind the first
// entry), server URL parsing, and the jittered exponential backoff.
@testable import EventBusNATS
@_spi(Package) import EventBusProtocol
import Testing

func address(_ text: String) -> ServerAddress { ServerAddress(url: text)! }

@Suite struct PoolTests {
    @Test(arguments: [
        ("nats://127.0.0.1:4222", "127.0.0.1", 4222), ("127.0.0.1:15221", "127.0.0.1", 15221),
        ("nats.example", "nats.example", 4222), ("NATS://h:1/", "h", 1), (" h:2 ", "h", 2),
        ("[::1]:4223", "::1", 4223), ("nats://[fe80::1]", "fe80::1", 4222),
    ] as [(String, String, UInt16)])
    func serverURLsParse(text: String, host: String, port: UInt16) {
        let parsed = ServerAddress(url: text)
        #expect(parsed == ServerAddress(host: host, port: port))
    }

    @Test(arguments: ["tls://h:1", "h:0", "h:65536", "h:x", "", "nats://", "::1", "u:p@h:1", "h:1/path", "[::1", "h 1"])
    func badServerURLsAreRefused(text: String) {
        #expect(ServerAddress(url: text) == nil)
    }

    @Test func hostPortMatchesConnectURLsSpelling() {
        #expect(address("nats://127.0.0.1:4222").hostPort == "127.0.0.1:4222")
        #expect(address("[::1]:4222").hostPort == "[::1]:4222")
        #expect(address("h").description == "nats://h:4222")
    }

    @Test func withoutRandomizingTheSeedsKeepTheirOrderAndDuplicatesGo() {
        var random = SplitMix64(seed: 1)
        let pool = ServerPool(seeds: [address("a:1"), address("b:2"), address("nats://a:1")], randomize: false, random: &random)
        #expect(pool.entries.map(\.address.hostPort) == ["a:1", "b:2"])
        #expect(pool.entries.allSatisfy { !$0.isImplicit })
    }

    @Test func rotateMovesTheCurrentServerToTheEnd() {
        var random = SplitMix64(seed: 1)
        var pool = ServerPool(seeds: [address("a:1"), address("b:2"), address("c:3")], randomize: false, random: &random)
        #expect(pool.rotate(after: address("a:1")) == address("b:2"))
        #expect(pool.entries.map(\.address.hostPort) == ["b:2", "c:3", "a:1"])
        #expect(pool.rotate(after: address("c:3")) == address("b:2"), "rotating after a server not first moves only it")
        #expect(pool.entries.map(\.address.hostPort) == ["b:2", "a:1", "c:3"])
    }

    /// One INFO after another: what the pool holds (in order, without randomizing) and who joined.
    @Test(arguments: [
        // A fresh cluster INFO adds the two unknown nodes as implicit entries.
        (["s:1"], [["s:1", "n2:2", "n3:3"]], "s:1", ["s:1", "n2:2*", "n3:3*"], ["n2:2", "n3:3"]),
        // A later INFO without n3 removes it; n2 stays.
        (["s:1"], [["s:1", "n2:2", "n3:3"], ["s:1", "n2:2"]], "s:1", ["s:1", "n2:2*"], []),
        // A seed missing from INFO is never removed.
        (["s:1", "t:9"], [["n2:2"]], "s:1", ["s:1", "t:9", "n2:2*"], ["n2:2"]),
        // The current server stays even when it is implicit and missing (its own INFO in lame duck mode).
        (["s:1"], [["s:1", "n2:2"], ["s:1"]], "n2:2", ["s:1", "n2:2*"], []),
        // An empty list changes nothing (a server may omit connect_urls).
        (["s:1"], [["s:1", "n2:2"], []], "s:1", ["s:1", "n2:2*"], []),
        // A node that left and came back rejoins.
        (["s:1"], [["s:1", "n2:2"], ["s:1"], ["s:1", "n2:2"]], "s:1", ["s:1", "n2:2*"], ["n2:2"]),
        // A garbled URL is skipped.
        (["s:1"], [["s:1", "n2:x", "n3:3"]], "s:1", ["s:1", "n3:3*"], ["n3:3"]),
    ] as [([String], [[String]], String, [String], [String])])
    func connectURLsUpdateThePoolAsNatsGoDoes(seeds: [String], infos: [[String]], current: String, pool expected: [String], joinedLast: [String]) {
        var random = SplitMix64(seed: 7)
        var pool = ServerPool(seeds: seeds.map(address), randomize: false, random: &random)
        var joined: [ServerAddress] = []
        for urls in infos {
            joined = pool.apply(connectURLs: urls, current: address(current), randomize: false, random: &random)
        }
        #expect(pool.entries.map { $0.address.hostPort + ($0.isImplicit ? "*" : "") } == expected)
        #expect(joined.map(\.hostPort) == joinedLast)
    }

    @Test func newServersAreShuffledInButTheFirstEntryStaysFirst() {
        var orders: Set<[String]> = []
        for seed in UInt64(0)..<40 {
            var random = SplitMix64(seed: seed)
            var pool = ServerPool(seeds: [address("s:1")], randomize: true, random: &random)
            pool.apply(connectURLs: (2...6).map { "n\($0):\($0)" }, current: address("s:1"), randomize: true, random: &random)
            #expect(pool.entries.first?.address.hostPort == "s:1")
            #expect(Set(pool.entries.map(\.address.hostPort)) == Set(["s:1"] + (2...6).map { "n\($0):\($0)" }))
            orders.insert(pool.entries.map(\.address.hostPort))
        }
        #expect(orders.count > 10, "shuffled: \(orders.count) distinct orders in 40 seeds")
    }
}

@Suite struct BackoffTests {
    @Test func theCeilingDoublesFromInitialToMaximumAndStaysThereForever() {
        let backoff = Backoff()
        let ceilings = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 10_000, Int.max].map { backoff.ceilingNanoseconds(afterFailedPasses: $0) / 1_000_000 }
        #expect(ceilings == [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000, 30000, 30000])
    }

    @Test(arguments: [0.0, 0.25, 0.5, 0.999_999])
    func theJitterTakesUpToHalfTheCeilingOff(random: Double) {
        let backoff = Backoff()
        for passes in 1...12 {
            let ceiling = backoff.ceilingNanoseconds(afterFailedPasses: passes)
            let delay = backoff.delayNanoseconds(afterFailedPasses: passes, random: random)
            #expect(delay <= ceiling && delay > ceiling / 2 - 1)
            #expect(delay == Int64(Double(ceiling) * (1 - 0.5 * random)))
        }
    }

    @Test func testsCanShortenIt() {
        let backoff = Backoff(initial: .milliseconds(10), maximum: .milliseconds(40), jitter: 0)
        #expect((1...5).map { backoff.delayNanoseconds(afterFailedPasses: $0, random: 0.9) / 1_000_000 } == [10, 20, 40, 40, 40])
    }
}
