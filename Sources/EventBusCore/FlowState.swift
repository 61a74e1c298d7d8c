// A connection's part in flow control (PROTOCOL.md "Flow control (1.2)"):
// whom it holds and who holds it, the frame held unrouted, its paced
// replays, the stall watch's view of it, its half-full mark and (issue 37)
// the trusted-hold window. When to hold, release, watch and fall behind is
// decided in Broker+FlowControl.swift ((1.3) a queue group's hold in
// Broker+GroupFlow.swift); this file holds the state and the rules that
// need nothing else.
//
// Before editing: every field is `private(set)`, changed only by the
// methods here. The two lists mirror each other: `p` is in `s.holding`
// exactly when `s` is in `p.heldBy` (`hold`, `release(holder:)`,
// `forgetHolders` change both sides at once; both are emptied when either
// connection goes). `heldFrame` is set exactly while the publisher is held
// or was released and has not handled it yet (`takeHeldFrame`).
// `heldInGroups` mirrors `QueueGroup.holding` (Broker+GroupFlow.swift
// changes both). `halfFull` is counted in the ledger while set
// (`QuotaLedger.countHalfFull`, the caller's job).
import EventBusPolicy

/// A connection's part in flow control (`Connection.flow`), changed only
/// through its methods.
struct FlowState {
    /// As a subscriber: the publishers it holds back now.
    private(set) var holding: [Connection] = []
    /// As a publisher: the subscribers holding it back now.
    private(set) var heldBy: [Connection] = []
    /// (1.3) As a publisher: the full queue groups holding it back now (held
    /// while this or `heldBy` is not empty; mirrors `QueueGroup.holding`).
    private(set) var heldInGroups: [QueueGroup] = []
    /// (1.3) As a member: how many of its groups hold a publisher now (it
    /// is watched for stalls meanwhile, as a holder is).
    private(set) var groupHolds = 0
    /// The publish frame not yet routed while it is held: handled first when
    /// it is released, then the input after it. Charged as inbound bytes.
    private(set) var heldFrame: [UInt8]? = nil
    /// EOF was read while it was held: end of input is handled once the
    /// held input is.
    private(set) var endPending = false
    /// Took no byte of its queue for the stall timeout while holding or
    /// replaying: handled as `drop-new` until its queue is empty again.
    private(set) var behind = false
    /// Replays (`last`, `since`) still to send, oldest first (only under `wait`).
    private(set) var replays: [PacedReplay] = []
    /// A replay of it is being sent now (its own events pass the replay's place).
    private(set) var pumping = false
    /// Bytes of its queue written so far; what the stall watch saw of it
    /// last and when that changed (monotonic ns).
    private(set) var bytesTaken: UInt64 = 0
    private(set) var watchedTaken: UInt64 = 0
    private(set) var progressAt: Int64 = 0
    /// In `Broker.flowWatch`.
    private(set) var watched = false
    /// Its queue is at least half full under `wait`, counted in its
    /// account's `halfFullWaiters` (`.ownUID`) or the broker's
    /// `ledger.halfFullTrustedHolders` (`.anyUID`): only such a connection can hold.
    private(set) var halfFull: HoldRight? = nil
    /// The queue charge at which it becomes `halfFull`: half the outbound
    /// limit under `wait` while it is not, else `Int.max` (one comparison per event queued).
    private(set) var halfFullAt = Int.max
    /// (issue 37) With `allow hold`: since when it holds a publisher of
    /// another uid (monotonic ns; nil: none now), the window that holding is
    /// measured in, and how long it held in it (ns).
    private(set) var othersHeldSince: Int64? = nil
    private(set) var trustWindowStart: Int64 = 0
    private(set) var trustHeldNanoseconds: Int64 = 0
    /// (issue 37) Held publishers of other uids for most of a
    /// `--trusted-hold-window`: behind for them (it holds its own uid's only)
    /// until its queue is empty.
    private(set) var trustBehind = false

    var isHeld: Bool { !heldBy.isEmpty || !heldInGroups.isEmpty }
}

extension FlowState {
    // MARK: Holds (both sides)

    /// Holds `publisher` on each of `holders` with `frame` unrouted; a
    /// holder that now holds a publisher of another uid starts measuring
    /// that (its trusted-hold window starts with its first such hold).
    static func hold(_ publisher: Connection, on holders: [Connection], frame: RawSpan, now: Int64) {
        publisher.flow.heldFrame = Array(copying: frame)
        publisher.flow.heldBy = holders
        for holder in holders {
            holder.flow.holding.append(publisher)
            if holder.flow.othersHeldSince == nil && holder.credentials.uid != publisher.credentials.uid {
                if holder.flow.trustWindowStart == 0 { holder.flow.trustWindowStart = now }
                holder.flow.othersHeldSince = now
            }
        }
    }

    /// Ends every hold of `holder` (what it held of other uids counts in its
    /// window): `released` is called, in order, with each publisher nothing
    /// holds any more.
    static func release(holder: Connection, now: Int64, _ released: (Connection) -> Void) {
        guard !holder.flow.holding.isEmpty else { return }
        if let since = holder.flow.othersHeldSince {
            holder.flow.trustHeldNanoseconds += now - max(since, holder.flow.trustWindowStart)
            holder.flow.othersHeldSince = nil
        }
        let held = holder.flow.holding
        holder.flow.holding = []
        for publisher in held {
            publisher.flow.heldBy.removeAll { $0 === holder }
            if !publisher.flow.isHeld { released(publisher) }
        }
    }

    /// A held `publisher` is going: every holder lets go of it.
    static func forgetHolders(of publisher: Connection) {
        for holder in publisher.flow.heldBy { holder.flow.holding.removeAll { $0 === publisher } }
        publisher.flow.heldBy = []
    }

    // MARK: Held input

    /// The held frame, once no one holds it any more (nil: none, or still held).
    mutating func takeHeldFrame() -> [UInt8]? {
        guard !isHeld, let frame = heldFrame else { return nil }
        heldFrame = nil
        return frame
    }

    /// EOF was read behind held input: end of input waits for it.
    mutating func deferEndOfInput() { endPending = true }

    /// The deferred end of input is handled now (or dropped with the connection).
    mutating func clearEndOfInput() { endPending = false }

    /// The connection is going: its held frame and deferred end are dropped.
    mutating func dropHeldInput() {
        heldFrame = nil
        endPending = false
    }

    // MARK: (1.3) Queue groups

    /// As a publisher: `group` holds it now.
    mutating func heldIn(_ group: QueueGroup) { heldInGroups.append(group) }

    /// As a publisher: `group` let go of it.
    mutating func releasedFrom(_ group: QueueGroup) { heldInGroups.removeAll { $0 === group } }

    /// As a publisher going: the groups holding it, no longer listed here.
    mutating func takeHeldInGroups() -> [QueueGroup] {
        let groups = heldInGroups
        heldInGroups = []
        return groups
    }

    /// As a member: one of its groups started (1) or ended (-1) holding.
    mutating func addGroupHold(_ count: Int) { groupHolds += count }

    // MARK: Half full

    /// The queue charge at which it is half full (`Int.max`: never, e.g. not under `wait`).
    mutating func armHalfFull(at bytes: Int) { halfFullAt = bytes }

    /// Marks it half full with hold right `right` (the caller counts it in the ledger).
    mutating func markHalfFull(_ right: HoldRight) { halfFull = right }

    /// Ends the half-full mark.
    /// - Returns: the right it was marked with (nil: it was not), for the ledger.
    mutating func clearHalfFull() -> HoldRight? {
        defer { halfFull = nil }
        return halfFull
    }

    // MARK: Draining and the stall watch

    /// `bytes` of its queue were written.
    mutating func took(_ bytes: Int) { bytesTaken &+= UInt64(bytes) }

    /// Puts it under the stall watch at `now` (monotonic ns).
    mutating func startWatch(now: Int64) {
        watched = true
        watchedTaken = bytesTaken
        progressAt = now
    }

    /// Takes it off the stall watch.
    mutating func endWatch() { watched = false }

    /// Whether it took bytes of its queue since the watch last looked (then
    /// its progress time is `now`).
    mutating func madeProgress(now: Int64) -> Bool {
        guard bytesTaken != watchedTaken else { return false }
        watchedTaken = bytesTaken
        progressAt = now
        return true
    }

    /// It stalled: behind until its queue is empty (not behind when it is
    /// empty already).
    mutating func fallBehind(queueIsEmpty: Bool) { behind = !queueIsEmpty }

    /// Its queue is empty again: no longer behind.
    mutating func catchUp() { behind = false }

    // MARK: (issue 37) The trusted-hold window

    /// At `now`, if its window of `length` ns is over: what it held of
    /// other uids is measured and a new window starts; held for at least
    /// 95 % of the window, it is behind for other uids (`trustBehind`).
    /// - Returns: whether it went behind for other uids now.
    mutating func closeTrustWindow(now t: Int64, length: Int64) -> Bool {
        let start = trustWindowStart
        guard t - start >= length else { return false }
        var held = trustHeldNanoseconds
        if let since = othersHeldSince {
            held += t - max(since, start)
            othersHeldSince = t
        }
        trustWindowStart = t
        trustHeldNanoseconds = 0
        guard held >= (t - start) / 20 * 19 else { return false }
        trustBehind = true
        return true
    }

    /// Its queue is empty again: it may hold other uids' publishers again.
    mutating func endTrustBehind() { trustBehind = false }

    // MARK: Paced replays

    /// Queues `more` behind its replays.
    mutating func queueReplays(_ more: [PacedReplay]) { replays.append(contentsOf: more) }

    /// The first replay is done.
    mutating func finishFirstReplay() { replays.removeFirst() }

    /// Ends the replays of `subscription`.
    mutating func cancelReplays(of subscription: Subscription) { replays.removeAll { $0.subscription === subscription } }

    /// Ends every replay (stalled, or going).
    /// - Returns: those that were left.
    mutating func takeReplays() -> [PacedReplay] {
        let left = replays
        replays = []
        return left
    }

    /// A replay of it is being sent (true) or no longer (false).
    mutating func setPumping(_ on: Bool) { pumping = on }
}
