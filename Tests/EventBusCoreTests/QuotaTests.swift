// Per-uid quotas in the core (PROTOCOL.md "Quotas (1.1)"), one test per row
// of the quota table and per rule: connection limits with the slots kept for
// uid 0, subscription limits, inbound budgets with back-pressure (the oldest
// incomplete frame read alone), the frame timeout, outbound back-pressure per
// uid and in total, the fair share per publisher uid, retained bytes, and the
// accounts `stats.me` and `clients` report.
@testable import EventBusCore
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import Foundation
import Testing

/// The `limit`/`timeout` error frame text of a refusal.
func refusalText(_ result: Result<Connection, RefusedConnection>) -> String? {
    guard case .failure(let refused) = result else { return nil }
    return String(decoding: refused.frame, as: UTF8.self)
}

/// The same effects in any order.
func sameEffects(_ a: [BrokerEffect], _ b: [BrokerEffect]) -> Bool {
    a.map { "\($0)" }.sorted() == b.map { "\($0)" }.sorted()
}

@Suite("Quotas")
struct QuotaTests {
    // MARK: Connections

    @Test func aUidGetsItsConnectionLimitAndRootAndTheBrokersUidNone() {
        let h = BrokerHarness { $0.quotas.maxConnectionsPerUID = 3; $0.ownCredentials = Credentials(pid: 1, uid: 999, gid: 999) }
        for _ in 0..<3 { _ = h.connect(uid: 2001) }
        let text = refusalText(h.tryConnect(uid: 2001))
        #expect(text?.contains(#""code":"limit""#) == true && text?.contains("3 connections for uid 2001") == true)
        _ = h.connect(uid: 2002)  // another uid is not affected
        for _ in 0..<5 { _ = h.connect(uid: 0); _ = h.connect(uid: 999) }
        #expect(h.broker.connectionCount == 14)
        h.checkInvariants()
        h.closeAll()
        #expect(h.broker.ledger.accounts.isEmpty, "accounts go with their last connection")
    }

    @Test func theLastConnectionSlotsAreKeptForRoot() {
        let h = BrokerHarness { $0.maxConnections = 400; $0.quotas.maxConnectionsPerUID = 1000 }
        for _ in 0..<336 { _ = h.connect(uid: 2001) }
        #expect(refusalText(h.tryConnect(uid: 2002))?.contains("the last 64 kept for uid 0") == true)
        for _ in 0..<64 { _ = h.connect(uid: 0) }
        #expect(refusalText(h.tryConnect(uid: 0))?.contains("too many connections (limit 400)") == true)
        h.closeAll()
    }

    @Test func aLimitLineChangesTheUidsLimit() {
        let h = BrokerHarness { $0.quotas.maxConnectionsPerUID = 2 }
        _ = h.connect(uid: 2001)
        _ = h.connect(uid: 2001)
        #expect(refusalText(h.tryConnect(uid: 2001)) != nil)
        guard case .success = h.tryConnect(uid: 2001, limits: UserLimitOverrides([.connections: 3])) else {
            Issue.record("the override did not raise the limit")
            return
        }
        #expect(refusalText(h.tryConnect(uid: 2001, limits: UserLimitOverrides([.connections: 3]))) != nil)
        // `unlimited`
        for _ in 0..<5 { _ = h.tryConnect(uid: 2001, limits: UserLimitOverrides([.connections: Int?.none])) }
        #expect(h.broker.ledger.accounts[2001]?.members.count == 8)
        h.closeAll()
    }

    @Test func limitLinesOfThePolicyFileSetAUidsLimitsAndAReloadChangesThem() throws {
        func policy(_ text: String) throws -> AccessPolicy {
            try AccessPolicy.load([PolicySource(path: "p.conf", text: text)], resolver: TableNameResolver(), brokerUID: 0)
        }
        let h = BrokerHarness { $0.quotas.maxConnectionsPerUID = 2; $0.policy = try? policy("limit connections 3 user=2001\nlimit subscriptions unlimited user=2001\n") }
        for _ in 0..<3 { _ = h.connect(uid: 2001) }
        #expect(refusalText(h.tryConnect(uid: 2001))?.contains("3 connections for uid 2001") == true)
        #expect(h.broker.ledger.accounts[2001]?.limits.subscriptions == nil, "unlimited")
        _ = h.connect(uid: 2002)
        _ = h.connect(uid: 2002)
        #expect(refusalText(h.tryConnect(uid: 2002)) != nil, "other uids keep the default")
        h.record(h.broker.reloadPolicy(try policy("limit connections 5 user=2001\n"), at: h.now))
        #expect(h.broker.ledger.accounts[2001]?.limits.connections == 5 && h.broker.ledger.accounts[2001]?.limits.subscriptions == 16384)
        _ = h.connect(uid: 2001)
        h.closeAll()
    }

    // MARK: Subscriptions

    @Test func subscriptionsAreLimitedPerUidOverItsConnectionsAndInTotal() {
        let h = BrokerHarness { $0.quotas.maxSubscriptionsPerUID = 5; $0.quotas.maxSubscriptions = 8 }
        let a = h.connect(uid: 2001), b = h.connect(uid: 2001), root = h.connect(uid: 0)
        for i in 0..<3 { h.send(a, #"{"op":"subscribe","type":"a.\#(i)","req":1}"#) }
        for i in 0..<2 { h.send(b, #"{"op":"subscribe","type":"b.\#(i).>","req":1}"#) }
        h.send(b, #"{"op":"subscribe","type":"b.9","req":7}"#)
        let refusal = h.read(b).last
        #expect(refusal?.code == "limit" && refusal?.string("message")?.contains("5 subscriptions for uid 2001") == true)
        #expect(b.subscriptionCount == 2 && h.broker.ledger.accounts[2001]?.subscriptions == 5)
        for i in 0..<4 { h.send(root, #"{"op":"subscribe","type":"r.\#(i)","req":\#(i)}"#) }
        #expect(h.read(root).map(\.op) == ["ok", "ok", "ok", "error"], "the total bounds root too")
        #expect(h.broker.statistics.subscriptions == 8)
        // Unsubscribing gives the room back; subscribing again the same pattern costs nothing.
        h.send(a, #"{"op":"unsubscribe","type":"a.0"}"#, #"{"op":"subscribe","type":"a.1","req":1}"#, #"{"op":"subscribe","type":"a.0","req":2}"#)
        #expect(h.read(a).suffix(2).map(\.op) == ["ok", "ok"])
        #expect(h.broker.ledger.accounts[2001]!.subscriptionBytes == [Pattern("a.0")!, Pattern("a.1")!, Pattern("a.2")!, Pattern("b.0.>")!, Pattern("b.1.>")!]
            .reduce(0) { $0 + Broker.subscriptionCost($1) })
        h.checkInvariants()
        h.closeAll()
        #expect(h.broker.ledger.totals.subscriptionBytes == 0)
    }

    // MARK: Inbound bytes

    /// Feeds `n` bytes of an unfinished publish frame.
    static func partial(_ n: Int) -> [UInt8] { utf8(#"{"op":"ping","x":""#) + [UInt8](repeating: 0x61, count: n) }

    @Test func overItsInboundBudgetAUidIsReadOneConnectionAtATimeUntilBelowHalf() {
        let h = BrokerHarness { $0.quotas.maxInboundBytesPerUID = 8192 }
        let a = h.connect(uid: 2001), b = h.connect(uid: 2001), c = h.connect(uid: 2001), other = h.connect(uid: 2002)
        h.sendRaw(a, Self.partial(3000))
        h.elapsedNanoseconds += 1_000
        h.sendRaw(b, Self.partial(3000))
        _ = h.takeEffects()
        h.sendRaw(c, Self.partial(3000))  // over 8 KiB: only the oldest incomplete frame (a) is read
        #expect(sameEffects(h.takeEffects(), [.pauseReading(b.id), .pauseReading(c.id)]))
        #expect(a.input.pauses.isEmpty && b.readPaused && c.readPaused && !other.readPaused)
        h.sendRaw(other, Self.partial(3000))
        #expect(h.takeEffects().isEmpty, "another uid is not throttled")
        // a completes its frame: b (now the oldest) is read, c still waits (over half).
        h.sendRaw(a, utf8("\"}\n"))
        #expect(sameEffects(h.takeEffects(), [.resumeReading(b.id), .pauseReading(a.id)]))
        // b completes: below half, everyone is read again.
        h.sendRaw(b, utf8("\"}\n"))
        #expect(sameEffects(h.takeEffects(), [.resumeReading(a.id), .resumeReading(c.id)]))
        #expect(h.broker.ledger.accounts[2001]!.inboundThrottle.isEmpty)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func overTheTotalInboundBudgetOnlyUidsAboveTheirShareAreThrottled() {
        let h = BrokerHarness { $0.quotas.maxInboundBytesPerUID = 1 << 20; $0.quotas.maxInboundBytes = 20000 }
        let big1 = h.connect(uid: 2001), big2 = h.connect(uid: 2001), small = h.connect(uid: 2002), small2 = h.connect(uid: 2002)
        h.sendRaw(small, Self.partial(1000))
        h.sendRaw(big1, Self.partial(11500))
        h.elapsedNanoseconds += 1
        _ = h.takeEffects()
        h.sendRaw(big2, Self.partial(8000))  // total over 20000; 2001 holds more than its half
        #expect(h.takeEffects() == [.pauseReading(big2.id)])
        #expect(h.broker.ledger.totals.inboundThrottled)
        h.sendRaw(small2, Self.partial(50))
        #expect(h.takeEffects().isEmpty && !small.readPaused && !small2.readPaused)
        h.sendRaw(big1, utf8("\"}\n"))  // total below half: throttling ends
        #expect(!h.broker.ledger.totals.inboundThrottled && !big2.readPaused)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func anIncompleteFrameWithoutProgressTimesOut() {
        let h = BrokerHarness { $0.quotas.frameTimeoutNanoseconds = 10_000_000_000 }
        let slow = h.connect(uid: 2001), trickle = h.connect(uid: 2001), idle = h.connect(uid: 2001)
        h.sendRaw(slow, Self.partial(10))
        h.sendRaw(trickle, Self.partial(10))
        h.elapsedNanoseconds += 6_000_000_000
        h.sendRaw(trickle, utf8("a"))  // progress
        #expect(h.tick().isEmpty)
        h.elapsedNanoseconds += 5_000_000_000
        #expect(h.tick().effects == [.close(slow.id, .afterWrite)])
        let last = h.peek(slow).last
        #expect(last?.code == "timeout" && last?.has("req") == false)
        #expect(h.broker.ledger.accounts[2001]!.inboundBytes == trickle.input.inboundCharged, "a closing connection's input is released at once")
        h.elapsedNanoseconds += 5_000_000_000
        #expect(h.tick().effects == [.close(trickle.id, .afterWrite)])
        _ = idle  // no incomplete frame: no timeout
        h.close(slow)
        h.close(trickle)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aConnectionPausedByTheBrokerDoesNotTimeOut() {
        let h = BrokerHarness { $0.quotas.frameTimeoutNanoseconds = 10_000_000_000; $0.quotas.maxInboundBytesPerUID = 4096 }
        let a = h.connect(uid: 2001), b = h.connect(uid: 2001)
        h.sendRaw(a, Self.partial(3000))
        h.elapsedNanoseconds += 1
        h.sendRaw(b, Self.partial(3000))  // b is paused: a is the oldest
        #expect(b.readPaused)
        h.elapsedNanoseconds += 11_000_000_000
        #expect(sameEffects(h.tick().effects, [.close(a.id, .afterWrite), .resumeReading(b.id)]), "only the connection being read; then b is")
        h.close(a)
        #expect(!b.readPaused)
        h.elapsedNanoseconds += 5_000_000_000
        #expect(h.tick().isEmpty, "its clock started again when reading resumed")
        h.checkInvariants()
        h.closeAll()
    }

    // MARK: Outbound bytes

    @Test func repliesOverAUidsOutboundLimitPauseItsConnectionsUntilBelowHalf() {
        let h = BrokerHarness { $0.quotas.maxOutboundBytesPerUID = 1000 }
        let a = h.connect(uid: 2001), b = h.connect(uid: 2001), other = h.connect(uid: 2002)
        let pings = String(repeating: #"{"op":"ping","req":12345}"# + "\n", count: 30)  // 25-byte replies
        h.sendRaw(a, utf8(pings))
        h.sendRaw(b, utf8(pings))
        #expect(b.readPaused)
        #expect(h.broker.ledger.accounts[2001]!.queuedBytes <= 1000 + 25 + 2 * OutboundQueue.entryOverheadBytes, "one frame of overshoot at most")
        h.sendRaw(other, utf8(pings))
        #expect(!other.readPaused)
        #expect(!a.readPaused, "a connection is paused when it asks for more, not before")
        h.send(a, #"{"op":"ping","req":1}"#)
        #expect(a.readPaused && b.readPaused)
        _ = h.read(a)
        #expect(!a.readPaused && !b.readPaused, "below half of the uid's limit: both resume")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func eventsOverAUidsOutboundLimitAreDroppedForItsConnections() {
        let e = eventSize()
        let h = BrokerHarness { $0.quotas.maxOutboundBytesPerUID = 3 * e }
        let s1 = h.connect(uid: 2002), s2 = h.connect(uid: 2002), p = h.connect(uid: 0)
        h.send(s1, #"{"op":"subscribe","type":">"}"#)
        h.send(s2, #"{"op":"subscribe","type":">"}"#)
        for i in 1...3 { h.send(p, paddedPublish(req: i)) }
        #expect(h.read(p).map { $0.int("delivered") } == [2, 1, 0])
        #expect(s1.droppedCount + s2.droppedCount == 3)
        h.checkInvariants()
        h.closeAll()
    }

    // MARK: Fair share

    @Test func anotherUidsEventsStillGetIntoAQueueOneUidFloods() {
        let e = eventSize()
        let h = BrokerHarness { $0.maxOutboundBytes = 20 * e }
        let s = h.connect(uid: 2002), flood = h.connect(uid: 2001), root = h.connect(uid: 0)
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        for _ in 0..<40 { h.send(flood, paddedPublish("x.flood")) }
        let floodHeld = s.accounting.actorShares[2001] ?? 0
        #expect(floodHeld <= 10 * e + e, "one publisher uid takes about half of an idle subscriber's budget")
        #expect(s.pendingDropCount > 0)
        for _ in 0..<5 { h.send(root, paddedPublish("system.tick")) }
        let frames = h.read(s)
        #expect(frames.filter { $0.type == "system.tick" }.count == 5, "root's events all got in")
        #expect(!s.isClosed && s.closing == nil, "never disconnected under drop-new")
        // Its own uid's events are outside the fair share too.
        h.checkInvariants()
        h.closeAll()
    }

    @Test func underDropOldAFloodingUidLosesItsOwnOldestEventsOnly() {
        let e = eventSize()
        let h = BrokerHarness { $0.maxOutboundBytes = 20 * e }
        let s = h.connect(uid: 2002), flood = h.connect(uid: 2001), root = h.connect(uid: 0)
        h.send(s, #"{"op":"hello","overflow":"drop-old"}"#, #"{"op":"subscribe","type":">"}"#)
        for _ in 0..<3 { h.send(root, paddedPublish("system.tick")) }
        for _ in 0..<40 { h.send(flood, paddedPublish("x.flood")) }
        let frames = h.read(s)
        #expect(frames.filter { $0.type == "system.tick" }.count == 3, "root's older events were not evicted")
        let floods = frames.filter { $0.type == "x.flood" }.compactMap(\.seq)
        #expect(floods.last == 43, "the newest flood event is there")
        let drops = frames.compactMap(dropped)
        #expect(drops.reduce(0) { $0 + $1.0 } + floods.count == 40)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aFrameKeptBeyondItsPublishIsQueuedByReferenceUnderTheSameLimits() {
        let h = BrokerHarness { $0.maxOutboundBytes = 300 }
        let s = h.connect(uid: 2002)
        let frame = utf8(#"{"op":"event","seq":1,"type":"t","data":"\#(String(repeating: "x", count: 100))"}"#) + [0x0A]
        let kept = frame.withUnsafeBytes { OutboundChunk.copying($0) }
        #expect(h.broker.offer(kept, seq: 1, to: s))
        #expect(s.outbound.entries[s.outbound.head].chunk === kept, "shared, not copied")
        #expect(s.outbound.chargedBytes == frame.count + OutboundQueue.entryOverheadBytes)
        #expect(!h.broker.offer(kept, seq: 2, to: s) || !h.broker.offer(kept, seq: 3, to: s), "the outbound limit applies")
        #expect(h.read(s).first?.seq == 1)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func theFairShareFormulaIsDbusBrokers() {
        // (users + 1) · (charge + share) − share ≤ remaining
        #expect(Broker.fairShareAllows(charge: 10, share: 0, users: 0, remaining: 10))
        #expect(!Broker.fairShareAllows(charge: 10, share: 40, users: 1, remaining: 50))  // 2·50−40 = 60 > 50
        #expect(Broker.fairShareAllows(charge: 5, share: 40, users: 1, remaining: 50))    // 2·45−40 = 50
        #expect(!Broker.fairShareAllows(charge: 10, share: 0, users: 2, remaining: 29))   // 3·10 = 30
    }

    // MARK: Retained bytes

    @Test func retainedChargesAreLimitedPerUidAndInTotal() {
        let h = BrokerHarness { $0.quotas.maxRetainedBytes = 8000; $0.quotas.maxRetainedEvents = 3 }
        let broker = h.broker
        let a = RetainedCharge(uid: 2001, bytes: 600)
        #expect(broker.retainedLimitError(for: a, replacing: nil) == nil)
        broker.chargeRetained(a)
        // Per uid: 1/8 of 8000 = 1000 bytes.
        #expect(broker.retainedLimitError(for: RetainedCharge(uid: 2001, bytes: 500), replacing: nil)?.code == .limit)
        #expect(broker.retainedLimitError(for: RetainedCharge(uid: 2001, bytes: 900), replacing: a) == nil, "replacing its own frees its bytes")
        #expect(broker.retainedLimitError(for: RetainedCharge(uid: 0, bytes: 5000), replacing: nil) == nil, "uid 0: no per-uid limit")
        broker.chargeRetained(RetainedCharge(uid: 0, bytes: 5000))
        broker.chargeRetained(RetainedCharge(uid: 2002, bytes: 100))
        #expect(broker.retainedLimitError(for: RetainedCharge(uid: 2003, bytes: 10), replacing: nil)?.message.contains("too many retained events") == true)
        #expect(broker.retainedLimitError(for: RetainedCharge(uid: 0, bytes: 3000), replacing: RetainedCharge(uid: 2002, bytes: 100))?.message.contains("--max-retained-bytes") == true)
        let c = h.connect(uid: 2001)
        h.send(c, #"{"op":"stats","req":1}"#)
        let me = h.read(c).first?.fields["me"] as? [String: Any]
        #expect(me?["retained_bytes"] as? Int == 600)
        broker.releaseRetained(a)
        broker.releaseRetained(RetainedCharge(uid: 0, bytes: 5000))
        broker.releaseRetained(RetainedCharge(uid: 2002, bytes: 100))
        #expect(broker.ledger.totals.retainedBytes == 0 && broker.ledger.accounts.count == 1)
        h.closeAll()
    }

    // MARK: Introspection

    @Test func statsCarriesTheCallersOwnUsageAndLimits() {
        let h = BrokerHarness()
        let a = h.connect(uid: 2001), b = h.connect(uid: 2001), root = h.connect(uid: 0)
        h.send(b, #"{"op":"subscribe","type":"a.>"}"#)
        h.sendRaw(b, Self.partial(100))
        h.send(a, #"{"op":"stats","req":1}"#)
        let me = h.read(a).first?.fields["me"] as? [String: Any]
        #expect(me?["uid"] as? Int == 2001 && me?["connections"] as? Int == 2 && me?["subscriptions"] as? Int == 1)
        #expect((me?["inbound_bytes"] as? Int ?? 0) >= 100)
        let limits = me?["limits"] as? [String: Any]
        #expect(limits?["connections"] as? Int == 256 && limits?["subscriptions"] as? Int == 16384)
        #expect(limits?["inbound_bytes"] as? Int == 16 << 20 && limits?["queued_bytes"] as? Int == 64 << 20 && limits?["retained_bytes"] as? Int == 8 << 20)
        h.send(root, #"{"op":"stats","req":1}"#)
        let rootLimits = (h.read(root).first?.fields["me"] as? [String: Any])?["limits"] as? [String: Any]
        #expect(rootLimits?["connections"] is NSNull, "uid 0 has no per-uid limit")
        h.closeAll()
    }

    @Test func clientsShowsRootEveryoneAndOthersTheirOwnUid() {
        let h = BrokerHarness()
        let a = h.connect(uid: 2001), b = h.connect(uid: 2002), root = h.connect(uid: 0)
        h.send(a, #"{"op":"hello","client":"app-a","echo":true}"#, #"{"op":"subscribe","type":"x.>"}"#, #"{"op":"publish","type":"x.y"}"#)
        h.send(b, #"{"op":"hello","overflow":"drop-old"}"#)
        h.send(a, #"{"op":"clients","req":1}"#)
        let own = (h.read(a).last?.fields["clients"] as? [[String: Any]]) ?? []
        #expect(own.count == 1)
        let entry = own.first ?? [:]
        #expect(entry["conn"] as? Int == Int(a.publicID) && entry["client"] as? String == "app-a" && entry["uid"] as? Int == 2001)
        #expect(entry["patterns"] as? [String] == ["x.>"] && entry["published"] as? Int == 1 && entry["delivered"] as? Int == 1)
        #expect(entry["echo"] as? Bool == true && entry["overflow"] as? String == "wait" && entry["since"] as? String == "2023-11-14T22:13:20.000Z")
        #expect(entry["pid"] != nil && entry["gid"] != nil && entry["queued_bytes"] != nil && entry["dropped"] as? Int == 0)
        #expect(entry["holding"] as? Int == 0 && entry["held"] as? Bool == false && entry["behind"] as? Bool == false)
        h.send(root, #"{"op":"clients","req":1}"#)
        let all = (h.read(root).last?.fields["clients"] as? [[String: Any]]) ?? []
        #expect(all.compactMap { $0["conn"] as? Int } == [a, b, root].map { Int($0.publicID) }, "in the order they came, by their public ids")
        #expect(all[1]["client"] is NSNull && all[1]["overflow"] as? String == "drop-old")
        h.closeAll()
    }

    // MARK: Routing cache

    @Test func aWildcardChangeMakesStaleOnlyTheCachedTypesItCanMatch() {
        let h = BrokerHarness()
        let s = h.connect(), p = h.connect(), churn = h.connect()
        h.send(s, #"{"op":"subscribe","type":"x.*"}"#, #"{"op":"subscribe","type":"a.b.c"}"#)
        h.send(p, #"{"op":"publish","type":"x.y"}"#, #"{"op":"publish","type":"a.b.c"}"#, #"{"op":"publish","type":"a.b"}"#)
        let index = h.broker.index
        #expect(index.cache["x.y"]?.isValid == true && index.cache["a.b.c"]?.isValid == true)
        h.send(churn, #"{"op":"subscribe","type":"a.*.c"}"#)
        #expect(index.cache["a.b.c"]?.isValid == false, "a.*.c can match a.b.c")
        #expect(index.cache["x.y"]?.isValid == true && index.cache["a.b"]?.isValid == true, "nor x.y nor a.b")
        h.send(churn, #"{"op":"unsubscribe","type":"a.*.c"}"#, #"{"op":"subscribe","type":"a.>"}"#)
        #expect(index.cache["a.b"]?.isValid == false && index.cache["x.y"]?.isValid == true)
        h.send(p, #"{"op":"publish","type":"a.b","req":1}"#)
        #expect(h.read(p).last?.int("delivered") == 1, "rebuilt with the new pattern")
        h.checkInvariants()
        h.closeAll()
    }
}

@Suite("Quotas: inbound totals under load")
struct InboundTotalLoadTests {
    /// 8 uids of 64 connections, joining one after the other, each feeding
    /// frames of 1 MiB − 4 bytes in 64 KiB reads, served round robin as the
    /// server would (only connections not paused).
    @Test func manyUidsFeedingIncompleteFramesStayNearTheTotalBudget() {
        let chunk = 65536
        let h = BrokerHarness { _ in }
        var conns: [Connection] = []
        var fed: [ObjectIdentifier: Int] = [:]
        let start = utf8(#"{"op":"ping","x":""#)
        for uid in UInt32(2001)...2008 {
            for _ in 0..<64 { conns.append(h.connect(uid: uid)) }
            for _ in 0..<6 {
                for c in conns where !c.readPaused && fed[ObjectIdentifier(c), default: 0] + chunk < (1 << 20) {
                    let first = fed[ObjectIdentifier(c), default: 0] == 0
                    h.sendRaw(c, first ? start + [UInt8](repeating: 0x61, count: chunk - start.count) : [UInt8](repeating: 0x61, count: chunk))
                    fed[ObjectIdentifier(c), default: 0] += chunk
                }
            }
        }
        let held = h.broker.ledger.totals.inboundBytes
        let perUID = (UInt32(2001)...2008).map { uid -> String in
            let a = h.broker.ledger.accounts[uid]!
            return "\(uid): \(a.inboundBytes >> 20) MiB \(a.inboundThrottle.rawValue) paused \(a.members.filter(\.readPaused).count) holders \(a.inboundHolders)"
        }
        // Over the total only uids above their share stop: the uids that came
        // later still get their share, so the bound is twice the budget plus
        // the frame each throttled uid's one connection may finish.
        #expect(held <= 2 * (64 << 20) + 8 * (2 << 20), "held \(held >> 20) MiB; per uid \(perUID)")
        #expect(h.broker.ledger.totals.inboundThrottled)
        #expect(perUID.allSatisfy { !$0.contains(" 0 MiB") }, "every uid got some of its input read: \(perUID)")
        h.checkInvariants()
        for c in conns { h.close(c) }
    }
}
