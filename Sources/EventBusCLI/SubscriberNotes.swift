// The notes a subscriber command (`listen`, `wait`, `get`) writes on standard
// error while it keeps going: events the broker dropped, a gap in the
// history, `--since` ahead of the broker. Texts only; the command prints them.
//
// Before editing: tests and users read these lines (docs/CLI.md); change the
// words only with the tests that quote them.
import EventBusSession

package enum SubscriberNotes {
    /// For a `dropped` notice.
    package static func dropped(count: UInt64, sinceSeq: UInt64) -> String {
        "the broker dropped \(count) event\(count == 1 ? "" : "s") for this listener, starting at seq \(sinceSeq) (reading too slowly)"
    }

    /// For a `gap` frame (1.1): what may have been missed.
    /// - Parameter instance: the broker run answering (from `hello`), if known.
    package static func gap(_ gap: SessionGap, instance: String?) -> String {
        if let old = gap.previousRun, let instance {
            return "the broker restarted (run \(old.instance ?? "?"), seq \(old.seq), is now run \(instance)); events of '\(gap.pattern)' published in between may have been missed, replaying this run's from seq \(gap.firstSeq)"
        }
        return "the broker's history no longer reaches back to seq \(gap.sinceSeq + 1); events of '\(gap.pattern)' from seq \(gap.sinceSeq + 1) to \(gap.firstSeq - 1) may have been missed"
    }

    /// When `--since SEQ` is beyond the broker's newest seq: nothing is
    /// replayed, and new events print as they come.
    package static func sinceAhead(asked: UInt64, newest: UInt64) -> String {
        "--since \(asked) is ahead of the broker: its newest event is seq \(newest), so nothing is replayed; events print as they are published (seqs start again at 1 when the broker restarts: was \(asked) from an earlier run?)"
    }
}
