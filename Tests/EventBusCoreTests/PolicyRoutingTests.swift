// The access policy inside the core (Broker+Policy.swift): filtered route
// lists (cache misses and hits), the exact-only path, the `filtered` mark a
// reload recomputes, revocation, the broker's `eventbus.policy.*` events, and
// `origin` on the event frame. The rules themselves are EventBusPolicyTests';
// behaviour with other uids is EventBusScenarios/AccessPolicyScenarios.swift
// (run in process without root, and against eventbusd with real uids).
@testable import EventBusCore
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Policy in routing")
struct PolicyRoutingTests {
    static func policy(_ text: String) throws -> AccessPolicy {
        try AccessPolicy.load([PolicySource(path: "p.conf", text: text)], resolver: TableNameResolver(), brokerUID: 0)
    }

    @Test func aFilteredSubscriptionMissesDeniedTypesOnCacheMissesAndHits() throws {
        let h = BrokerHarness { $0.policy = try? Self.policy("deny subscribe secret.>\n") }
        let reader = h.connect(uid: 1000)
        let root = h.connect(uid: 0)
        h.send(reader, #"{"op":"subscribe","type":">","req":1}"#, #"{"op":"subscribe","type":"secret.x","req":2}"#)
        let replies = h.read(reader)
        #expect(replies.map(\.raw) == [#"{"op":"ok","req":1,"type":">","filtered":true}"#,
                                        #"{"op":"error","req":2,"code":"forbidden","message":"subscribe secret.x denied for uid 1000 by p.conf:1"}"#])
        for _ in 0..<2 {  // the second round is served from the route cache
            h.send(root, #"{"op":"publish","type":"secret.x"}"#, #"{"op":"publish","type":"open.x"}"#)
        }
        #expect(h.read(reader).map(\.type) == ["open.x", "open.x"])
        #expect(reader.session.filteredCount == 1)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aReloadRevokesRecomputesFilteredAndClearsTheRouteCache() throws {
        let h = BrokerHarness()
        let reader = h.connect(uid: 1000)
        let root = h.connect(uid: 0)
        h.send(reader, #"{"op":"subscribe","type":">"}"#, #"{"op":"subscribe","type":"secret.>"}"#)
        h.send(root, #"{"op":"publish","type":"secret.x"}"#)  // caches secret.x -> reader
        #expect(h.read(reader).map(\.type) == ["secret.x"])
        h.record(h.broker.reloadPolicy(try Self.policy("deny subscribe secret.>\n"), at: h.now))
        let frames = h.read(reader)
        #expect(frames.first?.raw == #"{"op":"error","code":"forbidden","type":"secret.>","message":"subscribe secret.> denied for uid 1000 by p.conf:1; subscription removed by the policy reload (generation 2)"}"#)
        #expect(frames.last?.type == "eventbus.policy.reloaded" && frames.last?.raw.hasSuffix(#""data":{"generation":2,"files":["p.conf"]}}"#) == true, "\(frames)")
        #expect(reader.patterns == [Pattern(">")!] && reader.session.filteredCount == 1)
        #expect(h.takeNotices().contains(.policyReloaded(generation: 2, revokedSubscriptions: 1)))
        h.send(root, #"{"op":"publish","type":"secret.x"}"#, #"{"op":"publish","type":"open.x"}"#)
        #expect(h.read(reader).map(\.type) == ["open.x"])
        h.record(h.broker.reloadPolicy(try Self.policy("# nothing\n"), at: h.now))
        #expect(reader.session.filteredCount == 0)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func replaysAndLastThroughAFilteredSubscriptionLeaveOutDeniedTypesAndClearNeedsPublish() throws {
        let h = BrokerHarness { $0.policy = try? Self.policy("deny subscribe secret.>\ndeny publish locked.>\n") }
        let reader = h.connect(uid: 1000)
        let root = h.connect(uid: 0)
        for type in ["secret.a", "open.a", "secret.b", "open.b"] {
            h.send(root, #"{"op":"publish","type":"\#(type)","retain":true}"#)
        }
        h.send(reader, #"{"op":"subscribe","type":">","last":true,"req":1}"#)
        let last = h.read(reader)
        #expect(last.first?.int("retained") == 2 && last.dropFirst().map(\.type) == ["open.a", "open.b"])
        h.send(reader, #"{"op":"subscribe","type":"*.*","since":0}"#)
        #expect(h.read(reader).map(\.seq) == [2, 4], "replayed through the filtered *.*: open only")
        h.send(reader, #"{"op":"clear","type":"locked.x","req":2}"#, #"{"op":"clear","type":"open.a","req":3}"#)
        let replies = h.read(reader)
        #expect(replies.map { $0.code ?? "ok" } == ["forbidden", "ok"])
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aHalfClosedConnectionLeftWithoutSubscriptionsIsClosed() throws {
        let h = BrokerHarness()
        let reader = h.connect(uid: 1000)
        h.send(reader, #"{"op":"subscribe","type":"secret.>"}"#)
        h.endOfInput(reader)
        #expect(!reader.isClosed)
        h.record(h.broker.reloadPolicy(try Self.policy("deny subscribe secret.>\n"), at: h.now))
        #expect(h.lastStep.effects.contains(.close(reader.id, .afterFlush)))
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aRefusedReloadIsAnnouncedAndChangesNothing() throws {
        let h = BrokerHarness { $0.policy = try? Self.policy("deny publish secret.>\n") }
        let watcher = h.connect(uid: 0)
        h.send(watcher, #"{"op":"subscribe","type":"eventbus.policy.>"}"#)
        h.record(h.broker.refusePolicyReload("p.conf:3: bad", at: h.now))
        let event = try #require(h.read(watcher).first)
        #expect(event.type == "eventbus.policy.refused" && event.raw.hasSuffix(#""data":{"generation":1,"error":"p.conf:3: bad"}}"#), "\(event)")
        #expect(event.string("source") == "eventbusd")
        #expect(h.broker.policyGeneration == 1 && !h.broker.policy.paths.isEmpty)
        h.closeAll()
    }

    @Test func originNeedsTheBridgeRightAndIsForwardedUnchanged() throws {
        let h = BrokerHarness()  // no policy file: uid 0 (the broker's here) may bridge
        let subscriber = h.connect()
        let root = h.connect(uid: 0)
        let user = h.connect(uid: 1000)
        h.send(subscriber, #"{"op":"subscribe","type":"remote.>"}"#)
        h.send(user, #"{"op":"publish","type":"remote.x","origin":{"node":"b"},"req":1}"#)
        #expect(h.read(user).first?.code == "forbidden")
        h.send(root, #"{"op":"publish","type":"remote.x","origin":{ "node" : "b", "seq":9 },"data":1}"#)
        let event = try #require(h.read(subscriber).first)
        #expect(event.raw.hasSuffix(#","gid":1000,"origin":{ "node" : "b", "seq":9 },"data":1}"#), "\(event)")
        #expect(h.broker.statistics.published == 1)
        h.closeAll()
    }
}
