// The broker's quota ledger (PROTOCOL.md "Quotas (1.1)", "Flow control
// (1.2)"): the per-uid accounts, the totals over every uid, the fair-share
// charges a queue operation handed back, the outbound fast-path bound and
// the per-uid flow counts. Every field is `private(set)` (the totals'
// `fileprivate(set)`): each is changed only by a method of this file, which
// keeps the invariants below (an account's own counts through its methods,
// UserAccounts.swift). The rules that decide when to call them (the
// limits, throttles and pauses) are in Broker+Quotas.swift, UserAccounts.swift
// and Broker+FlowControl.swift.
//
// Before editing: the invariants. `accounts[uid]` exists exactly while `uid`
// has a connection or retained bytes (`Broker.account(for:)` makes it with
// `open`, `retireIfIdle` drops it), and it is the counted reference that
// keeps every `Connection.accounting.accountRef` alive (Uncounted.swift).
// `totals.inboundUIDs` is the number of accounts with `inboundBytes > 0`;
// `totals.inboundBytes`, `retainedBytes`, `retainedEvents` and
// `subscriptionBytes` are the sums of their accounts' counts (changed with
// them: `addInbound`, `chargeRetained`/`releaseRetained`,
// `chargeSubscription`). `released` is empty between two queue operations:
// a queue call fills it inside `collectReleased`, and whoever made that call
// passes the result to `Broker.applyOutbound`, which empties it
// (`drainReleased`). `outboundFastPathBytes` is at most every outbound limit
// in force (`--max-outbound`, `--max-queued`, every uid's): lowered by
// `noteOutboundLimit`, never raised. `usersPausedForOutbound` counts the
// accounts whose `outboundPaused` is not empty (`pauseForUserOutbound`,
// `resumeUserOutbound`, `forgetUserOutbound`); `totals.outboundPaused` the
// connections paused for `--max-queued`; `halfFullTrustedHolders` the
// connections whose `flow.halfFull` is `.anyUID` (the `.ownUID` ones are
// their account's `halfFullWaiters`; `countHalfFull`/`uncountHalfFull`).
import EventBusPolicy

/// The totals over every uid that `BrokerStatistics` does not carry
/// (changed only by `QuotaLedger`'s methods).
struct QuotaTotals {
    fileprivate(set) var inboundBytes = 0
    /// Accounts with `inboundBytes > 0`.
    fileprivate(set) var inboundUIDs = 0
    /// Over the total inbound budget (until back under half).
    fileprivate(set) var inboundThrottled = false
    fileprivate(set) var retainedBytes = 0
    fileprivate(set) var retainedEvents = 0
    fileprivate(set) var subscriptionBytes = 0
    /// Connections paused because all queues together are over `--max-queued`.
    fileprivate(set) var outboundPaused: [Connection] = []
}

/// What the broker counts per uid and in total for the quotas; held by
/// `Broker.ledger` and changed in place through its methods (the
/// invariants are in this file's header).
struct QuotaLedger {
    /// Per-uid accounts (UserAccounts.swift), by uid.
    private(set) var accounts: [UInt32: UserAccount] = [:]
    /// The totals beyond `BrokerStatistics`.
    private(set) var totals = QuotaTotals()
    /// Fair-share charges a queue operation handed back (`Broker.applyOutbound` releases them).
    private(set) var released: [ActorCharge] = []
    /// The smallest outbound limit any connection is under (its own, its
    /// uid's, the total), bytes: while all queues together hold no more, no
    /// limit can be reached and the per-event and per-frame checks are skipped.
    private(set) var outboundFastPathBytes: Int
    /// Accounts with connections paused for the uid's outbound limit.
    private(set) var usersPausedForOutbound = 0
    /// (1.2) Half-full `wait` connections allowed to hold every uid's
    /// publishers (`allow hold`); per uid, `UserAccount.halfFullWaiters`.
    private(set) var halfFullTrustedHolders = 0

    /// - Parameter outboundFastPathBytes: the smallest outbound limit of the
    ///   configuration (`--max-outbound`, `--max-queued`, the default per-uid limit).
    init(outboundFastPathBytes: Int) {
        self.outboundFastPathBytes = outboundFastPathBytes
    }

    // MARK: Accounts

    /// Keeps a new account (its uid has none).
    mutating func open(_ account: UserAccount) {
        accounts[account.uid] = account
    }

    /// Drops an account that holds nothing any more.
    mutating func retireIfIdle(_ account: UserAccount) {
        if account.isIdle && accounts[account.uid] === account { accounts[account.uid] = nil }
    }

    // MARK: Counts kept with their account's

    /// Adds `delta` inbound bytes to `account` and the total, keeping
    /// `inboundUIDs` the number of accounts holding any.
    mutating func addInbound(_ delta: Int, to account: UserAccount) {
        totals.inboundUIDs += account.addInbound(delta)
        totals.inboundBytes += delta
    }

    /// Over the total inbound budget (true) or back under half of it (false).
    mutating func setInboundThrottled(_ throttled: Bool) {
        totals.inboundThrottled = throttled
    }

    /// Counts (`sign` 1) or releases (-1) one subscription of `cost` bytes
    /// (already signed) for `account` and the total.
    mutating func chargeSubscription(sign: Int, cost: Int, to account: UserAccount) {
        account.chargeSubscription(sign: sign, cost: cost)
        totals.subscriptionBytes += cost
    }

    /// Counts a retained event for `account` and the total.
    mutating func chargeRetained(_ charge: RetainedCharge, to account: UserAccount) {
        account.countRetained(charge.bytes, sign: 1)
        totals.retainedBytes += charge.bytes
        totals.retainedEvents += 1
    }

    /// Stops counting a retained event for `account` and the total.
    mutating func releaseRetained(_ charge: RetainedCharge, from account: UserAccount) {
        account.countRetained(charge.bytes, sign: -1)
        totals.retainedBytes -= charge.bytes
        totals.retainedEvents -= 1
    }

    // MARK: Fair-share charges handed back

    /// Runs one queue operation that hands fair-share charges back into
    /// `released` (its caller passes the result to `Broker.applyOutbound`).
    mutating func collectReleased<R>(_ operation: (inout [ActorCharge]) -> R) -> R {
        operation(&released)
    }

    /// Hands each released charge to `release` and empties `released`.
    mutating func drainReleased(_ release: (ActorCharge) -> Void) {
        for charge in released { release(charge) }
        released.removeAll(keepingCapacity: true)
    }

    /// Takes `charge` out of a fair-share table (a connection's or an
    /// account's `actorShares`): the entry goes when nothing is left of it.
    /// A charge larger than held is released as all of it; one of a uid not
    /// held is a broken count and stops the broker.
    static func release(_ charge: ActorCharge, from shares: inout [UInt32: Int]) {
        guard let held = shares[charge.actor] else { preconditionFailure("fair share of uid \(charge.actor) not held") }
        if held <= charge.bytes { shares[charge.actor] = nil } else { shares[charge.actor] = held - charge.bytes }
    }

    // MARK: Outbound limits

    /// Lowers `outboundFastPathBytes` to a uid's outbound limit, bytes (nil:
    /// none); never raises it.
    @inline(__always)
    mutating func noteOutboundLimit(_ bytes: Int?) {
        if let bytes { outboundFastPathBytes = min(outboundFastPathBytes, bytes) }
    }

    /// Lists `connection` as paused for its uid's outbound limit.
    mutating func pauseForUserOutbound(_ connection: Connection, of account: UserAccount) {
        if account.pauseForOutbound(connection) { usersPausedForOutbound += 1 }
    }

    /// Empties `account`'s list of connections paused for its outbound
    /// limit (it is back under half).
    /// - Returns: the connections to resume.
    mutating func resumeUserOutbound(of account: UserAccount) -> [Connection] {
        guard !account.outboundPaused.isEmpty else { return [] }
        usersPausedForOutbound -= 1
        return account.resumeOutbound()
    }

    /// Takes a closing `connection` paused for its uid's limit off the list.
    mutating func forgetUserOutbound(_ connection: Connection, of account: UserAccount) {
        if account.forgetOutbound(connection) { usersPausedForOutbound -= 1 }
    }

    /// Lists `connection` as paused for `--max-queued`.
    mutating func pauseForTotalOutbound(_ connection: Connection) {
        totals.outboundPaused.append(connection)
    }

    /// Empties the list of connections paused for `--max-queued`.
    /// - Returns: the connections to resume.
    mutating func resumeTotalOutbound() -> [Connection] {
        let paused = totals.outboundPaused
        totals.outboundPaused.removeAll()
        return paused
    }

    /// Takes a closing `connection` paused for `--max-queued` off the list.
    mutating func forgetTotalOutbound(_ connection: Connection) {
        totals.outboundPaused.removeAll { $0 === connection }
    }

    // MARK: (1.2) Half-full holders

    /// Counts a connection that became half full with hold right `right`:
    /// for every uid (`.anyUID`) or its own uid's `account`.
    mutating func countHalfFull(_ right: HoldRight, of account: UserAccount) {
        if right == .anyUID { halfFullTrustedHolders += 1 } else { account.countHalfFullWaiter(1) }
    }

    /// Ends the count of `countHalfFull`.
    mutating func uncountHalfFull(_ right: HoldRight, of account: UserAccount) {
        if right == .anyUID { halfFullTrustedHolders -= 1 } else { account.countHalfFullWaiter(-1) }
    }
}
