// Half-close and shutdown (PROTOCOL.md "Semantics"): after EOF every frame the
// client wrote is handled (a last one without LF too) and every reply
// written; a connection with subscriptions keeps receiving events, one without
// is closed once its replies are written. Asserted on the steps the broker
// returns: `.close(id, .afterFlush)`, then `.close(id, .now)` from the write
// that empties the queue.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Half-close")
struct HalfCloseTests {
    @Test func endOfInputWithoutSubscriptionsClosesOnceRepliesAreWritten() {
        let h = BrokerHarness()
        let c = h.connect()
        let s = h.connect()
        h.send(s, #"{"op":"subscribe","type":"a"}"#)
        // The last frame has no LF: it is handled at EOF.
        h.sendRaw(c, utf8(#"{"op":"publish","type":"a","req":1}"# + "\n" + #"{"op":"ping","req":2}"#))
        #expect(h.peek(c).count == 1)
        let eof = h.endOfInput(c)
        #expect(eof.effects == [.close(c.id, .afterFlush)], "replies are still queued")
        #expect(eof.output == [c.id])
        #expect(h.read(c, maxBytes: 5).isEmpty)
        #expect(h.lastStep.isEmpty)
        #expect(h.read(c).map { $0.int("req") } == [1, 2])
        #expect(h.lastStep.effects == [.close(c.id, .now)], "closed by the write that emptied the queue")
        #expect(c.isClosed && h.broker.connectionCount == 1)
        #expect(h.read(s).count == 1, "the publish before EOF was routed")
        #expect(h.close(c).isEmpty, "closing twice does nothing")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func endOfInputWithNothingQueuedClosesAtOnce() {
        let h = BrokerHarness()
        let c = h.connect()
        h.send(c, #"{"op":"ping"}"#)
        #expect(h.endOfInput(c) == BrokerStep(effects: [.close(c.id, .now)]))
        #expect(c.isClosed)
        h.closeAll()
    }

    @Test func endOfInputWithSubscriptionsKeepsReceivingEvents() {
        let h = BrokerHarness()
        let s = h.connect()
        let p = h.connect()
        h.send(s, #"{"op":"subscribe","type":"a.>"}"#)
        #expect(h.endOfInput(s).isEmpty)
        h.send(p, #"{"op":"publish","type":"a.b","req":1}"#)
        #expect(h.lastStep.output == [s.id, p.id])
        #expect(h.read(p).first?.int("delivered") == 1)
        #expect(h.read(s).map(\.type) == ["a.b"])
        #expect(h.lastStep.isEmpty, "not closed after its queue is written")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func bytesAfterEndOfInputAreIgnored() {
        let h = BrokerHarness()
        let c = h.connect()
        let s = h.connect()
        h.send(c, #"{"op":"subscribe","type":"x"}"#)
        h.endOfInput(c)
        #expect(h.send(c, #"{"op":"ping","req":1}"#).isEmpty)
        #expect(h.endOfInput(c).isEmpty)
        #expect(h.read(c).isEmpty)
        #expect(h.send(s, #"{"op":"ping","req":1}"#).output == [s.id])
        h.closeAll()
    }

    @Test func aConnectionClosingAfterItsRepliesGetsNoMoreEvents() {
        let h = BrokerHarness()
        let c = h.connect()
        let s = h.connect()
        let p = h.connect()
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        h.send(c, #"{"op":"ping","req":1}"#)
        #expect(h.endOfInput(c).effects == [.close(c.id, .afterFlush)])
        h.send(p, #"{"op":"publish","type":"x","req":2}"#)
        #expect(h.read(p).first?.int("delivered") == 1)
        #expect(h.read(c).map(\.op) == ["ok"])
        h.closeAll()
    }

    @Test func anOversizedLastFrameAtEndOfInputIsAnsweredFrameTooLarge() {
        let h = BrokerHarness { $0.maxFrameBytes = 32 }
        let c = h.connect()
        h.sendRaw(c, utf8(#"{"op":"ping","req":1,"pad":"\#(String(repeating: "x", count: 40))"}"#))
        #expect(h.endOfInput(c) == BrokerStep(output: [c.id], effects: [.close(c.id, .afterFlush)]))
        let frames = h.read(c)
        #expect(frames.map(\.code) == ["frame_too_large"])
        #expect(h.lastStep.effects == [.close(c.id, .now)])
        h.closeAll()
    }

    @Test func beginShutdownClosesEveryConnectionOnceFlushed() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect()
        h.send(a, #"{"op":"subscribe","type":"x"}"#, #"{"op":"ping","req":1}"#)
        #expect(h.record(h.broker.beginShutdown()).effects == [.close(a.id, .afterFlush), .close(b.id, .now)])
        #expect(h.send(a, #"{"op":"ping","req":2}"#).isEmpty, "no input is handled while closing")
        _ = h.read(a, maxBytes: 3)
        #expect(h.lastStep.isEmpty)
        #expect(h.read(a).map { $0.int("req") } == [1])
        #expect(h.lastStep.effects == [.close(a.id, .now)])
        #expect(h.broker.connectionCount == 0)
        h.closeAll()
    }
}
