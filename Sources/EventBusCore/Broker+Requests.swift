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
        case .publish(let publish):
            self.publish(publish, frame: frame, req: req, from: connection)
        case .subscribe(let subscribe):
            self.subscribe(subscribe, req: req, from: connection)
        case .unsubscribe(let pattern):
            let removed = removeSubscription(pattern, from: connection)
            replyOKIfAsked(to: connection, req: req) { out in
                FrameEncoder.appendField("type", string: pattern.text, to: &out)
                FrameEncoder.appendField("removed", bool: removed, to: &out)
            }
        case .ping:
            replyOKIfAsked(to: connection, req: req)
        case .stats:
            stats(req: req, to: connection)
        case .hello(let hello):
            self.hello(hello, req: req, from: connection)
        case .clear(let type):
            clear(type, req: req, from: connection)
        case .clients:
            // 1.1 ops not implemented yet: answered as before they were known.
            reply(to: connection, req: req, error: ProtocolError(.unknownOp, "unknown op \"\(request.opName)\""))
        }
    }

    /// Success is silent without `req` (PROTOCOL.md "Requests").
    func replyOKIfAsked(to connection: Connection, req: UnsafeRawBufferPointer?, fields: (inout [UInt8]) -> Void = { _ in }) {
        guard req != nil else { return }
        replyOK(to: connection, req: req, fields: fields)
    }

    func subscribe(_ request: SubscribeRequest, req: UnsafeRawBufferPointer?, from connection: Connection) {
        let pattern = request.pattern
        if connection.subscriptions[pattern] == nil {
            guard connection.subscriptions.count < configuration.maxSubscriptionsPerConnection else {
                let message = "too many subscriptions on this connection (limit \(configuration.maxSubscriptionsPerConnection))"
                reply(to: connection, req: req, error: ProtocolError(.limit, message))
                notice(.limitReached(connection.id, pid: connection.credentials.pid, message: message))
                return
            }
        }
        // (1.1) The retained events for `last`, found before anything changes.
        var retained: [RetainedEvent] = []
        if request.last {
            guard let found = retainedMatches(pattern, for: connection) else {
                reply(to: connection, req: req, error: ProtocolError(.limit, "replay budget of uid \(connection.credentials.uid) used up; subscribe with last again later"))
                return
            }
            retained = found
        }
        addSubscription(pattern, to: connection)
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: pattern.text, to: &out)
            if request.last { FrameEncoder.appendField("retained", int: UInt64(retained.count), to: &out) }
        }
        // Replays of retained and history events (1.1), right after the `ok`,
        // through `offer` like live events.
        if request.last { sendRetained(retained, to: connection) }
        if let since = request.since, let subscription = connection.subscriptions[pattern] {
            replayHistory(since: since, instance: request.instance, subscription: subscription, to: connection,
                          sentRetained: Set(retained.map(\.seq)))
        }
    }

    // MARK: The subscription pair

    /// Makes a subscription: both directions of the index and the counters
    /// (the only place that adds one; per-uid accounting belongs here).
    /// - Returns: false when the connection already had the pattern.
    @discardableResult
    func addSubscription(_ pattern: Pattern, to connection: Connection) -> Bool {
        guard connection.subscriptions[pattern] == nil else { return false }
        let subscription = index.add(pattern, connection)
        subscription.offeredFrom = seq + 1
        connection.subscriptions[pattern] = subscription
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

    func publish(_ request: PublishRequest, frame: UnsafeRawBufferPointer, req: UnsafeRawBufferPointer?, from publisher: Connection) {
        let type = request.type
        var shared: OutboundFrame? = nil
        if request.retain {
            // (1.1) Kept before the event takes a seq: refused means not routed.
            let event = buildEvent(seq: self.seq + 1, request, frame: frame, publisher: publisher)
            if let error = retain(event, seq: self.seq + 1, type: type.name, uid: publisher.credentials.uid) {
                reply(to: publisher, req: req, error: error)
                return
            }
            shared = event
        }
        seq += 1
        let seq = self.seq
        statistics.published += 1
        if shared == nil && retention.history.isEnabled {
            shared = buildEvent(seq: seq, request, frame: frame, publisher: publisher)  // the ring keeps every event
        }
        var delivered: UInt64 = 0
        index.forEachMatch(type.name) { subscriber in
            guard subscriber.lastRoutedSeq != seq else { return }  // at most once
            subscriber.lastRoutedSeq = seq
            if subscriber === publisher && !publisher.echo { return }  // no echo
            if !subscriber.isRoutable { return }
            if shared == nil {
                shared = buildEvent(seq: seq, request, frame: frame, publisher: publisher)
            }
            if offer(shared!, seq: seq, to: subscriber) { delivered += 1 }
        }
        recordHistory(shared, seq: seq, type: type, publisher: publisher)
        statistics.delivered += delivered
        replyOKIfAsked(to: publisher, req: req) { out in
            FrameEncoder.appendField("seq", int: seq, to: &out)
            FrameEncoder.appendField("delivered", int: delivered, to: &out)
        }
    }

    func buildEvent(seq: UInt64, _ request: PublishRequest, frame: UnsafeRawBufferPointer, publisher: Connection) -> OutboundFrame {
        timestamps.format(nanosecondsSinceEpoch: now.wallNanoseconds, into: &timeScratch)
        func slice(_ token: JSONToken?) -> UnsafeRawBufferPointer? {
            token.map { UnsafeRawBufferPointer(rebasing: frame[$0.start..<$0.end]) }
        }
        return timeScratch.withUnsafeBytes { time in
            let parts = FrameEncoder.EventParts(
                seq: seq, type: request.type.name, time: time,
                source: slice(request.source), defaultSource: publisher.defaultSource,
                id: slice(request.id), instance: instance,
                pid: publisher.credentials.pid, uid: publisher.credentials.uid, gid: publisher.credentials.gid,
                data: slice(request.data))
            return OutboundFrame.make(capacity: FrameEncoder.eventByteCountUpperBound(parts)) {
                FrameEncoder.writeEvent(parts, into: $0)
            }
        }
    }
}
