// The core's stops for the server's time check (issue 35, PieceCount.swift):
// while `turnBytes` is bounded a `receive` stops every 8 frames with
// `stoppedForTimeCheck` and the rest kept; `continuing: true` goes on with
// what is left of the piece's bytes; unbounded, nothing stops. The core reads
// no clock: whether to go on is the caller's decision.
import EventBusCore
import Testing

@Suite("Time checks of a bounded piece of work")
struct TimeCheckTests {
    /// 20 pings (22 bytes and an LF each), req 11...30.
    static let pings = utf8((11...30).map { #"{"op":"ping","req":\#($0)}"# + "\n" }.joined())

    func replies(_ h: BrokerHarness, _ c: Connection) -> [Int] { h.read(c).compactMap { $0.int("req") } }

    @Test func aBoundedReceiveStopsEveryEightFramesAndGoesOnWhenContinued() {
        let h = BrokerHarness()
        h.broker.turnBytes = 8192
        let c = h.connect()
        h.sendRaw(c, TimeCheckTests.pings)
        #expect(h.broker.stoppedForTimeCheck && c.hasBufferedInput)
        #expect(replies(h, c) == Array(11...18))
        h.record(h.broker.receive(c, RawSpan(), at: h.now, continuing: true))
        #expect(h.broker.stoppedForTimeCheck && replies(h, c) == Array(19...26))
        h.record(h.broker.receive(c, RawSpan(), at: h.now, continuing: true))
        #expect(!h.broker.stoppedForTimeCheck && !c.hasBufferedInput && replies(h, c) == Array(27...30))
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aContinuedReceiveKeepsThePiecesByteBound() {
        let h = BrokerHarness()
        h.broker.turnBytes = 300
        let c = h.connect()
        h.sendRaw(c, TimeCheckTests.pings)
        #expect(h.broker.stoppedForTimeCheck && replies(h, c) == Array(11...18))  // 184 bytes
        // 116 bytes left: the frame that reaches them ends the piece (not a time check).
        h.record(h.broker.receive(c, RawSpan(), at: h.now, continuing: true))
        #expect(!h.broker.stoppedForTimeCheck && c.hasBufferedInput && replies(h, c) == Array(19...24))
        // A new piece (the server's next read of it) has the whole bound again.
        h.sendRaw(c, [])
        #expect(!h.broker.stoppedForTimeCheck && !c.hasBufferedInput && replies(h, c) == Array(25...30))
        h.checkInvariants()
        h.closeAll()
    }

    @Test func anUnboundedReceiveNeverStops() {
        let h = BrokerHarness()
        let c = h.connect()
        h.sendRaw(c, TimeCheckTests.pings)
        #expect(!h.broker.stoppedForTimeCheck && !c.hasBufferedInput && replies(h, c) == Array(11...30))
        h.checkInvariants()
        h.closeAll()
    }
}
