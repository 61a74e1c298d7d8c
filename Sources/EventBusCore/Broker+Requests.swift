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
        case .clear, .clients:
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
        if !pattern.hasWildcards { types.dropRoutes(of: pattern.text) }
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
        if !pattern.hasWildcards { types.dropRoutes(of: pattern.text) }
        index.remove(subscription)
        statistics.subscriptions -= 1
        return true
    }

    // MARK: Publish

    /// - Parameter typeEntry: the type's entry in `types`, when the caller
    ///   found it already.
    func publish(_ request: PublishRequest, frame: UnsafeRawBufferPointer, req: UnsafeRawBufferPointer?, from publisher: Connection, typeEntry: Int? = nil) {
        let type = request.type
        seq += 1
        let seq = self.seq
        statistics.published += 1
        var shared: OutboundFrame? = nil
        var delivered: UInt64 = 0
        forEachSubscriber(of: type, entry: typeEntry) { subscriber in
            guard subscriber.lastRoutedSeq != seq else { return }  // at most once
            subscriber.lastRoutedSeq = seq
            if subscriber === publisher && !publisher.echo { return }  // no echo
            if !subscriber.isRoutable { return }
            if shared == nil {
                shared = buildEvent(seq: seq, request, frame: frame, publisher: publisher)
            }
            if offer(shared!, seq: seq, to: subscriber) { delivered += 1 }
        }
        statistics.delivered += delivered
        replyOKIfAsked(to: publisher, req: req) { out in
            FrameEncoder.appendField("seq", int: seq, to: &out)
            FrameEncoder.appendField("delivered", int: delivered, to: &out)
        }
    }

    /// Calls `body` for every connection subscribed to `type` (the index's
    /// `forEachMatch`, through the type's entry in `types` and its kept list).
    @inline(__always)
    func forEachSubscriber(of type: EventType, entry: Int?, _ body: (Connection) -> Void) {
        var name = type.name
        guard let entry = entry ?? name.withUTF8({ types.entry(for: UnsafeRawBufferPointer($0)) }) else {
            index.forEachMatch(type.name, body)
            return
        }
        for connection in types.routes(entry, in: index) { body(connection) }
    }

    func buildEvent(seq: UInt64, _ request: PublishRequest, frame: UnsafeRawBufferPointer, publisher: Connection) -> OutboundFrame {
        func slice(_ token: JSONToken?) -> UnsafeRawBufferPointer? {
            token.map { UnsafeRawBufferPointer(rebasing: frame[$0.start..<$0.end]) }
        }
        let time = timestamps.bytes(nanosecondsSinceEpoch: now.wallNanoseconds)
        var type = request.type.name
        return type.withUTF8 { type in
            let parts = FrameEncoder.EventBytes(
                seq: seq, type: UnsafeRawBufferPointer(type), time: time,
                source: slice(request.source) ?? publisher.eventSource.bytes, id: slice(request.id),
                idPrefix: eventIDPrefix.bytes, identity: publisher.eventIdentity.bytes, origin: nil, data: slice(request.data))
            return OutboundFrame.make(capacity: FrameEncoder.eventByteCountUpperBound(parts)) {
                FrameEncoder.writeEvent(parts, into: $0)
            }
        }
    }
}
