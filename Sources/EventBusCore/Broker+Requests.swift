// Request handling and event routing (PROTOCOL.md "Requests", "Events",
// "Semantics"): one method per op, the one pair of functions that makes and
// ends a subscription, and the fan-out of a publish with the echo rule and
// at-most-once delivery (the overflow rules are in Broker+Output.swift).
//
// Before editing: a subscription is made and ended only by
// `addSubscription`/`removeSubscription`, which keep both directions of the
// index and `statistics.subscriptions` in step; a reply is never dropped.
// A publish finds its route list through `types` (EventTypeTable.swift) and
// has `writer` (EventWriter.swift) write its event from byte ranges
// (`EventContent`) and the publisher's ready-made parts (EventStamp.swift):
// nothing per event builds a String.
@_spi(Package) import EventBusProtocol

extension Broker {
    @inline(__always)
    func perform(_ request: Request, frame: RawSpan, req: RawSpan?, from connection: Connection) {
        switch request {
        case .publish(let publish):
            // (1.2) Held, the event waits unrouted: no seq, queued to no one.
            if mayHaveToHold(frame, connection), holdIfBlocked(frame, publish, entry: nil, publisher: connection) { return }
            // (1.3) A keyed publish out of line (Broker+Groups.swift): the
            // common one carries no key.
            if let key = publish.key {
                publishKeyed(publish, key: key, frame: frame, req: req, from: connection)
            } else {
                self.publish(publish, frame: frame, req: req, from: connection)
            }
        case .publishToGroup(let publish, let group, let uid):
            // (issue 36) A bridge's import of another machine's group event (Broker+GroupExport.swift).
            if mayHaveToHold(frame, connection), holdIfBlocked(frame, publish, entry: nil, publisher: connection) { return }
            publishToGroup(publish, group: GroupTarget(name: group, uid: uid), frame: frame, req: req, from: connection)
        case .subscribe(let subscribe):
            if subscribe.servers {
                subscribeServers(subscribe, req: req, from: connection)  // (issue 36)
            } else if let group = subscribe.group {
                subscribeGroup(subscribe, name: group, req: req, from: connection)
            } else if subscribe.serve {
                subscribeServing(subscribe, req: req, from: connection)
            } else {
                self.subscribe(subscribe, req: req, from: connection)
            }
        case .unsubscribe(let unsubscribe):
            let pattern = unsubscribe.pattern
            if let group = unsubscribe.group, !unsubscribe.servers {
                unsubscribeGroup(unsubscribe, name: group, req: req, from: connection)
                return
            }
            let removed = unsubscribe.servers ? unsubscribeServers(ServerWatch(pattern: pattern, group: unsubscribe.group, uid: unsubscribe.groupUID), from: connection)
                : unsubscribe.serve ? removeServing(pattern, from: connection) : removeSubscription(pattern, from: connection)
            replyOKIfAsked(to: connection, req: req) { out in
                FrameEncoder.appendField("type", string: pattern.text, to: &out)
                if unsubscribe.serve { FrameEncoder.appendField("serve", bool: true, to: &out) }
                if unsubscribe.servers { FrameEncoder.appendField("servers", bool: true, to: &out) }
                if unsubscribe.servers, let group = unsubscribe.group { FrameEncoder.appendField("group", string: group, to: &out) }
                if unsubscribe.servers, let uid = unsubscribe.groupUID { FrameEncoder.appendField("uid", int: UInt64(uid), to: &out) }
                FrameEncoder.appendField("removed", bool: removed, to: &out)
            }
        case .request(let request):
            serviceRequest(request, frame: frame, req: req, from: connection)
        case .reply(let reply):
            serviceReply(reply, frame: frame, req: req, from: connection)
        case .ping:
            replyOKIfAsked(to: connection, req: req)
        case .stats:
            stats(req: req, to: connection)
        case .hello(let hello):
            self.hello(hello, req: req, from: connection)
        case .clear(let type):
            clear(type, req: req, from: connection)
        case .clients:
            clients(req: req, to: connection)
        case .types(let limit):
            types(limit: limit, req: req, to: connection)
        }
    }

    /// Success is silent without `req` (PROTOCOL.md "Requests").
    func replyOKIfAsked(to connection: Connection, req: RawSpan?, fields: (inout [UInt8]) -> Void = { _ in }) {
        guard req != nil else { return }
        replyOK(to: connection, req: req, fields: fields)
    }

    func subscribe(_ request: SubscribeRequest, req: RawSpan?, from connection: Connection) {
        let pattern = request.pattern
        let filtered: Bool
        if let existing = connection.subscriptions[pattern] {
            filtered = existing.isFiltered
        } else {
            guard let decision = maySubscribe(connection, pattern, req: req) else { return }
            if let error = subscriptionLimitError(connection) {
                refuseForLimit(connection, req: req, error)
                return
            }
            filtered = decision.filtered
        }
        // (1.1) The retained events for `last`, found before anything changes.
        var retained: [RetainedEvent] = []
        if request.last {
            guard let found = retainedMatches(pattern, for: connection, filtered: filtered) else {
                reply(to: connection, req: req, error: ProtocolError(.limit, "replay budget of uid \(connection.credentials.uid) used up; subscribe with last again later"))
                return
            }
            retained = found
        }
        addSubscription(pattern, to: connection, filtered: filtered)
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: pattern.text, to: &out)
            if filtered { FrameEncoder.appendField("filtered", bool: true, to: &out) }
            if request.last { FrameEncoder.appendField("retained", int: UInt64(retained.count), to: &out) }
        }
        // Replays of retained and history events (1.1), right after the `ok`,
        // through `offer` like live events; paced under `wait` (1.2).
        guard request.last || request.since != nil, let subscription = connection.subscriptions[pattern] else { return }
        var replays: [PacedReplay] = []
        if !retained.isEmpty { replays.append(PacedReplay(retained: retained, subscription: subscription)) }
        if let since = request.since, let replay = historyReplay(since: since, instance: request.instance, subscription: subscription,
                                                                 to: connection, sentRetained: Set(retained.map(\.seq))) {
            replays.append(replay)
        }
        startReplays(replays, to: connection)
    }

    // MARK: The subscription pair

    /// Makes a subscription: both directions of the index and the counters,
    /// per uid too (the only place that adds one).
    /// - Parameter filtered: the policy denies some of the pattern's types to
    ///   the connection (`maySubscribe`'s answer); routing then checks it.
    /// - Returns: false when the connection already had the pattern.
    @discardableResult
    func addSubscription(_ pattern: Pattern, to connection: Connection, filtered: Bool = false) -> Bool {
        guard connection.subscriptions[pattern] == nil else { return false }
        if !pattern.hasWildcards { types.dropRoutes(of: pattern.text) }
        let subscription = index.add(pattern, connection)
        subscription.offeredFrom = seq + 1
        connection.keepSubscription(subscription, for: pattern)
        if connection.groups.unrecorded != 0 { noteEventSources(of: connection) }  // (1.3) its events are not all its group's now
        if filtered { setFiltered(subscription, true, on: connection) }
        chargeSubscription(pattern, of: connection, sign: 1)
        return true
    }

    /// Ends a subscription: both directions of the index and the counters
    /// (the only place that removes one: unsubscribe, close, and a policy
    /// reload's revocation). O(1) in the subscribers of the pattern.
    /// - Returns: whether the connection had the pattern.
    @discardableResult
    func removeSubscription(_ pattern: Pattern, from connection: Connection) -> Bool {
        guard let subscription = connection.dropSubscription(pattern) else { return false }
        cancelReplays(of: subscription, on: connection)
        if !pattern.hasWildcards { types.dropRoutes(of: pattern.text) }
        setFiltered(subscription, false, on: connection)
        index.remove(subscription)
        chargeSubscription(pattern, of: connection, sign: -1)
        return true
    }

    // MARK: Publish

    /// - Parameters:
    ///   - typeEntry: the type's entry in `types`, when the caller found it already.
    ///   - typeRange: where the type's bytes are in `frame`, when it is written there without escapes.
    func publish(_ request: PublishRequest, frame: RawSpan, req: RawSpan?, from publisher: Connection,
                 typeEntry: Int? = nil, typeRange: Range<Int>? = nil) {
        // Policy first: a denied publish takes no seq (PROTOCOL.md "Access policy (1.1)").
        guard mayPublish(publisher, request.type, entry: typeEntry, req: req), request.origin == nil || mayBridge(publisher, req: req) else { return }
        // What the event takes from the frame, as plain byte ranges: the
        // routing below copies no request (and counts no references).
        let content = EventContent(request, frame: frame, typeRange: typeRange)
        var kept: EventFrame? = nil
        if request.retain {
            // (1.1) Kept before the event takes a seq: refused means not routed.
            // The built frame (a chunk of its own past 2 KiB) must outlive the copy of its bytes.
            let built = buildEvent(seq: self.seq + 1, content, of: request.type, publisher: publisher)
            let chunk = withExtendedLifetime(built) { OutboundChunk.copying(built.bytes) }
            if let error = retain(chunk, seq: self.seq + 1, type: request.type.name, uid: publisher.credentials.uid) {
                reply(to: publisher, req: req, error: error)
                return
            }
            writer.keepBuiltChunk(chunk)  // alive through the fan-out (EventFrame does not count it)
            kept = EventFrame(chunk: chunk, typeOffset: Int(built.typeOffset), typeCount: Int(built.typeCount))
        }
        seq += 1
        let seq = self.seq
        statistics.published += 1
        publisher.accounting.countPublished()
        var delivered = fanOut(seq: seq, type: request.type, entry: typeEntry, publisher: publisher, built: kept) {
            buildEvent(seq: seq, content, of: request.type, publisher: publisher)
        }
        // (1.3) One member of each queue group (Broker+Groups.swift): one comparison while there is none.
        if _slowPath(groupsInUse != 0) { delivered &+= routeToGroups(seq: seq, type: request.type, entry: typeEntry, publisher: publisher, keyHash: publishKey?.keyHash) }
        replyOKIfAsked(to: publisher, req: req) { out in
            FrameEncoder.appendField("seq", int: seq, to: &out)
            FrameEncoder.appendField("delivered", int: delivered, to: &out)
        }
    }

    /// Queues the event `seq` of `type` to every connection that has a
    /// matching pattern and may receive it: at most once per connection, not
    /// to `publisher` unless it asked for echo, under each one's overflow
    /// rule and the publisher uid's fair share, then (1.3) to one member of
    /// each queue group it matches (Broker+Groups.swift). The frame is built
    /// once, by `build`, when the first receiver is found, or at once while
    /// the history ring is on (it keeps every event: `recordHistory`,
    /// Broker+History.swift) or queue groups exist. Counts `statistics.delivered`.
    /// - Parameters:
    ///   - entry: the type's entry in `types`, when the caller found it already.
    ///   - publisher: nil for the broker's own events.
    ///   - built: the frame when it was built already (a retained publish:
    ///     the kept chunk, queued by reference).
    /// - Returns: how many connections it was queued to (`delivered`).
    @inline(__always)
    func fanOut(seq: UInt64, type: EventType, entry: Int? = nil, publisher: Connection?, built: EventFrame? = nil,
                _ build: () -> EventFrame) -> UInt64 {
        let uid = publisher?.credentials.uid ?? configuration.ownCredentials.uid
        countPublished(type, entry: entry, seq: seq, owner: uid)
        var event = built
        // Built at once while the ring is on, and (1.3) while queue groups exist
        // (so `build` has no third call site: the fan-out keeps `offer` inlined).
        if event == nil && (retention.history.isEnabled || groupsInUse != 0) { event = build() }
        var delivered: UInt64 = 0
        var alreadyDropping: UInt64 = 0
        forEachSubscriber(of: type, entry: entry, publisherUID: uid) { subscriber in
            guard subscriber.output.route(seq) else { return }  // at most once
            if subscriber === publisher && !subscriber.echo { return }  // no echo
            if !subscriber.isRoutable { return }
            if event == nil { event = build() }
            // (issue 20) Dropping already under drop-new (or wait, for another
            // uid's events) and still refused: the event is lost for it as
            // `offer` would lose it; count it and go on (the broker-wide
            // counters once, after the loop): no call, nothing else looked at.
            // Refused so for every publisher, it is parked: out of the kept
            // route lists until it writes (ParkedSubscribers.swift); by the
            // publisher uid's fair share, parked against that uid.
            if subscriber.output.pendingDropsCounted > 0 && (subscriber.overflow == .dropNew || subscriber.overflow == .wait),
               let refused = refusal(size: event.unsafelyUnwrapped.count &+ OutboundQueue.entryOverheadBytes,
                                     actor: uid == subscriber.credentials.uid || isPrivileged(uid) ? OutboundQueue.noActor : uid, connection: subscriber) {
                subscriber.output.countAnotherDrop()
                subscriber.accounting.countDropped(1)
                alreadyDropping &+= 1
                if mayPark(subscriber, refused) { park(subscriber, refused: refused, publisher: uid) }
                return
            }
            if offer(event!, seq: seq, publisher: uid, to: subscriber) { delivered += 1 }
        }
        if types.splitsParked { countParked(type, entry: entry, publisher: publisher) }
        if alreadyDropping > 0 {
            statistics.dropped += alreadyDropping
            typeCounters.addDropped(alreadyDropping, typeCounters.routed)
        }
        recordHistory(event, seq: seq, publisher: publisher)
        // (1.3) Queue groups get it after this returns (`routeToGroups`, called
        // by the caller: a call here made the fan-out stop inlining `offer`);
        // its frame (and chunk) kept until then.
        if _slowPath(groupsInUse != 0) {
            groupEvent = event
        } else if writer.builtChunk != nil {
            writer.releaseBuiltChunk()
        }
        statistics.delivered += delivered
        countDelivered(delivered)
        return delivered
    }

    /// Calls `body` for every connection subscribed to `type` that may
    /// receive it (the index's `forEachMatch`, through the type's entry in
    /// `types` and its kept list; the broker's own reserved types have none).
    /// - Parameter publisherUID: (parkfair) the fan-out's publisher uid: the
    ///   connections parked against it are counted, not walked (nil: walked).
    @inline(__always)
    func forEachSubscriber(of type: EventType, entry: Int?, publisherUID: UInt32? = nil, _ body: (Connection) -> Void) {
        var found = entry
        if found == nil {
            found = types.entry(for: type.name.utf8Span.span.bytes)
        }
        guard let found else {
            index.forEachMatch(type, body)
            return
        }
        // The list is kept by `types` and every connection in it by
        // `connections` through the fan-out: no count per subscriber.
        // (issue 35) The array's buffer pointer stays: the per-subscriber
        // loop is where case 2 spends its time, and it borrows the elements
        // only during the call (Uncounted.swift's rule). A span instead
        // (`routes.span`, `Uncounted(list[unchecked: i])`) measured case 1
        // 2,407 and case 2 568.5 Ir per delivery against 2,389 and 565.7.
        // The loop moved into the fence (a `@_transparent`
        // `Uncounted.forEach(in:_:)`, stop 43) stopped the fan-out's closure
        // being inlined: case 1 2,897, case 2 847 against 2,405 and 570.
        var routes = types.routes(found, in: index)
        // (parkfair) Some connection is parked against a publisher uid: the
        // list with the parked ones to walk (one loop, `body` inlined once:
        // passing it to an out-of-line walk cost case 1 +5 %).
        if _slowPath(types.splitsFairParked) { routes = routesWithFairParked(found, routes, skipping: publisherUID) }
        routes.withUnsafeBufferPointer { list in
            for i in 0..<list.count { Uncounted(list[i]).with(body) }
        }
    }

    /// Writes a publish's event frame once (`EventWriter.buildEvent`, EventWriter.swift).
    /// - Parameter type: the event's type, whose bytes are written when
    ///   `content` has none.
    /// (1.3) A keyed publish (`publishKey`, set by `publishKeyed` only
    /// while it routes) writes the identity with the key after it.
    func buildEvent(seq: UInt64, _ content: EventContent, of type: EventType, publisher: Connection) -> EventFrame {
        writer.buildEvent(seq: seq, content, of: type, publisher: publisher, identity: publishKey?.identity.bytes ?? publisher.identity.eventIdentity.bytes,
                          wallNanoseconds: now.wallNanoseconds, history: &retention.history)
    }

}
