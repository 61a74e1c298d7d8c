// Keeping retained events across restarts (PROTOCOL.md "Retained events and
// history (1.1)"): `<state-dir>/retained.jsonl` is read once at start-up and
// written whenever the retained events changed, at most every `writeDelay`
// (a burst of retaining publishes costs one write), by a helper thread given
// immutable frames, and once more, synchronously, on the way out (SIGTERM,
// SIGINT, idle exit). A write appends the changes (RetainedStateFile.swift)
// unless the file is not this run's yet or the append would take it past
// twice the retained bytes plus 1 MiB: then it is rewritten whole (a
// compaction). So the bytes written follow the bytes changed (at most about
// twice): rewriting all of up to 64 MiB for each small change let one
// user's trickle of retaining publishes write 40+ MB/s to the disk
// (docs/RELIABILITY.md "Attack round"). The growth a rewrite allows is the
// retained bytes themselves, each charged to its publisher's uid under its
// quota, so the file never exceeds 2 x --max-retained-bytes + 1 MiB; and
// it is read whole at start, whatever its size: checking the size before
// the append, not after, let six uids' republished 1 MiB events grow it
// past the 129 MiB that start-up read, and the cut-off tail (root's newer
// value, a clear) came back as the old value (docs/RELIABILITY.md "Attack
// round 2").
//
// The directory is `StateDirectory`: opened once at start (refused if
// another uid owns it or others may write it), every file reached from its
// fd without following a symlink.
//
// Before editing: why a helper thread rather than bounded chunks on the
// loop: the cost that matters is fsync(2), tens to hundreds of ms on a busy
// disk, which no chunking can split; the loop only takes the snapshot (one
// array of references to the immutable event frames, O(retained events))
// and the helper sorts, writes, fsyncs and renames (DurableFile). One write
// is in flight at a time; a change during it is written after it. A failed
// write (ENOSPC, EIO) is logged once, retried every `retryDelay`, and the
// broker keeps serving; the old file stays intact meanwhile.
import Dispatch
import EventBusCore
import EventBusLog
import EventBusSystem
import Synchronization

/// The state file of one broker: loading, and writing in the background.
final class StatePersistence {
    let directory: String
    let path: String
    /// The opened directory; nil when it could not be used (logged).
    let stateDirectory: StateDirectory?
    let logger: Logger
    /// A change reaches the file within this plus the write itself (ns).
    let writeDelay: Int64 = 250_000_000
    let retryDelay: Int64 = 1_000_000_000

    private let queue = DispatchQueue(label: "eventbusd.state-writer")
    private let outcome = WriteOutcome()
    /// The generation of the retained events the file holds (or the one in flight).
    private var writtenGeneration: UInt64 = 0
    private var inFlight: UInt64? = nil
    /// When the first unwritten change was seen (monotonic ns).
    private var dirtySince: Int64? = nil
    private var retryAt: Int64? = nil
    private var failing = false
    /// The file was rewritten whole in this run (seqs compare only within
    /// one run) and every write since succeeded: changes may be appended.
    private var appendable = false
    /// Bytes in the file, as this run wrote it.
    private var fileBytes = 0
    /// What the write in flight is (`appendable`'s and `fileBytes`' update).
    private var inFlightAppends = false

    /// - Parameter directory: `--state-dir`; created (0700) if missing.
    ///   eventbusd checks it with `StateDirectory.open` before this (exit 78
    ///   on a refusal); a refusal here (a directory replaced meanwhile) is
    ///   logged and the retained events last for the run.
    init(directory: String, logger: Logger) {
        self.directory = directory
        self.path = directory + "/" + RetainedStateFile.fileName
        self.logger = logger
        do {
            stateDirectory = try StateDirectory.open(directory)
        } catch {
            logger.error("\(error); retained events will not survive a restart")
            stateDirectory = nil
        }
    }

    // MARK: Start-up

    /// Creates the directory if needed and restores the retained events of
    /// the file into `broker`. Never fails: what cannot be read is logged.
    func load(into broker: Broker) {
        guard let stateDirectory else { return }
        // The whole file, in pieces: a later line (a newer value, a clear)
        // must never be left unread, or an older value comes back.
        var reader = RetainedStateFile.Reader()
        do {
            guard try stateDirectory.read(RetainedStateFile.fileName, { reader.feed($0) }) else { return }
        } catch {
            logger.warning("failed to read state file \(path): \(error); starting without retained events")
            return
        }
        let report = broker.restoreRetained(reader.finish())
        for problem in report.problems { logger.warning("state file \(path): \(problem)") }
        logger.info("restored \(report.restored) retained event\(report.restored == 1 ? "" : "s") from \(path)")
        writtenGeneration = broker.retainedGeneration
        _ = broker.takeRetainedChanges()  // the restore itself is in the file; the first write is whole anyway
    }

    // MARK: The loop's side

    /// Called from the loop's timer check: starts a write when the retained
    /// events changed `writeDelay` ago and none is in flight; collects the
    /// outcome of the last one.
    func tick(_ broker: Broker, now: Int64) {
        collect(now: now)
        guard inFlight == nil, broker.retainedGeneration != writtenGeneration else {
            if inFlight == nil { dirtySince = nil }
            return
        }
        let since = dirtySince ?? now
        dirtySince = since
        if let retryAt, now < retryAt { return }
        guard now - since >= writeDelay else { return }
        guard let directory = stateDirectory else {
            writtenGeneration = broker.retainedGeneration
            return
        }
        let outcome = self.outcome
        if let changes = appendableChanges(broker) {
            inFlight = changes.generation
            inFlightAppends = true
            queue.async { outcome.store(StatePersistence.append(changes, to: directory)) }
        } else {
            let snapshot = broker.retainedSnapshot()
            inFlight = snapshot.generation
            inFlightAppends = false
            queue.async { outcome.store(StatePersistence.write(snapshot, to: directory)) }
        }
    }

    /// The changes to append, or nil when the file must be rewritten whole.
    /// The file after the append stays within `2 * retainedBytes + 1 MiB`
    /// (the retained bytes now, which the quotas bound); a whole rewrite
    /// holds the retained bytes and the header, so the file never exceeds
    /// `2 * --max-retained-bytes + 1 MiB`.
    private func appendableChanges(_ broker: Broker) -> RetainedChanges? {
        guard appendable, fileBytes <= StatePersistence.growthLimit(retainedBytes: broker.retainedBytes),
              let changes = broker.takeRetainedChanges() else { return nil }
        let appended = changes.lines.reduce(0) { $0 + $1.count }
        return fileBytes + appended <= StatePersistence.growthLimit(retainedBytes: broker.retainedBytes) ? changes : nil
    }

    /// The most the file may hold before it is rewritten whole.
    static func growthLimit(retainedBytes: Int) -> Int { 2 * retainedBytes + (1 << 20) }

    /// When the loop must call `tick` next (monotonic ns), nil when nothing is pending.
    func nextDeadline(_ broker: Broker, now: Int64) -> Int64? {
        if inFlight != nil { return now + 20_000_000 }  // poll for the outcome
        guard broker.retainedGeneration != writtenGeneration else { return nil }
        let due = (dirtySince ?? now) + writeDelay
        return max(due, retryAt ?? due)
    }

    /// On the way out: waits for a write in flight, then writes what changed since.
    /// - Parameter now: the server's monotonic time (ServerClock.swift).
    func finish(_ broker: Broker, now: Int64) {
        queue.sync {}
        collect(now: now)
        guard broker.retainedGeneration != writtenGeneration, let directory = stateDirectory else { return }
        let result: Result<Int, SystemError>
        if let changes = appendableChanges(broker) {
            result = StatePersistence.append(changes, to: directory)
        } else {
            result = StatePersistence.write(broker.retainedSnapshot(), to: directory)
        }
        if case .failure(let error) = result {
            logger.error("failed to write state file \(path): \(error); the retained events changed since the last write are lost")
        } else {
            writtenGeneration = broker.retainedGeneration
        }
    }

    private func collect(now: Int64) {
        guard let generation = inFlight, let result = outcome.take() else { return }
        inFlight = nil
        switch result {
        case .success(let bytes):
            writtenGeneration = generation
            fileBytes = inFlightAppends ? fileBytes + bytes : bytes
            appendable = true
            retryAt = nil
            dirtySince = nil
            if failing {
                failing = false
                logger.notice("wrote state file \(path) again")
            }
        case .failure(let error):
            // The changes taken are lost to the file (and an append may have
            // left part of a line): the next write is a whole one.
            appendable = false
            retryAt = now + retryDelay
            if !failing {
                failing = true
                logger.warning("failed to write state file \(path): \(error); retrying every \(retryDelay / 1_000_000_000) s")
            }
        }
    }

    // MARK: The helper's side

    /// Sorts and writes a snapshot (header, then each frame): one
    /// `StateDirectory.replace`. Runs on the helper thread (or at exit).
    /// - Returns: the bytes of the file, or the error.
    static func write(_ snapshot: RetainedSnapshot, to directory: StateDirectory) -> Result<Int, SystemError> {
        let blocks = StatePersistence.blocks(RetainedStateFile.orderedFrames(snapshot), after: RetainedStateFile.header)
        do {
            try directory.replace(RetainedStateFile.fileName, with: blocks)
            return .success(blocks.reduce(0) { $0 + $1.count })
        } catch {
            return .failure(error)
        }
    }

    /// Appends the lines of `changes`: one `StateDirectory.append`.
    /// - Returns: the bytes appended, or the error.
    static func append(_ changes: RetainedChanges, to directory: StateDirectory) -> Result<Int, SystemError> {
        let blocks = StatePersistence.blocks(changes.lines, after: [])
        do {
            try directory.append(RetainedStateFile.fileName, blocks)
            return .success(blocks.reduce(0) { $0 + $1.count })
        } catch {
            return .failure(error)
        }
    }

    /// The lines copied into ~1 MiB blocks, so the file takes few write(2)s.
    private static func blocks(_ lines: [OutboundChunk], after first: [UInt8]) -> [[UInt8]] {
        var blocks: [[UInt8]] = [first]
        for line in lines {
            if blocks[blocks.count - 1].count + line.count > 1 << 20 { blocks.append([]) }
            blocks[blocks.count - 1].append(contentsOf: line.bytes)
        }
        return blocks
    }
}

/// The helper thread's result, handed to the loop.
private final class WriteOutcome: Sendable {
    private let slot = Mutex<Result<Int, SystemError>?>(nil)

    func store(_ result: Result<Int, SystemError>) { slot.withLock { $0 = result } }

    func take() -> Result<Int, SystemError>? { slot.withLock { value in defer { value = nil }; return value } }
}
