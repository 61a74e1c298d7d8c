// Request handling and event routing (PROTOCOL.md "Requests", "Events",
// "Semantics"): one method per op, and the fan-out of a publish with the echo
// rule, at-most-once delivery and the overflow rules.
//
// Before editing: a reply is never dropped; only event frames go through the
// overflow rules in `offer`.
import EventBusProtocol

extension Broker {
    func perform(_ request: Request, frame: UnsafeRawBufferPointer, req: UnsafeRawBufferPointer?, from connection: Connection) {
        switch request {
        case .publish(let type, let data, let source, let id):
            publish(type: type, frame: frame, data: data, source: source, id: id, req: req, from: connection)
        case .subscribe(let pattern):
            subscribe(pattern, req: req, from: connection)
        case .unsubscribe(let pattern):
            let removed = connection.patterns.remove(pattern) != nil
            if removed {
                index.remove(pattern, connection)
                statistics.subscriptions -= 1
            }
            replyOKIfAsked(to: connection, req: req) { out in
                FrameEncoder.appendField("type", string: pattern.text, to: &out)
                FrameEncoder.appendField("removed", bool: removed, to: &out)
            }
        case .ping:
            replyOKIfAsked(to: connection, req: req)
        case .stats:
            let s = statistics
            let uptime = UInt64(max(0, now.monotonicNanoseconds - startMonotonic) / 1_000_000_000)
            replyOKIfAsked(to: connection, req: req) { out in
                FrameEncoder.appendField("connections", int: UInt64(s.connections), to: &out)
                FrameEncoder.appendField("subscriptions", int: UInt64(s.subscriptions), to: &out)
                FrameEncoder.appendField("published", int: s.published, to: &out)
                FrameEncoder.appendField("delivered", int: s.delivered, to: &out)
                FrameEncoder.appendField("dropped", int: s.dropped, to: &out)
                FrameEncoder.appendField("queued_bytes", int: UInt64(max(0, s.queuedBytes)), to: &out)
                FrameEncoder.appendField("uptime_s", int: uptime, to: &out)
                FrameEncoder.appendField("instance", string: instance, to: &out)
            }
        case .hello(let client, let echo, let overflow):
            guard !connection.saidHello else {
                reply(to: connection, req: req, error: ProtocolError(.badRequest, "hello may be sent once per connection"))
                return
            }
            connection.saidHello = true
            connection.echo = echo
            connection.overflow = overflow
            if let client {
                connection.clientName = client
                connection.defaultSource = client
            }
            let configuration = self.configuration
            let instance = self.instance
            replyOKIfAsked(to: connection, req: req) { out in
                FrameEncoder.appendField("server", string: configuration.serverName, to: &out)
                FrameEncoder.appendField("version", string: configuration.version, to: &out)
                FrameEncoder.appendField("protocol", int: UInt64(ProtocolConstants.version), to: &out)
                FrameEncoder.appendField("instance", string: instance, to: &out)
                FrameEncoder.appendField("conn", int: connection.id, to: &out)
                FrameEncoder.appendASCII(",\"features\":[", to: &out)
                for (i, feature) in ProtocolConstants.features.enumerated() {
                    if i > 0 { out.append(0x2C) }
                    JSONString.appendQuoted(feature, to: &out)
                }
                out.append(0x5D)
            }
        }
    }

    /// Success is silent without `req` (PROTOCOL.md "Requests").
    func replyOKIfAsked(to connection: Connection, req: UnsafeRawBufferPointer?, fields: (inout [UInt8]) -> Void = { _ in }) {
        guard req != nil else { return }
        replyOK(to: connection, req: req, fields: fields)
    }

    func subscribe(_ pattern: Pattern, req: UnsafeRawBufferPointer?, from connection: Connection) {
        if !connection.patterns.contains(pattern) {
            guard connection.patterns.count < configuration.maxSubscriptionsPerConnection else {
                let message = "too many subscriptions on this connection (limit \(configuration.maxSubscriptionsPerConnection))"
                reply(to: connection, req: req, error: ProtocolError(.limit, message))
                notices.append(.limitReached(connection.id, pid: connection.credentials.pid, message: message))
                return
            }
            connection.patterns.insert(pattern)
            index.add(pattern, connection)
            statistics.subscriptions += 1
        }
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: pattern.text, to: &out)
        }
    }

    func publish(type: EventType, frame: UnsafeRawBufferPointer, data: JSONToken?, source: JSONToken?, id: JSONToken?, req: UnsafeRawBufferPointer?, from publisher: Connection) {
        seq += 1
        let seq = self.seq
        statistics.published += 1
        var shared: OutboundFrame? = nil
        var delivered: UInt64 = 0
        index.forEachMatch(type.name) { subscriber in
            guard subscriber.lastRoutedSeq != seq else { return }  // at most once
            subscriber.lastRoutedSeq = seq
            if subscriber === publisher && !publisher.echo { return }  // no echo
            if subscriber.isClosed || subscriber.closeWhenFlushed || subscriber.closeAfterNextWrite { return }
            if shared == nil {
                shared = buildEvent(seq: seq, type: type, frame: frame, data: data, source: source, id: id, publisher: publisher)
            }
            if offer(shared!, seq: seq, to: subscriber) { delivered += 1 }
        }
        statistics.delivered += delivered
        replyOKIfAsked(to: publisher, req: req) { out in
            FrameEncoder.appendField("seq", int: seq, to: &out)
            FrameEncoder.appendField("delivered", int: delivered, to: &out)
        }
    }

    func buildEvent(seq: UInt64, type: EventType, frame: UnsafeRawBufferPointer, data: JSONToken?, source: JSONToken?, id: JSONToken?, publisher: Connection) -> OutboundFrame {
        timestamps.format(nanosecondsSinceEpoch: now.wallNanoseconds, into: &timeScratch)
        func slice(_ token: JSONToken?) -> UnsafeRawBufferPointer? {
            token.map { UnsafeRawBufferPointer(rebasing: frame[$0.start..<$0.end]) }
        }
        return timeScratch.withUnsafeBytes { time in
            let parts = FrameEncoder.EventParts(
                seq: seq, type: type.name, time: time,
                source: slice(source), defaultSource: publisher.defaultSource,
                id: slice(id), instance: instance,
                pid: publisher.credentials.pid, uid: publisher.credentials.uid, gid: publisher.credentials.gid,
                data: slice(data))
            return OutboundFrame.make(capacity: FrameEncoder.eventByteCountUpperBound(parts)) {
                FrameEncoder.writeEvent(parts, into: $0)
            }
        }
    }

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
                recordDrops(connection, count: 1, firstSeq: seq)
                return false
            case .dropOld:
                if size > limit {
                    // It could never fit: keep what is queued, lose only this one.
                    recordDrops(connection, count: 1, firstSeq: seq)
                    return false
                }
                // Leave room for the `dropped` notice placed below.
                let target = max(0, min(limit, connection.outbound.byteCount) - size - OutboundQueue.dropNoticeMaxBytes)
                let result = connection.outbound.dropOldestEvents(untilAtMost: target)
                statistics.queuedBytes -= result.bytes
                if result.count > 0 {
                    // The notice goes where the gap is, not after newer events.
                    let placed = connection.outbound.placeDropNotice(count: result.count, since: result.firstSeq)
                    statistics.queuedBytes += placed.bytes
                    statistics.dropped += result.count
                    if placed.added { notices.append(.startedDropping(connection.id, pid: connection.credentials.pid)) }
                }
                let stillOver = connection.outbound.byteCount + size > limit
                    || (statistics.queuedBytes + size > configuration.maxQueuedBytes && result.count == 0)
                if stillOver {
                    recordDrops(connection, count: 1, firstSeq: seq)
                    return false
                }
            case .disconnect:
                reply(to: connection, req: nil, error: ProtocolError(.slowConsumer, "outbound queue over its limit of \(limit) bytes; closing (overflow: disconnect)"))
                connection.closeAfterNextWrite = true
                notices.append(.slowConsumerDisconnected(connection.id, pid: connection.credentials.pid))
                return false
            }
        }
        if connection.pendingDropCount > 0 { queueDropNotice(connection) }
        enqueue(frame, seq: seq, to: connection)
        return true
    }
}
