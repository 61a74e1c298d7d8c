// A closing member's hand-on in slices (issue 38, `group-members` teardown,
// fifth stop): the group events queued to a member that closes, of which no
// byte was written, go to the members of their groups left (PROTOCOL-NOTES
// "Redelivery"), at most `handOnSliceUnits` of work per call, the rest in
// later loop turns (`continueHandOns`, which the server calls while
// `hasPendingHandOns` and charges to the closing uid's share of the loop).
// 64 members of one uid at its quota hold up to a million small events, and
// hang-ups come in several epoll batches: once the first batch's queues are
// discarded the uid has room again, and the next batch's events are really
// taken by the members left, one by one (a copy, a scan, `give`): tens of
// ms in one piece, another uid's ping waiting behind it.
//
// Before editing: a pending hand-on works on a copy of the closer's queue
// (`OutboundQueue` is a value: the copy shares its entries and chunks, and
// the connection's own is discarded as before, which neither copies nor
// frees what the copy holds), so it holds the frames it has still to hand
// on after their charge is released: at most what the closer had queued
// (its limits), for the few turns the hand-on lasts. The closer has left
// its groups already (`leaveGroupsForHandover`), so nothing is given to it;
// a group may lose or gain members between slices, and whatever is handed
// on goes to the members there at that moment. The room of the members
// left is looked at again in every slice (`HandOnTarget.fullFor` is reset):
// within a slice room only shrinks, across slices it may grow.
@_spi(Package) import EventBusProtocol

/// What is left of one closing member's hand-on (`Broker.handOver`).
final class PendingHandOn {
    enum Stage {
        /// Building `targetOfSeq` from `deliveries`.
        case table
        /// Finding each queued event's group (and the smallest per group).
        case find
        /// Handing them on.
        case give
    }

    /// The closer's uid (the loop time the hand-on takes is charged to it).
    let uid: UInt32
    /// The closer's queue as it was when it closed (a copy: see the header).
    let queue: OutboundQueue
    /// Its record of group events queued to it, and the memberships it left that someone is left in.
    let deliveries: [GroupDelivery]
    let live: [GroupMember]
    let crossing: Bool
    var targets: [Broker.HandOnTarget]
    var targetOfSeq: SeqTable
    /// The target of every queued event not in `targetOfSeq` (its place in
    /// `live`): the unrecorded membership's (`GroupHandover.unrecorded`),
    /// -1 for none.
    let implicit: Int32
    /// Per event of `queue` from its front (in `find` order): its target, -1 for none.
    var order: [Int32] = []
    var stage = Stage.table
    /// Where the stage goes on: an index in `deliveries`, or in `queue.entries`.
    var next = 0
    /// The next event's place in `order` (`give`).
    var at = 0

    init(uid: UInt32, queue: OutboundQueue, deliveries: [GroupDelivery], unrecorded: UInt64, live: [GroupMember], crossing: Bool) {
        self.uid = uid
        self.queue = queue
        self.deliveries = deliveries
        self.live = live
        self.crossing = crossing
        targets = live.map { Broker.HandOnTarget(group: $0.group) }
        targetOfSeq = SeqTable(capacity: deliveries.count)
        implicit = unrecorded == 0 ? -1 : live.firstIndex { $0.serial == unrecorded }.map { Int32($0) } ?? -1
    }
}

extension Broker {
    /// Work units of one slice: an entry looked at is one, an event handed
    /// on one by one (a copy, a scan, `give`) `handOnGiveUnits`. 16,384 is
    /// about 0.3-0.6 ms on the 2-CPU machine of docs/RELIABILITY.md.
    package static let defaultHandOnSliceUnits = 16_384
    static let handOnGiveUnits = 8

    /// Whether a closing member's hand-on waits for `continueHandOns`.
    package var hasPendingHandOns: Bool { !pendingHandOns.isEmpty }

    /// The uid of the closing member whose hand-on goes on next.
    package var pendingHandOnUID: UInt32? { pendingHandOns.first?.uid }

    /// One slice of the hand-ons still pending (the server calls it once per
    /// loop turn while `hasPendingHandOns`).
    package func continueHandOns(at time: BrokerTime) -> BrokerStep {
        now = time
        runHandOnSlice()
        return finishStep()
    }

    /// The second half of `leaveGroups(closing:)`: the group events queued
    /// to `connection` of which no byte was written go to the members of
    /// their groups left, in order (in slices: `runHandOnSlice`), and so do
    /// its requests (at once).
    ///
    /// Bounded by the room the members left have (issue 38, `group-members`
    /// teardown: 64 members of one uid at its outbound quota, a million
    /// small events, each handed on and refused: 110-200 ms in one piece).
    /// Once an event of a group is dropped there and no member left could
    /// take even the smallest of the events this member has for that group
    /// in its publisher's fair share (`mayTakeAny`: closed, behind, paced,
    /// or its queue, its uid, which all of a group's members share, or the
    /// publisher's share at its limit, under `wait` or `drop-new`), the rest
    /// of that publisher's in the slice are counted as dropped in one step
    /// for the next member in turn, as each would have been, and not copied,
    /// scanned or given.
    func handOver(_ handover: GroupHandover, from connection: Connection) {
        // Only to groups someone is left in (or, issue 36, that another
        // machine's member may take): when the members hang up together (one
        // epoll batch, `peersClosed`) nobody is, and the events queued to
        // them (up to the uid's outbound quota, a million small ones) are not
        // even looked at (issue 38's `group-members` teardown: building this
        // map for every member took 200 ms of CPU).
        let crossing = !fallbackGroups.isEmpty
        let live = handover.left.filter { !$0.group.isEmpty || (crossing && !$0.group.key.fallback) }
        if !live.isEmpty && (!handover.deliveries.isEmpty || handover.unrecorded != 0) {
            pendingHandOns.append(PendingHandOn(uid: connection.credentials.uid, queue: connection.outbound, deliveries: handover.deliveries,
                                                unrecorded: handover.unrecorded, live: live, crossing: crossing))
        }
        for redelivery in handover.requests {
            redeliverRequest(redelivery.token, frame: redelivery.frame, from: connection, groups: handover.servingGroups)
        }
    }

    /// At most `handOnSliceUnits` of the pending hand-ons' work, oldest first.
    func runHandOnSlice() {
        var units = handOnSliceUnits
        while units > 0, let first = pendingHandOns.first {
            if advance(first, units: &units) { pendingHandOns.removeFirst() }
        }
    }

    /// One group a closing member hands events on to (`handOver`).
    struct HandOnTarget {
        let group: QueueGroup
        /// The smallest of the events it has for the group (charged bytes, as redelivered).
        var smallest = Int.max
        /// Dropped there since the group was last looked at for room, and how many more before it is again.
        var refused = 0
        var nextLook = 1
        /// The publishers (`OutboundQueue.Entry.actor`) of whom no member
        /// left can take any event now: the rest of theirs in this slice are
        /// counted, from `firstSeq` (room only shrinks within a slice, and a
        /// publisher's fair share with it).
        var fullFor: [UInt32] = []
        var notHandedOn: UInt64 = 0
        var firstSeq: UInt64 = 0
    }

    /// Goes on with one hand-on for at most `units` of work.
    /// - Returns: whether it is finished.
    private func advance(_ work: PendingHandOn, units: inout Int) -> Bool {
        if work.stage == .table {
            let deliveries = work.deliveries
            while work.next < deliveries.count && units > 0 {
                let delivery = deliveries[work.next]
                work.next += 1
                units -= 1
                // (A member is in few groups: a look along `live` is cheaper than a hash.)
                if let i = work.live.firstIndex(where: { $0.serial == delivery.member }) { work.targetOfSeq.insert(delivery.seq, Int32(i)) }
            }
            guard work.next == deliveries.count else { return false }
            if work.targetOfSeq.isEmpty && work.implicit < 0 { return true }
            work.stage = .find
            work.next = work.queue.frontPosition
        }
        if work.stage == .find {
            findHandOnTargets(work, units: &units)
            guard work.next == work.queue.entries.count else { return false }
            work.stage = .give
            work.next = work.queue.frontPosition
        }
        giveHandedOn(work, units: &units)
        return work.next == work.queue.entries.count
    }

    /// `find`: each event's group (and the smallest per group), in queue order.
    private func findHandOnTargets(_ work: PendingHandOn, units: inout Int) {
        var across: [(frame: [UInt8], seq: UInt64, actor: UInt32, group: GroupKey)] = []
        let entries = work.queue.entries
        while work.next < entries.count && units > 0 {
            let entry = entries[work.next]
            work.next += 1
            units -= 1
            guard entry.isEvent else { continue }
            let recorded = work.targetOfSeq[entry.seq]
            let i = Int(recorded >= 0 ? recorded : work.implicit)
            guard i >= 0 else {
                work.order.append(-1)
                continue
            }
            let group = work.targets[i].group
            guard !group.isEmpty else {
                // (issue 36) Its group is gone here: another machine's member may take it.
                if work.crossing && !group.key.fallback { across.append((entry.withSpan { Broker.redeliveredCopy($0) }, entry.seq, entry.actor, group.key)) }
                work.order.append(-1)
                continue
            }
            work.order.append(Int32(i))
            work.targets[i].smallest = min(work.targets[i].smallest, entry.withSpan { Broker.redeliveredCount($0) } + OutboundQueue.entryOverheadBytes)
        }
        for redelivery in across {
            redeliverAcross(redelivery.frame.span.bytes, seq: redelivery.seq, actor: redelivery.actor, of: redelivery.group)
        }
    }

    /// `give`: hands the events on, in queue order, up to the room of the
    /// members left; what none can take is counted as dropped at the slice's end.
    private func giveHandedOn(_ work: PendingHandOn, units: inout Int) {
        let entries = work.queue.entries
        while work.next < entries.count && units > 0 {
            let entry = entries[work.next]
            work.next += 1
            guard entry.isEvent else {
                units -= 1
                continue
            }
            let i = Int(work.order[work.at])
            work.at += 1
            units -= 1
            guard i >= 0 else { continue }
            let group = work.targets[i].group
            let actor = entry.actor, seq = entry.seq
            if work.targets[i].fullFor.contains(actor) {
                if work.targets[i].notHandedOn == 0 { work.targets[i].firstSeq = seq }
                work.targets[i].notHandedOn += 1
                continue
            }
            guard !group.isEmpty else { continue }
            units -= Broker.handOnGiveUnits - 1
            groupHandOns &+= 1
            let dropped = statistics.dropped
            EventFrame.lending(entry.withSpan { Broker.redeliveredCopy($0) }) { redeliver($0, seq: seq, actor: actor, in: group) }
            guard statistics.dropped != dropped else { continue }
            // Dropped there (or room made under drop-old): can the group take any more?
            work.targets[i].refused += 1
            guard work.targets[i].refused >= work.targets[i].nextLook else { continue }
            if mayTakeAny(group, size: work.targets[i].smallest, actor: actor) {
                work.targets[i].nextLook = work.targets[i].refused + max(1, group.count)  // O(1) per event amortised
            } else {
                work.targets[i].fullFor.append(actor)
            }
        }
        // The slice ends: what was not handed on is counted, and room is looked at again in the next.
        for t in work.targets.indices {
            if work.targets[t].notHandedOn > 0 {
                countNotHandedOn(work.targets[t].notHandedOn, firstSeq: work.targets[t].firstSeq, in: work.targets[t].group)
                work.targets[t].notHandedOn = 0
            }
            work.targets[t].fullFor = []
        }
    }

    /// Events no member left could take, counted as dropped as each would
    /// have been: for the next member in turn, under its rule (no room: dropped).
    private func countNotHandedOn(_ count: UInt64, firstSeq: UInt64, in group: QueueGroup) {
        let n = group.slotCount
        var slot = group.cursor < n ? group.cursor : 0
        for _ in 0..<n {
            if let member = group.member(at: slot), member.connection.isRoutable {
                recordDrops(member.connection, count: count, firstSeq: firstSeq, takenFromQueue: false)
                group.passTurn(after: slot)
                return
            }
            slot = group.after(slot)
        }
    }
}
