// Flow control (PROTOCOL.md "Flow control (1.2)") as steps of the core: a
// hold is a `.pauseReading` of the publisher with its event unrouted (no
// seq), the release a `.resumeReading` once the holder's queue is below
// half, the stall timeout a `tick` that makes the holder behind, and a
// holder that closes releases at once. The socket-level behaviour is in
// Tests/EventBusIntegrationTests/FlowControlTests.swift.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Flow control")
struct FlowControlCoreTests {
    /// Room for about 8 events of `paddedPublish`; half is 4.
    static let e = eventSize()
    static func configure(_ c: inout BrokerConfiguration) {
        c.maxOutboundBytes = 8 * e + e / 2
        c.stallTimeoutNanoseconds = 1_000_000_000
    }

    /// Publishes until the publisher is held; returns how many were routed.
    static func fillUntilHeld(_ h: BrokerHarness, _ p: Connection, limit: Int = 64) -> Int {
        for i in 1...limit {
            let step = h.send(p, paddedPublish(req: i))
            if step.effects.contains(.pauseReading(p.id)) { return i - 1 }
        }
        return limit
    }

    @Test func aFullWaitSubscriberHoldsASameUIDPublisherWithItsEventUnroutedAndReleasesItBelowHalf() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        let routed = Self.fillUntilHeld(h, p)
        #expect(routed >= 4 && routed <= 8, "routed \(routed)")
        #expect(p.flow.isHeld && s.flow.holding.count == 1 && h.broker.statistics.held == 1 && h.broker.statistics.holds == 1)
        #expect(h.broker.statistics.published == UInt64(routed), "the held event took no seq")
        #expect(s.outbound.chargedBytes <= h.broker.configuration.maxOutboundBytes)
        #expect(h.broker.statistics.dropped == 0)
        #expect(p.hasBufferedInput)
        #expect(s.account.halfFullWaiters == 1)
        h.checkAccounts()
        // Input that arrives while held waits behind the held frame.
        h.send(p, paddedPublish(req: 100))
        #expect(h.broker.statistics.published == UInt64(routed))
        // Reading one event leaves the queue above half: still held.
        _ = h.read(s, maxBytes: Self.e - OutboundQueue.entryOverheadBytes)
        #expect(p.flow.isHeld)
        // Below half: released; the next receive routes the held frame first.
        let frames = h.read(s)
        #expect(frames.count == routed - 1)
        #expect(h.takeEffects().contains(.resumeReading(p.id)))
        _ = h.sendRaw(p, [])
        let replies = h.read(p).compactMap { $0.int("seq") }
        #expect(replies == Array(1...(routed + 2)), "every publish answered in order: \(replies)")
        #expect(!p.flow.isHeld && h.broker.statistics.held == 0 && h.broker.statistics.dropped == 0)
        h.checkAccounts()
        h.closeAll()
    }

    @Test func anotherUIDIsNotHeldItsEventIsDroppedAsDropNew() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(uid: 1000), p = h.connect(uid: 2000)
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        for i in 1...20 { h.send(p, paddedPublish(req: i)) }
        #expect(!p.flow.isHeld && h.broker.statistics.holds == 0)
        #expect(h.broker.statistics.dropped > 0 && s.pendingDropCount > 0)
        #expect(p.account.halfFullWaiters == 0, "a full subscriber of another uid costs uid 2000 no walk")
        h.checkAccounts()
        h.closeAll()
    }

    @Test func theStallTimeoutMakesTheHolderBehindAndReleasesItsPublishers() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        _ = Self.fillUntilHeld(h, p)
        #expect(h.broker.needsTicks)
        #expect(h.broker.tickIntervalNanoseconds == 50_000_000)
        h.elapsedNanoseconds += 900_000_000
        h.tick()
        #expect(p.flow.isHeld, "not yet")
        h.elapsedNanoseconds += 200_000_000
        let step = h.tick()
        #expect(step.effects.contains(.resumeReading(p.id)) && step.effects.contains(.notice(.stalled(s.id, pid: s.credentials.pid))))
        #expect(s.flow.behind && !p.flow.isHeld && h.broker.statistics.stalls == 1)
        // Behind: drop-new, no new hold.
        _ = h.sendRaw(p, [])
        for i in 0..<10 { h.send(p, paddedPublish(req: 200 + i)) }
        #expect(!p.flow.isHeld && h.broker.statistics.dropped > 0)
        // Its queue empties: itself again.
        _ = h.read(s)
        #expect(!s.flow.behind)
        h.closeAll()
    }

    @Test func aHolderThatClosesReleasesAtOnceAndAHeldPublisherThatClosesIsForgotten() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(), p = h.connect()
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        _ = Self.fillUntilHeld(h, p)
        h.close(s)
        #expect(!p.flow.isHeld && h.broker.statistics.held == 0)
        let s2 = h.connect()
        h.send(s2, #"{"op":"subscribe","type":">"}"#)
        _ = h.sendRaw(p, [])
        _ = Self.fillUntilHeld(h, p)
        #expect(s2.flow.holding.count == 1)
        h.close(p)
        #expect(s2.flow.holding.isEmpty && h.broker.statistics.held == 0)
        h.checkAccounts()
        h.closeAll()
    }

    @Test func dropNewDropOldAndDisconnectNeverHold() {
        for overflow in ["drop-new", "drop-old", "disconnect"] {
            let h = BrokerHarness(Self.configure)
            let s = h.connect(), p = h.connect()
            h.send(s, #"{"op":"hello","overflow":"\#(overflow)"}"#, #"{"op":"subscribe","type":">"}"#)
            for i in 1...20 { h.send(p, paddedPublish(req: i)) }
            #expect(h.broker.statistics.holds == 0, "\(overflow)")
            h.closeAll()
        }
    }
}
