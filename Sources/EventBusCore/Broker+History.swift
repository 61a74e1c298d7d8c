// History replay (PROTOCOL.md "Retained events and history (1.1)"): every
// publish is recorded in the ring (HistoryRing.swift); a `subscribe` with
// `since` gets, right after its `ok`, the ring's events after that seq that
// its pattern matches and the connection may receive, flagged
// `"replayed":true`, preceded by a `gap` frame when the ring no longer
// reaches back. The broker is single-threaded and the replay runs inside the
// subscribe step, so replay and live events form one sequence without gaps
// or duplicates by construction: every event up to the current seq comes
// from the ring, every later one live.
//
// Before editing: one event reaches a connection at most once however many
// of its patterns match (PROTOCOL.md "Names and patterns"), so each
// subscription remembers `offeredFrom`, the seq from which it has been
// offered everything it matches, and a replay skips what another
// subscription already offered. The cost of a replay is bounded whatever a
// client does: at most `maxDeduplicated` other subscriptions are consulted
// (beyond them a hostile client can only get duplicates on its own
// connection), and all replay work is paid from a per-uid credit that
// refills with time; a replay the credit cannot pay for is cut short and
// says so with a `gap` frame. docs/PROTOCOL-NOTES.md states the rule.
@_spi(Package) import EventBusProtocol

/// A uid's replay credit: units of replay work it may still spend.
struct ReplayCredit {
    var units: Int
    /// CLOCK_MONOTONIC ns when `units` was last brought up to date.
    var updated: Int64
}

/// A replay the broker keeps its place in (PROTOCOL.md "Flow control
/// (1.2)": paced replay): the retained events of a `last: true`, or the
/// history ring's events of a `since`, from `next` on. Its place is
/// changed only here, by the replay (`fileprivate(set)`); FlowState.swift
/// keeps the connection's list, Broker+FlowControl.swift paces it.
final class PacedReplay {
    /// The subscription it was asked with (ends with it).
    let subscription: Subscription
    /// `last`: the retained events found at the subscribe, and the next to send.
    let retained: [RetainedEvent]
    fileprivate(set) var nextRetained = 0
    /// `since`: the next seq to look at, the last seq it covers (the newest
    /// at the subscribe: later ones came live), and what it skips.
    let isHistory: Bool
    fileprivate(set) var nextSeq: UInt64 = 0
    fileprivate(set) var endSeq: UInt64 = 0
    /// A `gap` frame still to send before the first replayed event: (since_seq, first_seq).
    fileprivate(set) var gap: (since: UInt64, first: UInt64)? = nil
    fileprivate(set) var matcher: PatternMatcher? = nil
    fileprivate(set) var dedup: [(matcher: PatternMatcher, from: UInt64)] = []
    fileprivate(set) var sentRetained: Set<UInt64> = []

    init(retained: [RetainedEvent], subscription: Subscription) {
        self.subscription = subscription
        self.retained = retained
        self.isHistory = false
    }

    init(historyOf subscription: Subscription) {
        self.subscription = subscription
        self.retained = []
        self.isHistory = true
    }
}

extension Broker {
    /// Other subscriptions of the connection a replay de-duplicates against.
    static let maxDeduplicated = 16

    // MARK: Recording

    /// Records the event that just took `seq` in the history ring. `event`
    /// is nil only while history is off (nothing built it).
    /// - Parameter publisher: nil for the broker's own events.
    @inline(__always)
    func recordHistory(_ event: EventFrame?, seq: UInt64, publisher: Connection?) {
        retention.history.record(event, seq: seq, publisher: publisher?.id ?? 0)
    }

    // MARK: Replay

    /// The replay of a subscribe with `since`, to send right after its `ok`
    /// (and its retained events) through `startReplays`: the ring's events
    /// after `since` that `subscription`'s pattern matches and the connection
    /// may receive (no echo without `echo: true`), each flagged
    /// `"replayed":true`, in seq order, skipping those another of the
    /// connection's subscriptions already offered; a `gap` frame first when
    /// the ring no longer reaches back to `since + 1`, when `instance` is
    /// not this run's (then `since` counts as 0), or when the uid's replay
    /// credit cuts the replay short:
    /// `{"op":"gap","type":"a.>","since_seq":10,"first_seq":50}`.
    /// - Parameter sentRetained: seqs sent as retained events (a subscribe
    ///   with both `last` and `since`): not sent again.
    /// - Returns: nil when there is nothing to send.
    func historyReplay(since requested: UInt64, instance: String?, subscription: Subscription, to connection: Connection, sentRetained: Set<UInt64> = []) -> PacedReplay? {
        let ring = retention.history
        let foreign = instance != nil && instance != self.instance
        let since = foreign ? 0 : requested
        var start = ring.index(after: since)
        // `since: 0` with this run's instance is the whole ring, without a
        // gap even once the ring has dropped its oldest (PROTOCOL.md).
        var gap = foreign || (since > 0 && ring.lostThrough > since)

        // What the replay may cost: the ring entries it scans plus the
        // subscriptions it looks at; cut the scan to what the credit pays for.
        let uid = connection.credentials.uid
        let available = replayCredit(uid: uid)
        let others = connection.subscriptionCount - 1
        if (ring.count - start) + others > available {
            let affordable = ring.count - max(0, available - others)
            if affordable > start {
                start = affordable
                gap = true
            }
        }
        spendReplayCredit(uid: uid, units: others)
        let firstReplayed = start < ring.count ? ring[start].seq : seq + 1
        let replay = PacedReplay(historyOf: subscription)
        if gap { replay.gap = (since, firstReplayed) }
        defer { subscription.offeredFrom = min(subscription.offeredFrom, firstReplayed) }
        guard start < ring.count else { return gap ? replay : nil }

        // Subscriptions that may already have offered some of these events:
        // this one (a repeated subscribe) and up to `maxDeduplicated` others
        // that overlap it and existed before the newest ring event.
        let newest = ring[ring.count - 1].seq
        let matcher = PatternMatcher(subscription.pattern)
        if subscription.offeredFrom <= newest { replay.dedup.append((matcher, subscription.offeredFrom)) }
        for (pattern, other) in connection.subscriptions where other !== subscription && other.offeredFrom <= newest {
            guard replay.dedup.count < Broker.maxDeduplicated + 1 else { break }
            let overlaps = PatternMatcher.mayOverlap(matcher.bytes.span, pattern.text.utf8Span.span)
            if overlaps { replay.dedup.append((PatternMatcher(pattern), other.offeredFrom)) }
        }
        replay.matcher = matcher
        replay.nextSeq = firstReplayed
        replay.endSeq = newest
        replay.sentRetained = sentRetained
        return replay
    }

    /// Sends what it can of `replay` (retained events, or ring events from
    /// its place on): under `wait` (not behind) it stops where the next event
    /// does not fit and keeps its place; otherwise the overflow rule decides
    /// each event, as for live ones. A gap frame goes first where the ring
    /// dropped events before they were sent.
    /// - Returns: whether the replay is done.
    func pump(_ replay: PacedReplay, to connection: Connection) -> Bool {
        var copyUnits = 0
        var delivered: UInt64 = 0
        defer { statistics.delivered += delivered }
        if !replay.isHistory {
            defer { spendReplayCredit(uid: connection.credentials.uid, units: copyUnits) }
            while replay.nextRetained < replay.retained.count {
                let event = replay.retained[replay.nextRetained]
                switch event.frame.withSpan({ offerFlagged($0, .retained, seq: event.seq, to: connection, copyUnits: &copyUnits) }) {
                case .full: return false
                case .queued: delivered += 1
                case .dropped: break
                }
                replay.nextRetained += 1
                if !connection.isRoutable { return true }  // closed under `overflow: disconnect`
            }
            return true
        }
        let ring = retention.history
        if replay.gap == nil, replay.nextSeq <= replay.endSeq, ring.lostThrough >= replay.nextSeq {
            replay.gap = (replay.nextSeq - 1, ring.firstSeq ?? replay.endSeq + 1)  // the ring moved past its place
        }
        if let gap = replay.gap {
            writer.writeReply { out in
                FrameEncoder.appendASCII("{\"op\":\"gap\",\"type\":", to: &out)
                JSONString.appendQuoted(replay.subscription.pattern.text, to: &out)
                FrameEncoder.appendField("since_seq", int: gap.since, to: &out)
                FrameEncoder.appendField("first_seq", int: gap.first, to: &out)
                FrameEncoder.appendASCII("}\n", to: &out)
            }
            enqueue(bytes: writer.scratch, to: connection)
            replay.gap = nil
        }
        guard let matcher = replay.matcher else { return true }
        var checks = 0
        var scanned = 0
        defer { spendReplayCredit(uid: connection.credentials.uid, units: scanned + checks + copyUnits) }
        var i = ring.index(after: replay.nextSeq &- 1)
        while i < ring.count {
            let entry = ring[i]
            guard entry.seq <= replay.endSeq else { break }
            scanned += 1
            i += 1
            if replayedEventSkipped(entry, replay, matcher, connection, checks: &checks) {
                replay.nextSeq = entry.seq + 1
                continue
            }
            switch entry.withFrame({ offerFlagged($0, .replayed, seq: entry.seq, to: connection, copyUnits: &copyUnits) }) {
            case .full: return false
            case .queued: delivered += 1
            case .dropped: break
            }
            replay.nextSeq = entry.seq + 1
            if !connection.isRoutable { return true }  // closed under `overflow: disconnect`
        }
        return true
    }

    /// Whether a ring entry is not for this replay: another type, the
    /// connection's own event without echo, denied by the policy, or offered
    /// already (by another subscription, or as a retained event).
    private func replayedEventSkipped(_ entry: HistoryEntry, _ replay: PacedReplay, _ matcher: PatternMatcher, _ connection: Connection, checks: inout Int) -> Bool {
        entry.withTypeBytes { type in
            guard matcher.matches(type) else { return true }
            if entry.publisher == connection.id && !connection.echo { return true }  // no echo
            if replay.subscription.isFiltered && !retentionMayReceive(connection, type) { return true }  // the policy
            for earlier in replay.dedup {
                checks += 1
                if entry.seq >= earlier.from && earlier.matcher.matches(type) { return true }
            }
            return !replay.sentRetained.isEmpty && replay.sentRetained.contains(entry.seq)
        }
    }

    /// The events `replay` would still send (for the `dropped` notice of a
    /// replay cut short): how many, and the first one's seq.
    func unsentEvents(of replay: PacedReplay, to connection: Connection) -> (count: UInt64, first: UInt64) {
        if !replay.isHistory {
            let left = replay.retained[replay.nextRetained...]
            return (UInt64(left.count), left.map(\.seq).min() ?? 0)
        }
        guard let matcher = replay.matcher else { return (0, 0) }
        let ring = retention.history
        var count: UInt64 = 0
        var first: UInt64 = 0
        var checks = 0
        var i = ring.index(after: replay.nextSeq &- 1)
        while i < ring.count, ring[i].seq <= replay.endSeq {
            let entry = ring[i]
            i += 1
            if replayedEventSkipped(entry, replay, matcher, connection, checks: &checks) { continue }
            if first == 0 { first = entry.seq }
            count += 1
        }
        spendReplayCredit(uid: connection.credentials.uid, units: Int(count) + checks)
        return (count, first)
    }

    // MARK: Credit

    /// What copying a replayed or retained frame of `bytes` costs in replay
    /// credit, beyond the unit its entry already costs: one unit per 64 bytes
    /// past the first 256 (copying 64 bytes costs about what examining an
    /// entry does, 10 ns). So a replay's cost follows the bytes it copies,
    /// not only the entries it looks at: a 16 MiB ring of 64 KiB events is
    /// 257 entries but 16 MiB of copying (up to `--max-outbound` per
    /// `subscribe`), about 262,000 units.
    static func replayUnits(copying bytes: Int) -> Int { max(0, bytes - 256) / 64 }

    /// The units `uid` may spend now: its credit refilled for the time since
    /// it was last used, up to the burst (`RetentionConfiguration`).
    func replayCredit(uid: UInt32) -> Int {
        let limits = configuration.retention
        guard let credit = retention.replayCredit[uid] else { return limits.replayBurstUnits }
        let elapsed = max(0, now.monotonicNanoseconds - credit.updated)
        let refill = elapsed >= 1_000_000_000 * 64 ? limits.replayBurstUnits
            : Int(elapsed) / 1_000 * limits.replayUnitsPerSecond / 1_000_000
        return min(limits.replayBurstUnits, credit.units + refill)
    }

    /// Takes `units` from `uid`'s credit.
    /// - Parameter allowDebt: when false, nothing is taken unless the credit covers it.
    /// - Returns: whether the units were taken.
    @discardableResult
    func spendReplayCredit(uid: UInt32, units: Int, allowDebt: Bool = true) -> Bool {
        let available = replayCredit(uid: uid)
        guard allowDebt || units <= available else { return false }
        let left = available - units
        if left >= configuration.retention.replayBurstUnits {
            retention.replayCredit[uid] = nil  // full again: forget the uid
        } else {
            retention.replayCredit[uid] = ReplayCredit(units: left, updated: now.monotonicNanoseconds)
        }
        return true
    }
}
