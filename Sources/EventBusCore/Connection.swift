// One client connection as the broker core sees it, its stored state in a
// few parts by concern, each the keeper of its own rule:
// - `identity`: who it is (fixed at `open`);
// - `session`: its `hello` options and policy view (`hello` once; the
//   filtered counts are its filtered subscriptions);
// - `splitter` and `input`: its framing, and why it is not read, what of its
//   input is charged since when, the large-frame scan (`pause` reports
//   whether it was read until then, `unpause` whether it is read now);
// - `outbound` (OutboundQueue.swift) and `output`: its queue, and where its
//   events stand (at most once per seq: `route`; drops not yet told, with
//   the seq of the first: `countDrops`/`takePendingDrops`; listed once per
//   step);
// - `accounting`: what it is charged for and its `clients` counters (its
//   fair shares keep no entry for 0 bytes);
// - `flow` (FlowState.swift): its part in flow control (holding and heldBy
//   mirrored);
// - `park` (issue 20, ParkedSubscribers.swift): set exactly while it is
//   parked (`markParked`/`markUnparked`, at the end of the class), and
//   `fairPark` (parkfair) exactly while it is parked against some publisher
//   uids (`markParked(against:)`/`markUnparkedFair`);
// - `groups` (QueueGroups.swift: each membership once by key, the fallback
//   names counted, a member blocked exactly while listed, the deliveries a
//   bounded superset of the queued group events, or none while all of them
//   are one membership's) and `requests`
//   (RequestTable.swift, the one file that changes them); its
//   subscriptions (the fallback servings among its servings) and where it
//   is in its life (open, closing, closed: each step once, never back),
//   `private(set)` too, changed by the methods at the end of the class.
//
// Before editing: the core knows no fds; the server keeps its own record per
// connection id and learns what to do only from the `BrokerStep`s the broker
// returns. Every change goes through `Broker`, in place through a mutating
// method of the part (`connection.input.pause(.held)`: the parts are structs
// held by the class, never copied out to be changed; a part is replaced
// whole only here, e.g. `dropBufferedInput` at the close). The parts'
// fields are `private(set)` (the requests' `fileprivate(set)`; `flow` and
// `groups` in their own files; `outbound`'s not yet, written only in
// OutboundQueue.swift): they are changed only
// by the methods in their part's file, which keep the part's rule; when to
// call them is the broker's business (Broker+*.swift). scripts/check-ownership
// fails on a field another file could set. The server reads
// `outbound` to write it. The public names (`echo`, `pendingDropCount`, ...)
// read a part's field: they are how it is read from outside the core.
// `outbound` is a stored property of its own so that the server's reads
// (every write) borrow it instead of copying it; `splitter` one of its own
// because the frames it hands out are handled while it is being fed, and
// that handling reads and changes `input`: in one struct the two would be
// overlapping accesses (exclusivity).
import EventBusPolicy
@_spi(Package) import EventBusProtocol

/// Broker-assigned connection number, unique within one broker run; 1, 2, 3...
@usableFromInline package typealias ConnectionID = UInt64

/// The peer's kernel credentials (`SO_PEERCRED`, and the supplementary
/// groups from `SO_PEERGROUPS`), captured at connect time.
@usableFromInline package struct Credentials: Equatable, Sendable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32
    /// `SO_PEERGROUPS`, in any order (`group=` policy rules match these and `gid`).
    package var supplementaryGroups: [UInt32]

    package init(pid: Int32, uid: UInt32, gid: UInt32, supplementaryGroups: [UInt32] = []) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.supplementaryGroups = supplementaryGroups
    }

    /// The identity the access policy judges (PROTOCOL.md "Access policy (1.1)").
    package var policyIdentity: PolicyIdentity {
        PolicyIdentity(uid: uid, gid: gid, supplementaryGroups: supplementaryGroups)
    }
}

/// One client connection, made by `Broker.open`; the server holds it next to
/// its own record (fd, epoll interest) under the same `id`.
package final class Connection {
    /// Who it is (never changes).
    @usableFromInline let identity: ConnectionIdentity
    /// `hello` options and its policy view.
    var session: ConnectionSession
    /// The bytes read and not yet handled: frames cut at LF (one incomplete
    /// frame at most, or a backlog). Beside `input`, not in it (header).
    var splitter: FrameSplitter
    /// Its input: the inbound budget's view of it, and why it is not read.
    var input = ConnectionInput()
    /// Frames waiting to be written; the server writes them and reports with
    /// `Broker.didWrite`.
    package internal(set) var outbound = OutboundQueue()
    /// Where its events stand: at-most-once, drops not yet reported, the step it was last listed in.
    var output = ConnectionOutput()
    /// (issue 20) Out of the kept route lists while full (ParkedSubscribers.swift,
    /// through `markParked`/`markUnparked`): set exactly while it is in the
    /// broker's `parking`, a fresh state at each park.
    private(set) var park: ParkState? = nil
    /// (parkfair) Out of the kept route lists for events of some publisher
    /// uids while their fair share of its queue is full (`markParked(against:)`,
    /// `markUnparkedFair`): set exactly while it is in `parking.againstUIDs`.
    private(set) var fairPark: ParkState? = nil
    /// Its uid's account and what its queue holds for other uids; its counters for `clients`.
    var accounting: ConnectionAccounting
    /// (1.2) Holds, paced replays and the stall watch (FlowState.swift, its
    /// rules; when they apply: Broker+FlowControl.swift, (1.3) a queue
    /// group's hold Broker+GroupFlow.swift).
    var flow = FlowState()

    /// This connection's side of the subscription index (PROTOCOL.md
    /// "Semantics": weak, gone with it). Changed only by
    /// `Broker.addSubscription`/`removeSubscription` (`keepSubscription`/`dropSubscription`).
    private(set) var subscriptions: [Pattern: Subscription] = [:]
    /// (1.3) Its queue group memberships, those passed over until it
    /// writes, and the group events queued to it (QueueGroups.swift, its
    /// rules; when they apply: Broker+Groups.swift, Broker+GroupFlow.swift).
    var groups = ConnectionGroups()
    /// (1.3) Its serving subscriptions (PROTOCOL.md "Request/reply"),
    /// separate from the plain ones (a pattern may be in both). Changed only
    /// by `Broker.addServing`/`removeServing` (`keepServing`/`dropServing`).
    private(set) var servings: [Pattern: Subscription] = [:]
    /// (issue 36) The patterns of `servings` that are fallback ones (in
    /// `Broker.fallbackIndex`, not `serveIndex`): a subset of its keys,
    /// changed with them.
    private(set) var fallbackServings: Set<Pattern> = []
    /// (issue 36) Its watches of the serving patterns (and of groups'
    /// members), armed or not (Broker+ServerWatch.swift: `watchServers`,
    /// `disarmServerWatch`, `unwatchServers`).
    private(set) var serverWatches: [ServerWatch: Bool] = [:]
    /// (1.3) The requests it waits on and those it was given (RequestTable.swift).
    var requests = ConnectionRequests()

    /// Set once the broker has decided to close it (`.close(id, .afterFlush)`
    /// or `.afterWrite`): no input is handled and no event routed to it.
    /// Never unset; set only before it is closed (`closeAfter`).
    private(set) var closing: CloseTiming?
    /// Forgotten by the broker (`.close(id, .now)` was returned): set once
    /// (`markClosed`), never unset.
    package private(set) var isClosed = false

    init(id: ConnectionID, credentials: Credentials, policy: PolicyView, account: UserAccount, maxFrameBytes: Int,
         connectedAt: Int64) {
        self.identity = ConnectionIdentity(id: id, credentials: credentials, connectedAtWallNanoseconds: connectedAt,
                                           eventIdentity: EventStamp.identity(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid))
        self.session = ConnectionSession(policy: policy, eventSource: EventStamp.source("pid/\(credentials.pid)"))
        self.splitter = FrameSplitter(maxFrameBytes: maxFrameBytes)
        self.accounting = ConnectionAccounting(accountRef: Uncounted(account))
    }

    // MARK: Read from outside the core

    @inlinable package var id: ConnectionID { identity.id }
    @inlinable package var credentials: Credentials { identity.credentials }
    /// When it connected, wall clock ns since the epoch (`clients`: `since`).
    package var connectedAtWallNanoseconds: Int64 { identity.connectedAtWallNanoseconds }
    /// The policy as this connection's identity sees it (shared with other
    /// connections of that identity); replaced by a policy reload
    /// (Broker+Policy.swift).
    package var policy: PolicyView { session.policy }
    /// `hello` options (PROTOCOL.md "Requests").
    package var clientName: String? { session.clientName }
    package var echo: Bool { session.echo }
    package var overflow: OverflowPolicy { session.overflow }
    /// Counters for `clients` (PROTOCOL.md "Introspection"): events it
    /// published, events queued to it, events it lost.
    package var publishedCount: UInt64 { accounting.publishedCount }
    package var deliveredCount: UInt64 { accounting.deliveredCount }
    // `droppedCount` and `pendingDropCount` add what it lost while parked
    // (ParkedSubscribers.swift).
    /// The client shut down its writing side (EOF read).
    package var inputClosed: Bool { input.inputClosed }
    /// Whether the broker has paused its reading.
    package var readPaused: Bool { !input.pauses.isEmpty }

    /// The patterns it is subscribed to (a copy: for tests and introspection).
    package var patterns: Set<Pattern> { Set(subscriptions.keys) }

    /// How many patterns it is subscribed to.
    package var subscriptionCount: Int { subscriptions.count }

    /// (1.3) Requests it asked that are not answered yet (`clients`: `pending`).
    package var pendingRequestCount: Int { requests.pending.count }
    /// (1.3) Requests it was given and has not answered (`clients`: `serving`).
    package var servingRequestCount: Int { requests.serving.count }

    /// Its uid's account (`accounting.accountRef` as a reference).
    var account: UserAccount { accounting.accountRef.object }

    /// Half-closed, whether it has nothing left to receive (PROTOCOL.md
    /// "Semantics": half-close): no subscription of any kind and (1.3) no
    /// request waiting for its answer.
    var isIdleAfterInput: Bool { subscriptions.isEmpty && servings.isEmpty && requests.pending.isEmpty && groups.memberships.isEmpty }

    /// Whether events may still be routed to it.
    var isRoutable: Bool { closing == nil && !isClosed }

    /// The broker has input of it that it stopped handling (between frames)
    /// and will handle before new input: the server serves it as readable
    /// once its reading resumes.
    /// (issue 37) A large frame of it is being validated as it arrives
    /// (Broker+Scan.swift): the server reads it in smaller pieces, so a
    /// read's validation is a smaller piece of work.
    package var isScanningLargeFrame: Bool { input.scan != nil }

    package var hasBufferedInput: Bool { splitter.hasBacklog || flow.heldFrame != nil || flow.endPending }

    // MARK: Its subscriptions and its life (when: Broker+*.swift)

    /// Keeps its side of a new plain subscription (`Broker.addSubscription`).
    func keepSubscription(_ subscription: Subscription, for pattern: Pattern) { subscriptions[pattern] = subscription }

    /// Drops its side of a plain subscription. - Returns: it, nil when it had none.
    func dropSubscription(_ pattern: Pattern) -> Subscription? { subscriptions.removeValue(forKey: pattern) }

    /// Keeps its side of a new serving subscription, a fallback one or not (`Broker.addServing`).
    func keepServing(_ subscription: Subscription, for pattern: Pattern, fallback: Bool) {
        servings[pattern] = subscription
        if fallback { fallbackServings.insert(pattern) }
    }

    /// Drops its side of a serving subscription.
    /// - Returns: it and whether it was a fallback one, nil when it had none.
    func dropServing(_ pattern: Pattern) -> (subscription: Subscription, fallback: Bool)? {
        guard let subscription = servings.removeValue(forKey: pattern) else { return nil }
        return (subscription, fallbackServings.remove(pattern) != nil)
    }

    /// (issue 36) Starts or re-arms a watch (told once at the next change).
    func watchServers(_ watch: ServerWatch) { serverWatches[watch] = true }

    /// (issue 36) Its watch was told: kept, not armed.
    func disarmServerWatch(_ watch: ServerWatch) { serverWatches[watch] = false }

    /// (issue 36) Ends a watch. - Returns: whether it had it.
    func unwatchServers(_ watch: ServerWatch) -> Bool { serverWatches.removeValue(forKey: watch) != nil }

    /// The broker decided to close it after its queue is written
    /// (`.afterFlush`) or after the next write (`.afterWrite`, which may
    /// follow `.afterFlush`).
    func closeAfter(_ timing: CloseTiming) {
        assert(!isClosed, "a closed connection does not close again")
        closing = timing
    }

    /// At its close: its framing starts afresh, so the bytes it held (an
    /// incomplete frame, a backlog) are freed at once (`Broker.forget`).
    func dropBufferedInput() { splitter = FrameSplitter(maxFrameBytes: splitter.maxFrameBytes) }

    /// (issue 20) It is parked now (`Broker.park`), on no parked part yet.
    /// - Returns: false when it was parked already (nothing changed).
    func markParked() -> Bool {
        guard park == nil else { return false }
        park = ParkState()
        return true
    }

    /// (issue 20) Its park ends (`Broker.unpark`, once its parked parts
    /// are counted).
    func markUnparked() { park = nil }

    /// (parkfair) It is parked against `uid` too (`Broker.parkAgainst`): a
    /// fresh state with the uid added, the parts of the old one counted.
    /// - Returns: false when it was parked against `uid` already.
    func markParked(against uid: UInt32) -> Bool {
        let actors = fairPark?.actors ?? []
        guard !actors.contains(uid) else { return false }
        if let state = fairPark {
            for (_, part) in state.parts { countParked(on: part.routes, leaving: true) }
        }
        fairPark = ParkState(actors: (actors + [uid]).sorted())
        return true
    }

    /// (parkfair) Its park against publisher uids ends (`Broker.unpark`,
    /// once its parts are counted).
    func markUnparkedFair() { fairPark = nil }

    /// The broker forgets it. - Returns: whether it was open until now.
    func markClosed() -> Bool {
        guard !isClosed else { return false }
        isClosed = true
        return true
    }
}

/// Who a connection is: fixed at `Broker.open` (noncopyable: it holds its
/// event identity's bytes).
@usableFromInline
struct ConnectionIdentity: ~Copyable {
    /// Broker-assigned, unique within the run.
    @usableFromInline let id: ConnectionID
    /// Its peer's `SO_PEERCRED` (and groups), captured at connect time.
    @usableFromInline let credentials: Credentials
    /// When it connected, wall clock ns since the epoch (`clients`: `since`).
    let connectedAtWallNanoseconds: Int64
    /// `,"pid":P,"uid":U,"gid":G` as its events carry it.
    let eventIdentity: StampBytes
}

/// What a connection asked for (`hello`, PROTOCOL.md "Requests") and what
/// the policy lets it do (noncopyable: it holds its default source's
/// bytes); changed only through its methods.
struct ConnectionSession: ~Copyable {
    /// Its identity's policy view (replaced by a reload, Broker+Policy.swift).
    private(set) var policy: PolicyView
    /// How many of its subscriptions are `filtered` (some of their types are
    /// denied to it): while 0, routing never asks the policy about it.
    /// Changed only by `Broker.setFiltered` (`countFiltered`).
    private(set) var filteredCount = 0
    /// (1.3) The same for its serving subscriptions (`serve` and `subscribe`
    /// must both allow a type): changed only by `Broker.setFiltered`.
    private(set) var serveFilteredCount = 0
    private(set) var clientName: String? = nil
    private(set) var echo = false
    private(set) var overflow = OverflowPolicy.wait
    private(set) var saidHello = false
    /// The value used for `source` when a publish has none, quoted: client
    /// name or `pid/<pid>` (made at `open`, remade at `hello`).
    private(set) var eventSource: StampBytes

    init(policy: PolicyView, eventSource: consuming StampBytes) {
        self.policy = policy
        self.eventSource = eventSource
    }

    /// Its `hello` arrived (once per connection: `Broker` checks `saidHello`).
    mutating func noteHello() { saidHello = true }

    /// The options of its `hello`; a client name is its events' default source too.
    mutating func take(echo: Bool, overflow: OverflowPolicy, client: String?) {
        self.echo = echo
        self.overflow = overflow
        if let client {
            clientName = client
            eventSource = EventStamp.source(client)
        }
    }

    /// Its identity's policy view after a reload.
    mutating func setPolicy(_ view: PolicyView) { policy = view }

    /// One of its subscriptions became `filtered` (true) or no longer is
    /// (false); `serving`: a serving one.
    mutating func countFiltered(_ filtered: Bool, serving: Bool) {
        if serving { serveFilteredCount += filtered ? 1 : -1 } else { filteredCount += filtered ? 1 : -1 }
    }
}

/// A connection's input as the broker holds it (its bytes are in
/// `Connection.splitter`), changed only through its methods.
struct ConnectionInput {
    /// Inbound bytes charged to its uid (what its splitter held at the last
    /// `syncInbound`), since when it holds any, and when a byte last arrived
    /// for them or its reading last resumed (monotonic ns; the frame timeout).
    private(set) var inboundCharged = 0
    private(set) var inboundSince: Int64 = 0
    private(set) var inboundProgressAt: Int64 = 0
    /// The client shut down its writing side (EOF read).
    private(set) var inputClosed = false
    /// (issue 37) Bytes handed to its splitter so far, and the scan of the
    /// large incomplete frame the splitter holds, which began at byte
    /// `scanFrameStart` of the input (Broker+Scan.swift).
    private(set) var fedBytes = 0
    private(set) var scan: RequestScan? = nil
    private(set) var scanFrameStart = 0
    /// Why it is not read (PROTOCOL.md "Semantics": requests are
    /// back-pressured; "Quotas": inbound budgets); the server was told with
    /// `.pauseReading` when the first reason came, and is told
    /// `.resumeReading` when the last goes (`Broker.pause`/`unpause` only).
    private(set) var pauses: PauseReasons = []

    /// Charges `held` inbound bytes now (`Broker.syncInbound`): the first
    /// charge after none starts the frame timeout's clock at `now`.
    mutating func chargeInbound(_ held: Int, now: Int64) {
        if inboundCharged == 0 {
            inboundSince = now
            inboundProgressAt = now
        }
        inboundCharged = held
    }

    /// A byte arrived for the held bytes, or its reading resumed, at `now`
    /// (monotonic ns): the frame timeout starts again.
    mutating func madeProgress(now: Int64) { inboundProgressAt = now }

    /// `count` more bytes were handed to its splitter.
    mutating func fed(_ count: Int) { fedBytes &+= count }

    /// The client shut down its writing side.
    mutating func close() { inputClosed = true }

    /// (issue 37) Starts a scan of the large incomplete frame whose first
    /// byte is input byte `frameStart`.
    mutating func startScan(frameStart: Int) {
        scan = RequestScan()
        scanFrameStart = frameStart
    }

    /// (issue 37) Drops the scan (its frame was handed out, or is gone).
    mutating func endScan() { scan = nil }

    /// Adds `reason` to why it is not read.
    /// - Returns: whether it was read until now (the server is to be told).
    mutating func pause(_ reason: PauseReasons) -> Bool {
        let wasReading = pauses.isEmpty
        pauses.insert(reason)
        return wasReading
    }

    /// Takes `reason` away.
    /// - Returns: whether it is read now (no reason left).
    mutating func unpause(_ reason: PauseReasons) -> Bool {
        pauses.remove(reason)
        return pauses.isEmpty
    }

    /// Forgets every reason (the connection is going).
    mutating func clearPauses() { pauses = [] }
}

/// Where a connection's events stand (its queue is `Connection.outbound`),
/// changed only through its methods.
struct ConnectionOutput {
    /// Last seq routed here (so one event is delivered at most once: `route`).
    private(set) var lastRoutedSeq: UInt64 = 0
    /// Events lost since the last `dropped` notice, and the seq of the first
    /// (`Connection.pendingDropCount` adds those counted while parked):
    /// `pendingDropSince` is set with the first drop counted
    /// (`countDrops`) and both are zero again once told (`takePendingDrops`).
    private(set) var pendingDropsCounted: UInt64 = 0
    private(set) var pendingDropSince: UInt64 = 0
    /// (issue 37) Under drop-old: when the notice first in line was placed
    /// (monotonic ns), i.e. since when it has dropped without reading past it.
    private(set) var dropOldSince: Int64 = 0
    /// The step in which it was last listed in `BrokerStep.output`.
    private(set) var step: UInt64 = 0

    /// Whether the event of `seq` is routed here for the first time (then
    /// it is marked routed: at most once).
    mutating func route(_ seq: UInt64) -> Bool {
        // One block, no branch: the fan-out inlines it per subscriber.
        let first = lastRoutedSeq != seq
        lastRoutedSeq = seq
        return first
    }

    /// Counts `count` events lost (not yet told), the first being `firstSeq`.
    /// - Returns: whether these are the first since the last notice.
    mutating func countDrops(_ count: UInt64, firstSeq: UInt64) -> Bool {
        let first = pendingDropsCounted == 0
        if first { pendingDropSince = firstSeq }
        pendingDropsCounted &+= count
        return first
    }

    /// Counts one more event lost while some are not told yet (its seq is
    /// not the first: `pendingDropSince` stays). The fan-out's path for a
    /// subscriber that is dropping already.
    mutating func countAnotherDrop() {
        assert(pendingDropsCounted > 0, "the first drop goes through countDrops")
        pendingDropsCounted &+= 1
    }

    /// The drops not yet told, now told (both counts back to zero).
    mutating func takePendingDrops() -> (count: UInt64, since: UInt64) {
        defer {
            pendingDropsCounted = 0
            pendingDropSince = 0
        }
        return (pendingDropsCounted, pendingDropSince)
    }

    /// (issue 37) A drop notice was placed first in line at `now` (monotonic ns).
    mutating func startDroppingOld(now: Int64) { dropOldSince = now }

    /// Whether it is to be listed in the output of step `number` (then it is
    /// marked listed: once per step).
    mutating func list(inStep number: UInt64) -> Bool {
        let first = step != number  // one block, no branch (as `route`)
        step = number
        return first
    }
}

/// What a connection is charged for, and to whom; changed only through its methods.
struct ConnectionAccounting {
    /// Its uid's account. Uncounted (Uncounted.swift): the broker's
    /// `ledger.accounts` keeps the account while the connection is open
    /// (never read after `Broker.forget`).
    let accountRef: Uncounted<UserAccount>
    /// Its index among the account's members (`Broker.admit`/`dismiss` keep it).
    private(set) var memberIndex = 0
    /// Outbound bytes in its queue charged to other publisher uids (fair
    /// share); no entry for 0 bytes (`QuotaLedger.release`).
    private(set) var actorShares: [UInt32: Int] = [:]
    /// Counters for `clients` (PROTOCOL.md "Introspection").
    private(set) var publishedCount: UInt64 = 0
    private(set) var deliveredCount: UInt64 = 0
    /// (`Connection.droppedCount` adds what it lost while parked.)
    private(set) var droppedCounted: UInt64 = 0

    /// It is now member `index` of its account's `members`.
    mutating func setMemberIndex(_ index: Int) { memberIndex = index }

    /// Charges `bytes` queued here to publisher uid `actor`'s fair share.
    mutating func chargeShare(of actor: UInt32, bytes: Int) { actorShares[actor, default: 0] += bytes }

    /// Takes a released charge out of the fair shares.
    mutating func releaseShare(_ charge: ActorCharge) { QuotaLedger.release(charge, from: &actorShares) }

    /// It published one event (or asked one request).
    mutating func countPublished() { publishedCount += 1 }

    /// One event (or request) was queued to it.
    mutating func countDelivered() { deliveredCount += 1 }

    /// `count` events were lost for it.
    mutating func countDropped(_ count: UInt64) { droppedCounted &+= count }
}
