// Where a client has got to in the broker's sequence (PROTOCOL.md "Retained
// events and history (1.1)"), the one position the library, the CLI and the
// bridge resume from: a reconnect subscribes each covered pattern with
// `since` and `instance`, so nothing the history still holds is lost.
//
// Before editing: a reconnect always names the last run's `instance` with
// `since`, so the broker decides: the same run replays after `since`; a new
// run (the broker restarted: history is per run) sends a `gap` (`since_seq`
// 0) and replays its whole ring, i.e. what was published on it before the
// client was back. `seq` is the highest seq of any event (or publish `ok`)
// taken on a connection of that run: the broker routes in seq order into
// one queue per connection, so every matching event up to it has been read
// (or announced lost by a `dropped` frame). Retained events never move it.

/// A position: every matching event up to `seq` of broker run `instance`
/// has been handled. `instance` nil: a bare `--since SEQ` of no known run.
package struct StreamPosition: Equatable, Hashable, Sendable {
    package var instance: String?
    package var seq: UInt64

    package init(instance: String?, seq: UInt64) {
        self.instance = instance
        self.seq = seq
    }
}

/// The session's position and which patterns it covers.
struct PositionTracker {
    /// The broker run of `seq` (nil before the first `hello` reply, or a bare `--since`).
    private(set) var instance: String?
    private(set) var seq: UInt64 = 0
    /// Whether `since` is sent at all: once a `hello` named a run, or a
    /// starting position was given.
    private(set) var known = false
    /// Patterns whose events up to `seq` were offered to this client:
    /// subscribed and acknowledged, or given with the starting position.
    var covered: Set<String> = []
    /// The run and position before the latest `hello` reply, when that reply
    /// named a new run (the broker restarted); nil otherwise.
    private(set) var previous: StreamPosition?
    /// The position moved since `moved` was last cleared.
    var moved = false

    var position: StreamPosition { StreamPosition(instance: instance, seq: seq) }

    /// Starts from `position` for `patterns` (`listen --since`, `--resume`).
    mutating func start(at position: StreamPosition, covering patterns: [String]) {
        instance = position.instance
        seq = position.seq
        known = true
        covered = Set(patterns)
    }

    /// The `hello` reply named run `instance`: a new one resets the position
    /// (its seqs start again), after the subscribes already asked for the old one.
    mutating func greeted(instance: String) {
        guard instance != self.instance else {
            previous = nil
            return
        }
        previous = self.instance.map { StreamPosition(instance: $0, seq: seq) }
        self.instance = instance
        seq = 0
        known = true
        moved = true
    }

    /// An event (or a publish `ok`) of `seq` was taken.
    @inline(__always)
    mutating func saw(_ seq: UInt64) {
        if seq > self.seq {
            self.seq = seq
            moved = true
        }
    }

    /// Goes back to `position` (nil: none known), the one a connection lost
    /// before its replays were over had asked for: nothing was handed on meanwhile.
    mutating func restore(_ position: StreamPosition?) {
        instance = position?.instance
        seq = position?.seq ?? 0
        known = position != nil
        previous = nil
    }

    /// `since` and `instance` for a subscribe of `pattern`; nil: subscribe plainly.
    func since(for pattern: String) -> StreamPosition? {
        known && covered.contains(pattern) ? position : nil
    }
}
