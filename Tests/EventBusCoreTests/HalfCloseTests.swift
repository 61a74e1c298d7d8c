// Half-close and shutdown (PROTOCOL.md "Semantics"): after EOF every frame the
// client wrote is handled (a last one without LF too) and every reply
// written; a connection with subscriptions keeps receiving events, one without
// is closed once its replies are written.
@testable import EventBusCore
import EventBusProtocol
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
        h.broker.endOfInput(c, at: h.now)
        #expect(c.inputClosed && !c.wantsInput)
        #expect(!c.readyToClose, "replies are still queued")
        #expect(h.read(c, maxBytes: 5).isEmpty)
        #expect(!c.readyToClose)
        #expect(h.read(c).map { $0.int("req") } == [1, 2])
        #expect(c.readyToClose)
        #expect(h.read(s).count == 1, "the publish before EOF was routed")
        h.broker.close(c)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func endOfInputWithNothingQueuedIsReadyToCloseAtOnce() {
        let h = BrokerHarness()
        let c = h.connect()
        h.send(c, #"{"op":"ping"}"#)
        h.broker.endOfInput(c, at: h.now)
        #expect(c.readyToClose)
        h.closeAll()
    }

    @Test func endOfInputWithSubscriptionsKeepsReceivingEvents() {
        let h = BrokerHarness()
        let s = h.connect()
        let p = h.connect()
        h.send(s, #"{"op":"subscribe","type":"a.>"}"#)
        h.broker.endOfInput(s, at: h.now)
        #expect(s.inputClosed && !s.wantsInput && !s.readyToClose)
        h.send(p, #"{"op":"publish","type":"a.b","req":1}"#)
        #expect(h.read(p).first?.int("delivered") == 1)
        #expect(h.read(s).map(\.type) == ["a.b"])
        #expect(!s.readyToClose)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func bytesAfterEndOfInputAreIgnored() {
        let h = BrokerHarness()
        let c = h.connect()
        h.broker.endOfInput(c, at: h.now)
        h.send(c, #"{"op":"ping","req":1}"#)
        h.broker.endOfInput(c, at: h.now)
        #expect(h.read(c).isEmpty)
        h.closeAll()
    }

    @Test func aConnectionClosingAfterItsRepliesGetsNoMoreEvents() {
        let h = BrokerHarness()
        let c = h.connect()
        let s = h.connect()
        let p = h.connect()
        h.send(s, #"{"op":"subscribe","type":">"}"#)
        h.send(c, #"{"op":"ping","req":1}"#)
        h.broker.endOfInput(c, at: h.now)
        h.send(p, #"{"op":"publish","type":"x","req":2}"#)
        #expect(h.read(p).first?.int("delivered") == 1)
        #expect(h.read(c).map(\.op) == ["ok"])
        h.closeAll()
    }

    @Test func anOversizedLastFrameAtEndOfInputIsAnsweredFrameTooLarge() {
        let h = BrokerHarness { $0.maxFrameBytes = 32 }
        let c = h.connect()
        h.sendRaw(c, utf8(#"{"op":"ping","req":1,"pad":"\#(String(repeating: "x", count: 40))"}"#))
        h.broker.endOfInput(c, at: h.now)
        let frames = h.read(c)
        #expect(frames.map(\.code) == ["frame_too_large"])
        #expect(c.readyToClose)
        h.closeAll()
    }

    @Test func beginShutdownClosesEveryConnectionOnceFlushed() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect()
        h.send(a, #"{"op":"subscribe","type":"x"}"#, #"{"op":"ping","req":1}"#)
        h.broker.beginShutdown()
        #expect(!a.wantsInput && !b.wantsInput)
        #expect(b.readyToClose)
        #expect(!a.readyToClose)
        _ = h.read(a)
        #expect(a.readyToClose)
        h.closeAll()
    }
}
