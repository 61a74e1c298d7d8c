// A worker's one membership records none of its deliveries (issue 38, case
// 10: `ConnectionGroups.unrecorded`): while every event queued to a
// connection comes from that membership, its hand-on takes every event it
// holds unwritten as that membership's. Whatever could queue it another
// event ends that for good, recording the events queued so far as the
// membership's (a plain subscription, another membership), and so does its
// leaving. The tests check, through the hand-on at close, that exactly the
// group's unwritten events go on: none of its plain subscription's, none of
// a membership it left, each of a second group's to that group.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Queue group deliveries left unrecorded")
struct GroupUnrecordedTests {
    static func publish(_ h: BrokerHarness, _ publisher: Connection, _ type: String, _ values: Range<Int>) {
        for i in values { h.send(publisher, #"{"op":"publish","type":"\#(type)","data":\#(i)}"#) }
    }

    /// The `data` of the events in `frames` of `type` marked redelivered.
    static func redelivered(_ frames: [Frame], _ type: String) -> [Int] {
        frames.filter { $0.op == "event" && $0.type == type && $0.bool("redelivered") == true }.compactMap { $0.int("data") }
    }

    /// The `data` of the events of `type` queued to `connection`.
    static func held(_ h: BrokerHarness, _ connection: Connection, _ type: String) -> [Int] {
        h.peek(connection).filter { $0.op == "event" && $0.type == type }.compactMap { $0.int("data") }
    }

    @Test("A worker's one membership records nothing; at its close every event it holds unwritten goes on")
    func oneMembershipHandsOnAll() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect()
        for m in [a, b] { h.send(m, #"{"op":"subscribe","type":"job","group":"w"}"#) }
        for m in [a, b] { _ = h.read(m) }
        #expect(a.groups.unrecorded != 0 && b.groups.unrecorded != 0, "a worker's one membership is left unrecorded")
        let publisher = h.connect()
        Self.publish(h, publisher, "job", 0..<40)
        _ = h.read(a, maxBytes: 0)
        #expect(a.groups.deliveries.isEmpty, "nothing recorded: \(a.groups.deliveries.count)")
        let held = Self.held(h, a, "job")
        #expect(held.count == 20)
        _ = h.read(b)
        h.record(h.broker.peersClosed([a], at: h.now))
        #expect(Self.redelivered(h.read(b), "job") == held, "each event a held goes to b once, in order")
        h.close(a)
        h.closeAll()
    }

    @Test("A plain subscription taken later records the group events queued so far; only those go on at close")
    func plainSubscriptionLater() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect()
        for m in [a, b] { h.send(m, #"{"op":"subscribe","type":"job","group":"w"}"#) }
        for m in [a, b] { _ = h.read(m) }
        let publisher = h.connect()
        Self.publish(h, publisher, "job", 0..<10)  // 5 to a, unrecorded
        h.send(a, #"{"op":"subscribe","type":"note"}"#)
        #expect(a.groups.unrecorded == 0, "a plain subscription ends it")
        #expect(a.groups.deliveries.count == 5, "the 5 queued are recorded as the group's: \(a.groups.deliveries.count)")
        Self.publish(h, publisher, "note", 0..<3)
        Self.publish(h, publisher, "job", 10..<20)  // 5 more to a, recorded
        let held = Self.held(h, a, "job")
        #expect(held.count == 10 && Self.held(h, a, "note").count == 3)
        _ = h.read(b)
        h.record(h.broker.peersClosed([a], at: h.now))
        let frames = h.read(b)
        #expect(Self.redelivered(frames, "job") == held, "a's group events go to b")
        #expect(!frames.contains { $0.type == "note" }, "its plain subscription's events stay its own")
        h.close(a)
        h.closeAll()
    }

    @Test("A second membership records the first's queued events; at close each group's go to that group")
    func secondMembership() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect(), c = h.connect()
        for m in [a, b] { h.send(m, #"{"op":"subscribe","type":"job","group":"w"}"#) }
        h.send(c, #"{"op":"subscribe","type":"mail","group":"v"}"#)
        for m in [a, b, c] { _ = h.read(m) }
        let publisher = h.connect()
        Self.publish(h, publisher, "job", 0..<6)  // 3 to a, unrecorded
        h.send(a, #"{"op":"subscribe","type":"mail","group":"v"}"#)
        #expect(a.groups.unrecorded == 0 && a.groups.deliveries.count == 3)
        Self.publish(h, publisher, "mail", 0..<6)  // 3 to a
        Self.publish(h, publisher, "job", 6..<12)  // 3 more to a
        let jobs = Self.held(h, a, "job"), mails = Self.held(h, a, "mail")
        #expect(jobs.count == 6 && mails.count == 3)
        for m in [b, c] { _ = h.read(m) }
        h.record(h.broker.peersClosed([a], at: h.now))
        let toB = h.read(b), toC = h.read(c)
        #expect(Self.redelivered(toB, "job") == jobs && !toB.contains { $0.type == "mail" })
        #expect(Self.redelivered(toC, "mail") == mails && !toC.contains { $0.type == "job" })
        h.close(a)
        h.closeAll()
    }

    @Test("A membership left, then one made again: only the second one's events go on at close")
    func leftAndJoinedAgain() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect()
        for m in [a, b] { h.send(m, #"{"op":"subscribe","type":"job","group":"w"}"#) }
        for m in [a, b] { _ = h.read(m) }
        let publisher = h.connect()
        Self.publish(h, publisher, "job", 0..<4)  // 2 to a: its share once it left
        h.send(a, #"{"op":"unsubscribe","type":"job","group":"w"}"#)
        #expect(a.groups.unrecorded == 0)
        let share = Self.held(h, a, "job")
        #expect(share.count == 2)
        h.send(a, #"{"op":"subscribe","type":"job","group":"w"}"#)
        #expect(a.groups.unrecorded == 0, "only a first membership goes unrecorded")
        _ = h.read(b)
        Self.publish(h, publisher, "job", 4..<8)
        let held = Self.held(h, a, "job")
        #expect(held.count > share.count)
        _ = h.read(b)
        h.record(h.broker.peersClosed([a], at: h.now))
        let handedOn = Self.redelivered(h.read(b), "job")
        #expect(handedOn == Array(held.dropFirst(share.count)), "the second membership's go on, not the first's: \(handedOn) of \(held)")
        h.close(a)
        h.closeAll()
    }

    @Test("A connection that holds events of an old plain subscription when it joins records its deliveries")
    func eventsQueuedBeforeJoining() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect()
        h.send(a, #"{"op":"subscribe","type":"job"}"#)
        let publisher = h.connect()
        Self.publish(h, publisher, "job", 0..<3)  // a's own, by its plain subscription
        h.send(a, #"{"op":"unsubscribe","type":"job"}"#)
        for m in [a, b] { h.send(m, #"{"op":"subscribe","type":"job","group":"w"}"#) }
        #expect(a.groups.unrecorded == 0, "events are queued: recorded")
        _ = h.read(b)
        Self.publish(h, publisher, "job", 3..<7)  // about half to a
        let held = Self.held(h, a, "job")
        #expect(held.count > 3)
        h.record(h.broker.peersClosed([a], at: h.now))
        let handedOn = Self.redelivered(h.read(b), "job")
        #expect(handedOn == held.filter { $0 >= 3 }, "only the group's go on: \(handedOn) of \(held)")
        h.close(a)
        h.closeAll()
    }
}
