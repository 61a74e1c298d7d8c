// Request handling and event routing (PROTOCOL.md "Requests", "Events",
// "Semantics"): one method per op, the one pair of functions that makes and
// ends a subscription, and the fan-out of a publish with the echo rule and
// at-most-once delivery (the overflow rules are in Broker+Output.swift).
//
// Before editing: a subscription is made and ended only by
// `addSubscription`/`removeSubscription`, which keep both directions of the
// index and `statistics.subscriptions` in step; a reply is never dropped.
import EventBusProtocol

extension Broker {
    @inline(__always)
    func perform(_ request: Request, frame: UnsafeRawBufferPointer, req: UnsafeRawBufferPointer?, from connection: Connection) {
        switch request {
        case .publish(let type, let data, let source, let id):
            publish(type: type, frame: frame, data: data, source: source, id: id, req: req, from: connection)
        case .subscribe(let pattern):
            subscribe(pattern, req: req, from: connection)
        case .unsubscribe(let pattern):
            let removed = removeSubscription(pattern, from: connection)
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
        if connection.subscriptions[pattern] == nil {
            guard connection.subscriptions.count < configuration.maxSubscriptionsPerConnection else {
                let message = "too many subscriptions on this connection (limit \(configuration.maxSubscriptionsPerConnection))"
                reply(to: connection, req: req, error: ProtocolError(.limit, message))
                notice(.limitReached(connection.id, pid: connection.credentials.pid, message: message))
                return
            }
            addSubscription(pattern, to: connection)
        }
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: pattern.text, to: &out)
        }
        // Replays of retained and history events (1.1) are offered here,
        // right after the `ok`, through `offer` like live events.
    }

    // MARK: The subscription pair

    /// Makes a subscription: both directions of the index and the counters
    /// (the only place that adds one; per-uid accounting belongs here).
    /// - Returns: false when the connection already had the pattern.
    @discardableResult
    func addSubscription(_ pattern: Pattern, to connection: Connection) -> Bool {
        guard connection.subscriptions[pattern] == nil else { return false }
        connection.subscriptions[pattern] = index.add(pattern, connection)
        statistics.subscriptions += 1
        return true
    }

    /// Ends a subscription: both directions of the index and the counters
    /// (the only place that removes one: unsubscribe, close, and a policy
    /// reload's revocation). O(1) in the subscribers of the pattern.
    /// - Returns: whether the connection had the pattern.
    @discardableResult
    func removeSubscription(_ pattern: Pattern, from connection: Connection) -> Bool {
        guard let subscription = connection.subscriptions.removeValue(forKey: pattern) else { return false }
        index.remove(subscription)
        statistics.subscriptions -= 1
        return true
    }

    // MARK: Publish

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
            if !subscriber.isRoutable { return }
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
}
