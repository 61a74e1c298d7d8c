// Everything that puts bytes into an outbound queue (PROTOCOL.md
// "Semantics"): `enqueue`, the replies, the overflow rules for events
// (`offer`), the one path for `dropped` notices, and closing a connection
// after a final error frame.
//
// Before editing: `enqueue` is the only place that grows a queue, so
// `statistics.queuedBytes` and each queue's `byteCount` stay exact (the
// shrinking side is `didWrite`, `dropOldestEvents` in `offer`, and
// `forget`); per-uid queue accounting belongs next to it. Replies are never
// dropped; only event frames go through `offer`.
import EventBusProtocol

/// Where `enqueue` puts a frame.
enum Placement {
    /// After everything queued.
    case back
    /// First in line after a partly written frame, replacing the `dropped`
    /// notice there: a drop-old notice with its count and since_seq.
    case frontNotice(count: UInt64, since: UInt64)
}

extension Broker {
    /// Queues a frame (the single place that grows queues) and lists the
    /// connection in the step's output.
    /// - Parameter seq: the event's seq, or 0 for a reply or notice.
    @inline(__always)
    func enqueue(_ frame: OutboundFrame, seq: UInt64, to connection: Connection, at placement: Placement = .back) {
        switch placement {
        case .back:
            connection.outbound.append(frame, seq: seq)
            statistics.queuedBytes += frame.count
        case .frontNotice(let count, let since):
            let before = connection.outbound.byteCount
            connection.outbound.putNoticeInFront(frame, count: count, since: since)
            statistics.queuedBytes += connection.outbound.byteCount - before
        }
        markOutput(connection)
    }

    func enqueue(bytes: [UInt8], to connection: Connection) {
        let frame = bytes.withUnsafeBytes { OutboundFrame.copying($0) }
        enqueue(frame, seq: 0, to: connection)
    }

    func reply(to connection: Connection, req: UnsafeRawBufferPointer?, error: ProtocolError) {
        scratch.removeAll(keepingCapacity: true)
        FrameEncoder.appendError(req: req, error, to: &scratch)
        enqueue(bytes: scratch, to: connection)
    }

    func replyOK(to connection: Connection, req: UnsafeRawBufferPointer?, fields: (inout [UInt8]) -> Void = { _ in }) {
        scratch.removeAll(keepingCapacity: true)
        FrameEncoder.appendOK(req: req, to: &scratch, fields: fields)
        enqueue(bytes: scratch, to: connection)
    }

    /// Queues `error` (no `req`) as the connection's last frame and closes it
    /// after the next write: `.close(id, .afterWrite)`. Used for
    /// `slow_consumer`; the place for `timeout` and a connect-time
    /// `forbidden` too.
    func disconnect(_ connection: Connection, with error: ProtocolError) {
        guard connection.closing != .afterWrite, !connection.isClosed else { return }
        reply(to: connection, req: nil, error: error)
        connection.closing = .afterWrite
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
        if takenFromQueue {
            if let placed = connection.outbound.noticeInFront {
                enqueueDropNotice(count: placed.count + count, since: placed.since, to: connection, at: .frontNotice(count: placed.count + count, since: placed.since))
            } else {
                notice(.startedDropping(connection.id, pid: connection.credentials.pid))
                enqueueDropNotice(count: count, since: firstSeq, to: connection, at: .frontNotice(count: count, since: firstSeq))
            }
            return
        }
        if connection.pendingDropCount == 0 {
            connection.pendingDropSince = firstSeq
            notice(.startedDropping(connection.id, pid: connection.credentials.pid))
        }
        connection.pendingDropCount += count
    }

    /// Queues the notice for the drops waiting in `pendingDropCount`.
    func queuePendingDropNotice(_ connection: Connection) {
        let count = connection.pendingDropCount, since = connection.pendingDropSince
        connection.pendingDropCount = 0
        connection.pendingDropSince = 0
        enqueueDropNotice(count: count, since: since, to: connection, at: .back)
    }

    /// `{"op":"dropped","count":2,"since_seq":4}`
    private func enqueueDropNotice(count: UInt64, since: UInt64, to connection: Connection, at placement: Placement) {
        scratch.removeAll(keepingCapacity: true)
        FrameEncoder.appendDropped(count: count, sinceSeq: since, to: &scratch)
        let frame = scratch.withUnsafeBytes { OutboundFrame.copying($0) }
        enqueue(frame, seq: 0, to: connection, at: placement)
    }

    // MARK: Events

    /// Queues an event under the outbound limits and the connection's
    /// `overflow` rule (PROTOCOL.md "Semantics").
    /// - Returns: whether the event was queued.
    func offer(_ frame: OutboundFrame, seq: UInt64, to connection: Connection) -> Bool {
        let limit = configuration.maxOutboundBytes
        let size = frame.count
        var overLocal = connection.outbound.byteCount + size > limit
        // Global bound: beyond --max-queued, the connections holding at least a
        // fair share of it (the largest queues) are treated as over their limit.
        if !overLocal && statistics.queuedBytes + size > configuration.maxQueuedBytes {
            let fairShare = configuration.maxQueuedBytes / max(1, connections.count)
            if connection.outbound.byteCount + size > fairShare { overLocal = true }
        }
        if overLocal {
            switch connection.overflow {
            case .dropNew:
                recordDrops(connection, count: 1, firstSeq: seq, takenFromQueue: false)
                return false
            case .dropOld:
                if size > limit {
                    // It could never fit: keep what is queued, lose only this one.
                    recordDrops(connection, count: 1, firstSeq: seq, takenFromQueue: false)
                    return false
                }
                // Leave room for the `dropped` notice placed below.
                let target = max(0, min(limit, connection.outbound.byteCount) - size - OutboundQueue.dropNoticeMaxBytes)
                let result = connection.outbound.dropOldestEvents(untilAtMost: target)
                statistics.queuedBytes -= result.bytes
                if result.count > 0 { recordDrops(connection, count: result.count, firstSeq: result.firstSeq, takenFromQueue: true) }
                let stillOver = connection.outbound.byteCount + size > limit
                    || (statistics.queuedBytes + size > configuration.maxQueuedBytes && result.count == 0)
                if stillOver {
                    recordDrops(connection, count: 1, firstSeq: seq, takenFromQueue: false)
                    return false
                }
            case .disconnect:
                disconnect(connection, with: ProtocolError(.slowConsumer, "outbound queue over its limit of \(limit) bytes; closing (overflow: disconnect)"))
                notice(.slowConsumerDisconnected(connection.id, pid: connection.credentials.pid))
                return false
            }
        }
        if connection.pendingDropCount > 0 { queuePendingDropNotice(connection) }
        enqueue(frame, seq: seq, to: connection)
        return true
    }
}
