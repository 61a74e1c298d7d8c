// One client connection as the broker core sees it, its stored state in a
// few parts by concern: who it is (`identity`), what it asked for and what
// the policy lets it do (`session`), its framing (`splitter`) and input
// state (`input`), its queue (`outbound`) and delivery bookkeeping
// (`output`), what it is charged for (`accounting`), its part in flow
// control (`flow`), its subscriptions, and where it is in its life (open,
// closing, closed).
//
// Before editing: the core knows no fds; the server keeps its own record per
// connection id and learns what to do only from the `BrokerStep`s the broker
// returns. Every change goes through `Broker`, in place through the part
// (`connection.input.pauses.insert(...)`: the parts are structs held by the
// class, never copied out to be changed); the server reads `outbound` to
// write it. The public names (`echo`, `pendingDropCount`, ...) read a part's
// field: they are how it is read from outside the core; inside it, a field
// is changed through its part. `outbound` is a stored property of its own
// so that the server's reads (every write) borrow it instead of copying it;
// `splitter` one of its own because the frames it hands out are handled
// while it is being fed, and that handling reads and changes `input`: in
// one struct the two would be overlapping accesses (exclusivity).
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
    /// (issue 20) Out of the kept route lists while full (ParkedSubscribers.swift).
    var park: ParkState? = nil
    /// Its uid's account and what its queue holds for other uids; its counters for `clients`.
    var accounting: ConnectionAccounting
    /// (1.2) Holds, paced replays and the stall watch (Broker+FlowControl.swift;
    /// (1.3) a queue group's hold, Broker+GroupFlow.swift).
    var flow = FlowState()

    /// This connection's side of the subscription index (PROTOCOL.md
    /// "Semantics": weak, gone with it). Changed only by
    /// `Broker.addSubscription`/`removeSubscription`.
    var subscriptions: [Pattern: Subscription] = [:]
    /// (1.3) Its queue group memberships, those passed over until it
    /// writes, and the group events queued to it (QueueGroups.swift).
    /// Changed only by Broker+Groups.swift and Broker+GroupFlow.swift.
    var groups = ConnectionGroups()
    /// (1.3) Its serving subscriptions (PROTOCOL.md "Request/reply"),
    /// separate from the plain ones (a pattern may be in both). Changed only
    /// by `Broker.addServing`/`removeServing`.
    var servings: [Pattern: Subscription] = [:]
    /// (issue 36) The patterns of `servings` that are fallback ones (in
    /// `Broker.fallbackIndex`, not `serveIndex`).
    var fallbackServings: Set<Pattern> = []
    /// (1.3) The requests it waits on and those it was given (RequestTable.swift).
    var requests = ConnectionRequests()

    /// Set once the broker has decided to close it (`.close(id, .afterFlush)`
    /// or `.afterWrite`): no input is handled and no event routed to it.
    var closing: CloseTiming?
    /// Forgotten by the broker (`.close(id, .now)` was returned).
    package internal(set) var isClosed = false

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
/// the policy lets it do (noncopyable: it holds its default source's bytes).
struct ConnectionSession: ~Copyable {
    /// Its identity's policy view (replaced by a reload, Broker+Policy.swift).
    var policy: PolicyView
    /// How many of its subscriptions are `filtered` (some of their types are
    /// denied to it): while 0, routing never asks the policy about it.
    /// Changed only by `Broker.setFiltered`.
    var filteredCount = 0
    /// (1.3) The same for its serving subscriptions (`serve` and `subscribe`
    /// must both allow a type): changed only by `Broker.setFiltered`.
    var serveFilteredCount = 0
    var clientName: String? = nil
    var echo = false
    var overflow = OverflowPolicy.wait
    var saidHello = false
    /// The value used for `source` when a publish has none, quoted: client
    /// name or `pid/<pid>` (made at `open`, remade at `hello`).
    var eventSource: StampBytes
}

/// A connection's input as the broker holds it (its bytes are in `Connection.splitter`).
struct ConnectionInput {
    /// Inbound bytes charged to its uid (what its splitter held at the last
    /// `syncInbound`), since when it holds any, and when a byte last arrived
    /// for them or its reading last resumed (monotonic ns; the frame timeout).
    var inboundCharged = 0
    var inboundSince: Int64 = 0
    var inboundProgressAt: Int64 = 0
    /// The client shut down its writing side (EOF read).
    var inputClosed = false
    /// (issue 37) Bytes handed to its splitter so far, and the scan of the
    /// large incomplete frame the splitter holds, which began at byte
    /// `scanFrameStart` of the input (Broker+Scan.swift).
    var fedBytes = 0
    var scan: RequestScan? = nil
    var scanFrameStart = 0
    /// Why it is not read (PROTOCOL.md "Semantics": requests are
    /// back-pressured; "Quotas": inbound budgets); the server was told with
    /// `.pauseReading` when the first reason came, and is told
    /// `.resumeReading` when the last goes (`Broker.pause`/`unpause` only).
    var pauses: PauseReasons = []
}

/// Where a connection's events stand (its queue is `Connection.outbound`).
struct ConnectionOutput {
    /// Last seq routed here (so one event is delivered at most once).
    var lastRoutedSeq: UInt64 = 0
    /// Events lost since the last `dropped` notice, and the seq of the first
    /// (`Connection.pendingDropCount` adds those counted while parked).
    var pendingDropsCounted: UInt64 = 0
    var pendingDropSince: UInt64 = 0
    /// (issue 37) Under drop-old: when the notice first in line was placed
    /// (monotonic ns), i.e. since when it has dropped without reading past it.
    var dropOldSince: Int64 = 0
    /// The step in which it was last listed in `BrokerStep.output`.
    var step: UInt64 = 0
}

/// What a connection is charged for, and to whom.
struct ConnectionAccounting {
    /// Its uid's account. Uncounted (Uncounted.swift): the broker's
    /// `ledger.accounts` keeps the account while the connection is open
    /// (never read after `Broker.forget`).
    let accountRef: Uncounted<UserAccount>
    /// Its index among the account's members.
    var memberIndex = 0
    /// Outbound bytes in its queue charged to other publisher uids (fair share).
    var actorShares: [UInt32: Int] = [:]
    /// Counters for `clients` (PROTOCOL.md "Introspection").
    var publishedCount: UInt64 = 0
    var deliveredCount: UInt64 = 0
    /// (`Connection.droppedCount` adds what it lost while parked.)
    var droppedCounted: UInt64 = 0
}

/// A connection's part in flow control (PROTOCOL.md "Flow control (1.2)"),
/// changed only by Broker+FlowControl.swift. The two lists mirror each
/// other: `p` is in `s.holding` exactly when `s` is in `p.heldBy`; both are
/// emptied when either connection goes.
struct FlowState {
    /// As a subscriber: the publishers it holds back now.
    var holding: [Connection] = []
    /// As a publisher: the subscribers holding it back now.
    var heldBy: [Connection] = []
    /// (1.3) As a publisher: the full queue groups holding it back now (held
    /// while this or `heldBy` is not empty; mirrors `QueueGroup.holding`).
    var heldInGroups: [QueueGroup] = []
    /// (1.3) As a member: how many of its groups hold a publisher now (it
    /// is watched for stalls meanwhile, as a holder is).
    var groupHolds = 0
    /// The publish frame not yet routed while it is held: handled first when
    /// it is released, then the input after it. Charged as inbound bytes.
    var heldFrame: [UInt8]? = nil
    /// EOF was read while it was held: end of input is handled once the
    /// held input is.
    var endPending = false
    /// Took no byte of its queue for the stall timeout while holding or
    /// replaying: handled as `drop-new` until its queue is empty again.
    var behind = false
    /// Replays (`last`, `since`) still to send, oldest first (only under `wait`).
    var replays: [PacedReplay] = []
    /// A replay of it is being sent now (its own events pass the replay's place).
    var pumping = false
    /// Bytes of its queue written so far; what the stall watch saw of it
    /// last and when that changed (monotonic ns).
    var bytesTaken: UInt64 = 0
    var watchedTaken: UInt64 = 0
    var progressAt: Int64 = 0
    /// In `Broker.flowWatch`.
    var watched = false
    /// Its queue is at least half full under `wait`, counted in its
    /// account's `halfFullWaiters` (`.ownUID`) or the broker's
    /// `ledger.halfFullTrustedHolders` (`.anyUID`): only such a connection can hold.
    var halfFull: HoldRight? = nil
    /// The queue charge at which it becomes `halfFull`: half the outbound
    /// limit under `wait` while it is not, else `Int.max` (one comparison per event queued).
    var halfFullAt = Int.max
    /// (issue 37) With `allow hold`: since when it holds a publisher of
    /// another uid (monotonic ns; nil: none now), the window that holding is
    /// measured in, and how long it held in it (ns).
    var othersHeldSince: Int64? = nil
    var trustWindowStart: Int64 = 0
    var trustHeldNanoseconds: Int64 = 0
    /// (issue 37) Held publishers of other uids for most of a
    /// `--trusted-hold-window`: behind for them (it holds its own uid's only)
    /// until its queue is empty.
    var trustBehind = false

    var isHeld: Bool { !heldBy.isEmpty || !heldInGroups.isEmpty }
}
