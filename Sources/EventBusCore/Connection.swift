// One client connection as the broker core sees it: identity and the policy
// view of that identity, options from `hello`, its subscriptions, framing
// state, outbound queue, drop accounting, and where it is in its life (open,
// closing, closed).
//
// Before editing: the core knows no fds; the server keeps its own record per
// connection id and learns what to do only from the `BrokerStep`s the broker
// returns. Every change goes through `Broker`; the server reads `outbound`
// to write it.
import EventBusPolicy
import EventBusProtocol

/// Broker-assigned connection number, unique within one broker run; 1, 2, 3...
public typealias ConnectionID = UInt64

/// The peer's kernel credentials (`SO_PEERCRED`, and the supplementary
/// groups from `SO_PEERGROUPS`), captured at connect time.
public struct Credentials: Equatable, Sendable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// `SO_PEERGROUPS`, in any order (`group=` policy rules match these and `gid`).
    public var supplementaryGroups: [UInt32]

    public init(pid: Int32, uid: UInt32, gid: UInt32, supplementaryGroups: [UInt32] = []) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.supplementaryGroups = supplementaryGroups
    }

    /// The identity the access policy judges (PROTOCOL.md "Access policy (1.1)").
    public var policyIdentity: PolicyIdentity {
        PolicyIdentity(uid: uid, gid: gid, supplementaryGroups: supplementaryGroups)
    }
}

/// One client connection, made by `Broker.open`; the server holds it next to
/// its own record (fd, epoll interest) under the same `id`.
public final class Connection {
    public let id: ConnectionID
    public let credentials: Credentials
    /// The policy as this connection's identity sees it (shared with other
    /// connections of that identity); replaced by a policy reload
    /// (Broker+Policy.swift).
    public internal(set) var policy: PolicyView
    /// How many of its subscriptions are `filtered` (some of their types are
    /// denied to it): while 0, routing never asks the policy about it.
    var filteredCount = 0

    /// `hello` options (PROTOCOL.md "Requests").
    public internal(set) var clientName: String?
    public internal(set) var echo = false
    public internal(set) var overflow = OverflowPolicy.wait
    var saidHello = false
    /// The value used for `source` when a publish has none, quoted: client
    /// name or `pid/<pid>` (made at `open`, remade at `hello`).
    var eventSource: StampBytes
    /// `,"pid":P,"uid":U,"gid":G` as its events carry it.
    let eventIdentity: StampBytes

    /// This connection's side of the subscription index (PROTOCOL.md
    /// "Semantics": weak, gone with it). Changed only by
    /// `Broker.addSubscription`/`removeSubscription`.
    var subscriptions: [Pattern: Subscription] = [:]

    var splitter: FrameSplitter
    /// Frames waiting to be written; the server writes them and reports with
    /// `Broker.didWrite`.
    public internal(set) var outbound = OutboundQueue()

    /// Its uid's account, and its index among the account's members.
    /// Uncounted (Uncounted.swift): the broker's `ledger.accounts` keeps the account
    /// while the connection is open (never read after `Broker.forget`).
    let accountRef: Uncounted<UserAccount>
    /// `accountRef` as a reference.
    var account: UserAccount { accountRef.object }
    var memberIndex = 0
    /// When it connected, wall clock ns since the epoch (`clients`: `since`).
    public let connectedAtWallNanoseconds: Int64

    /// Counters for `clients` (PROTOCOL.md "Introspection"): events it
    /// published, events queued to it, events it lost.
    public internal(set) var publishedCount: UInt64 = 0
    public internal(set) var deliveredCount: UInt64 = 0
    public internal(set) var droppedCount: UInt64 = 0

    /// Inbound bytes charged to its uid (what its splitter held at the last
    /// `syncInbound`), since when it holds any, and when a byte last arrived
    /// for them or its reading last resumed (monotonic ns; the frame timeout).
    var inboundCharged = 0
    var inboundSince: Int64 = 0
    var inboundProgressAt: Int64 = 0
    /// Outbound bytes in its queue charged to other publisher uids (fair share).
    var actorShares: [UInt32: Int] = [:]

    /// Events lost since the last `dropped` notice, and the seq of the first.
    public internal(set) var pendingDropCount: UInt64 = 0
    var pendingDropSince: UInt64 = 0
    /// Last seq routed here (so one event is delivered at most once).
    var lastRoutedSeq: UInt64 = 0

    /// The client shut down its writing side (EOF read).
    public internal(set) var inputClosed = false
    /// Why it is not read (PROTOCOL.md "Semantics": requests are
    /// back-pressured; "Quotas": inbound budgets); the server was told with
    /// `.pauseReading` when the first reason came, and is told
    /// `.resumeReading` when the last goes.
    var pauses: PauseReasons = []
    /// Whether the broker has paused its reading.
    public var readPaused: Bool { !pauses.isEmpty }
    /// Set once the broker has decided to close it (`.close(id, .afterFlush)`
    /// or `.afterWrite`): no input is handled and no event routed to it.
    var closing: CloseTiming?
    /// Forgotten by the broker (`.close(id, .now)` was returned).
    public internal(set) var isClosed = false
    /// The step in which it was last listed in `BrokerStep.output`.
    var outputStep: UInt64 = 0
    /// (1.2) Holds, paced replays and the stall watch (Broker+FlowControl.swift).
    var flow = FlowState()

    init(id: ConnectionID, credentials: Credentials, policy: PolicyView, account: UserAccount, maxFrameBytes: Int,
         connectedAt: Int64) {
        self.id = id
        self.accountRef = Uncounted(account)
        self.credentials = credentials
        self.policy = policy
        self.connectedAtWallNanoseconds = connectedAt
        self.splitter = FrameSplitter(maxFrameBytes: maxFrameBytes)
        self.eventSource = EventStamp.source("pid/\(credentials.pid)")
        self.eventIdentity = EventStamp.identity(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
    }

    /// The patterns it is subscribed to (a copy: for tests and introspection).
    public var patterns: Set<Pattern> { Set(subscriptions.keys) }

    /// How many patterns it is subscribed to.
    public var subscriptionCount: Int { subscriptions.count }

    /// Whether events may still be routed to it.
    var isRoutable: Bool { closing == nil && !isClosed }

    /// The broker has input of it that it stopped handling (between frames)
    /// and will handle before new input: the server serves it as readable
    /// once its reading resumes.
    public var hasBufferedInput: Bool { splitter.hasBacklog || flow.heldFrame != nil || flow.endPending }
}

/// A connection's part in flow control (PROTOCOL.md "Flow control (1.2)"),
/// changed only by Broker+FlowControl.swift. The two lists mirror each
/// other: `p` is in `s.holding` exactly when `s` is in `p.heldBy`; both are
/// emptied when either connection goes.
struct FlowState {
    /// As a subscriber: the publishers it holds back now.
    var holding: [Connection] = []
    /// As a publisher: the subscribers holding it back now (held while not empty).
    var heldBy: [Connection] = []
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

    var isHeld: Bool { !heldBy.isEmpty }
}
