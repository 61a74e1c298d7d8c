// The client's side of flow control (PROTOCOL.md "Flow control (1.2)"):
// how many events this bus holds for its observers and streams, and when the
// reader thread must stop reading the socket so that the broker holds the
// publisher instead of this process's memory growing.
//
// Before editing: this is a pure state machine (no locks, no clock reads:
// time comes in as an argument); `FlowGate` keeps it behind a lock and does
// the waking. Every event it counts is later either `took` or subtracted by
// `close`, so the totals never drift. An account that is *behind* (its
// consumer took nothing for `stallNanoseconds` while the reader waited for
// room) no longer counts towards the totals and loses its new events until
// its queue is empty again; that loss is reported once, with a count.

/// A run of events one registration lost while it was behind, reported as
/// one `BusNotice.droppedLocally(pattern:count:sinceSeq:)`.
struct LocalLoss: Equatable, Sendable {
    /// The registration's pattern (its event type for typed observers).
    var pattern: String
    /// Events lost in the run.
    var count: UInt64
    /// `seq` of the first of them.
    var sinceSeq: UInt64

    var notice: BusNotice { .droppedLocally(pattern: pattern, count: count, sinceSeq: sinceSeq) }
}

/// The events waiting in every local queue of one bus (one connection).
struct DeliveryLedger {
    /// One registration's queue.
    struct Account {
        var pattern: String
        var events = 0
        var bytes = 0
        /// When its consumer last took an event, or when its queue became
        /// non-empty (monotonic ns): the start of the current wait.
        var waitingSince: Int64 = 0
        /// Took nothing for the stall timeout while the reader waited.
        var behind = false
        /// The loss of the current behind run (count 0: none yet).
        var lost = LocalLoss(pattern: "", count: 0, sinceSeq: 0)
    }

    /// What `admit` decided for one event.
    enum Admission: Equatable {
        /// Queue it (it is counted).
        case queue
        /// Drop it: the registration is behind (counted in its loss).
        case drop
    }

    /// Events all queues together may hold before the reader stops reading.
    let maxEvents: Int
    /// Bytes (`cost`) all queues together may hold before the reader stops reading.
    let maxBytes: Int
    /// How long a consumer may take nothing, while the reader waits for
    /// room, before its registration is behind (nanoseconds).
    let stallNanoseconds: Int64

    /// Events counted now (accounts not behind).
    private(set) var events = 0
    /// Bytes counted now (accounts not behind).
    private(set) var bytes = 0
    /// Whether the reader thread waits for room (set by `readerMustWait`).
    private(set) var readerWaiting = false
    private var accounts: [ObjectIdentifier: Account] = [:]

    /// - Parameters: see the properties; limits are raised to at least 1.
    init(maxEvents: Int, maxBytes: Int, stallNanoseconds: Int64) {
        self.maxEvents = max(1, maxEvents)
        self.maxBytes = max(1, maxBytes)
        self.stallNanoseconds = max(0, stallNanoseconds)
    }

    /// The cost in bytes of queueing `event` once: its `data` plus a fixed
    /// 128 bytes for the envelope and the queue's own bookkeeping.
    static func cost(of event: RawEvent) -> Int { event.data.count + 128 }

    /// At or past either limit: the reader must not read more.
    var isFull: Bool { events >= maxEvents || bytes >= maxBytes }

    /// At or below half of both limits: a waiting reader may read again.
    var hasRoom: Bool { events <= maxEvents / 2 && bytes <= maxBytes / 2 }

    /// Whether registration `id` is behind now.
    func isBehind(_ id: ObjectIdentifier) -> Bool { accounts[id]?.behind ?? false }

    /// Events queued for registration `id` (behind or not).
    func queued(_ id: ObjectIdentifier) -> Int { accounts[id]?.events ?? 0 }

    /// An event of `cost` bytes for registration `id` on `pattern`.
    /// - Parameters:
    ///   - seq: the event's `seq`, for the loss report.
    ///   - now: monotonic clock, ns.
    mutating func admit(_ id: ObjectIdentifier, pattern: String, cost: Int, seq: UInt64, now: Int64) -> Admission {
        var account = accounts[id] ?? Account(pattern: pattern)
        defer { accounts[id] = account }
        if account.behind {
            if account.lost.count == 0 { account.lost = LocalLoss(pattern: account.pattern, count: 0, sinceSeq: seq) }
            account.lost.count += 1
            return .drop
        }
        if account.events == 0 { account.waitingSince = now }
        account.events += 1
        account.bytes += cost
        events += 1
        bytes += cost
        return .queue
    }

    /// The consumer of `id` took one event of `cost` bytes.
    /// - Returns: whether to wake the waiting reader (room again), and the
    ///   loss to report when this ended a behind run.
    mutating func took(_ id: ObjectIdentifier, cost: Int, now: Int64) -> (wakeReader: Bool, loss: LocalLoss?) {
        guard var account = accounts[id] else { return (false, nil) }
        account.events -= 1
        account.bytes -= cost
        account.waitingSince = now
        var loss: LocalLoss? = nil
        if account.behind {
            if account.events == 0 {
                account.behind = false
                if account.lost.count > 0 { loss = account.lost }
                account.lost.count = 0
            }
        } else {
            events -= 1
            bytes -= cost
        }
        accounts[id] = account.events == 0 && !account.behind ? nil : account
        return (releaseReaderIfRoom(), loss)
    }

    /// Registration `id` ended: what it still had queued is no longer counted.
    /// - Returns: as `took`; the loss of an unfinished behind run.
    mutating func close(_ id: ObjectIdentifier) -> (wakeReader: Bool, loss: LocalLoss?) {
        guard let account = accounts.removeValue(forKey: id) else { return (false, nil) }
        if !account.behind {
            events -= account.events
            bytes -= account.bytes
        }
        return (releaseReaderIfRoom(), account.lost.count > 0 ? account.lost : nil)
    }

    /// The reader asks before each read whether it must wait: yes while the
    /// queues are full, and once waiting, until they are down to half.
    mutating func readerMustWait() -> Bool {
        if readerWaiting { return true }
        if isFull { readerWaiting = true }
        return readerWaiting
    }

    /// While the reader waits: registrations whose consumer took nothing for
    /// the stall timeout become behind (their queue stops counting).
    /// - Parameter now: monotonic clock, ns.
    /// - Returns: when to look again (the next stall deadline, ns), nil when
    ///   no queue could stall.
    mutating func markStalled(now: Int64) -> Int64? {
        guard readerWaiting else { return nil }
        var next: Int64? = nil
        for (id, account) in accounts where !account.behind && account.events > 0 {
            let deadline = account.waitingSince &+ stallNanoseconds
            if deadline <= now {
                accounts[id]!.behind = true
                events -= account.events
                bytes -= account.bytes
            } else {
                next = min(next ?? deadline, deadline)
            }
        }
        _ = releaseReaderIfRoom()
        return readerWaiting ? next : nil
    }

    private mutating func releaseReaderIfRoom() -> Bool {
        guard readerWaiting, hasRoom else { return false }
        readerWaiting = false
        return true
    }
}
