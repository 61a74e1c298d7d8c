// Unit tests of the client state machine's 1.1 side (PROTOCOL.md "Retained
// events and history"): resubscribing with `since` after a reconnect, gaps,
// registrations with `initial: .last`, `current`, and ending every
// registration of one observer.
@_spi(Package) import EventBusProtocol
import Testing
@testable import EventBus

@Suite struct ClientHistoryStateTests {
    let base = ClientStateTests()

    func retained(_ type: String, seq: UInt64) -> String {
        #"{"op":"event","seq":\#(seq),"type":"\#(type)","time":"t","source":"s","id":"i","pid":1,"uid":2,"gid":3,"data":{},"retained":true}"#
    }

    /// Connects, answering the hello (the first frame) with `instance`.
    func connect(_ state: inout ClientState, instance: String) -> [String] {
        let step = state.connectionEstablished()!
        let frames = base.frames(step)
        let req = Int64(frames[0].split(separator: ",")[1].dropFirst(6))!  // {"op":"hello","req":N,...
        base.perform(base.handle(&state, base.ok(req, #""instance":"\#(instance)","conn":7"#)))
        return frames
    }

    @Test func aReconnectResubscribesWithSinceTheLastSeqSeenAndTheOldInstance() {
        var state = base.makeState()
        _ = connect(&state, instance: "run1")
        _ = state.add(RecordingSink(), on: Pattern("a.>")!)  // req 2
        _ = state.add(RecordingSink(), on: Pattern("b")!)  // req 3, never answered
        base.perform(base.handle(&state, base.ok(2, #""type":"a.>""#)))
        base.perform(base.handle(&state, base.event("a.x", seq: 40)))
        let publish = OutgoingPublish(type: "c", data: base.json("1"), source: nil, id: nil, exclude: nil, completion: base.outcomes.publishCompletion)
        _ = state.publish(publish, now: 0)  // req 4
        base.perform(base.handle(&state, base.ok(4, #""seq":42,"delivered":0"#)))
        base.perform(base.handle(&state, base.event("a.y", seq: 41)))  // a replayed older one does not lower it
        base.perform(state.connectionLost(reason: "gone"))
        let frames = connect(&state, instance: "run1")
        #expect(frames.dropFirst() == [
            #"{"op":"subscribe","req":6,"type":"a.>","since":42,"instance":"run1"}"#,
            #"{"op":"subscribe","req":7,"type":"b"}"#,
        ])
    }

    @Test func aNewBrokerRunStartsTheCountAgainAndItsGapIsReportedOnce() {
        var state = base.makeState()
        _ = connect(&state, instance: "run1")
        let one = RecordingSink(), two = RecordingSink()
        _ = state.add(one, on: Pattern("a")!)  // 2
        _ = state.add(two, on: Pattern("b")!)  // 3
        base.perform(base.handle(&state, base.ok(2)))
        base.perform(base.handle(&state, base.ok(3)))
        base.perform(base.handle(&state, base.event("a", seq: 9)))
        base.perform(state.connectionLost(reason: "gone"))
        let frames = connect(&state, instance: "run2")
        #expect(frames[1].contains(#""since":9,"instance":"run1""#), "the broker decides: a foreign run replays its whole ring")
        var notices = base.perform(base.handle(&state, base.ok(5)))
        notices += base.perform(base.handle(&state, #"{"op":"gap","type":"a","since_seq":0,"first_seq":1}"#))
        notices += base.perform(base.handle(&state, base.ok(6)))
        notices += base.perform(base.handle(&state, #"{"op":"gap","type":"b","since_seq":0,"first_seq":1}"#))
        let gap = BusGap(sinceSeq: 0, firstSeq: 1, brokerRestarted: true)
        #expect(notices == [.gap(gap)])
        #expect(one.gaps.withLock { $0 } == [gap] && two.gaps.withLock { $0 } == [gap])
        base.perform(base.handle(&state, base.event("a", seq: 3)))
        base.perform(state.connectionLost(reason: "again"))
        #expect(connect(&state, instance: "run2")[1].contains(#""since":3,"instance":"run2""#))
    }

    @Test func anInitialLastRegistrationGetsTheRetainedEventFirstAndNothingOlderAfter() {
        var state = base.makeState()
        _ = connect(&state, instance: "run1")
        let old = RecordingSink(), new = RecordingSink()
        _ = state.add(old, on: Pattern("currency.changed")!)  // req 2
        base.perform(base.handle(&state, base.ok(2)))
        let (_, step) = state.add(new, on: Pattern("currency.changed")!, initial: true)
        #expect(base.frames(step) == [#"{"op":"subscribe","req":3,"type":"currency.changed","last":true}"#])
        base.perform(base.handle(&state, base.event("currency.changed", seq: 5)))  // queued before the broker saw req 3
        base.perform(base.handle(&state, base.ok(3, #""type":"currency.changed","retained":1"#)))
        base.perform(base.handle(&state, retained("currency.changed", seq: 4)))
        base.perform(base.handle(&state, base.event("currency.changed", seq: 6)))
        #expect(old.received.withLock { $0.map(\.metadata.seq) } == [5, 6], "the others do not get the retained copy")
        let got = new.received.withLock { $0 }
        #expect(got.map(\.metadata.seq) == [4, 6] && got[0].metadata.isRetained && !got[1].metadata.isRetained)
        #expect(state.subscribed == ["currency.changed"])
    }

    @Test func anInitialLastRegistrationWhileDisconnectedAsksOnTheNextConnection() {
        var state = base.makeState()
        let sink = RecordingSink()
        _ = state.add(sink, on: Pattern("a")!, initial: true)
        #expect(connect(&state, instance: "run1")[1] == #"{"op":"subscribe","req":2,"type":"a","last":true}"#)
        base.perform(base.handle(&state, base.ok(2, #""retained":0"#)))
        base.perform(base.handle(&state, base.event("a", seq: 8)))
        #expect(sink.received.withLock { $0.map(\.metadata.seq) } == [8])
    }

    @Test func currentSubscribesWithLastThenUndoesItAndSettlesWithAPing() {
        var state = base.makeState()
        _ = connect(&state, instance: "run1")
        let results = Locked<[Result<RawEvent?, EventBusError>]>([])
        let step = state.current(Pattern("a")!) { r in results.withLock { $0.append(r) } }
        #expect(base.frames(step) == [
            #"{"op":"subscribe","req":2,"type":"a","last":true}"#,
            #"{"op":"unsubscribe","req":3,"type":"a"}"#,
            #"{"op":"ping","req":4}"#,
        ])
        base.perform(base.handle(&state, base.ok(2, #""retained":1"#)))
        base.perform(base.handle(&state, retained("a", seq: 3)))
        base.perform(base.handle(&state, base.ok(3, #""removed":true"#)))
        base.perform(base.handle(&state, base.ok(4)))
        #expect(results.withLock { $0.map { (try? $0.get())??.metadata.seq } } == [3])
        #expect(state.subscribed.isEmpty && state.pending.isEmpty)

        // Nothing retained; the pattern already subscribed is left as it is.
        _ = state.add(RecordingSink(), on: Pattern("b")!)  // 5
        let again = state.current(Pattern("b")!) { r in results.withLock { $0.append(r) } }
        #expect(base.frames(again).map { $0.contains("unsubscribe") } == [false, false])
        base.perform(base.handle(&state, base.ok(5)))
        base.perform(base.handle(&state, base.ok(6, #""retained":0"#)))
        #expect(results.withLock { $0.count } == 2)
    }

    @Test func unsubscribingAnObserverEndsAllItsRegistrationsAndOnlyThose() {
        var state = base.makeState()
        _ = connect(&state, instance: "run1")
        let screen = Screen(), other = Screen()
        let a = RecordingSink(owner: screen), b = RecordingSink(owner: screen), c = RecordingSink(owner: other)
        _ = state.add(a, on: Pattern("x")!)
        _ = state.add(b, on: Pattern("y")!, initial: true)
        _ = state.add(c, on: Pattern("x")!)
        let step = state.removeRegistrations(of: ObjectIdentifier(screen))
        #expect(base.frames(step) == [#"{"op":"unsubscribe","req":4,"type":"y"}"#])
        #expect(a.endings.withLock { $0.count } == 0, "finished by the effects")
        base.perform(step)
        #expect(a.endings.withLock { $0.count } == 1 && b.endings.withLock { $0.count } == 1 && c.endings.withLock { $0.isEmpty })
        #expect(state.subscribed == ["x"] && state.registrationCount == 1)
    }
}
