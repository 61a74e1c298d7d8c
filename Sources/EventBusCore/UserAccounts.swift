// Per-uid accounting (PROTOCOL.md "Quotas (1.1)"): what each uid holds in
// the broker (connections, subscriptions and their memory, bytes of
// incomplete incoming frames, outbound bytes, retained bytes), its limits, and
// the totals. The rules that use these counts are in Broker+Quotas.swift.
//
// Before editing: every count is changed at exactly one place: connections
// in `admit`/`dismiss` (called by `open`/`forget`), subscriptions in
// `chargeSubscription` (called by the subscription pair), inbound bytes in
// `syncInbound`, outbound bytes in `applyOutbound` (every queue change
// reports its delta there), retained bytes in `chargeRetained`/
// `releaseRetained` (the retention code calls them); the ledger's methods
// (QuotaLedger.swift) change the totals with them. `UserAccount`'s fields
// are `private(set)`: those places call its methods (in this file), which
// keep the account's own rules (its class comment). An account lives while
// its uid has a connection or retained bytes.
import EventBusPolicy
@_spi(Package) import EventBusProtocol

/// The per-uid and total limits of PROTOCOL.md's quota table that are not
/// per-connection options of `BrokerConfiguration` (defaults are the table's).
package struct QuotaConfiguration: Sendable, Equatable {
    /// Connections per uid (`--max-connections-per-uid`, default 256).
    package var maxConnectionsPerUID = 256
    /// Of `--max-connections`, how many only uid 0 may use (64).
    package var reservedRootConnections = 64
    /// Subscriptions per uid (`--max-subscriptions-per-uid`, default 16384).
    package var maxSubscriptionsPerUID = 16384
    /// Subscriptions in total (`--max-subscriptions-total`, default 262144).
    package var maxSubscriptions = 262_144
    /// Bytes of incomplete incoming frames per uid (`--max-inbound-per-uid`, default 16 MiB).
    package var maxInboundBytesPerUID = 16 << 20
    /// Bytes of incomplete incoming frames in total (`--max-inbound`, default 64 MiB).
    package var maxInboundBytes = 64 << 20
    /// Outbound bytes per uid, events and replies (`--max-outbound-per-uid`, default 64 MiB).
    package var maxOutboundBytesPerUID = 64 << 20
    /// Retained events in total (`--max-retained`, default 65536).
    package var maxRetainedEvents = 65_536
    /// Bytes of retained events in total (`--max-retained-bytes`, default 64 MiB).
    package var maxRetainedBytes = 64 << 20
    /// Bytes of retained events per publisher uid; nil: 1/8 of `maxRetainedBytes`.
    package var maxRetainedBytesPerUID: Int? = nil
    /// An incomplete frame that gets no byte for this long while the broker
    /// reads its connection closes it with `timeout` (`--frame-timeout`, 60 s), ns.
    package var frameTimeoutNanoseconds: Int64 = 60_000_000_000
    /// (1.3) Requests asked and not answered per uid (4096; uid 0 and the
    /// broker's uid: no per-uid limit) and in total (65536) (PROTOCOL.md
    /// "Request/reply": bounds).
    package var maxPendingRequestsPerUID = 4096
    package var maxPendingRequests = 65_536
    /// (1.3) Requests given to serving connections and not answered, per
    /// uid (16384; uid 0 and the broker's uid: none) and in total (262144):
    /// each is a reply token the broker keeps. A server at a bound is passed
    /// over (not reached) until it answers some.
    package var maxServingRequestsPerUID = 16_384
    package var maxServingRequests = 262_144
    /// (1.3) Members of one queue group (`--max-group-members`, default 64;
    /// uid 0 and the broker's uid: none). A group is its uid's, so this
    /// bounds what one uid can spread another uid's events over: round robin
    /// writes each event to the next member's socket, one write(2) each
    /// while their kernel buffers fill, so the members bound that cost.
    package var maxGroupMembers = 64
    package init() {}

    /// The per-uid retained bytes limit in force.
    package var retainedBytesPerUID: Int { maxRetainedBytesPerUID ?? maxRetainedBytes / 8 }
}

/// A per-uid budget (the "per uid" column of the quota table): the policy
/// file's `limit` resources.
package typealias QuotaResource = LimitResource

/// One uid's limits; nil is unlimited (uid 0, the broker's uid
/// `BrokerConfiguration.ownCredentials.uid`, or a `limit ... unlimited` line).
package struct UserLimits: Equatable, Sendable {
    package var connections: Int?
    package var subscriptions: Int?
    package var inboundBytes: Int?
    package var outboundBytes: Int?
    package var retainedBytes: Int?

    package init(connections: Int? = nil, subscriptions: Int? = nil, inboundBytes: Int? = nil, outboundBytes: Int? = nil, retainedBytes: Int? = nil) {
        self.connections = connections
        self.subscriptions = subscriptions
        self.inboundBytes = inboundBytes
        self.outboundBytes = outboundBytes
        self.retainedBytes = retainedBytes
    }

    package subscript(resource: QuotaResource) -> Int? {
        get {
            switch resource {
            case .connections: connections
            case .subscriptions: subscriptions
            case .inbound: inboundBytes
            case .outbound: outboundBytes
            case .retained: retainedBytes
            }
        }
        set {
            switch resource {
            case .connections: connections = newValue
            case .subscriptions: subscriptions = newValue
            case .inbound: inboundBytes = newValue
            case .outbound: outboundBytes = newValue
            case .retained: retainedBytes = newValue
            }
        }
    }
}

/// The per-uid limits a connection's policy view sets (`limit` lines,
/// PROTOCOL.md "Quotas (1.1)"): for each resource named, the value, where
/// `.some(nil)` is `unlimited`. Resources not named keep the broker's default.
/// Example: `limit connections 1024 user=eventbus-bridge` is
/// `UserLimitOverrides([.connections: 1024])`.
package struct UserLimitOverrides: Equatable, Sendable {
    package var values: [QuotaResource: Int?]

    package init(_ values: [QuotaResource: Int?] = [:]) { self.values = values }

    /// The overrides a policy view's `limit` lines make.
    init(_ limits: PerUIDLimits) {
        var values: [QuotaResource: Int?] = [:]
        for resource in LimitResource.allCases {
            guard let line = limits[resource] else { continue }
            switch line.value {
            case .value(let n): values[resource] = .some(n)
            case .unlimited: values[resource] = .some(nil)
            }
        }
        self.values = values
    }
}

/// What one uid holds, and its limits. Every field is `private(set)`,
/// changed only by the methods below, which keep its rules: each member
/// knows its index in `members` (`admit`/`dismiss`), and `inboundReader`
/// is one of them, set only while `inboundThrottle` is not empty
/// (`setInboundThrottle`/`chooseInboundReader`/`dismiss`); each count moves
/// with what it counts (the ledger's methods move the totals with them,
/// QuotaLedger.swift), and a fair-share table has no entry at 0.
final class UserAccount {
    let uid: UInt32
    /// uid 0 or the broker's own uid: no per-uid limits by default, and its
    /// events are outside every fair share.
    let isPrivileged: Bool
    private(set) var limits: UserLimits

    /// Its open connections (each knows its index here: O(1) removal).
    private(set) var members: [Connection] = []
    private(set) var subscriptions = 0
    /// Estimated memory of its subscriptions, bytes (`subscriptionCost`).
    private(set) var subscriptionBytes = 0
    /// Bytes its connections' splitters hold (incomplete frames, backlogs).
    private(set) var inboundBytes = 0
    /// Connections of it holding inbound bytes.
    private(set) var inboundHolders = 0
    /// Charged bytes of its connections' outbound queues.
    private(set) var queuedBytes = 0
    /// Retained events it published, and their bytes.
    private(set) var retainedBytes = 0
    private(set) var retainedEvents = 0
    /// Outbound bytes in its queues charged to other, unprivileged publisher
    /// uids (the fair share of DESIGN-NOTES C.2); no entry for 0 bytes.
    private(set) var actorShares: [UInt32: Int] = [:]

    /// Why reading its connections is throttled for inbound bytes, and the
    /// one connection read meanwhile (the oldest incomplete frame).
    private(set) var inboundThrottle: InboundThrottle = []
    private(set) var inboundReader: Connection?
    /// Connections paused because it is over its outbound limit.
    private(set) var outboundPaused: [Connection] = []
    /// (1.2) Its connections under `wait` whose queue is at least half full
    /// (`FlowState.halfFull`): while 0, its publishers cannot be held by them.
    private(set) var halfFullWaiters = 0
    /// (1.3) Requests its connections asked and that are not answered yet
    /// (RequestTable.swift changes it).
    private(set) var pendingRequests = 0
    /// (1.3) Reply tokens its connections hold (requests given, not answered).
    private(set) var servingRequests = 0
    /// (1.3) How many of them each other requester uid holds (its fair
    /// share of the uid's bound, `Broker.mayServeMore`); no entry at 0.
    private(set) var servingShares: [UInt32: Int] = [:]
    /// (1.3) Queue-group memberships of its connections (joinGroup/leaveGroup
    /// change it): at most its connection limit (`groupLimitError`).
    private(set) var groupMemberships = 0

    init(uid: UInt32, isPrivileged: Bool, limits: UserLimits) {
        self.uid = uid
        self.isPrivileged = isPrivileged
        self.limits = limits
    }

    /// Whether nothing is held any more (the account can go).
    var isIdle: Bool { members.isEmpty && retainedBytes == 0 && retainedEvents == 0 }

    /// Its limits now (at a connect, or after a policy reload).
    func setLimits(_ limits: UserLimits) { self.limits = limits }

    // MARK: Members

    /// Counts a new connection (it learns its index).
    func admit(_ connection: Connection) {
        connection.accounting.setMemberIndex(members.count)
        members.append(connection)
    }

    /// Stops counting a connection (the last member takes its index); it is
    /// no longer the one read while throttled.
    func dismiss(_ connection: Connection) {
        let i = connection.accounting.memberIndex
        let last = members.count - 1
        if i != last {
            let moved = members[last]
            members[i] = moved
            moved.accounting.setMemberIndex(i)
        }
        members.removeLast()
        if inboundReader === connection { inboundReader = nil }
    }

    // MARK: Counts

    /// One more (`sign` 1) or one fewer (-1) subscription of `cost` bytes (signed).
    func chargeSubscription(sign: Int, cost: Int) {
        subscriptions += sign
        subscriptionBytes += cost
    }

    /// One more (1) or one fewer (-1) queue-group membership.
    func countGroupMembership(_ sign: Int) { groupMemberships += sign }

    /// Adds `delta` inbound bytes.
    /// - Returns: 1 when it holds some now and held none, -1 when the
    ///   other way round, else 0 (the ledger's count of uids holding any).
    func addInbound(_ delta: Int) -> Int {
        let before = inboundBytes
        inboundBytes += delta
        if before == 0 && inboundBytes != 0 { return 1 }
        if before != 0 && inboundBytes == 0 { return -1 }
        return 0
    }

    /// One of its connections began (1) or ceased (-1) to hold inbound bytes.
    func countInboundHolder(_ sign: Int) { inboundHolders += sign }

    /// Its connections' queues' charge changed by `delta` bytes.
    @inline(__always)
    func addQueued(_ delta: Int) { queuedBytes += delta }

    /// A retained event of `bytes` it published is kept (1) or gone (-1).
    func countRetained(_ bytes: Int, sign: Int) {
        retainedBytes += bytes * sign
        retainedEvents += sign
    }

    /// One more (1) or one fewer (-1) of its `wait` connections is half full.
    func countHalfFullWaiter(_ sign: Int) { halfFullWaiters += sign }

    // MARK: Fair shares

    /// Charges `bytes` queued to one of its connections to publisher uid `actor`.
    func chargeShare(of actor: UInt32, bytes: Int) { actorShares[actor, default: 0] += bytes }

    /// Takes a released charge out of its fair shares.
    func releaseShare(_ charge: ActorCharge) { QuotaLedger.release(charge, from: &actorShares) }

    // MARK: Inbound throttle

    /// Sets why its connections are throttled; no reason left, no reader.
    /// - Returns: the reasons before.
    func setInboundThrottle(_ throttle: InboundThrottle) -> InboundThrottle {
        let was = inboundThrottle
        inboundThrottle = throttle
        if throttle.isEmpty { inboundReader = nil }
        return was
    }

    /// Makes `member` (one of its connections, or none) the one read while throttled.
    func chooseInboundReader(_ member: Connection?) { inboundReader = member }

    // MARK: Outbound pauses

    /// Lists `connection` as paused for its outbound limit.
    /// - Returns: whether it is the first listed.
    func pauseForOutbound(_ connection: Connection) -> Bool {
        let first = outboundPaused.isEmpty
        outboundPaused.append(connection)
        return first
    }

    /// Empties the list of connections paused for its outbound limit.
    /// - Returns: them.
    func resumeOutbound() -> [Connection] {
        let paused = outboundPaused
        outboundPaused.removeAll()
        return paused
    }

    /// Takes a closing `connection` off the list.
    /// - Returns: whether the list is empty now.
    func forgetOutbound(_ connection: Connection) -> Bool {
        outboundPaused.removeAll { $0 === connection }
        return outboundPaused.isEmpty
    }

    // MARK: (1.3) Requests

    /// One more (1) or one fewer (-1) request of its connections waits for its answer.
    func countPendingRequest(_ sign: Int) { pendingRequests += sign }

    /// One of its connections was given a reply token, counted in the fair
    /// share of requester uid `actor` (nil: none).
    func countServing(for actor: UInt32?) {
        servingRequests += 1
        if let actor { servingShares[actor, default: 0] += 1 }
    }

    /// One of its connections' tokens is gone (its share, if any, is released with `releaseServingShare`).
    func uncountServing() { servingRequests -= 1 }

    /// Takes one token's fair-share charge of `actor` off it.
    func releaseServingShare(of actor: UInt32) {
        guard let held = servingShares[actor] else { preconditionFailure("serving share of uid \(actor) not held") }
        servingShares[actor] = held > 1 ? held - 1 : nil
    }
}

/// Why a uid's connections are throttled for inbound bytes.
struct InboundThrottle: OptionSet {
    let rawValue: UInt8
    /// Over its own budget, until back under half of it.
    static let user = InboundThrottle(rawValue: 1)
    /// Over its fair share while the total is over budget, until the total is back under half.
    static let total = InboundThrottle(rawValue: 2)
}

/// A retained event's charge (PROTOCOL.md "Quotas (1.1)", retained events):
/// the publisher's uid and the event's bytes. The retention code keeps one
/// with each retained event and hands it back when the event is replaced,
/// cleared or dropped.
package struct RetainedCharge: Equatable, Sendable {
    package var uid: UInt32
    package var bytes: Int

    package init(uid: UInt32, bytes: Int) {
        self.uid = uid
        self.bytes = bytes
    }
}

extension Broker {
    // MARK: Accounts

    /// Whether `uid` has no per-uid limits by default (PROTOCOL.md "Quotas").
    func isPrivileged(_ uid: UInt32) -> Bool { uid == 0 || uid == configuration.ownCredentials.uid }

    /// The limits of `uid` with `overrides` applied.
    func limits(for uid: UInt32, _ overrides: UserLimitOverrides) -> UserLimits {
        let q = configuration.quotas
        var limits = isPrivileged(uid) ? UserLimits() : UserLimits(
            connections: q.maxConnectionsPerUID, subscriptions: q.maxSubscriptionsPerUID,
            inboundBytes: q.maxInboundBytesPerUID, outboundBytes: q.maxOutboundBytesPerUID,
            retainedBytes: q.retainedBytesPerUID)
        for (resource, value) in overrides.values { limits[resource] = value }
        return limits
    }

    /// The account of `uid`, made on first use.
    func account(for uid: UInt32) -> UserAccount {
        if let account = ledger.accounts[uid] { return account }
        let account = UserAccount(uid: uid, isPrivileged: isPrivileged(uid), limits: limits(for: uid, UserLimitOverrides()))
        ledger.open(account)
        return account
    }

    /// Drops an account that holds nothing any more.
    func retireIfIdle(_ account: UserAccount) {
        ledger.retireIfIdle(account)
    }

    // MARK: Connections (called by `open` and `forget` only)

    /// Counts a new connection for its uid.
    func admit(_ connection: Connection, to account: UserAccount) {
        account.admit(connection)
    }

    /// Stops counting a connection that is being forgotten (its
    /// subscriptions, queue and inbound bytes were released before).
    func dismiss(_ connection: Connection) {
        let account = connection.account
        account.dismiss(connection)
        retireIfIdle(account)
    }

    // MARK: Subscriptions (called by the subscription pair only)

    /// Memory one subscription costs, estimated in bytes: its pattern (held
    /// once, shared by the connection's set, its record and the trie) and the
    /// records around it (measured: docs/RELIABILITY.md "Quotas").
    static func subscriptionCost(_ pattern: Pattern) -> Int { pattern.text.utf8.count + 320 }

    /// Counts (`sign` 1) or releases (-1) one subscription of `connection`
    /// (with `extraBytes` more: (1.3) a group membership's own records).
    func chargeSubscription(_ pattern: Pattern, of connection: Connection, sign: Int, extraBytes: Int = 0) {
        let cost = (Broker.subscriptionCost(pattern) + extraBytes) * sign
        ledger.chargeSubscription(sign: sign, cost: cost, to: connection.account)
        statistics.subscriptions += sign
    }

    // MARK: Retained events (the API for the retention code)

    /// Whether `uid` may keep `charge` as a retained event in place of
    /// `replacing` (the charge of the retained event of that type now, if
    /// any, whoever published it): the per-uid bytes limit (uid 0 and the
    /// broker's uid: none, unless a `limit retained` line says so) and the
    /// totals (`--max-retained` events, `--max-retained-bytes`).
    /// - Returns: nil when it fits, otherwise the `limit` error to answer,
    ///   e.g. `retained bytes of uid 1000 would exceed 8388608`.
    package func retainedLimitError(for charge: RetainedCharge, replacing: RetainedCharge?) -> ProtocolError? {
        let q = configuration.quotas
        let freed = replacing?.bytes ?? 0
        let freedEvents = replacing == nil ? 0 : 1
        if ledger.totals.retainedEvents - freedEvents + 1 > q.maxRetainedEvents {
            return ProtocolError(.limit, "too many retained events (limit \(q.maxRetainedEvents))")
        }
        if ledger.totals.retainedBytes - freed + charge.bytes > q.maxRetainedBytes {
            return ProtocolError(.limit, "retained events would exceed \(q.maxRetainedBytes) bytes in total (--max-retained-bytes)")
        }
        let held = ledger.accounts[charge.uid]?.retainedBytes ?? 0
        let limit = ledger.accounts[charge.uid]?.limits.retainedBytes ?? limits(for: charge.uid, UserLimitOverrides()).retainedBytes
        if let limit {
            let freedOwn = replacing?.uid == charge.uid ? freed : 0
            if held - freedOwn + charge.bytes > limit {
                return ProtocolError(.limit, "retained events of uid \(charge.uid) would exceed \(limit) bytes")
            }
            // The same share of the events as of the bytes (1/8 by default):
            // otherwise two uids of small events could take all 65,536 and
            // leave nobody, uid 0 included, a new retained type.
            let events = Broker.retainedEventsLimit(bytesLimit: limit, q)
            let heldEvents = ledger.accounts[charge.uid]?.retainedEvents ?? 0
            let freedOwnEvents = replacing?.uid == charge.uid ? 1 : 0
            if heldEvents - freedOwnEvents + 1 > events {
                return ProtocolError(.limit, "retained events of uid \(charge.uid) would exceed \(events) events (its share of --max-retained)")
            }
        }
        return nil
    }

    /// A uid's limit of retained events: the share of `maxRetainedEvents`
    /// that its bytes limit is of `maxRetainedBytes` (8,192 of 65,536 for
    /// the default 1/8), at least 1.
    static func retainedEventsLimit(bytesLimit: Int, _ q: QuotaConfiguration) -> Int {
        let (product, overflow) = q.maxRetainedEvents.multipliedReportingOverflow(by: bytesLimit)
        guard !overflow else { return q.maxRetainedEvents }
        return max(1, product / max(1, q.maxRetainedBytes))
    }

    /// Counts a retained event (after `retainedLimitError` said it fits, or
    /// when restoring the state file at start).
    package func chargeRetained(_ charge: RetainedCharge) {
        let account = account(for: charge.uid)
        ledger.chargeRetained(charge, to: account)
    }

    /// Stops counting a retained event (replaced, cleared, or dropped).
    package func releaseRetained(_ charge: RetainedCharge) {
        guard let account = ledger.accounts[charge.uid] else { preconditionFailure("retained charge of uid \(charge.uid) has no account") }
        ledger.releaseRetained(charge, from: account)
        retireIfIdle(account)
    }
}
