// Many members of one queue group hanging up at once (issue 38's attack row
// `group-members`, docs/RELIABILITY.md "group-members, the teardown"): each
// closing member hands the group the events queued to it and never written
// (PROTOCOL.md "Queue groups (1.3)", redelivery). Taken one by one, what a
// member hands on goes to members that hang up next, which hand it on again.
// The server hands the core the hang-ups of one epoll batch together
// (`Broker.peersClosed`): they all leave their groups before any hands its
// events on, so an event is handed on once per batch at most. The tests count the hand-ons as a client sees them (frames with
// `"redelivered":true` in each queue when it is discarded, and in the one
// member left that reads) and check that the member left gets every event
// once.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Queue group teardown")
struct GroupTeardownTests {
    static let members = 63
    static let events = 640
    /// The events queued to the members that hang up (the member left has its tenth).
    static let closers = events - events / (members + 1)

    /// A group of `members + 1` members of uid 2000 on `job`, none reading;
    /// uid 1000 publishes `events` jobs (round robin: each member gets ten).
    /// Then every member but the first hangs up, in join order, the
    /// hang-ups handed to the broker in batches of `batch` (as epoll reports
    /// them); each hung-up member's queue is discarded as the server does.
    /// - Returns: how many times an event was handed on, and the job numbers
    ///   the member left holds.
    static func tearDown(batch: Int) -> (handOns: Int, kept: [Int]) {
        let h = BrokerHarness()
        let workers = (0...members).map { _ in h.connect(uid: 2000, gid: 2000) }
        for worker in workers { h.send(worker, #"{"op":"subscribe","type":"job","group":"w"}"#) }
        let publisher = h.connect()
        for i in 0..<events { h.send(publisher, #"{"op":"publish","type":"job","data":\#(i)}"#) }
        let left = workers[0]
        var handOns = 0
        var start = 1
        while start < workers.count {
            let hungUp = Array(workers[start..<min(start + batch, workers.count)])
            start += hungUp.count
            h.record(h.broker.peersClosed(hungUp, at: h.now))
            for worker in hungUp {
                handOns += h.peek(worker).filter { $0.bool("redelivered") == true }.count
                while !worker.outbound.isEmpty { h.record(h.broker.didWrite(worker, bytes: worker.outbound.byteCount)) }
            }
        }
        let frames = h.peek(left)
        handOns += frames.filter { $0.bool("redelivered") == true }.count
        let kept = frames.compactMap { $0.op == "event" ? $0.int("data") : nil }
        for worker in workers.dropFirst() { h.close(worker) }
        h.closeAll()
        return (handOns, kept)
    }

    @Test("Members hanging up together (one epoll batch) hand each event on once, to the member left")
    func together() {
        let (handOns, kept) = Self.tearDown(batch: Self.members)
        #expect(kept.sorted() == Array(0..<Self.events), "every job reaches the member left, once")
        #expect(handOns == Self.closers, "each event handed on once: \(handOns) hand-ons for \(Self.closers) events")
    }

    @Test("Members hanging up in batches of 16 hand an event on once per batch at most")
    func inBatches() {
        let (handOns, kept) = Self.tearDown(batch: 16)
        #expect(kept.sorted() == Array(0..<Self.events), "every job reaches the member left, once")
        let batches = (Self.members + 15) / 16
        #expect(handOns >= Self.closers && handOns <= batches * Self.closers, "\(handOns) hand-ons for \(Self.closers) events in \(batches) batches")
        print("in batches of 16: \(handOns) hand-ons for \(Self.closers) events")
    }

    @Test("Members hanging up one by one hand the same events on again and again; the member left gets each once")
    func oneByOne() {
        let (handOns, kept) = Self.tearDown(batch: 1)
        #expect(kept.sorted() == Array(0..<Self.events), "every job reaches the member left, once")
        print("one by one: \(handOns) hand-ons for \(Self.closers) events")
        #expect(handOns > 3 * Self.closers, "the cascade: \(handOns) hand-ons for \(Self.closers) events")
    }
}
