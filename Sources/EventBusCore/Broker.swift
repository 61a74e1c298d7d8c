// The broker as a state machine (PROTOCOL.md "Requests", "Events",
// "Semantics"): connections, subscriptions, routing, seq, the echo rule,
// outbound limits, drop accounting and stats. No fds, no threads, no clock
// reads: time comes in as an argument (`at: BrokerTime`), and a bounded
// `receive` stops for the server to look at its clock
// (`stoppedForTimeCheck`, PieceCount.swift). Each public method is one step that
// returns a `BrokerStep` (connections with new output, connections to close,
// reading to pause or resume, notices), which the server applies.
//
// Before editing: every path that queues bytes goes through `enqueue`
// (Broker+Output.swift) so the per-connection and global byte counts stay
// exact; every subscription is made and ended by `addSubscription` /
// `removeSubscription` (Broker+Requests.swift); every close goes through
// `forget`. The broker's state is in a few owned parts, held here and
// changed in place, each with its invariants in its file's header: the
// quota ledger `ledger` (QuotaLedger.swift: accounts, totals, released
// fair-share charges, the outbound fast-path bound, paused and half-full
// counts; each uid's `UserAccount`, UserAccounts.swift), the policy state
// `policyState` (PolicyState.swift: views, generation, denial log, the
// open-publish verdict, all swapped together), the event writer `writer`
// (EventWriter.swift: the reply buffer, the event scratch, the built chunk,
// seq digits, timestamps, id prefix, and the code that writes an event
// frame), the subscription indexes `index`, `serveIndex` and `fallbackIndex`
// (SubscriptionIndex.swift: changed only by the subscription pair, empty
// once every subscription is gone, `version` moved by every change), the
// queue groups `groups`, `serveGroups` and `fallbackGroups`
// (QueueGroups.swift: made and ended only by Broker+Groups.swift, a member
// blocked exactly while listed), the request table `requests`
// (RequestTable.swift: a request is in it until `finish` takes it out with
// every token), the type table `types` (EventTypeTable.swift: a route list
// used only while the index's `version` stands), `parking`
// (ParkedSubscribers.swift: every park and unpark splits the kept lists
// again), `typeCounters` (TypeCounters.swift: O(1), no allocation for a
// known type, a slot found through its generation-checked `Ref`) and
// `retention` (the retained store, which only `retain` and `clear` change,
// and the history ring of consecutive seqs, HistoryRing.swift);
// `Connection`'s are its `identity`, `session`, `input`, `output`,
// `outbound`, `accounting`, `flow`, `park`, `groups` and `requests`
// (Connection.swift's header names each one's rule), and its own
// subscriptions and life. The parts' fields are `private(set)` (or
// `fileprivate(set)`): a broker file decides when a rule applies and calls
// the part's method, which keeps the part's invariant; scripts/check-ownership
// (run by scripts/test) fails on a part's field another file could set, and
// lists the few not closed yet. The 1.1 features: per-uid
// accounting and quotas in UserAccounts.swift and Broker+Quotas.swift (called
// from `open`, `forget`, the subscription pair, `enqueue`, between frames in
// `receive`, and the frame timeout's `tick(at:)`; `.pauseReading`/
// `.resumeReading` may name many connections in one step); introspection in
// Broker+Introspection.swift; replay right after a subscribe's `ok` (marked in
// `subscribe`). The access policy is in Broker+Policy.swift: other ops ask
// `mayPublish` (also for `clear`), `mayReceive` (retained and replayed
// events), `mayBridge`, `maySubscribe`.
import EventBusPolicy
@_spi(Package) import EventBusProtocol

/// Limits and identity of a broker (PROTOCOL.md "Semantics" defaults).
package struct BrokerConfiguration: Sendable {
    /// Largest incoming frame in bytes (`--max-frame`, default 1 MiB).
    package var maxFrameBytes = ProtocolConstants.defaultMaxFrameBytes
    /// Per-connection outbound limit in bytes (`--max-outbound`, default 8 MiB).
    package var maxOutboundBytes = 8 << 20
    /// Frame bytes one `receive` handles before it stops and keeps the rest
    /// (`Connection.hasBufferedInput`): the unit of work between two
    /// scheduling decisions of the server while several uids are about
    /// (issue 20; the server sets 8 KiB). The default, no bound, handles all
    /// the bytes given.
    package var turnBytes = Int.max
    /// Connections at most (`--max-connections`, default 4096).
    package var maxConnections = 4096
    /// Patterns per connection at most (`--max-subscriptions`, default 4096).
    package var maxSubscriptionsPerConnection = 4096
    /// All outbound queues together in bytes (`--max-queued`, default 512 MiB).
    package var maxQueuedBytes = 512 << 20
    /// (issue 37) A connection with `allow hold` that keeps publishers of
    /// other uids held for at least 95 % of this window is behind for them
    /// (`--trusted-hold-window`, default 5 s; Broker+FlowControl.swift).
    package var trustedHoldWindowNanoseconds: Int64 = 5_000_000_000
    /// (1.2) How long a connection that holds a publisher (or has a paced
    /// replay) may take no byte of its queue before it is behind, ns
    /// (`--stall-timeout`, default 1 s; PROTOCOL.md "Flow control").
    package var stallTimeoutNanoseconds: Int64 = 1_000_000_000
    /// (1.3) Requests asked and not answered at most per connection
    /// (`--max-pending-requests`, default 1024; PROTOCOL.md "Request/reply").
    package var maxPendingRequestsPerConnection = 1024
    /// (1.3) Requests given to one serving connection and not answered at
    /// most (4096): past it the connection is passed over.
    package var maxServingRequestsPerConnection = 4096
    /// (1.3) The longest `req` a request may carry, bytes: the broker keeps
    /// it until the answer.
    package var maxRequestIDBytes = 1024
    /// (1.3) The largest `timeout` a request may ask for, ms
    /// (`--max-request-timeout`, default 300 s), and the one it gets without (25 s).
    package var maxRequestTimeoutMilliseconds: UInt64 = 300_000
    package var defaultRequestTimeoutMilliseconds: UInt64 = 25_000
    /// Retained events and the history ring (1.1), Broker+Retention.swift.
    package var retention = RetentionConfiguration()
    /// Per-uid and total limits (PROTOCOL.md "Quotas (1.1)").
    package var quotas = QuotaConfiguration()
    /// Event types with counters at most (PROTOCOL.md "Per-type counters (1.2)": 65,536).
    package var maxTrackedTypes = 65_536
    /// `server` and `version` in the `hello` reply.
    package var serverName = "eventbusd"
    package var version = EventBusRelease.version
    /// The broker process's own pid, uid and gid: stamped on its own
    /// `eventbus.` events; the uid may `bridge` without a policy file.
    package var ownCredentials = Credentials(pid: 0, uid: 0, gid: 0)
    /// The access policy at start (PROTOCOL.md "Access policy (1.1)"); nil:
    /// no policy file (`AccessPolicy.withoutFiles` for `ownCredentials.uid`).
    /// `Broker.reloadPolicy` replaces it.
    package var policy: AccessPolicy? = nil

    package init() {}
}

/// A point in time as the server read it once for a batch of input.
package struct BrokerTime: Sendable {
    /// CLOCK_REALTIME, ns since the Unix epoch: stamps events.
    package var wallNanoseconds: Int64
    /// CLOCK_MONOTONIC, ns: measures uptime.
    package var monotonicNanoseconds: Int64

    package init(wallNanoseconds: Int64, monotonicNanoseconds: Int64) {
        self.wallNanoseconds = wallNanoseconds
        self.monotonicNanoseconds = monotonicNanoseconds
    }
}

/// Counters reported by `stats` (PROTOCOL.md "Requests").
package struct BrokerStatistics: Equatable, Sendable {
    package var connections = 0
    package var subscriptions = 0
    /// Events accepted from publishers.
    package var published: UInt64 = 0
    /// Event frames queued to subscribers.
    package var delivered: UInt64 = 0
    /// Events dropped for slow subscribers.
    package var dropped: UInt64 = 0
    /// Bytes in all outbound queues, as charged (`OutboundQueue.chargedBytes`).
    package var queuedBytes = 0
    /// (1.2, PROTOCOL.md "Flow control") Publisher connections held now,
    /// times a publisher was held, times a connection went behind.
    package var held = 0
    package var holds: UInt64 = 0
    package var stalls: UInt64 = 0
    /// (1.3, PROTOCOL.md "Request/reply") Requests routed (they took a seq),
    /// replies accepted, requests answered `no_responders`, requests timed out.
    package var requests: UInt64 = 0
    package var replies: UInt64 = 0
    package var noResponders: UInt64 = 0
    package var timeouts: UInt64 = 0
}

/// The broker core, owned by one thread (the server's loop). Each public
/// method is a step that returns what the server must do (`BrokerStep`).
package final class Broker {
    package let configuration: BrokerConfiguration
    /// The bound on frame bytes per `receive` in force: the server sets
    /// `configuration.turnBytes` while several uids have input, no bound
    /// otherwise (one uid alone keeps whole reads: no copy of their rest).
    package var turnBytes = Int.max
    /// (issue 35) While `turnBytes` is bounded, `receive` also stops every
    /// `PieceCount.framesPerCheck` frames with this set and the rest kept
    /// (`hasBufferedInput`): the server, which owns the clock, goes on with
    /// `receive(_:_:at:continuing: true)` while its turn has time. So costly
    /// small frames (new types, patterns) are bounded by time too, and the
    /// core reads no clock.
    package internal(set) var stoppedForTimeCheck = false
    /// Frame bytes the current bounded piece of work may still handle
    /// (`turnBytes` at its first `receive`, less what each handled).
    var pieceBytesLeft = Int.max
    /// (issue 37) Frames answered from a scan made as they arrived
    /// (Broker+Scan.swift; for tests: that large frames take that path).
    var scannedFrames = 0
    /// Random id of this broker run (PROTOCOL.md "Events": `instance`).
    package let instance: String
    let startMonotonic: Int64

    package internal(set) var statistics = BrokerStatistics()
    var connections: [ConnectionID: Connection] = [:]
    let index = SubscriptionIndex()
    /// (1.3) Queue groups by pattern and by key (QueueGroups.swift,
    /// Broker+Groups.swift): of plain subscriptions, and of serving ones.
    let groups = GroupIndex()
    let serveGroups = GroupIndex()
    /// (issue 36) Bridges' fallback memberships of groups named as local ones (Broker+GroupExport.swift).
    let fallbackGroups = GroupIndex()
    /// (1.3) `groups.count` (and, issue 36, `fallbackGroups.count`), as a plain
    /// stored number: the one comparison an event pays while no queue group
    /// exists (kept by `joinGroup`/`leaveGroup`).
    var groupsInUse = 0
    /// (1.3) The frame `fanOut` just routed while groups exist, for
    /// `routeToGroups` right after it (its chunk kept in `writer.builtChunk`).
    var groupEvent: EventFrame? = nil
    /// (issue 38) Group events a closing member handed on one by one (a
    /// copy, a scan, `give`), not those dropped in bulk once no member left
    /// could take them (`handOver`): the work a teardown costs, for tests.
    package internal(set) var groupHandOns: UInt64 = 0
    /// (issue 38) Closing members' hand-ons not finished yet, oldest first,
    /// and the work one slice of them does (Broker+GroupHandOn.swift; set
    /// lower by tests).
    var pendingHandOns: [PendingHandOn] = []
    package var handOnSliceUnits = Broker.defaultHandOnSliceUnits
    /// (1.3) The key of the keyed publish being routed (`publishKeyed`), nil otherwise.
    var publishKey: PublishKey? = nil
    /// (1.3) The mark of the request being routed (`ConnectionGroups.chosen`):
    /// a server is taken once per request without scanning the list.
    var requestMark: UInt64 = 0
    /// (1.3) The uid of the requester being routed: `mayServeMore` gives it
    /// its fair share of each server's reply tokens.
    var requestingUID: UInt32 = 0
    /// (1.3) The seed of key hashes and member salts (random per run, as `types`').
    let groupSeed: UInt64
    /// (1.3) Serving subscriptions, apart from the plain ones (Broker+RequestReply.swift).
    let serveIndex = SubscriptionIndex(serving: true)
    /// (issue 36) Fallback serving subscriptions (a bridge's): asked only when
    /// a request reaches no server in `serveIndex` (Broker+Fallback.swift).
    let fallbackIndex = SubscriptionIndex(serving: true)
    /// (issue 36) Plain serving subscriptions and serving group members by
    /// pattern, and the connections watching them (Broker+ServerWatch.swift).
    var servingPatterns: [Pattern: Int] = [:]
    var serverWatchers: [ConnectionID: Connection] = [:]
    /// (issue 36) Members of the (event, non-fallback) groups by name and
    /// pattern, for the watches of groups' members (Broker+ServerWatch.swift):
    /// of every uid's groups by name, and (attacker6) of each uid's.
    var memberPatterns: [GroupTarget: [Pattern: Int]] = [:]
    /// (1.3) Pending requests, reply tokens, deadlines (RequestTable.swift).
    var requests = RequestTable()
    var nextConnectionID: ConnectionID = 1
    var seq: UInt64 = 0
    /// Retained events and the history ring (Broker+Retention.swift, Broker+History.swift).
    var retention: RetentionState
    /// Per-uid accounts, the totals beyond `statistics`, released fair-share
    /// charges and the per-uid flow counts (QuotaLedger.swift).
    var ledger: QuotaLedger
    /// (1.2) Connections that hold publishers, replay at their pace or are
    /// behind: the stall watch (Broker+FlowControl.swift).
    var flowWatch: [Connection] = []
    /// Connections with a paced replay left (while 0, no offer looks for one).
    var pacedReplays = 0

    /// What the running step has decided so far (`finishStep` hands it out).
    var current = BrokerStep()
    /// Numbers the steps, so `markOutput` lists a connection once per step.
    var stepNumber: UInt64 = 1
    /// The reply buffer and where event frames are written: the event
    /// scratch, the built chunk, seq digits, timestamps, id prefix (EventWriter.swift).
    var writer: EventWriter
    var now = BrokerTime(wallNanoseconds: 0, monotonicNanoseconds: 0)
    /// Published types by their bytes, with their route lists (EventTypeTable.swift).
    var types: EventTypeTable
    /// (issue 20) Subscribers out of the route lists while full (ParkedSubscribers.swift).
    var parking = ParkingLot()
    /// Per-type counters for `types` (TypeCounters.swift, Broker+Types.swift);
    /// `routed` is the type `fanOut` is routing: queued events carry it,
    /// drops are counted for it.
    let typeCounters: TypeCounters
    /// The types of the events a drop-old made room by dropping (reused).
    var droppedTypesScratch: [TypeCounters.Ref] = []

    /// The policy in force, its views, generation, denial log and publish
    /// verdict (PolicyState.swift; applied by Broker+Policy.swift).
    var policyState: PolicyState
    /// `stats.policy_generation`: 1 for the policy loaded at start, +1 per reload.
    package var policyGeneration: UInt64 { policyState.generation }

    /// - Parameters:
    ///   - configuration: limits.
    ///   - instance: this run's id, e.g. 16 random hex digits.
    ///   - startTime: when the broker started (for `uptime_s`).
    package init(configuration: BrokerConfiguration, instance: String, startTime: BrokerTime) {
        self.configuration = configuration
        self.instance = instance
        self.startMonotonic = startTime.monotonicNanoseconds
        self.ledger = QuotaLedger(outboundFastPathBytes: min(configuration.maxOutboundBytes, configuration.maxQueuedBytes, configuration.quotas.maxOutboundBytesPerUID))
        self.now = startTime
        var seed = Hasher()  // the standard library's per-process random seed
        seed.combine(instance)
        types = EventTypeTable(seed: UInt64(truncatingIfNeeded: seed.finalize()))
        var groupHasher = Hasher()
        groupHasher.combine(instance)
        groupHasher.combine("groups")
        groupSeed = UInt64(truncatingIfNeeded: groupHasher.finalize())
        typeCounters = TypeCounters(capacity: configuration.maxTrackedTypes)
        writer = EventWriter(instance: instance)
        self.policyState = PolicyState(policy: configuration.policy ?? .withoutFiles(brokerUID: configuration.ownCredentials.uid))
        self.retention = RetentionState(configuration.retention)
    }

    /// Number of open connections.
    package var connectionCount: Int { connections.count }

    /// Whether the subscription index is empty (for invariant checks).
    package var indexIsEmpty: Bool { index.isEmpty && serveIndex.isEmpty && fallbackIndex.isEmpty && groups.isEmpty && serveGroups.isEmpty && fallbackGroups.isEmpty }

    // MARK: Connections

    /// Admits a new connection, or refuses it at a connection limit
    /// (PROTOCOL.md "Quotas (1.1)": `--max-connections` with the last 64 kept
    /// for uid 0, and the per-uid limit) or when the policy denies it `connect`.
    /// - Parameters:
    ///   - credentials: the peer's `SO_PEERCRED` (and groups).
    ///   - limitOverrides: per-uid limits in place of those of its policy
    ///     view's `limit` lines (tests); nil: the view's. They become its
    ///     uid's limits (the newest connection's view decides: views of one
    ///     uid differ only by groups).
    ///   - time: when it connected (`clients`: `since`); the last known time if nil.
    /// - Returns: the connection, or the bytes of the error frame to write
    ///   before closing the socket, e.g.
    ///   `{"op":"error","code":"limit","message":"256 connections for uid 1000 (limit)"}` or
    ///   `{"op":"error","code":"forbidden","message":"connect denied for uid 2002 by /etc/eventbus/policy.conf:4"}`.
    package func open(credentials: Credentials, limitOverrides: UserLimitOverrides? = nil, at time: BrokerTime? = nil) -> Result<Connection, RefusedConnection> {
        if let time { now = time }
        let uid = credentials.uid
        let view = policyState.views.view(for: credentials.policyIdentity)
        let overrides = limitOverrides ?? UserLimitOverrides(view.limits)
        let limits = self.limits(for: uid, overrides)
        if let error = connectionLimitError(uid: uid, account: ledger.accounts[uid], limits: limits) {
            var bytes: [UInt8] = []
            FrameEncoder.appendError(req: nil, error, to: &bytes)
            return .failure(RefusedConnection(frame: bytes, logLine: error.message))
        }
        if let refusal = connectRefusal(credentials, view) { return .failure(refusal) }
        let account = account(for: uid)
        account.setLimits(limits)
        ledger.noteOutboundLimit(limits.outboundBytes)
        let connection = Connection(id: nextConnectionID, credentials: credentials, policy: view, account: account,
                                    maxFrameBytes: configuration.maxFrameBytes, connectedAt: now.wallNanoseconds)
        nextConnectionID += 1
        connections[connection.id] = connection
        admit(connection, to: account)
        clearHalfFull(connection)  // (1.2) `wait` by default: it may hold once half full
        statistics.connections = connections.count
        return .success(connection)
    }

    /// Forgets a connection the server is closing (peer gone, I/O error,
    /// after the write of `.close(id, .afterWrite)`, shutdown deadline): its
    /// subscriptions vanish (weak subscriptions, PROTOCOL.md "Semantics") and
    /// its queue is released. Idempotent.
    /// - Returns: `.close(id, .now)` (nothing if it was closed already).
    package func close(_ connection: Connection) -> BrokerStep {
        forget(connection)
        return finishStep()
    }

    /// The one close path: removes every subscription, releases the queue and
    /// the inbound bytes, stops counting it for its uid and tells the server
    /// to close the socket (`.close(id, .now)`).
    func forget(_ connection: Connection) {
        guard connection.markClosed() else { return }
        unpark(connection)
        forgetFlow(connection)
        for pattern in Array(connection.subscriptions.keys) { removeSubscription(pattern, from: connection) }
        leaveGroups(closing: connection)  // (1.3) before its queue goes: what it never got goes to the others
        forgetRequests(of: connection)  // (1.3) its servings, what it asked and what it was given
        if !connection.serverWatches.isEmpty { forgetServerWatches(of: connection) }  // (issue 36)
        applyOutbound(connection, ledger.collectReleased { connection.outbound.removeAll(released: &$0) })
        forgetPauses(connection)
        connection.dropBufferedInput()
        syncInbound(connection)
        connections[connection.id] = nil
        let account = connection.account
        dismiss(connection)  // may retire the account: not read after this
        if !account.inboundThrottle.isEmpty && account.inboundReader == nil && !account.members.isEmpty { chooseInboundReader(account) }
        statistics.connections = connections.count
        current.effects.append(.close(connection.id, .now))
    }

    /// Closes once the queue is written (at once when it is empty already).
    func closeWhenFlushed(_ connection: Connection) {
        guard connection.closing == nil, !connection.isClosed else { return }
        if connection.outbound.isEmpty {
            forget(connection)
        } else {
            unpark(connection)  // nothing is routed to it from now: nothing counted either
            connection.closeAfter(.afterFlush)
            current.effects.append(.close(connection.id, .afterFlush))
        }
    }

    // MARK: Input

    /// Handles bytes read from a connection: every complete frame in order.
    /// Input of a connection that is closing or whose input ended is ignored.
    /// - Parameters:
    ///   - bytes: the chunk read; not retained.
    ///   - time: when it was read (stamps events).
    ///   - continuing: the same piece of work as the last call, which
    ///     stopped for the server's time check (`stoppedForTimeCheck`): it
    ///     goes on with what is left of `turnBytes`.
    /// - Returns: output for the replies and events queued, `.pauseReading`
    ///   when the connection's queue went over its limit, closes of
    ///   subscribers under `overflow: disconnect`, notices.
    package func receive(_ connection: Connection, _ bytes: RawSpan, at time: BrokerTime, continuing: Bool = false) -> BrokerStep {
        stoppedForTimeCheck = false
        guard connection.closing == nil, !connection.isClosed, !connection.inputClosed else { return finishStep() }
        now = time
        if bytes.byteCount > 0 { connection.input.madeProgress(now: time.monotonicNanoseconds) }
        // (1.2) A released publisher's held frame comes first, then the input after it.
        if connection.flow.heldFrame != nil && !handleHeldFrame(connection) {
            connection.input.fed(bytes.byteCount)
            connection.splitter.keepUnread(bytes)  // (the server does not read a held connection)
            syncInbound(connection)
            return finishStep()
        }
        // A bounded piece of work per call (issue 20): after `turnBytes` of
        // frames the rest waits in the splitter (`hasBufferedInput`) and the
        // server's scheduler decides who is next, so another uid's request
        // waits for at most that much of this connection's input.
        let finished: Bool
        if turnBytes != .max && !continuing { pieceBytesLeft = turnBytes }
        if let scan = usableScan(connection) {
            finished = feed(connection, bytes, scanned: scan)
        } else if turnBytes == .max {
            finished = connection.splitter.feed(bytes) { piece in
                handle(piece, from: connection)
                return mayReadNextFrame(connection)
            }
        } else {
            // Costly small frames (new types, patterns) are bounded by time
            // too: every 8 frames the server looks at its clock (`stoppedForTimeCheck`).
            var count = PieceCount()
            finished = connection.splitter.feed(bytes, stopAfter: pieceBytesLeft) { piece in
                handle(piece, from: connection)
                return mayReadNextFrame(connection) && count.add(piece)
            }
            endPiece(count, finished: finished, connection)
        }
        // (issue 37) A large frame still incomplete is validated as it comes
        // (`fedBytes` counted after the feed: `usableScan` looks before it).
        connection.input.fed(bytes.byteCount)
        if connection.splitter.pending.count >= Broker.scanFromBytes || connection.input.scan != nil { advanceScan(connection) }
        if finished && connection.flow.endPending && connection.flow.heldFrame == nil {
            connection.flow.clearEndOfInput()
            finishInput(connection)
        }
        syncInbound(connection)
        return finishStep()
    }

    /// Handles end of input (the client shut down its writing side): a last
    /// frame without LF is handled, then a connection without subscriptions is
    /// closed once its replies are written; one with subscriptions keeps
    /// receiving events (PROTOCOL.md "Semantics": half-close).
    /// - Returns: for a connection without subscriptions `.close(id, .now)`
    ///   when nothing is queued, `.close(id, .afterFlush)` otherwise.
    package func endOfInput(_ connection: Connection, at time: BrokerTime) -> BrokerStep {
        guard connection.closing == nil, !connection.isClosed, !connection.inputClosed else { return finishStep() }
        now = time
        if connection.flow.heldFrame != nil || connection.splitter.hasBacklog {
            connection.flow.deferEndOfInput()  // (1.2) after the held input (`receive`)
        } else {
            finishInput(connection)
        }
        syncInbound(connection)
        return finishStep()
    }

    /// End of input once every frame before it was handled: a last frame
    /// without LF, then the half-close rule.
    private func finishInput(_ connection: Connection) {
        var scan = usableScan(connection)
        connection.splitter.finish { piece in
            if let scanned = scan {
                scan = nil
                handle(piece, from: connection, scanned: scanned)
            } else {
                handle(piece, from: connection)
            }
            return connection.closing == nil && !connection.isClosed && connection.flow.heldFrame == nil
        }
        connection.input.endScan()
        if connection.flow.heldFrame != nil || connection.splitter.hasBacklog {
            connection.flow.deferEndOfInput()  // held by its last frame
            return
        }
        connection.input.close()
        if connection.isIdleAfterInput { closeWhenFlushed(connection) }
    }

    func handle(_ piece: SplitFrame, from connection: Connection) {
        switch piece {
        case .tooLarge(let size):
            reply(to: connection, req: nil, error: ProtocolError(.frameTooLarge, "frame of \(size) bytes exceeds the limit of \(configuration.maxFrameBytes) bytes; discarded"))
        case .frame(let frame):
            handle(frame: frame, from: connection)
        }
    }

    /// A frame (the split chunk's span, valid during the call).
    @inline(__always)
    private func handle(frame: RawSpan, from connection: Connection) {
        // The common publish shape the specialised way, its type found
        // by its bytes; everything else (every error included) the
        // general way.
        var tokens = PublishTokens()
        if PublishScanner.scan(frame, into: &tokens), let entry = types.entry(for: frame.extracting(unchecked: tokens.typeRange)) {
            let req: RawSpan? = if let token = tokens.req { frame.extracting(unchecked: token.range) } else { nil }
            let request = tokens.request(type: types.type(entry))
            // (1.2) Held, the event waits unrouted: no seq, queued to no one
            // (asked here, not in `publish`, which keeps `fanOut` inlined).
            if mayHaveToHold(frame, connection), holdIfBlocked(frame, request, entry: entry, publisher: connection) { return }
            publish(request, frame: frame, req: req, from: connection, typeEntry: entry, typeRange: tokens.typeRange)
            return
        }
        handle(RequestDecoder.decode(frame), frame, from: connection)
    }

    /// A decoded frame: its error answered, or its request carried out.
    func handle(_ decoded: DecodedFrame, _ frame: RawSpan, from connection: Connection) {
        let req: RawSpan? = if let token = decoded.req { frame.extracting(token.range) } else { nil }
        switch decoded.request {
        case .failure(let error):
            reply(to: connection, req: req, error: error)
        case .success(let request):
            perform(request, frame: frame, req: req, from: connection)
        }
    }

    // MARK: Output

    /// Records that `bytes` of the connection's queue were written.
    /// - Returns: `.close(id, .now)` when a connection closing after its
    ///   flush has nothing left; below half the limit `.resumeReading` (if it
    ///   was paused) and output for a pending `dropped` notice.
    package func didWrite(_ connection: Connection, bytes: Int) -> BrokerStep {
        guard bytes > 0, !connection.isClosed else { return finishStep() }
        applyOutbound(connection, ledger.collectReleased { connection.outbound.consume(bytes, released: &$0) })
        flowDidWrite(connection, bytes: bytes)
        unpark(connection)  // it took bytes: back in the route lists
        if !connection.groups.blocked.isEmpty { unblockGroups(connection) }  // (1.3) and in turn in its groups
        if connection.output.pendingDropsCounted > 0 && connection.closing != .afterWrite
            && connection.outbound.chargedBytes < configuration.maxOutboundBytes / 2 {
            queuePendingDropNotice(connection)
        }
        if connection.closing == .afterFlush && connection.outbound.isEmpty { forget(connection) }
        return finishStep()
    }

    /// Starts a graceful stop: no more input is handled from any connection;
    /// each is closed once its queue is written.
    /// - Returns: `.close(id, .now)` for every connection with nothing queued,
    ///   `.close(id, .afterFlush)` for the others.
    package func beginShutdown() -> BrokerStep {
        for connection in connections.values.sorted(by: { $0.id < $1.id }) {
            closeWhenFlushed(connection)
        }
        return finishStep()
    }
}

/// A connection refused at a connection limit or by the policy: write
/// `frame`, then close the socket.
package struct RefusedConnection: Error {
    package let frame: [UInt8]
    /// For a policy refusal: the line to log (naming uid, pid and the rule),
    /// or nil when the denial log's once-a-minute limit holds it back; for a
    /// connection limit, which limit (the server words the log line).
    package let logLine: String?
    /// Whether the policy refused it (`forbidden`), not a limit.
    package let forbidden: Bool

    package init(frame: [UInt8], logLine: String? = nil, forbidden: Bool = false) {
        self.frame = frame
        self.logLine = logLine
        self.forbidden = forbidden
    }
}
