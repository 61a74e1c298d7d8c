// The broker's quota ledger (PROTOCOL.md "Quotas (1.1)", "Flow control
// (1.2)"): the per-uid accounts, the totals over every uid, the fair-share
// charges a queue operation handed back, the outbound fast-path bound and
// the per-uid flow counts. The rules that read and change them are in
// Broker+Quotas.swift, UserAccounts.swift and Broker+FlowControl.swift; this
// file holds the state and the few rules that need nothing else.
//
// Before editing: the invariants. `accounts[uid]` exists exactly while `uid`
// has a connection or retained bytes (`Broker.account(for:)` makes it,
// `retireIfIdle` drops it), and it is the counted reference that keeps every
// `Connection.accounting.accountRef` alive (Uncounted.swift).
// `totals.inboundUIDs` is the number of accounts with `inboundBytes > 0`;
// `totals.inboundBytes`, `retainedBytes`, `retainedEvents` and
// `subscriptionBytes` are the sums of their accounts' counts. `released` is
// empty between two queue operations: whoever hands it to an `OutboundQueue`
// call passes the result to `Broker.applyOutbound`, which empties it.
// `outboundFastPathBytes` is at most every outbound limit in force
// (`--max-outbound`, `--max-queued`, every uid's): lowered by
// `noteOutboundLimit`, never raised. `usersPausedForOutbound` counts the
// accounts whose `outboundPaused` is not empty; `halfFullTrustedHolders` the
// connections whose `flow.halfFull` is `.anyUID` (the `.ownUID` ones are
// their account's `halfFullWaiters`).

/// The totals over every uid that `BrokerStatistics` does not carry.
struct QuotaTotals {
    var inboundBytes = 0
    /// Accounts with `inboundBytes > 0`.
    var inboundUIDs = 0
    /// Over the total inbound budget (until back under half).
    var inboundThrottled = false
    var retainedBytes = 0
    var retainedEvents = 0
    var subscriptionBytes = 0
    /// Connections paused because all queues together are over `--max-queued`.
    var outboundPaused: [Connection] = []
}

/// What the broker counts per uid and in total for the quotas; held by
/// `Broker.ledger` and changed in place (the invariants are in this file's header).
struct QuotaLedger {
    /// Per-uid accounts (UserAccounts.swift), by uid.
    var accounts: [UInt32: UserAccount] = [:]
    /// The totals beyond `BrokerStatistics`.
    var totals = QuotaTotals()
    /// Fair-share charges a queue operation handed back (`Broker.applyOutbound` releases them).
    var released: [ActorCharge] = []
    /// The smallest outbound limit any connection is under (its own, its
    /// uid's, the total), bytes: while all queues together hold no more, no
    /// limit can be reached and the per-event and per-frame checks are skipped.
    private(set) var outboundFastPathBytes: Int
    /// Accounts with connections paused for the uid's outbound limit.
    var usersPausedForOutbound = 0
    /// (1.2) Half-full `wait` connections allowed to hold every uid's
    /// publishers (`allow hold`); per uid, `UserAccount.halfFullWaiters`.
    var halfFullTrustedHolders = 0

    /// - Parameter outboundFastPathBytes: the smallest outbound limit of the
    ///   configuration (`--max-outbound`, `--max-queued`, the default per-uid limit).
    init(outboundFastPathBytes: Int) {
        self.outboundFastPathBytes = outboundFastPathBytes
    }

    /// Lowers `outboundFastPathBytes` to a uid's outbound limit, bytes (nil:
    /// none); never raises it.
    @inline(__always)
    mutating func noteOutboundLimit(_ bytes: Int?) {
        if let bytes { outboundFastPathBytes = min(outboundFastPathBytes, bytes) }
    }

    /// Takes `charge` out of a fair-share table (a connection's or an
    /// account's `actorShares`): the entry goes when nothing is left of it.
    /// A charge larger than held is released as all of it; one of a uid not
    /// held is a broken count and stops the broker.
    static func release(_ charge: ActorCharge, from shares: inout [UInt32: Int]) {
        guard let held = shares[charge.actor] else { preconditionFailure("fair share of uid \(charge.actor) not held") }
        if held <= charge.bytes { shares[charge.actor] = nil } else { shares[charge.actor] = held - charge.bytes }
    }
}
