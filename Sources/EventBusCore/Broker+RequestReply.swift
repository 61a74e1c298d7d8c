// Request/reply (PROTOCOL.md "Request/reply (1.3)"): serving subscriptions,
// the routing of a `request` to the connections that serve its type, the
// `reply` that answers it, and every way a request ends without one
// (`no_responders`, `no_reply`, `timeout`, its requester gone). The books
// are RequestTable.swift's.
//
// Before editing: serving subscriptions live in `serveIndex` and
// `Connection.servings`, never in the plain index, so the publish path does
// not know they exist; `addServing`/`removeServing` are the only places that
// make and end one. A request is queued to its servers as a reply frame
// (`enqueue(bytes:)`): never dropped once queued (a server that cannot take
// it is passed over before, or holds the requester). Every way out of the
// books goes through `RequestTable.finish`; a token that ends while its
// frame is still queued keeps its fair-share charge until the frame is
// written (`releaseWrittenShares`, attacker round 4). The `key` of queue groups
// arrives with `ServiceRequest.publish` (the seam: `routeRequest` picks
// the servers; one member per group is the groups code's choice there).
import EventBusPolicy
@_spi(Package) import EventBusProtocol

extension Broker {
    // MARK: Serving subscriptions

    /// `subscribe` with `serve: true`: needs `subscribe` and `serve` for
    /// the pattern (PROTOCOL.md "Request/reply": who may serve).
    func subscribeServing(_ request: SubscribeRequest, req: RawSpan?, from connection: Connection) {
        let pattern = request.pattern
        let filtered: Bool
        let fallback: Bool
        if let existing = connection.servings[pattern] {
            filtered = existing.isFiltered
            fallback = connection.fallbackServings.contains(pattern)
        } else {
            guard let decision = mayServe(connection, pattern, req: req) else { return }
            if request.fallback && !mayServeAsFallback(connection, req: req) { return }
            if let error = subscriptionLimitError(connection) {
                refuseForLimit(connection, req: req, error)
                return
            }
            filtered = decision.filtered
            fallback = request.fallback
            addServing(pattern, to: connection, filtered: filtered, fallback: fallback)
        }
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: pattern.text, to: &out)
            FrameEncoder.appendField("serve", bool: true, to: &out)
            if fallback { FrameEncoder.appendField("fallback", bool: true, to: &out) }
            if filtered { FrameEncoder.appendField("filtered", bool: true, to: &out) }
        }
    }

    /// Makes a serving subscription (the only place that adds one); charged
    /// as a subscription (PROTOCOL.md "Quotas").
    func addServing(_ pattern: Pattern, to connection: Connection, filtered: Bool, fallback: Bool = false) {
        guard connection.servings[pattern] == nil else { return }
        let subscription = (fallback ? fallbackIndex : serveIndex).add(pattern, connection)
        connection.keepServing(subscription, for: pattern, fallback: fallback)
        if !fallback { countServing(pattern, 1) }
        if filtered { setFiltered(subscription, true, on: connection) }
        chargeSubscription(pattern, of: connection, sign: 1)
    }

    /// Ends a serving subscription (the only place that removes one:
    /// unsubscribe, close, a reload's revocation). The requests it was given
    /// that no other serving subscription of the connection matches are
    /// taken back (`no_reply` where it was the last server).
    /// - Returns: whether the connection had it.
    @discardableResult
    func removeServing(_ pattern: Pattern, from connection: Connection, closing: Bool = false) -> Bool {
        guard let removed = connection.dropServing(pattern) else { return false }
        let subscription = removed.subscription
        setFiltered(subscription, false, on: connection)
        if removed.fallback {
            fallbackIndex.remove(subscription)
        } else {
            serveIndex.remove(subscription)
            countServing(pattern, -1)  // (issue 36) Broker+ServerWatch.swift
        }
        chargeSubscription(pattern, of: connection, sign: -1)
        if !closing && !connection.requests.serving.isEmpty {
            var lost: [ReplyToken] = []
            for token in connection.requests.serving {
                guard let type = requests.slots[token]?.request.type, pattern.matches(type) else { continue }
                if connection.servings.keys.contains(where: { $0.matches(type) }) { continue }
                lost.append(token)
            }
            for token in lost { withdraw(token, from: connection, because: .unsubscribed) }
        }
        return true
    }

    /// A connection is going (from `forget`): its serving subscriptions end,
    /// the tokens it was given are taken back (`no_reply` where it was the
    /// last server), and the requests it asked are forgotten (a late reply
    /// to one gets `accepted: false`).
    func forgetRequests(of connection: Connection) {
        for pattern in Array(connection.servings.keys) { removeServing(pattern, from: connection, closing: true) }
        for token in Array(connection.requests.serving) { withdraw(token, from: connection, because: .closed) }
        for request in Array(connection.requests.pending.values) { requests.finish(request) }
        if !connection.requests.lingering.isEmpty { releaseWrittenShares(connection, all: true) }
    }

    /// A connection fell behind (PROTOCOL.md "Flow control"): the requests
    /// queued to it count as unanswered by it.
    func requestsFellBehind(_ connection: Connection) {
        for token in Array(connection.requests.serving) { withdraw(token, from: connection, because: .behind) }
    }

    /// Takes back one token; the requester gets `no_reply` once no server is
    /// left. (Also from the redelivery of a closing group member's requests.)
    func withdraw(_ token: ReplyToken, from server: Connection, because loss: ServerLoss) {
        guard let request = requests.withdraw(token, from: server, because: loss), request.tokens.isEmpty else { return }
        let message = request.noReplyMessage
        requests.finish(request)
        answer(request) { out in let req = request.req; FrameEncoder.appendError(req: req.span.bytes, ProtocolError(.noReply, message), to: &out) }
    }

    // MARK: Asking

    /// `request` (PROTOCOL.md "Request/reply": asking, routing, nobody to
    /// ask, bounds, flow control). The answer comes later (`reply`), or an
    /// error now.
    func serviceRequest(_ request: ServiceRequest, frame: RawSpan, req: RawSpan?, from requester: Connection) {
        guard let req else { preconditionFailure("the decoder refuses a request without req") }
        guard req.byteCount <= configuration.maxRequestIDBytes else {
            reply(to: requester, req: req, error: ProtocolError(.badRequest, "the req of a request may be at most \(configuration.maxRequestIDBytes) bytes (the broker keeps it until the answer)"))
            return
        }
        let type = request.publish.type
        guard mayPublish(requester, type, req: req) else { return }
        let timeout = request.timeoutMilliseconds ?? configuration.defaultRequestTimeoutMilliseconds
        guard timeout <= configuration.maxRequestTimeoutMilliseconds else {
            reply(to: requester, req: req, error: ProtocolError(.badRequest, "timeout \(timeout) ms is over the broker's maximum of \(configuration.maxRequestTimeoutMilliseconds) ms (--max-request-timeout)"))
            return
        }
        if let error = pendingLimitError(requester) {
            refuseForLimit(requester, req: req, error)
            return
        }
        // The frame a server gets is the event's with `"op":"request"`, the
        // token and the time left: written once, spliced per server.
        let event = buildRequestEvent(seq: seq + 1, request.publish, frame: frame, requester: requester)
        let size = event.count + Broker.requestExtraBytes + OutboundQueue.entryOverheadBytes
        var servers: [Connection] = []
        var blockers: [Connection] = []
        requestMark &+= 1
        requestingUID = requester.credentials.uid
        routeRequest(type, from: requester) { server in
            switch requestFit(size: size, requester: requester, server: server) {
            case .fits:
                servers.append(server)
                _ = server.groups.chosen(requestMark)
            case .holds: blockers.append(server)
            case .passedOver: break
            }
        }
        // (1.3) One member of each serving queue group (Broker+Groups.swift).
        var blockingGroups: [QueueGroup] = []
        if serveGroups.count != 0 {
            let keyHash = if let key = request.publish.key { hashOfKey(token: frame.extracting(key.range)) } else { UInt64?.none }
            routeRequestToGroups(type, keyHash: keyHash, size: size, requester: requester,
                                 servers: &servers, blockers: &blockers, blockingGroups: &blockingGroups)
        }
        if !blockers.isEmpty || !blockingGroups.isEmpty {
            hold(requester, on: blockers, groups: blockingGroups, frame: frame)  // routed again when released
            return
        }
        // (issue 36) Nobody here: a bridge's fallback subscription asks another machine.
        if servers.isEmpty && !fallbackIndex.isEmpty {
            routeRequestToFallback(type, size: size, requester: requester, servers: &servers, blockers: &blockers)
            if !blockers.isEmpty {
                hold(requester, on: blockers, groups: [], frame: frame)
                return
            }
        }
        guard !servers.isEmpty else {
            statistics.noResponders += 1
            reply(to: requester, req: req, error: ProtocolError(.noResponders, "no connection serves \(type.name)"))
            return
        }
        seq += 1
        statistics.requests += 1
        requester.accounting.countPublished()
        countRequest(type, owner: requester.credentials.uid)
        let pending = PendingRequest(requester: requester, req: Array(copying: req), seq: seq, type: type,
                                     deadline: now.monotonicNanoseconds &+ Int64(clamping: timeout) &* 1_000_000)
        requests.add(pending)
        var out: [UInt8] = []
        for server in servers {
            let token = requests.issueToken(for: pending, to: server, actor: servingActor(requester.credentials.uid, server))
            out.removeAll(keepingCapacity: true)
            FrameEncoder.appendRequest(event: event.span.bytes, token: { token.append(to: &$0) }, timeoutMilliseconds: timeout, to: &out)
            enqueue(bytes: out, to: server)
            requests.noteFrameEnd(token, server.flow.bytesTaken &+ UInt64(server.outbound.byteCount))
            server.accounting.countDelivered()
        }
    }

    /// (attacker round 4) Gives back the fair-share charges of ended tokens
    /// whose request frames `connection` has now been written (all of them
    /// once its queue is empty or it goes; RequestTable.swift keeps them).
    func releaseWrittenShares(_ connection: Connection, all: Bool = false) {
        RequestTable.releaseWrittenShares(of: connection, all: all)
    }

    /// Bytes a request frame adds to its event frame: `"request"` for
    /// `"event"`, `,"reply":"<32 hex>","timeout":<at most 20 digits>`.
    static let requestExtraBytes = 2 + 10 + ReplyToken.textLength + 12 + 20

    /// Calls `body` with every connection that may be given a request of
    /// `type` from `requester`: a matching serving subscription the policy
    /// lets serve it (`serveIndex`), at most once each, not the requester
    /// unless it said `echo: true`, not one being closed. (Queue groups pick
    /// one member per group here.)
    func routeRequest(_ type: EventType, from requester: Connection, _ body: (Connection) -> Void) {
        for server in serveIndex.matches(type) {
            if server === requester && !requester.echo { continue }
            guard server.isRoutable, mayServeMore(server) else { continue }
            body(server)
        }
    }

    /// Whether `server` may be given one more request of `requestingUID`:
    /// the reply tokens the broker keeps for it, its uid (none for uid 0 and
    /// the broker's) and all servers are below their bounds, and a requester
    /// of another uid stays within its fair share of the server's bound and
    /// of its uid's (`fairShareAllows`, as for outbound bytes: one uid alone
    /// holds at most about half, so the server's own uid, uid 0 and the
    /// broker's always find room). At a bound it is passed over.
    func mayServeMore(_ server: Connection) -> Bool {
        let quotas = configuration.quotas
        let held = server.requests.serving.count + server.requests.lingering.count  // ended tokens' frames still queued count too
        let perConnection = configuration.maxServingRequestsPerConnection
        if held >= perConnection { return false }
        let account = server.account
        if !account.isPrivileged && account.servingRequests >= quotas.maxServingRequestsPerUID { return false }
        guard requests.slots.count < quotas.maxServingRequests else { return false }
        let actor = servingActor(requestingUID, server)
        guard actor != OutboundQueue.noActor else { return true }
        let shares = server.requests.shares
        guard Broker.fairShareAllows(charge: 1, share: shares[actor] ?? 0, users: shares.count, remaining: perConnection - held) else { return false }
        guard !account.isPrivileged else { return true }
        let uidShares = account.servingShares
        return Broker.fairShareAllows(charge: 1, share: uidShares[actor] ?? 0, users: uidShares.count,
                                      remaining: quotas.maxServingRequestsPerUID - account.servingRequests)
    }

    /// Whose fair share a request of `uid` to `server` counts in: none
    /// (`OutboundQueue.noActor`) for the server's own uid, uid 0 and the broker's.
    @inline(__always)
    func servingActor(_ uid: UInt32, _ server: Connection) -> UInt32 {
        uid == server.credentials.uid || isPrivileged(uid) ? OutboundQueue.noActor : uid
    }

    /// What a server whose queue is at `size` bytes short does with a request.
    enum RequestFit {
        case fits, holds, passedOver
    }

    /// Flow control for a request as for an event (PROTOCOL.md
    /// "Request/reply", "Flow control"): it fits under the limits and the
    /// requester uid's fair share; if not, a server under `wait` that may
    /// hold the requester (same uid, or `allow hold`) and whose queue is
    /// half full holds it; any other is passed over (not reached).
    func requestFit(size: Int, requester: Connection, server: Connection) -> RequestFit {
        let uid = requester.credentials.uid
        let actor = uid == server.credentials.uid || isPrivileged(uid) ? OutboundQueue.noActor : uid
        let blockedByReplay = !server.flow.replays.isEmpty
        let refused = refusal(size: size, actor: actor, connection: server)
        if refused == nil && !blockedByReplay && !server.flow.behind { return .fits }
        if refused == nil && server.flow.behind { return .fits }  // behind: drop-new, and it fits
        guard server.overflow == .wait, !server.flow.behind else { return .passedOver }
        switch server.policy.hold {
        case .ownUID: guard server.credentials.uid == uid else { return .passedOver }
        case .anyUID: break
        case .none: return .passedOver
        }
        if blockedByReplay { return .holds }
        guard server.outbound.chargedBytes >= configuration.maxOutboundBytes / 2, refused != .total else { return .passedOver }
        return .holds
    }

    /// The `limit` error for one more pending request of `requester`, nil
    /// when it may ask (per connection, per uid except uid 0 and the
    /// broker's, in total).
    func pendingLimitError(_ requester: Connection) -> ProtocolError? {
        let perConnection = configuration.maxPendingRequestsPerConnection
        if requester.requests.pending.count >= perConnection {
            return ProtocolError(.limit, "\(perConnection) pending requests on this connection (limit, --max-pending-requests)")
        }
        let account = requester.account
        let perUID = configuration.quotas.maxPendingRequestsPerUID
        if !account.isPrivileged && account.pendingRequests >= perUID {
            return ProtocolError(.limit, "\(perUID) pending requests for uid \(account.uid) (limit)")
        }
        let total = configuration.quotas.maxPendingRequests
        if requests.count >= total {
            return ProtocolError(.limit, "too many pending requests in total (limit \(total))")
        }
        return nil
    }

    /// The event frame of a request (PROTOCOL.md "Events" shape, `seq`
    /// the one it takes if it reaches anyone).
    private func buildRequestEvent(seq: UInt64, _ publish: PublishRequest, frame: RawSpan, requester: Connection) -> [UInt8] {
        // (1.3) A keyed request's frame carries its key after the identity.
        let identity = if let key = publish.key { Broker.identity(requester, key: frame.extracting(key.range)) } else { Broker.identity(requester, key: nil) }
        return writer.requestEvent(seq: seq, EventContent(publish, frame: frame, typeRange: nil), of: publish.type, publisher: requester,
                                   identity: identity, wallNanoseconds: now.wallNanoseconds)
    }

    // MARK: Answering

    /// `reply` (PROTOCOL.md "Request/reply": answering, the answer, bounds).
    /// `accepted: false`, the same answer whatever the reason, for a token
    /// that is not good on this connection now (unknown, expired, answered,
    /// given to another connection, not a token at all).
    func serviceReply(_ reply: ServiceReply, frame: RawSpan, req: RawSpan?, from server: Connection) {
        let text = frame.extracting((reply.to.start + 1)..<(reply.to.end - 1))
        guard let token = ReplyToken(text: text), let slot = requests.slots[token], slot.server === server else {
            answerReply(to: server, req: req, accepted: false)
            return
        }
        // (issue 36) A bridge relays another machine's `no_responders` & co.
        if reply.code != nil && server.fallbackServings.isEmpty {
            self.reply(to: server, req: req, error: ProtocolError(.badRequest, "field \"code\" is for a bridge relaying another machine's answer (a connection with a fallback serving subscription)"))
            return
        }
        let request = slot.request
        requests.finish(request)
        let time = writer.timeBytes(nanosecondsSinceEpoch: now.wallNanoseconds)
        let data: RawSpan? = if let token = reply.data { frame.extracting(token.range) } else { nil }
        let error: RawSpan? = if let token = reply.error { frame.extracting(token.range) } else { nil }
        var out: [UInt8] = []
        let requestReq = request.req
        server.identity.eventIdentity.withSpan { identity in
            FrameEncoder.appendAnswer(req: requestReq.span.bytes, seq: request.seq, time: time, identity: identity,
                                      data: data, serviceError: error, code: reply.code?.rawValue ?? ErrorCode.serviceError.rawValue, to: &out)
        }
        // Charged to the requester's queue and uid: one that would pass its
        // uid's outbound quota (PROTOCOL.md "Request/reply": bounds), its
        // queue's --max-outbound or --max-queued is not queued. (attacker)
        // Before, only the uid's quota was checked, so a root requester with
        // 600 requests pending to another uid's server held 125 MB of that
        // server's 1 MB answers in one queue (8 MiB is its limit), charged to root.
        let requester = request.requester
        let answerBytes = out.count
        let size = answerBytes + OutboundQueue.entryOverheadBytes
        if let refused = refusal(size: size, actor: OutboundQueue.noActor, connection: requester) {
            let limit = requester.account.limits.outboundBytes ?? 0
            let why = refused == .user ? "would take uid \(requester.account.uid) past its outbound limit of \(limit) bytes" : "does not fit: \(refusalText(refused, requester))"
            answer(request) { out in
                let req = request.req
                FrameEncoder.appendError(req: req.span.bytes, ProtocolError(.limit, "the reply of \(answerBytes) bytes \(why) (replies not read); not queued"), to: &out)
            }
            answerReply(to: server, req: req, accepted: false)
            return
        }
        statistics.replies += 1
        enqueue(bytes: out, to: requester)
        backPressure(requester)
        closeIfIdle(requester)
        answerReply(to: server, req: req, accepted: true)
    }

    private func answerReply(to server: Connection, req: RawSpan?, accepted: Bool) {
        replyOKIfAsked(to: server, req: req) { out in FrameEncoder.appendField("accepted", bool: accepted, to: &out) }
    }

    /// Queues a frame `write` makes to a request's requester (which is out
    /// of the books already) and closes a half-closed requester with nothing left.
    private func answer(_ request: PendingRequest, _ write: (inout [UInt8]) -> Void) {
        let requester = request.requester
        guard !requester.isClosed, requester.closing == nil else { return }
        writer.writeReply(write)
        enqueue(bytes: writer.scratch, to: requester)
        backPressure(requester)
        closeIfIdle(requester)
    }

    /// An answer queued to a requester counts as its reply (PROTOCOL.md
    /// "Semantics": requests are back-pressured): over its queue's, its
    /// uid's or the total limit, the requester is not read until the queue
    /// drains, as after any reply (`mayReadNextFrame` pauses it).
    private func backPressure(_ requester: Connection) {
        _ = mayReadNextFrame(requester)
    }

    /// A half-closed connection whose last pending request was answered.
    private func closeIfIdle(_ connection: Connection) {
        if connection.inputClosed && connection.isIdleAfterInput { closeWhenFlushed(connection) }
    }

    // MARK: Deadlines

    /// The earliest deadline of a pending request, monotonic ns (the server
    /// wakes for it); nil while nothing is pending.
    package var nextRequestDeadline: Int64? { requests.nextDeadline }

    /// Answers `timeout` to every request whose deadline has passed at
    /// `time` (PROTOCOL.md "Request/reply": no answer) and forgets it.
    /// Cost: O(log n) per request expired, nothing when none is due.
    package func expireRequests(at time: BrokerTime) -> BrokerStep {
        now = time
        while let request = requests.due(at: time.monotonicNanoseconds) {
            requests.finish(request)
            statistics.timeouts += 1
            answer(request) { out in
                let req = request.req
                FrameEncoder.appendError(req: req.span.bytes, ProtocolError(.timeout, "no reply to the request of \(request.type.name) (seq \(request.seq)) before its deadline"), to: &out)
            }
        }
        return finishStep()
    }
}
