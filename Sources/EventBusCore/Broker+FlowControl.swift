// Flow control (PROTOCOL.md "Flow control (1.2)"): a subscriber under
// `overflow: "wait"` holds back a publisher of its own uid (or of any uid,
// with the policy's `hold` right) whose event would not fit its queue. The
// event is not routed yet: the publish frame is kept unrouted
// (`FlowState.heldFrame`), the publisher is not read (`PauseReasons.held`)
// and its socket buffer fills as a pipe's would. It is routed, and the
// publisher read on, once every subscriber holding it has room (its queue
// below half its limit), has closed, or is behind: a holder that takes no
// byte of its queue for `--stall-timeout` releases every publisher it holds
// and is handled as `drop-new` until its queue is empty again (`tick`).
// Paced replays (`last`, `since` under `wait`) live here too: the broker
// keeps the connection's place and sends the rest as its queue drains.
//
// Before editing: a hold is decided before the event takes a seq (`publish`
// asks `holdIfBlocked` first), so an event reaches all its subscribers or,
// held, none of them yet, and no queue ever passes its limit because of a
// hold. Every hold is made by `hold` and ended by `release(holder:)` or
// `forgetFlow`, which keep `statistics.held` exact; a connection's flow
// state (`FlowState.swift`) is changed only by its methods, which keep
// `holding`/`heldBy` mirrored and the trusted-hold window's arithmetic. The cost on the publish path is one comparison
// while all queues together are below the smallest limit (`mayHaveToHold`);
// the rest is out of line so that `publish` keeps `fanOut` inlined
// (callgrind case 1: 2,245 without the check, 2,489 with an inlined one).
import EventBusPolicy
@_spi(Package) import EventBusProtocol

extension Broker {
    // MARK: Holding

    /// Whether a publish of `frame` could have to wait: some queue may be
    /// nearly full (all queues together hold more than the smallest limit
    /// less the event) or a paced replay is under way. One comparison on
    /// the publish path; `holdIfBlocked` decides.
    /// (issue 37) While some connection is parked, also whenever a holder
    /// for `publisher` is half full: a parked one the event fits must come
    /// back to the lists to get it (`holdIfBlocked`), not count it lost.
    @inline(__always)
    func mayHaveToHold(_ frame: RawSpan, _ publisher: Connection) -> Bool {
        pacedReplays != 0 || ((statistics.queuedBytes &+ frame.byteCount &+ Broker.eventEnvelopeBound > ledger.outboundFastPathBytes
                               || types.splitsParked || types.splitsFairParked)
            && (ledger.halfFullTrustedHolders > 0 || publisher.account.halfFullWaiters > 0))
    }

    /// Marks a connection whose queue reached `halfFullAt` (an event was
    /// queued): under `wait`, at least half full, and allowed to hold, it is
    /// counted for its uid or, with `allow hold`, for every uid, until its
    /// queue is below half again (`flowDidWrite`) or it goes. So a full
    /// subscriber of another uid costs a publisher no walk of its subscribers.
    @inline(never)
    func noteHalfFull(_ connection: Connection) {
        connection.flow.armHalfFull(at: Int.max)
        guard connection.flow.halfFull == nil, !connection.isClosed else { return }
        // (issue 37) Behind for other uids: it may hold its own uid's only.
        let right = connection.flow.trustBehind && connection.policy.hold == .anyUID ? .ownUID : connection.policy.hold
        guard right != .none else { return }
        connection.flow.markHalfFull(right)
        ledger.countHalfFull(right, of: connection.account)
    }

    /// Ends the mark of `noteHalfFull`; it may be made again once the queue is half full.
    func clearHalfFull(_ connection: Connection) {
        if let right = connection.flow.clearHalfFull() { ledger.uncountHalfFull(right, of: connection.account) }
        connection.flow.armHalfFull(at: connection.overflow == .wait && !connection.isClosed ? configuration.maxOutboundBytes / 2 : Int.max)
    }

    /// What an event adds to its publish frame at most, with its queue
    /// entry: the fixed text and seqs (EventBytes' bound, 131), a default
    /// source (a 64-byte client name, quoted), a default id (instance, `-`,
    /// seq), the identity (`,"pid":P,"uid":U,"gid":G`, 51), `origin`'s key.
    static let eventEnvelopeBound = 131 + 66 + 40 + 52 + 10 + OutboundQueue.entryOverheadBytes

    /// Whether the publish `frame` of `publisher` must wait: some subscriber
    /// under `wait` that may hold it has no room for its event. If so the
    /// publisher is held (`hold`) and the caller routes nothing. Out of line
    /// (asked only when `mayHaveToHold`): the publish path keeps `fanOut` inlined.
    /// - Returns: true when held.
    @inline(never)
    func holdIfBlocked(_ frame: RawSpan, _ request: PublishRequest, entry: Int?, publisher: Connection) -> Bool {
        let type = request.type
        // An upper bound of the event's size (every part but the broker's own comes from the frame).
        let bound = frame.byteCount &+ 131 &+ publisher.session.eventSource.byteCount &+ writer.eventIDPrefix.byteCount &+ 21
            &+ publisher.identity.eventIdentity.byteCount &+ 10 &+ OutboundQueue.entryOverheadBytes
        var blockers: [Connection] = []
        let uid = publisher.credentials.uid
        let half = configuration.maxOutboundBytes / 2
        var fits: [Connection] = []
        func consider(_ subscriber: Connection) {
            if subscriber === publisher && !subscriber.echo { return }
            guard subscriber.overflow == .wait, !subscriber.flow.behind, subscriber.isRoutable else { return }
            switch subscriber.policy.hold {
            case .ownUID: guard subscriber.credentials.uid == uid else { return }
            case .anyUID: if subscriber.flow.trustBehind { guard subscriber.credentials.uid == uid else { return } }
            case .none: return
            }
            let blocked: Bool
            if !subscriber.flow.replays.isEmpty {
                blocked = true  // live events wait behind a paced replay
            } else {
                let actor = uid == subscriber.credentials.uid || isPrivileged(uid) ? OutboundQueue.noActor : uid
                // Held only where draining gives room: a queue at least half
                // full (below that, or over --max-queued, the event is dropped
                // as under drop-new; PROTOCOL-NOTES.md).
                let refused = refusal(size: bound, actor: actor, connection: subscriber)
                if refused == nil && (subscriber.isParked || subscriber.fairPark != nil) { fits.append(subscriber) }
                guard subscriber.outbound.chargedBytes >= half, let refused, refused != .total else { return }
                blocked = true
            }
            if blocked && !blockers.contains(where: { $0 === subscriber }) { blockers.append(subscriber) }
        }
        forEachSubscriber(of: type, entry: entry, consider)
        // (issue 37) Parked `wait` subscribers hold as they would in the
        // lists; one the event fits goes back to them (it gets the event).
        forEachParked(of: type, entry: entry, consider)
        for subscriber in fits { unpark(subscriber) }
        // (1.3) A full queue group, or a keyed event's full member (Broker+GroupFlow.swift).
        var blockingGroups: [QueueGroup] = []
        if groupsInUse != 0 {
            let keyHash = if let key = request.key { hashOfKey(token: frame.extracting(key.range)) } else { UInt64?.none }
            for group in groupsMatching(type, entry: entry) {
                let verdict = groupBlocks(group, bound: bound, type: type, publisher: publisher, keyHash: keyHash)
                if verdict.blocks { blockingGroups.append(group) }
                if let holder = verdict.holder, !blockers.contains(where: { $0 === holder }) { blockers.append(holder) }
            }
        }
        guard !blockers.isEmpty || !blockingGroups.isEmpty else { return false }
        hold(publisher, on: blockers, groups: blockingGroups, frame: frame)
        return true
    }

    /// Holds `publisher` on each of `holders` and (1.3) `groups` with
    /// `frame` unrouted, and stops reading it (the splitter stops after this
    /// frame). (1.3) A request is held the same way (Broker+RequestReply.swift).
    func hold(_ publisher: Connection, on holders: [Connection], groups: [QueueGroup] = [], frame: RawSpan) {
        FlowState.hold(publisher, on: holders, frame: frame, now: now.monotonicNanoseconds)
        for holder in holders { watch(holder) }
        holdOnGroups(publisher, groups)
        statistics.held += 1
        statistics.holds += 1
        pause(publisher, .held)  // (inside the splitter's callback: the caller charges the held frame)
    }

    /// Releases every publisher `holder` holds: each one no other connection
    /// holds is read again (its held frame first).
    func release(holder: Connection) {
        FlowState.release(holder: holder, now: now.monotonicNanoseconds) { publisher in
            statistics.held -= 1
            unpause(publisher, .held)
        }
    }

    /// Handles a released publisher's held frame (from `receive`).
    /// - Returns: whether to go on with the input after it (false: held again, or paused).
    func handleHeldFrame(_ connection: Connection) -> Bool {
        guard let frame = connection.flow.takeHeldFrame() else { return connection.flow.heldFrame == nil }
        handle(.frame(frame.span.bytes), from: connection)
        return connection.flow.heldFrame == nil && mayReadNextFrame(connection)
    }

    /// A connection is going: its holds end both ways, its replays are
    /// dropped (from `forget`).
    func forgetFlow(_ connection: Connection) {
        clearHalfFull(connection)
        release(holder: connection)
        if connection.flow.isHeld {
            FlowState.forgetHolders(of: connection)
            forgetGroupHolds(of: connection)
            statistics.held -= 1
        }
        connection.flow.dropHeldInput()
        if !connection.flow.takeReplays().isEmpty { pacedReplays -= 1 }
    }

    // MARK: Draining

    /// After bytes of `connection`'s queue were written (from `didWrite`):
    /// a paced replay goes on, holds end once the queue is below half, and
    /// a connection behind is itself again once its queue is empty.
    @inline(__always)
    func flowDidWrite(_ connection: Connection, bytes: Int) {
        connection.flow.took(bytes)
        if !connection.requests.lingering.isEmpty { releaseWrittenShares(connection) }  // (1.3) ended tokens' shares
        if connection.flow.trustBehind && connection.outbound.isEmpty {
            connection.flow.endTrustBehind()
            clearHalfFull(connection)  // it may hold other uids again once half full
        }
        if connection.flow.halfFull != nil && connection.outbound.chargedBytes < configuration.maxOutboundBytes / 2 { clearHalfFull(connection) }
        guard connection.flow.watched else { return }
        if connection.flow.behind {
            if connection.outbound.isEmpty {
                connection.flow.catchUp()
                clearHalfFull(connection)  // it may hold again once half full
            }
            return
        }
        guard connection.outbound.chargedBytes < configuration.maxOutboundBytes / 2 else { return }
        if !connection.flow.replays.isEmpty { pumpReplays(connection) }
        if connection.flow.replays.isEmpty {
            release(holder: connection)
            releaseGroups(of: connection)  // (1.3) it can take events again
        }
    }

    // MARK: The stall watch

    /// Puts a connection that holds or replays under the stall watch.
    func watch(_ connection: Connection) {
        guard !connection.flow.watched else { return }
        connection.flow.startWatch(now: now.monotonicNanoseconds)
        flowWatch.append(connection)
    }

    /// The stall timeout (from `tick`): each watched connection that took
    /// no byte of its queue for `--stall-timeout` goes behind.
    func watchForStalls() {
        let timeout = configuration.stallTimeoutNanoseconds
        var i = 0
        while i < flowWatch.count {
            let connection = flowWatch[i]
            let busy = !connection.flow.holding.isEmpty || !connection.flow.replays.isEmpty || connection.flow.groupHolds > 0
            if connection.isClosed || (!busy && !connection.flow.behind) {
                connection.flow.endWatch()
                flowWatch.swapAt(i, flowWatch.count - 1)
                flowWatch.removeLast()
                continue
            }
            i += 1
            if connection.flow.othersHeldSince != nil && !connection.flow.trustBehind { checkTrustedHolder(connection) }
            if !connection.flow.madeProgress(now: now.monotonicNanoseconds) && busy && !connection.flow.behind
                && now.monotonicNanoseconds - connection.flow.progressAt >= timeout {
                fallBehind(connection)
            }
        }
    }

    /// (issue 37) At the end of each `--trusted-hold-window` of a connection
    /// holding publishers of other uids (the policy's `allow hold`): held for
    /// at least 95 % of it, it is behind for other uids (`trustBehind`): it
    /// releases every publisher it holds, is counted as stalled, and holds
    /// only its own uid's until its queue is empty, other uids' events that
    /// do not fit being dropped for it as under `drop-new`. So `hold` lets a
    /// uid slow another's publisher, never stop it for longer than a window.
    private func checkTrustedHolder(_ connection: Connection) {
        guard connection.flow.closeTrustWindow(now: now.monotonicNanoseconds, length: configuration.trustedHoldWindowNanoseconds) else { return }
        statistics.stalls += 1
        clearHalfFull(connection)  // marked again, as an own-uid holder:
        if connection.outbound.chargedBytes >= connection.flow.halfFullAt { noteHalfFull(connection) }
        release(holder: connection)
        notice(.stalled(connection.id, pid: connection.credentials.pid))
    }

    /// A stalled connection: it releases every publisher it holds, the rest
    /// of its replays is dropped (told with `dropped`), and until its queue
    /// is empty it is handled as `drop-new`.
    private func fallBehind(_ connection: Connection) {
        statistics.stalls += 1
        connection.flow.fallBehind(queueIsEmpty: connection.outbound.isEmpty)
        if connection.flow.behind {
            // Holding no one, it no longer makes its uid's publishers look for holders.
            clearHalfFull(connection)
            connection.flow.armHalfFull(at: Int.max)
        }
        release(holder: connection)
        releaseGroups(of: connection)  // (1.3) its groups look again at who can take their events
        if !connection.requests.serving.isEmpty { requestsFellBehind(connection) }  // (1.3) no_reply where it was the last
        if !connection.flow.replays.isEmpty {
            var count: UInt64 = 0
            var first: UInt64 = 0
            for replay in connection.flow.takeReplays() {
                let left = unsentEvents(of: replay, to: connection)
                if left.count > 0 && (first == 0 || left.first < first) { first = left.first }
                count += left.count
            }
            pacedReplays -= 1
            recordDrops(connection, count: count, firstSeq: first, takenFromQueue: false)
        }
        notice(.stalled(connection.id, pid: connection.credentials.pid))
    }

    // MARK: Paced replay

    /// Queues `replays` behind the connection's others and sends what fits
    /// (everything, unless the connection is under `wait`).
    func startReplays(_ replays: [PacedReplay], to connection: Connection) {
        guard !replays.isEmpty else { return }
        if connection.flow.replays.isEmpty { pacedReplays += 1 }
        connection.flow.queueReplays(replays)
        pumpReplays(connection)
    }

    /// Sends the connection's replays in order until its queue is full (under
    /// `wait`, not behind) or they are done; watched while any is left.
    func pumpReplays(_ connection: Connection) {
        connection.flow.setPumping(true)
        defer { connection.flow.setPumping(false) }
        while let replay = connection.flow.replays.first {
            guard pump(replay, to: connection) else {
                watch(connection)
                return
            }
            guard !connection.flow.replays.isEmpty else { return }  // closed meanwhile
            connection.flow.finishFirstReplay()
            if connection.flow.replays.isEmpty { pacedReplays -= 1 }
        }
    }

    /// Ends the replays of `subscription` (unsubscribed or revoked: nothing
    /// only it matched arrives after its `ok`).
    func cancelReplays(of subscription: Subscription, on connection: Connection) {
        guard !connection.flow.replays.isEmpty else { return }
        connection.flow.cancelReplays(of: subscription)
        if connection.flow.replays.isEmpty { pacedReplays -= 1 }
    }
}
