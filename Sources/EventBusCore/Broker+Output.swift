// Everything that puts bytes into an outbound queue (PROTOCOL.md
// "Semantics", "Quotas (1.1)"): `enqueue`, the replies, the outbound limits
// and the publisher uid's fair share for events with the overflow rules
// (`offer`), the one path for `dropped` notices, and closing a connection
// after a final error frame.
//
// Before editing: the `enqueue` functions are the only places that grow a
// queue; every queue change hands its change of charge to `applyOutbound`
// (Broker+Quotas.swift), so each queue's charge, its uid's and
// `statistics.queuedBytes` stay exact (the shrinking side is `didWrite`,
// `makeRoom` and `replaceStaleQueue` under drop-old, and `forget`).
// Replies are never dropped; only event frames go through `offer`.
@_spi(Package) import EventBusProtocol

extension Broker {
    /// Queues a reply or notice (the single place that grows queues with
    /// them) and lists the connection in the step's output.
    func enqueue(bytes: RawSpan, to connection: Connection) {
        applyOutbound(connection, connection.outbound.appendReply(bytes))
        markOutput(connection)
    }

    func enqueue(bytes: [UInt8], to connection: Connection) {
        enqueue(bytes: bytes.span.bytes, to: connection)
    }

    /// Queues an event (the single place that grows queues with events),
    /// charging `actor`'s fair share unless it is `OutboundQueue.noActor`.
    @inline(__always)
    func enqueue(event: EventFrame, seq: UInt64, actor: UInt32, to connection: Connection) {
        let delta = connection.outbound.appendEvent(event, seq: seq, actor: actor, typeRef: typeCounters.routed)
        if actor != OutboundQueue.noActor { chargeActor(actor, bytes: delta, to: connection) }
        applyOutbound(connection, delta)
        // (1.2) Half full under `wait`: it may hold from now on (Broker+FlowControl.swift).
        if connection.outbound.chargedBytes >= connection.flow.halfFullAt { noteHalfFull(connection) }
        markOutput(connection)
    }

    /// Puts a drop-old `dropped` notice first in line (see `OutboundQueue.putNoticeInFront`).
    func enqueueNoticeInFront(_ bytes: RawSpan, count: UInt64, since: UInt64, to connection: Connection) {
        applyOutbound(connection, connection.outbound.putNoticeInFront(bytes, count: count, since: since))
        markOutput(connection)
    }

    func reply(to connection: Connection, req: RawSpan?, error: ProtocolError) {
        writer.writeReply { out in FrameEncoder.appendError(req: req, error, to: &out) }
        enqueue(bytes: writer.scratch, to: connection)
    }

    func replyOK(to connection: Connection, req: RawSpan?, fields: (inout [UInt8]) -> Void = { _ in }) {
        writer.writeReply { out in FrameEncoder.appendOK(req: req, to: &out, fields: fields) }
        enqueue(bytes: writer.scratch, to: connection)
    }

    /// Queues `error` (no `req`) as the connection's last frame and closes it
    /// after the next write: `.close(id, .afterWrite)`. Used for
    /// `slow_consumer`; the place for `timeout` and a connect-time
    /// `forbidden` too.
    func disconnect(_ connection: Connection, with error: ProtocolError) {
        guard connection.closing != .afterWrite, !connection.isClosed else { return }
        reply(to: connection, req: nil, error: error)
        unpark(connection)  // nothing is routed to it from now: nothing counted either
        connection.closeAfter(.afterWrite)
        syncInbound(connection)  // its input will not be handled: release it now
        current.effects.append(.close(connection.id, .afterWrite))
    }

    // MARK: Drops

    /// Counts `count` events lost for `connection`, the first being
    /// `firstSeq`, and sees to its `dropped` notice: the one drop-notice path.
    /// - Parameter takenFromQueue: the events were queued and dropped from
    ///   it (drop-old): the notice goes where they were, first in line, merged
    ///   with a notice already there (counts add up, the earlier since_seq
    ///   stays). Otherwise the events never got in: the count waits in
    ///   `pendingDropCount`, and `queuePendingDropNotice` queues the notice
    ///   before the next event that fits or once the queue drains below half.
    func recordDrops(_ connection: Connection, count: UInt64, firstSeq: UInt64, takenFromQueue: Bool) {
        guard count > 0 else { return }
        statistics.dropped += count
        connection.accounting.countDropped(count)
        if !takenFromQueue { typeCounters.addDropped(count, typeCounters.routed) }
        if takenFromQueue {
            if let placed = connection.outbound.noticeInFront {
                enqueueDropNotice(count: placed.count + count, since: placed.since, to: connection, inFront: true)
            } else {
                notice(.startedDropping(connection.id, pid: connection.credentials.pid))
                connection.output.startDroppingOld(now: now.monotonicNanoseconds)
                enqueueDropNotice(count: count, since: firstSeq, to: connection, inFront: true)
            }
            return
        }
        if connection.output.countDrops(count, firstSeq: firstSeq) {
            notice(.startedDropping(connection.id, pid: connection.credentials.pid))
        }
    }

    /// Queues the notice for the drops waiting in `pendingDropCount`.
    func queuePendingDropNotice(_ connection: Connection) {
        unpark(connection)  // its queue has room: back in the lists, its parked drops counted
        // (issue 37) A drop-old one back from the lot told them first in line.
        guard connection.output.pendingDropsCounted > 0 else { return }
        let (count, since) = connection.output.takePendingDrops()
        enqueueDropNotice(count: count, since: since, to: connection, inFront: false)
    }

    /// `{"op":"dropped","count":2,"since_seq":4}`, at the back or first in line.
    func enqueueDropNotice(count: UInt64, since: UInt64, to connection: Connection, inFront: Bool) {
        writer.writeReply { out in FrameEncoder.appendDropped(count: count, sinceSeq: since, to: &out) }
        if inFront {
            let notice = writer.scratch
            enqueueNoticeInFront(notice.span.bytes, count: count, since: since, to: connection)
        } else {
            enqueue(bytes: writer.scratch, to: connection)
        }
    }

    // MARK: Events

    /// Which limit an event did not fit (for the overflow rule and messages).
    enum Refusal {
        case connection, user, total, fairShare
    }

    /// Queues an event under the outbound limits, the fair share of its
    /// publisher uid and the connection's `overflow` rule (PROTOCOL.md
    /// "Semantics", "Quotas (1.1)"): a refused event is dropped (drop-new),
    /// makes room by dropping the oldest queued events (drop-old; under the
    /// fair share only events of the same publisher uid), or closes the
    /// connection (disconnect).
    /// - Parameter publisher: the publisher's uid.
    /// - Returns: whether the event was queued.
    @inline(__always)
    func offer(_ event: EventFrame, seq: UInt64, publisher: UInt32, to connection: Connection) -> Bool {
        // Outside every fair share: own events, and those of uid 0 and the broker's uid.
        let actor = publisher == connection.credentials.uid || isPrivileged(publisher) ? OutboundQueue.noActor : publisher
        let size = event.count + OutboundQueue.entryOverheadBytes
        // While all queues hold less than the smallest limit, none can be reached.
        let mayFit = actor == OutboundQueue.noActor && statistics.queuedBytes + size <= ledger.outboundFastPathBytes && pacedReplays == 0
        // (1.2) Live events wait behind a paced replay: dropped here where their publisher was not held.
        if !mayFit && !connection.flow.replays.isEmpty && !connection.flow.pumping {
            refuse(connection, .connection, seq: seq)
            return false
        }
        if !mayFit, let refusal = refusal(size: size, actor: actor, connection: connection) {
            // (issue 37) Stalled under drop-old: parked (ParkedSubscribers.swift).
            if connection.overflow == .dropOld && parkedDropOld(connection, refusal, seq: seq) { return false }
            guard makeRoom(for: size, actor: actor, refusal: refusal, connection: connection) else {
                refuse(connection, refusal, seq: seq)
                return false
            }
        }
        if connection.output.pendingDropsCounted > 0 { queuePendingDropNotice(connection) }
        enqueue(event: event, seq: seq, actor: actor, to: connection)
        connection.accounting.countDelivered()
        return true
    }

    /// An event that did not fit and could not make room: closed under
    /// `overflow: disconnect`, otherwise counted as dropped.
    func refuse(_ connection: Connection, _ refusal: Refusal, seq: UInt64) {
        if connection.overflow == .disconnect {
            disconnect(connection, with: ProtocolError(.slowConsumer, "\(refusalText(refusal, connection)); closing (overflow: disconnect)"))
            notice(.slowConsumerDisconnected(connection.id, pid: connection.credentials.pid))
        } else {
            recordDrops(connection, count: 1, firstSeq: seq, takenFromQueue: false)
        }
    }

    /// `offer` for a frame kept beyond its publish (a retained or replayed
    /// event, `OutboundChunk.copying`): queued by reference, not copied.
    /// - Parameter publisher: the uid charged for the fair share; nil (the
    ///   broker's own uid) leaves it outside every fair share.
    func offer(_ frame: OutboundChunk, seq: UInt64, publisher: UInt32? = nil, to connection: Connection) -> Bool {
        withExtendedLifetime(frame) {
            offer(EventFrame(chunk: frame), seq: seq, publisher: publisher ?? configuration.ownCredentials.uid, to: connection)
        }
    }

    /// The first limit an event of `size` charged bytes would break, nil when it fits.
    @inline(__always)
    func refusal(size: Int, actor: UInt32, connection: Connection) -> Refusal? {
        let queued = connection.outbound.chargedBytes
        if queued + size > configuration.maxOutboundBytes { return .connection }
        if let limit = connection.account.limits.outboundBytes, connection.account.queuedBytes + size > limit { return .user }
        // Beyond --max-queued, the connections holding at least a fair share
        // of it (the largest queues) are treated as over their limit.
        if statistics.queuedBytes + size > configuration.maxQueuedBytes
            && queued + size > configuration.maxQueuedBytes / max(1, connections.count) {
            return .total
        }
        if actor != OutboundQueue.noActor && fairShareDeficit(actor: actor, size: size, connection: connection) > 0 {
            return .fairShare
        }
        return nil
    }

    /// Under drop-old, drops the oldest queued events until an event of
    /// `size` fits (under the fair share, only `actor`'s, looking at no more
    /// than 4096 queued frames).
    /// - Returns: whether it fits now (false for the other overflow rules).
    func makeRoom(for size: Int, actor: UInt32, refusal: Refusal, connection: Connection) -> Bool {
        guard connection.overflow == .dropOld else { return false }
        let limit = configuration.maxOutboundBytes
        // It could never fit: keep what is queued, lose only this one.
        if size + OutboundQueue.dropNoticeMaxBytes + OutboundQueue.entryOverheadBytes > limit { return false }
        let queued = connection.outbound.chargedBytes
        let reserve = OutboundQueue.dropNoticeMaxBytes + OutboundQueue.entryOverheadBytes  // for the notice placed below
        var target: Int
        var only: UInt32? = nil
        var scanLimit = Int.max
        switch refusal {
        case .connection, .total:
            target = min(limit, queued) - size - reserve
        case .user:
            let account = connection.account
            target = queued - (account.queuedBytes + size - (account.limits.outboundBytes ?? .max)) - reserve
        case .fairShare:
            let own = connection.accounting.actorShares[actor] ?? 0
            let deficit = fairShareDeficit(actor: actor, size: size, connection: connection)
            guard own >= deficit else { return false }  // its own events cannot make the room
            target = queued - deficit - reserve
            only = actor
            scanLimit = 4096
        }
        let result = ledger.collectReleased {
            connection.outbound.dropOldestEvents(untilAtMost: max(0, target), actor: only, scanLimit: scanLimit, released: &$0, droppedTypes: &droppedTypesScratch)
        }
        countDroppedTypes()
        applyOutbound(connection, result.delta)
        if result.count > 0 { recordDrops(connection, count: result.count, firstSeq: result.firstSeq, takenFromQueue: true) }
        guard let still = self.refusal(size: size, actor: actor, connection: connection) else { return true }
        // Over --max-queued, dropping some of its own is enough (others drop theirs).
        return still == .total && result.count > 0
    }

    func refusalText(_ refusal: Refusal, _ connection: Connection) -> String {
        switch refusal {
        case .connection: "outbound queue over its limit of \(configuration.maxOutboundBytes) bytes"
        case .user: "outbound queues of uid \(connection.account.uid) over their limit of \(connection.account.limits.outboundBytes ?? 0) bytes"
        case .total: "all outbound queues over --max-queued (\(configuration.maxQueuedBytes) bytes)"
        case .fairShare: "outbound queue full with events of other uids (fair share)"
        }
    }
}
