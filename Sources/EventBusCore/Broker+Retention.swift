// Retained events (PROTOCOL.md "Retained events and history (1.1)",
// "Quotas (1.1)"): keeping the event of a `publish` with `retain: true`,
// `clear`, the retained events sent after a `subscribe` with `last: true`,
// and the snapshot the server writes to the state file. The history ring and
// `since` replays are in Broker+History.swift; the state file's format in
// RetainedStateFile.swift.
//
// Before editing: the limits are the quotas' (UserAccounts.swift:
// `retainedLimitError`, `chargeRetained`, `releaseRetained`; 65,536 events
// and 64 MiB in all, 1/8 of the bytes per uid, `--max-retained...`): every
// retained event is charged to its publisher's uid while it is kept, and
// only `retain` and `clear` change the store. The access policy is asked
// through `retentionMayReceive` (its `mayReceive`, only for filtered
// subscriptions, as live routing does) and `mayPublish` (`clear`). A
// retained event is refused before the publish takes a seq, so an error
// reply always means nothing happened.
@_spi(Package) import EventBusProtocol

/// Bounds of retention and history (PROTOCOL.md "Quotas (1.1)", "Retained
/// events and history (1.1)").
package struct RetentionConfiguration: Sendable {
    /// Events in the history ring (`--history-events`, default 10,000; 0 turns it off).
    package var historyEvents = 10_000
    /// Bytes of event frames in the history ring (`--history-bytes`, default 16 MiB; 0 turns it off).
    package var historyBytes = 16 << 20
    /// Replay work a uid may spend at once, in entries examined (ring or
    /// retained entries, subscriptions, de-duplication checks; each costs
    /// about 10 ns), and how much comes back per second. See
    /// docs/PROTOCOL-NOTES.md "Retained events and history".
    package var replayBurstUnits = 4 << 20
    package var replayUnitsPerSecond = 1 << 20

    package init() {}
}

/// What the broker keeps besides connections: retained events, the history
/// ring, and the bookkeeping of both (one stored property of `Broker`).
struct RetentionState {
    var retained = RetainedStore()
    var history: HistoryRing
    /// Replay credit per uid (see Broker+History.swift).
    var replayCredit: [UInt32: ReplayCredit] = [:]
    /// Seqs 1...restoredThrough were given to events restored from the state file.
    var restoredThrough: UInt64 = 0

    init(_ configuration: RetentionConfiguration) {
        history = HistoryRing(maxEvents: configuration.historyEvents, maxBytes: configuration.historyBytes)
    }
}

/// A copy of the retained events for the state file writer: the frames are
/// immutable and only read, so handing them to another thread is safe.
package struct RetainedSnapshot: @unchecked Sendable {
    /// `(seq, frame)` in no particular order (the writer sorts them).
    package let events: [(seq: UInt64, frame: OutboundChunk)]
    /// `Broker.retainedGeneration` when it was taken.
    package let generation: UInt64
}

/// The changes of the retained events since the state file was last
/// written, as lines to append (immutable frames, safe to hand over).
package struct RetainedChanges: @unchecked Sendable {
    /// Each one line with its LF: an event frame, or a clear line.
    package let lines: [OutboundChunk]
    /// `Broker.retainedGeneration` when they were taken.
    package let generation: UInt64
}

extension Broker {
    // MARK: Access

    /// Whether the access policy lets `connection` receive events of the
    /// type whose bytes are `type` (`last` and `since` replays through a
    /// filtered subscription ask it; an unfiltered one may receive every
    /// type it matches): `mayReceive` (Broker+Policy.swift).
    func retentionMayReceive(_ connection: Connection, _ type: RawSpan) -> Bool {
        guard let eventType = EventType(String(decodingUTF8: type)) else { return false }
        return mayReceive(connection, eventType)
    }

    // MARK: Publish with retain

    /// The quota charge of a retained event: its publisher's uid and the
    /// bytes of its frame.
    func retainedCharge(_ event: RetainedEvent) -> RetainedCharge {
        RetainedCharge(uid: event.uid, bytes: event.frame.count)
    }

    /// Keeps `frame` as the retained event of `type` (replacing the one there),
    /// published by `uid` with `seq`, if the quotas allow (PROTOCOL.md "Quotas
    /// (1.1)"). Called before the publish takes `seq`.
    /// - Returns: the `limit` error to answer with (nothing kept), or nil.
    func retain(_ frame: OutboundChunk, seq: UInt64, type: String, uid: UInt32) -> ProtocolError? {
        let event = RetainedEvent(seq: seq, type: type, frame: frame, uid: uid)
        let old = retention.retained[type]
        if let error = retainedLimitError(for: retainedCharge(event), replacing: old.map(retainedCharge)) {
            return ProtocolError(.limit, error.message + "; nothing kept")
        }
        if let old { releaseRetained(retainedCharge(old)) }
        chargeRetained(retainedCharge(event))
        retention.retained.put(event)
        return nil
    }

    // MARK: clear

    /// `clear`: removes the retained event of `type`. `ok` carries `type` and
    /// `removed`: `{"op":"ok","req":5,"type":"currency.changed","removed":true}`.
    /// Needs publish permission for the type (`mayPublish` answers `forbidden`).
    func clear(_ type: EventType, req: RawSpan?, from connection: Connection) {
        guard mayPublish(connection, type, req: req) else { return }
        let removed = retention.retained.remove(type.name, seq: seq)
        if let removed { releaseRetained(retainedCharge(removed)) }
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: type.name, to: &out)
            FrameEncoder.appendField("removed", bool: removed != nil, to: &out)
        }
    }

    // MARK: subscribe with last

    /// The retained events `pattern` matches that `connection` may receive,
    /// in seq order; charged to the uid's replay credit.
    /// - Parameter filtered: the subscription is (or will be) marked filtered:
    ///   ask the policy for each type.
    /// - Returns: nil when the uid's replay credit cannot pay for the search,
    ///   or is spent (in debt) for an exact pattern (answer `limit`).
    func retainedMatches(_ pattern: Pattern, for connection: Connection, filtered: Bool) -> [RetainedEvent]? {
        guard pattern.hasWildcards else {
            guard let event = retention.retained[pattern.text] else { return [] }
            guard !filtered || withUTF8(event.type, { retentionMayReceive(connection, $0) }) else { return [] }
            // No search to pay for, but the copy is: a uid in debt from
            // copying (sendRetained) waits like one out of credit.
            return replayCredit(uid: connection.credentials.uid) > 0 ? [event] : nil
        }
        guard spendReplayCredit(uid: connection.credentials.uid, units: retention.retained.count, allowDebt: false) else { return nil }
        let matcher = PatternMatcher(pattern)
        var found: [RetainedEvent] = []
        for event in retention.retained.events.values {
            let take = withUTF8(event.type) { matcher.matches($0) && (!filtered || retentionMayReceive(connection, $0)) }
            if take { found.append(event) }
        }
        found.sort { $0.seq < $1.seq }
        return found
    }

    // MARK: The state file

    /// Goes up with every change of the retained events (the server writes
    /// the state file when it differs from what it last wrote).
    package var retainedGeneration: UInt64 { retention.retained.generation }

    /// Bytes of the retained event frames now.
    package var retainedBytes: Int { retention.retained.byteCount }

    /// The retained events now, for the state file writer (a whole rewrite;
    /// the list of changes starts again). O(retained events).
    package func retainedSnapshot() -> RetainedSnapshot {
        _ = retention.retained.takeChanges()
        let events = retention.retained.events.values.map { (seq: $0.seq, frame: $0.frame) }
        return RetainedSnapshot(events: events, generation: retention.retained.generation)
    }

    /// The changes since the last snapshot or call, as lines to append to
    /// the state file (`RetainedStateFile`), in the order they happened; nil
    /// when they outgrew the retained events themselves (write a snapshot).
    /// O(changes).
    package func takeRetainedChanges() -> RetainedChanges? {
        guard let changes = retention.retained.takeChanges() else { return nil }
        let lines = changes.map { change -> OutboundChunk in
            switch change {
            case .put(let event): event.frame
            case .clear(let type, let seq): RetainedStateFile.clearLine(type: type, seq: seq)
            }
        }
        return RetainedChanges(lines: lines, generation: retention.retained.generation)
    }

    /// Restores retained events read from a state file (`RetainedStateFile`)
    /// before the broker serves anyone: each gets a new seq, in their old
    /// order, and keeps every other field. Events over the limits are left out.
    /// - Returns: how many were restored, and the problems found (to log).
    package func restoreRetained(fromStateFile bytes: RawSpan) -> RetainedStateFile.Report {
        restoreRetained(RetainedStateFile.read(bytes))
    }

    /// `restoreRetained(fromStateFile:)` for a file read in pieces
    /// (`RetainedStateFile.Reader`'s report).
    package func restoreRetained(_ read: RetainedStateFile.Report) -> RetainedStateFile.Report {
        precondition(seq == 0 && connections.isEmpty, "retained events are restored before the broker serves")
        var report = read
        for event in report.events {
            if let error = retain(event.frame.withSeq(seq + 1), seq: seq + 1, type: event.type, uid: event.uid) {
                report.problems.append("left out the retained \(event.type): \(error.message)")
                continue
            }
            seq += 1
            report.restored += 1
        }
        retention.restoredThrough = seq
        report.events = []
        return report
    }

    /// `stats` fields (1.1): `,"retained":N,"retained_bytes":B,"history_first_seq":F,"history_events":E`.
    /// `retained` and `retained_bytes` count the retained events `connection`
    /// may receive (all of them for uid 0, the broker's uid, or a policy that
    /// lets it receive every type); they are left out when its replay
    /// credit cannot pay for looking at each one (PROTOCOL-NOTES.md).
    func appendRetentionStats(for connection: Connection, to out: inout [UInt8]) {
        if let (count, bytes) = visibleRetained(for: connection) {
            FrameEncoder.appendField("retained", int: UInt64(count), to: &out)
            FrameEncoder.appendField("retained_bytes", int: UInt64(bytes), to: &out)
        }
        FrameEncoder.appendField("history_first_seq", int: retention.history.firstSeq ?? (seq + 1), to: &out)
        FrameEncoder.appendField("history_events", int: UInt64(retention.history.count), to: &out)
    }

    /// The retained events `connection` may receive: how many, their bytes.
    /// Counting another uid's events of a type it may not receive told it
    /// the secret's length (docs/RELIABILITY.md "Attack round 2"). nil when
    /// its replay credit cannot pay for the search (one unit per event).
    func visibleRetained(for connection: Connection) -> (count: Int, bytes: Int)? {
        let store = retention.retained
        if isPrivileged(connection.credentials.uid) || store.count == 0 { return (store.count, store.byteCount) }
        if case .allowed = connection.policy.subscribe(Broker.everyType) { return (store.count, store.byteCount) }
        guard spendReplayCredit(uid: connection.credentials.uid, units: store.count, allowDebt: false) else { return nil }
        var count = 0, bytes = 0
        for event in store.events.values where withUTF8(event.type, { retentionMayReceive(connection, $0) }) {
            count += 1
            bytes += event.frame.count
        }
        return (count, bytes)
    }

    /// `>`: every type.
    static let everyType = Pattern(">")!

    /// The `hello` features this file's work adds: `retain`, and `history`
    /// while the ring is on.
    var retentionFeatures: [String] {
        retention.history.isEnabled ? ["retain", "history"] : ["retain"]
    }
}

/// What became of a replayed or retained copy `offerFlagged` offered.
enum ReplayOffer {
    case queued, dropped
    /// (1.2) It does not fit yet under `wait`: nothing queued, nothing dropped.
    case full
}

/// The flag a replayed or retained copy of an event carries.
enum ReplayFlag {
    /// `"retained":true`: sent after a `subscribe` with `last`.
    case retained
    /// `"replayed":true`: sent from the history after a `subscribe` with `since`.
    case replayed
}

extension Broker {
    /// Offers a copy of the event frame `bytes` with `,"retained":true` or
    /// `,"replayed":true` added before its final `}`: written into
    /// `writer.eventScratch` and copied into the queue's chunk like a live event, or
    /// into a chunk of its own when larger than `OutboundQueue.copyLimitBytes`.
    /// Outside every fair share (the subscriber asked for it). A copy that
    /// cannot fit and may not make room (drop-new, disconnect) is refused
    /// before anything is copied, so a replay into a full queue costs no
    /// copying; the credit units of what is copied are added to `copyUnits`
    /// (the replay credit pays for them, see `replayUnits(copying:)`).
    /// (1.2) Under `wait`, a copy that does not fit is not dropped but
    /// answered `.full` (the paced replay keeps its place), unless the
    /// connection is behind, its queue is empty (it would never fit) or the
    /// limit is --max-queued's.
    func offerFlagged(_ bytes: RawSpan, _ flag: ReplayFlag, seq: UInt64, to connection: Connection, copyUnits: inout Int) -> ReplayOffer {
        let suffix: StaticString = flag == .retained ? ",\"retained\":true}\n" : ",\"replayed\":true}\n"
        let keep = bytes.byteCount - 2  // without `}\n`
        let size = keep + suffix.utf8CodeUnitCount
        if connection.overflow != .dropOld,
           let refusal = refusal(size: size + OutboundQueue.entryOverheadBytes, actor: OutboundQueue.noActor, connection: connection) {
            if connection.overflow == .wait && !connection.flow.behind && !connection.outbound.isEmpty && refusal != .total { return .full }
            refuse(connection, refusal, seq: seq)
            return .dropped
        }
        copyUnits += Broker.replayUnits(copying: size)
        let copy = writer.flaggedCopy(of: bytes, suffix: suffix)
        let queued = withExtendedLifetime(copy.chunk) { offer(copy.frame, seq: seq, publisher: configuration.ownCredentials.uid, to: connection) }
        return queued ? .queued : .dropped
    }
}

/// Calls `body` with the UTF-8 bytes of `text`.
@inline(__always)
func withUTF8<R>(_ text: String, _ body: (RawSpan) -> R) -> R {
    body(text.utf8Span.span.bytes)
}
