// Where the bridge's export side has got to in the local broker's sequence,
// so that a new bus connection resumes with `since` (PROTOCOL.md "Retained
// events and history (1.1)") and the exports published while the bridge was
// away, still in the broker's history ring, are not lost.
//
// Before editing: the resubscribe always names the last run's `instance`, so
// the broker decides: the same run replays after `lastSeq`; a new run (the
// broker restarted: history is per run) answers with a `gap` frame
// (`since_seq` 0) and replays its whole ring, i.e. what was published on it
// before the bridge was back. `lastSeq` is the highest seq of any event read
// on a connection of that run: the broker routes in seq order, so every
// matching event up to it was read (or announced lost by a `dropped` frame).
// The first connection of a bridge process subscribes without `since`: a
// bridge that starts exports what happens from then on.

/// One bridge process's position in the local broker's sequence.
public struct BusPosition: Equatable, Sendable {
    /// The broker run of `lastSeq` (nil before the first `hello` reply).
    public private(set) var instance: String?
    /// The highest `seq` read in `instance`'s run (0: none yet).
    public private(set) var lastSeq: UInt64 = 0
    /// The run before the latest `hello` reply's, and how far the bridge had
    /// read in it, when that reply named a new run (the broker restarted); nil otherwise.
    public private(set) var previousRun: String?
    public private(set) var previousLastSeq: UInt64 = 0

    /// The latest `hello` reply named a run other than the one before it.
    public var restarted: Bool { previousRun != nil }

    public init() {}

    /// `since` and `instance` for the export subscribes of a new connection;
    /// nil for the first one (subscribe plainly).
    public var resume: (since: UInt64, instance: String)? {
        instance.map { (lastSeq, $0) }
    }

    /// The `hello` reply named run `instance`: a new run resets the position
    /// (its seqs start again), after the subscribes already asked for the old one.
    public mutating func greeted(instance: String) {
        guard instance != self.instance else {
            previousRun = nil
            return
        }
        previousRun = self.instance
        previousLastSeq = previousRun == nil ? 0 : lastSeq
        self.instance = instance
        lastSeq = 0
    }

    /// An event with `seq` was read on this run's connection.
    @inline(__always)
    public mutating func saw(_ seq: UInt64) {
        if seq > lastSeq { lastSeq = seq }
    }
}
