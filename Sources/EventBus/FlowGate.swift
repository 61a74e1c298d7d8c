// The shared, locked `DeliveryLedger` of one bus: sinks count what they
// queue and what their consumer takes; the reader thread asks it before
// each read whether the queues have room, and waits when they do not.
//
// Before editing: the gate's lock is a leaf (nothing else is locked inside
// it), and its callers may hold the state lock or none. The wake-up and the
// loss notices are performed after unlocking.
import Dispatch
import EventBusSystem

/// One bus's flow gate (see DeliveryLedger.swift for the rules).
final class FlowGate: Sendable {
    let ledger: Locked<DeliveryLedger>
    /// The reader thread's semaphore (`BusCore.wake`), signalled when room returns.
    let wake: DispatchSemaphore
    /// Where loss notices go (`BusCore.post`); set once the core exists.
    let noticeTarget = Locked<(@Sendable (BusNotice) -> Void)?>(nil)

    /// - Parameters:
    ///   - maxEvents, maxBytes: the bus's buffer (`Configuration.bufferLimit`, `bufferLimitBytes`).
    ///   - stallTimeout: `Configuration.localStallTimeout`.
    ///   - wake: the reader's semaphore.
    init(maxEvents: Int, maxBytes: Int, stallTimeout: Duration, wake: DispatchSemaphore) {
        let (seconds, attoseconds) = stallTimeout.components
        let nanoseconds = seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
        self.ledger = Locked(DeliveryLedger(maxEvents: maxEvents, maxBytes: maxBytes, stallNanoseconds: nanoseconds))
        self.wake = wake
    }

    /// A gate that never fills, for sinks made outside a bus (tests).
    static func unbounded() -> FlowGate {
        FlowGate(maxEvents: .max, maxBytes: .max, stallTimeout: .seconds(3600), wake: DispatchSemaphore(value: 0))
    }

    /// Counts an event for `sink` on `pattern`, or says to drop it (behind).
    func admit(_ sink: ObjectIdentifier, pattern: String, cost: Int, seq: UInt64) -> DeliveryLedger.Admission {
        let now = Clock.monotonicNanoseconds()
        return ledger.withLock { $0.admit(sink, pattern: pattern, cost: cost, seq: seq, now: now) }
    }

    /// `sink`'s consumer took an event of `cost` bytes.
    func took(_ sink: ObjectIdentifier, cost: Int) {
        let now = Clock.monotonicNanoseconds()
        let (wakeReader, loss) = ledger.withLock { $0.took(sink, cost: cost, now: now) }
        settle(wakeReader, loss)
    }

    /// `sink` ended: its queue stops counting.
    func close(_ sink: ObjectIdentifier) {
        let (wakeReader, loss) = ledger.withLock { $0.close(sink) }
        settle(wakeReader, loss)
    }

    private func settle(_ wakeReader: Bool, _ loss: LocalLoss?) {
        if wakeReader { wake.signal() }
        if let loss, let target = noticeTarget.withLock({ $0 }) { target(loss.notice) }
    }

    /// Called by the reader thread before each read.
    /// - Returns: nil when it may read; otherwise how long to wait at most
    ///   (ms) before asking again (a stall deadline may pass meanwhile).
    func readerWait(longest: Int32) -> Int32? {
        let now = Clock.monotonicNanoseconds()
        return ledger.withLock { ledger -> Int32? in
            guard ledger.readerMustWait() else { return nil }
            guard let next = ledger.markStalled(now: now) else { return ledger.readerWaiting ? longest : nil }
            let milliseconds = max(1, (next - now + 999_999) / 1_000_000)
            return Int32(min(Int64(longest), milliseconds))
        }
    }
}
