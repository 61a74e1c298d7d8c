// A closing member's hand-on is bounded by the room of the members left
// (issue 38, `group-members` teardown, docs/RELIABILITY.md "Queue groups
// under attack, fourth stop"): the members of a group share one uid, and
// when that uid is at its outbound quota every event handed on is refused
// there. `Broker.handOver` stops handing a group events once one is dropped
// and no member left could take even the smallest of the rest, and counts
// the rest as dropped in one step. The tests count the work
// (`Broker.groupHandOns`: events copied, scanned and given) and check that
// the drops are counted as before and that a member left with room still
// gets what fits, marked `"redelivered":true`.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Queue group hand-on bound")
struct GroupHandOnBoundTests {
    static let members = 16
    static let closers = 12
    static let quota = 64_000

    /// `members` non-reading members of uid 2000 on `job` (uid 2000 limited
    /// to `quota` outbound bytes), filled by uid 1000's publishes until the
    /// quota refuses them; `drain` members left read all they have first.
    /// Then the last `closers` hang up in one batch.
    /// - Returns: the events the closers held, hand-ons, drops counted, and
    ///   the frames each member left has.
    static func tearDown(drain: Int) -> (held: Int, handOns: UInt64, dropped: UInt64, left: [[Frame]]) {
        let h = BrokerHarness { $0.quotas.maxOutboundBytesPerUID = quota }
        let workers = (0..<members).map { _ in h.connect(uid: 2000, gid: 2000) }
        for worker in workers { h.send(worker, #"{"op":"subscribe","type":"job","group":"w"}"#) }
        for worker in workers { _ = h.read(worker) }  // the oks
        let publisher = h.connect()
        var published = 0
        // Until uid 2000 is full: a publish that reaches nobody.
        while true {
            let before = h.broker.statistics.dropped
            h.send(publisher, #"{"op":"publish","type":"job","data":\#(published)}"#)
            published += 1
            if h.broker.statistics.dropped > before && published > 4 * members { break }
        }
        let left = Array(workers[..<(members - closers)])
        let closing = Array(workers[(members - closers)...])
        for worker in left.prefix(drain) { _ = h.read(worker) }
        let held = closing.reduce(0) { $0 + h.peek($1).filter { $0.op == "event" }.count }
        let handOns = h.broker.groupHandOns
        let dropped = h.broker.statistics.dropped
        h.record(h.broker.peersClosed(closing, at: h.now))
        let result = (held, h.broker.groupHandOns - handOns, h.broker.statistics.dropped - dropped, left.map { h.peek($0) })
        for worker in closing {
            while !worker.outbound.isEmpty { h.record(h.broker.didWrite(worker, bytes: worker.outbound.byteCount)) }
            h.close(worker)
        }
        h.closeAll()
        return result
    }

    @Test("Members left at their uid's quota: one event handed on per closer, the rest counted as dropped at once")
    func membersLeftFull() {
        let (held, handOns, dropped, left) = Self.tearDown(drain: 0)
        #expect(held > 4 * Self.closers, "the closers hold several events each: \(held)")
        // Before (trial bd5ec7e): every one of them was copied, scanned, given and refused (122 hand-ons for 122 events).
        #expect(handOns <= UInt64(Self.closers), "\(handOns) events handed on one by one of \(held)")
        #expect(dropped == UInt64(held), "each event is counted as dropped, as before: \(dropped) of \(held)")
        #expect(left.allSatisfy { $0.allSatisfy { $0.bool("redelivered") != true } }, "nothing fits: nothing is redelivered")
        print("members left full: \(handOns) hand-ons for \(held) events")
    }

    @Test("A member left with room still gets what fits, redelivered; the hand-on stops at its room")
    func memberLeftWithRoom() {
        let (held, handOns, dropped, left) = Self.tearDown(drain: 1)
        let redelivered = left[0].filter { $0.bool("redelivered") == true }.count
        #expect(redelivered > 0, "the drained member takes events handed on")
        #expect(left.dropFirst().allSatisfy { $0.allSatisfy { $0.bool("redelivered") != true } }, "the full members take none")
        #expect(UInt64(redelivered) + dropped == UInt64(held), "each event redelivered or counted as dropped: \(redelivered) + \(dropped) of \(held)")
        #expect(handOns <= UInt64(redelivered + Self.closers), "\(handOns) hand-ons for \(redelivered) redelivered of \(held)")
        print("one member left with room: \(handOns) hand-ons, \(redelivered) redelivered, \(dropped) dropped of \(held)")
    }

    @Test("A large hand-on goes on in slices across calls, each bounded; every event reaches a member left once, in order")
    func inSlices() {
        let h = BrokerHarness()
        h.broker.handOnSliceUnits = 64
        let workers = (0..<4).map { _ in h.connect(uid: 2000, gid: 2000) }
        for worker in workers { h.send(worker, #"{"op":"subscribe","type":"job","group":"w"}"#) }
        for worker in workers { _ = h.read(worker) }  // the oks
        let publisher = h.connect()
        let events = 400
        for i in 0..<events { h.send(publisher, #"{"op":"publish","type":"job","data":\#(i)}"#) }
        let left = Array(workers[..<2]), closing = Array(workers[2...])
        let handOns = h.broker.groupHandOns
        h.record(h.broker.peersClosed(closing, at: h.now))
        // The server discards a hung-up member's queue at once; the hand-on works on its copy.
        for worker in closing {
            while !worker.outbound.isEmpty { h.record(h.broker.didWrite(worker, bytes: worker.outbound.byteCount)) }
        }
        var slices = 1
        var most = h.broker.groupHandOns - handOns
        while h.broker.hasPendingHandOns {
            let before = h.broker.groupHandOns
            h.record(h.broker.continueHandOns(at: h.now))
            most = max(most, h.broker.groupHandOns - before)
            slices += 1
        }
        let perSlice = UInt64(64 / Broker.handOnGiveUnits + 1)
        #expect(slices > 4, "\(events / 2) events handed on in \(slices) slices")
        #expect(most <= perSlice, "at most \(perSlice) hand-ons per slice of 64 units: \(most)")
        #expect(h.broker.groupHandOns - handOns == UInt64(events / 2), "each of the closers' events handed on once")
        let frames = left.map { h.read($0).filter { $0.op == "event" } }
        let all = frames.flatMap { $0 }.compactMap { $0.int("data") }
        #expect(all.sorted() == Array(0..<events), "every job reaches a member left, once")
        for member in frames {
            let redelivered = member.filter { $0.bool("redelivered") == true }.compactMap { $0.int("data") }
            #expect(!redelivered.isEmpty, "each member left takes a share")
            // Round robin gave worker k the jobs k, k + 4, ...: each closer's in its queue order.
            for k in 2..<4 {
                let closer = redelivered.filter { $0 % 4 == k }
                #expect(closer == closer.sorted(), "worker \(k)'s events handed on in queue order")
            }
        }
        h.closeAll()
    }
}
