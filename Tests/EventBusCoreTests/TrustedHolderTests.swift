// (issue 37) A holder with `allow hold` bounded in time as well as in
// progress (Broker+FlowControl.swift `checkTrustedHolder`): one that keeps
// another uid's publisher held for 95 % of `--trusted-hold-window` while
// taking bytes (so never stalled) is behind for other uids: the publisher is
// released, the holder counted as stalled, later events of other uids that
// do not fit dropped for it, until its queue is empty; its own uid's
// publishers it still holds. One that holds for less of the window is left alone.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Trusted holders bounded in time")
struct TrustedHolderTests {
    static let e = eventSize()

    static func configure(_ c: inout BrokerConfiguration) {
        c.maxOutboundBytes = 8 * e + e / 2
        c.stallTimeoutNanoseconds = 1_000_000_000
        c.trustedHoldWindowNanoseconds = 2_000_000_000
        c.policy = try? PolicyRoutingTests.policy("allow hold - user=1000\n")
    }

    /// Advances the harness by `steps` ticks of 100 ms, the holder taking a
    /// few bytes at each (progress: never stalled), or none.
    static func run(_ h: BrokerHarness, _ holder: Connection, steps: Int, taking: Int = 3) {
        for _ in 0..<steps {
            h.elapsedNanoseconds += 100_000_000
            if taking > 0 { _ = h.read(holder, maxBytes: taking) }
            h.tick()
        }
    }

    @Test func aTrustedHolderThatKeepsAnotherUIDsPublisherHeldIsBehindForItAfterTheWindow() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(uid: 1000), p = h.connect(uid: 0)
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        _ = FlowControlCoreTests.fillUntilHeld(h, p)
        #expect(p.flow.isHeld, "allow hold: another uid's publisher is held")
        Self.run(h, s, steps: 15)
        #expect(p.flow.isHeld && h.broker.statistics.stalls == 0, "taking bytes, within the window: still held")
        Self.run(h, s, steps: 10)
        #expect(!p.flow.isHeld, "held for the whole window: released")
        #expect(s.flow.trustBehind && !s.flow.behind && h.broker.statistics.stalls == 1)
        #expect(h.takeNotices().contains(.stalled(s.id, pid: s.credentials.pid)))
        // Behind for other uids: p is not held again, its events that do not fit are dropped for s.
        _ = h.sendRaw(p, [])
        for i in 0..<10 { h.send(p, paddedPublish(req: 300 + i)) }
        #expect(!p.flow.isHeld && s.pendingDropCount > 0)
        // Its own uid's publisher it still holds.
        let own = h.connect(uid: 1000)
        h.send(own, paddedPublish(req: 1))
        #expect(own.flow.isHeld, "its own uid's publisher: held as before")
        // Its queue empties: it may hold other uids again.
        while !s.outbound.isEmpty { _ = h.read(s) }
        #expect(!s.flow.trustBehind)
        h.closeAll()
    }

    @Test func aTrustedHolderThatReleasesItsPublisherOftenEnoughIsLeftAlone() {
        let h = BrokerHarness(Self.configure)
        let s = h.connect(uid: 1000), p = h.connect(uid: 0)
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        for _ in 0..<6 {
            _ = FlowControlCoreTests.fillUntilHeld(h, p)
            Self.run(h, s, steps: 5)  // held 0.5 s
            while p.flow.isHeld || !s.outbound.isEmpty { _ = h.read(s) }  // then it catches up
            _ = h.sendRaw(p, [])
            Self.run(h, s, steps: 1, taking: 0)  // 0.1 s not held
        }
        #expect(!s.flow.trustBehind && h.broker.statistics.stalls == 0, "held about 80 % of each window: left alone")
        #expect(h.broker.statistics.dropped == 0)
        h.closeAll()
    }
}
