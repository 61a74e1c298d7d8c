// The quota rules (PROTOCOL.md "Quotas (1.1)", "Semantics"): who may
// connect and subscribe, the inbound budgets with their back-pressure and the
// frame timeout, outbound back-pressure on requests (per connection, per uid,
// in total), and the fair share of each subscriber's budget per publisher uid.
// The counts they read are kept in UserAccounts.swift and QuotaLedger.swift
// (whose methods change each total with its accounts' counts).
//
// Before editing: reading is paused and resumed only through `pause` and
// `unpause` with a reason (a connection is read when it has none left), so
// the rules never undo each other. Nothing here is dropped for inbound
// budgets: the kernel's socket buffers hold the rest (back-pressure).
@_spi(Package) import EventBusProtocol

/// Why the broker is not reading a connection (several may hold at once).
struct PauseReasons: OptionSet {
    let rawValue: UInt8
    /// Its own queue is over `--max-outbound` (until below half).
    static let outbound = PauseReasons(rawValue: 1)
    /// Its uid's queues are over the per-uid outbound limit (until below half).
    static let userOutbound = PauseReasons(rawValue: 2)
    /// All queues are over `--max-queued` and it holds at least a fair share (until below half).
    static let totalOutbound = PauseReasons(rawValue: 4)
    /// Its uid is throttled for inbound bytes and it is not the one connection read.
    static let inbound = PauseReasons(rawValue: 8)
    /// (1.2) A subscriber holds it back (PROTOCOL.md "Flow control"; until released).
    static let held = PauseReasons(rawValue: 16)
}

extension Broker {
    // MARK: Pausing

    func pause(_ connection: Connection, _ reason: PauseReasons) {
        guard !connection.input.pauses.contains(reason) else { return }
        if connection.input.pause(reason) && connection.closing == nil && !connection.inputClosed && !connection.isClosed {
            current.effects.append(.pauseReading(connection.id))
        }
    }

    func unpause(_ connection: Connection, _ reason: PauseReasons) {
        guard connection.input.pauses.contains(reason) else { return }
        guard connection.input.unpause(reason) else { return }
        connection.input.madeProgress(now: now.monotonicNanoseconds)  // the frame timeout counts while read only
        if connection.closing == nil && !connection.inputClosed && !connection.isClosed {
            current.effects.append(.resumeReading(connection.id))
        }
    }

    // MARK: Limits

    /// After a policy reload: each uid's limits from the view of its newest
    /// connection. A lower limit applies to new allocations only; nothing
    /// already held is taken back (DESIGN-NOTES-1.1.md C.2).
    func refreshLimits() {
        for account in ledger.accounts.values {
            guard let newest = account.members.max(by: { $0.id < $1.id }) else { continue }
            account.setLimits(limits(for: account.uid, UserLimitOverrides(newest.policy.limits)))
            ledger.noteOutboundLimit(account.limits.outboundBytes)
        }
    }

    // MARK: Admission

    /// The `limit` error for one connection too many, nil when it may connect:
    /// `--max-connections` (the last `reservedRootConnections` for uid 0
    /// only, at most a quarter of it) and the per-uid limit.
    func connectionLimitError(uid: UInt32, account: UserAccount?, limits: UserLimits) -> ProtocolError? {
        let total = configuration.maxConnections
        let reserved = min(configuration.quotas.reservedRootConnections, total / 4)
        if connections.count >= total {
            return ProtocolError(.limit, "too many connections (limit \(total))")
        }
        if uid != 0 && connections.count >= total - reserved {
            return ProtocolError(.limit, "too many connections (limit \(total), the last \(reserved) kept for uid 0)")
        }
        if let limit = limits.connections, (account?.members.count ?? 0) >= limit {
            return ProtocolError(.limit, "\(limit) connections for uid \(uid) (limit)")
        }
        return nil
    }

    /// Answers `req` with a `limit` error and tells the log (one line per
    /// connection's uid, rate-limited): how a subscription, a membership or a
    /// request over its bound is refused.
    func refuseForLimit(_ connection: Connection, req: RawSpan?, _ error: ProtocolError) {
        reply(to: connection, req: req, error: error)
        notice(.limitReached(connection.id, pid: connection.credentials.pid, message: error.message))
    }

    /// The `limit` error for one more subscription on `connection`, nil when
    /// it fits (per connection, per uid, in total).
    func subscriptionLimitError(_ connection: Connection) -> ProtocolError? {
        let perConnection = configuration.maxSubscriptionsPerConnection
        if connection.subscriptions.count + connection.groups.memberships.count >= perConnection {
            return ProtocolError(.limit, "too many subscriptions on this connection (limit \(perConnection))")
        }
        let account = connection.account
        if let limit = account.limits.subscriptions, account.subscriptions >= limit {
            return ProtocolError(.limit, "\(limit) subscriptions for uid \(account.uid) (limit)")
        }
        let total = configuration.quotas.maxSubscriptions
        if statistics.subscriptions >= total {
            return ProtocolError(.limit, "too many subscriptions in total (limit \(total))")
        }
        return nil
    }

    /// (1.3) A uid's queue-group memberships are at most its connection
    /// limit (none for uid 0 and the broker's uid): each group an event
    /// matches costs its publisher a choice, so a uid's groups may cost
    /// others no more than its connections may (PROTOCOL-NOTES.md
    /// "Queue groups": bounds).
    func groupLimitError(_ connection: Connection) -> ProtocolError? {
        let account = connection.account
        guard let limit = account.limits.connections, account.groupMemberships >= limit else { return nil }
        return ProtocolError(.limit, "\(limit) queue-group memberships for uid \(account.uid) (limit: its connection limit)")
    }

    /// (1.3) A queue group has at most `--max-group-members` members (none
    /// for uid 0 and the broker's uid): round robin writes each event to the
    /// next member, one write(2) per event while the members' kernel buffers
    /// fill, so a group of thousands that never read makes every publisher
    /// into it pay a system call per event; the bound keeps that within what
    /// a few plain subscribers cost (PROTOCOL-NOTES.md "Queue groups": bounds).
    func groupMembersLimitError(_ connection: Connection, _ key: GroupKey) -> ProtocolError? {
        guard !connection.account.isPrivileged, let group = groupIndex(serving: key.serve).group(key) else { return nil }
        let limit = configuration.quotas.maxGroupMembers
        guard group.count >= limit else { return nil }
        return ProtocolError(.limit, "queue group \"\(key.name)\" of uid \(key.uid) on \(key.pattern.text) already has \(group.count) members (--max-group-members \(limit)); join again when one leaves")
    }

    // MARK: Inbound bytes

    /// Charges what the connection's splitter holds now (the one place
    /// inbound bytes are counted) and applies the inbound budgets.
    func syncInbound(_ connection: Connection) {
        let held = connection.isClosed || connection.closing != nil ? 0
            : connection.splitter.heldBytes + (connection.flow.heldFrame?.capacity ?? 0) + (connection.input.scan?.heldBytes ?? 0)
        let delta = held - connection.input.inboundCharged
        guard delta != 0 else { return }
        let account = connection.account
        if connection.input.inboundCharged == 0 {
            account.countInboundHolder(1)
        } else if held == 0 {
            account.countInboundHolder(-1)
        }
        connection.input.chargeInbound(held, now: now.monotonicNanoseconds)
        ledger.addInbound(delta, to: account)
        updateInboundThrottle(account)
        if delta > 0 && !ledger.totals.inboundThrottled && ledger.totals.inboundBytes > configuration.quotas.maxInboundBytes {
            beginTotalInboundThrottle()
        } else if delta < 0 && ledger.totals.inboundThrottled && ledger.totals.inboundBytes < configuration.quotas.maxInboundBytes / 2 {
            endTotalInboundThrottle()
        }
    }

    /// A uid's share of the total inbound budget.
    var inboundFairShare: Int { configuration.quotas.maxInboundBytes / max(1, ledger.totals.inboundUIDs) }

    /// Throttles or releases one uid after its inbound bytes changed, and
    /// keeps its one read connection the one with the oldest incomplete frame.
    func updateInboundThrottle(_ account: UserAccount) {
        var throttle = account.inboundThrottle
        if let limit = account.limits.inboundBytes {
            if account.inboundBytes > limit { throttle.insert(.user) } else if account.inboundBytes < limit / 2 { throttle.remove(.user) }
        }
        if ledger.totals.inboundThrottled && account.inboundBytes >= inboundFairShare { throttle.insert(.total) }
        if !ledger.totals.inboundThrottled { throttle.remove(.total) }
        setInboundThrottle(account, throttle)
    }

    func setInboundThrottle(_ account: UserAccount, _ throttle: InboundThrottle) {
        let was = account.setInboundThrottle(throttle)
        if throttle.isEmpty {
            guard !was.isEmpty else { return }
            for member in account.members { unpause(member, .inbound) }
            return
        }
        // Throttled: read only the oldest incomplete frame's connection.
        if was.isEmpty || account.inboundReader.map({ $0.input.inboundCharged == 0 || $0.isClosed }) ?? true {
            chooseInboundReader(account)
        }
    }

    /// Picks the member holding inbound bytes the longest (O(members), on
    /// changes of the reader only) and pauses every other member.
    func chooseInboundReader(_ account: UserAccount) {
        var oldest: Connection? = nil
        for member in account.members where member.input.inboundCharged > 0 && !member.isClosed && member.closing == nil {
            if oldest == nil || member.input.inboundSince < oldest!.input.inboundSince { oldest = member }
        }
        account.chooseInboundReader(oldest)
        for member in account.members where member !== oldest { pause(member, .inbound) }
        if let oldest { unpause(oldest, .inbound) }
    }

    func beginTotalInboundThrottle() {
        ledger.setInboundThrottled(true)
        let share = inboundFairShare
        for account in ledger.accounts.values where account.inboundBytes >= share {
            setInboundThrottle(account, account.inboundThrottle.union(.total))
        }
    }

    func endTotalInboundThrottle() {
        ledger.setInboundThrottled(false)
        for account in ledger.accounts.values where account.inboundThrottle.contains(.total) {
            setInboundThrottle(account, account.inboundThrottle.subtracting(.total))
        }
    }

    // MARK: Frame timeout

    /// The frame timeout (PROTOCOL.md "Quotas"): closes, with `error` code
    /// `timeout`, every connection whose incomplete frame got no byte for
    /// `--frame-timeout` while the broker was reading it. The server calls
    /// it about once a second (`tickIntervalNanoseconds`).
    /// - Returns: `.close(id, .afterWrite)` for each, with the error queued.
    package func tick(at time: BrokerTime) -> BrokerStep {
        now = time
        if !flowWatch.isEmpty { watchForStalls() }
        let timeout = configuration.quotas.frameTimeoutNanoseconds
        guard timeout > 0, ledger.totals.inboundBytes > 0 else { return finishStep() }
        var expired: [Connection] = []
        for account in ledger.accounts.values where account.inboundHolders > 0 {
            for member in account.members where member.input.inboundCharged > 0 && member.input.pauses.isEmpty
                && !member.splitter.hasBacklog && member.closing == nil && !member.isClosed
                && time.monotonicNanoseconds - member.input.inboundProgressAt >= timeout {
                expired.append(member)
            }
        }
        for connection in expired.sorted(by: { $0.id < $1.id }) {
            let seconds = Double(timeout) / 1e9
            disconnect(connection, with: ProtocolError(.timeout, "incomplete frame made no progress for \(seconds) s (--frame-timeout); closing"))
        }
        return finishStep()
    }

    /// How often the server should call `tick`: a tenth of the frame
    /// timeout, between 10 ms and 1 s.
    package var tickIntervalNanoseconds: Int64 {
        let frames = min(1_000_000_000, max(10_000_000, configuration.quotas.frameTimeoutNanoseconds / 10))
        // (1.2) The stall watch: a twentieth of the stall timeout, at least 10 ms.
        return flowWatch.isEmpty ? frames : min(frames, max(10_000_000, configuration.stallTimeoutNanoseconds / 20))
    }

    // MARK: Outbound bytes

    /// Applies a change of `connection`'s queue charge to its uid and the
    /// total (the one place outbound bytes are counted) and releases the
    /// fair-share charges the queue handed back; resumes reading where a
    /// limit is left behind.
    @inline(__always)
    func applyOutbound(_ connection: Connection, _ delta: Int) {
        connection.accounting.accountRef.with { $0.addQueued(delta) }  // no count: the broker keeps it
        statistics.queuedBytes += delta
        if !ledger.released.isEmpty { releaseActorCharges(connection) }
        if delta < 0 && (connection.input.pauses.contains(.outbound) || ledger.usersPausedForOutbound > 0 || !ledger.totals.outboundPaused.isEmpty) {
            outboundShrank(connection)
        }
    }

    /// Charges the fair share of publisher uid `actor` for an event of
    /// `bytes` just queued to `connection`. Out of line, as the inliner
    /// kept it before the fair shares became methods: inlined into
    /// `publish`, its dictionary code made `publish` too large for the
    /// queue's append to be inlined (callgrind case 1 +1.5 %, case 2 +7 %).
    @inline(never)
    func chargeActor(_ actor: UInt32, bytes: Int, to connection: Connection) {
        connection.accounting.chargeShare(of: actor, bytes: bytes)
        connection.account.chargeShare(of: actor, bytes: bytes)
    }

    /// One release per run of charges of one uid (a queue discarded whole
    /// holds mostly one publisher's: issue 38's `group-members` teardown
    /// released a million charges one dictionary update at a time).
    private func releaseActorCharges(_ connection: Connection) {
        let account = connection.account
        var run = ActorCharge(actor: OutboundQueue.noActor, bytes: 0)
        func release(_ charge: ActorCharge) {
            connection.accounting.releaseShare(charge)
            account.releaseShare(charge)
        }
        ledger.drainReleased { charge in
            if charge.actor == run.actor {
                run.bytes += charge.bytes
                return
            }
            if run.actor != OutboundQueue.noActor { release(run) }
            run = charge
        }
        if run.actor != OutboundQueue.noActor { release(run) }
    }

    private func outboundShrank(_ connection: Connection) {
        if connection.input.pauses.contains(.outbound) && connection.outbound.chargedBytes < configuration.maxOutboundBytes / 2 {
            unpause(connection, .outbound)
        }
        let account = connection.account
        if !account.outboundPaused.isEmpty && account.queuedBytes < (account.limits.outboundBytes ?? .max) / 2 {
            for member in ledger.resumeUserOutbound(of: account) { unpause(member, .userOutbound) }
        }
        if !ledger.totals.outboundPaused.isEmpty && statistics.queuedBytes < configuration.maxQueuedBytes / 2 {
            for member in ledger.resumeTotalOutbound() { unpause(member, .totalOutbound) }
        }
    }

    /// Between two frames of `connection`: pauses it when its replies have
    /// put its queue, its uid or all queues over their limits (requests are
    /// back-pressured, PROTOCOL.md "Semantics"), so one read cannot overshoot
    /// by more than one frame's replies.
    /// - Returns: whether to go on with its next frame.
    @inline(__always)
    func mayReadNextFrame(_ connection: Connection) -> Bool {
        guard connection.closing == nil && !connection.isClosed else { return false }
        if statistics.queuedBytes <= ledger.outboundFastPathBytes { return connection.input.pauses.isEmpty }
        let charged = connection.outbound.chargedBytes
        if charged > configuration.maxOutboundBytes { pause(connection, .outbound) }
        let account = connection.account
        if let limit = account.limits.outboundBytes, account.queuedBytes > limit, !connection.input.pauses.contains(.userOutbound) {
            pause(connection, .userOutbound)
            ledger.pauseForUserOutbound(connection, of: account)
        }
        if statistics.queuedBytes > configuration.maxQueuedBytes, !connection.input.pauses.contains(.totalOutbound),
           charged > configuration.maxQueuedBytes / max(1, connections.count) {
            pause(connection, .totalOutbound)
            ledger.pauseForTotalOutbound(connection)
        }
        return connection.input.pauses.isEmpty
    }

    /// Takes a closing connection out of the lists of paused connections.
    func forgetPauses(_ connection: Connection) {
        if connection.input.pauses.contains(.userOutbound) { ledger.forgetUserOutbound(connection, of: connection.account) }
        if connection.input.pauses.contains(.totalOutbound) { ledger.forgetTotalOutbound(connection) }
        connection.input.clearPauses()
    }

    // MARK: Fair share

    /// dbus-broker's `user_charge_check` (DESIGN-NOTES-1.1.md C.1): whether
    /// an actor already holding `share` of a budget with `remaining` left,
    /// shared by `users` actors (itself included when it holds a share), may
    /// take `charge` more: `(users + 1) · (charge + share) − share ≤ remaining`.
    @inline(__always)
    static func fairShareAllows(charge: Int, share: Int, users: Int, remaining: Int) -> Bool {
        (users + 1) * (charge + share) - share <= remaining
    }

    /// Bytes of `actor`'s events to drop from `connection`'s queue before a
    /// charge of `size` passes the fair-share checks (0 when it passes now).
    func fairShareDeficit(actor: UInt32, size: Int, connection: Connection) -> Int {
        func deficit(_ shares: [UInt32: Int], limit: Int, used: Int) -> Int {
            let share = shares[actor] ?? 0
            let users = shares.count  // the actor among them when it holds a share
            let remaining = limit - used
            if Broker.fairShareAllows(charge: size, share: share, users: users, remaining: remaining) { return 0 }
            // After dropping d of the actor's bytes (share - d, remaining + d) it
            // passes iff (users + 1) · (size + share) − share − remaining ≤ (users + 1) · d.
            let over = (users + 1) * (size + share) - share - remaining
            return (over + users) / (users + 1)
        }
        var needed = deficit(connection.accounting.actorShares, limit: configuration.maxOutboundBytes, used: connection.outbound.chargedBytes)
        if let limit = connection.account.limits.outboundBytes {
            needed = max(needed, deficit(connection.account.actorShares, limit: limit, used: connection.account.queuedBytes))
        }
        return needed
    }
}

extension Broker {
    /// Bytes the quotas count now: outbound queues, incomplete inbound
    /// frames, retained events and the history ring (the server gives freed
    /// heap memory back when this falls, BrokerServer+Memory.swift).
    package var countedBytes: Int {
        statistics.queuedBytes + ledger.totals.inboundBytes + retention.retained.byteCount + retention.history.byteCount
    }

    /// Whether `tick` has anything to watch (some incomplete frame is held).
    package var needsTicks: Bool { (configuration.quotas.frameTimeoutNanoseconds > 0 && ledger.totals.inboundBytes > 0) || !flowWatch.isEmpty }
}
