// Giving memory back to the system when what the broker holds falls
// (issue 20, "memory counted as allocated"; docs/PROTOCOL-NOTES.md "Quotas
// (1.1)"): glibc keeps freed blocks in its heap, so after a burst of large
// queues, replays or incomplete frames RSS would stay at the peak although
// the quotas count nothing any more. The server watches the bytes the core
// counts (`Broker.countedBytes`) once per loop turn and, when they fell by
// `HeapTrimmer.releaseBytes` from their peak since the last trim, or by half
// of that peak and at least `HeapTrimmer.smallestRelease` (connections that
// went, queues written, frames completed), calls malloc_trim(3), at most
// once per `HeapTrimmer.intervalNanoseconds`; a trim held back by the
// interval is made when it ends (the loop wakes for it). The second rule is
// for a fall spread over several loop turns: 16 connections holding 1 MB
// copies that go over two turns gave 8 MB back after the first trim, which
// never reached `releaseBytes` again, so RSS stayed 8 MB above what the
// core counted (seen as a test failing under load).
//
// Before editing: a trim walks glibc's free lists and madvises the free
// pages away, and the kernel's freeing of the pages is most of its cost:
// measured 0.8 ms after 200 incomplete 1 MiB frames went, 21 ms after 64 MiB
// of 1 MiB retained copies went (16,000 pages), on the loaded 2-CPU machine
// (docs/RELIABILITY.md "Memory counted as allocated"). It runs only after
// such a fall and at most once a second, so its share of the loop stays
// about 2 % at worst. Nothing here changes what the core counts.
import EventBusCore
import EventBusSystem

/// When to give freed heap memory back: after the counted bytes fell by
/// `releaseBytes` from their peak, or by half the peak and at least
/// `smallestRelease`, at most once per `intervalNanoseconds`.
package struct HeapTrimmer {
    /// A fall of the counted bytes that is worth a trim (8 MiB).
    package static let releaseBytes = 8 << 20
    /// The smallest fall worth a trim when it is half the peak or more (1 MiB).
    package static let smallestRelease = 1 << 20
    /// The shortest time between two trims, ns (1 s).
    package static let intervalNanoseconds: Int64 = 1_000_000_000

    /// The most the core counted since the last trim.
    package var peak = 0
    package var lastTrimAt: Int64? = nil
    /// A trim waits for the interval to end: when it may be made (monotonic ns).
    package private(set) var dueAt: Int64? = nil

    package init() {}

    /// Records what the core counts now.
    /// - Returns: whether to trim now.
    package mutating func observe(counted: Int, now: Int64) -> Bool {
        if counted > peak { peak = counted }
        let fall = peak - counted
        guard fall >= HeapTrimmer.releaseBytes || (fall >= HeapTrimmer.smallestRelease && fall * 2 >= peak) else {
            dueAt = nil
            return false
        }
        if let last = lastTrimAt, now - last < HeapTrimmer.intervalNanoseconds {
            dueAt = last + HeapTrimmer.intervalNanoseconds
            return false
        }
        peak = counted
        lastTrimAt = now
        dueAt = nil
        return true
    }
}

extension BrokerServer {
    /// Once per loop turn (from `checkTimers`): trims the heap when the
    /// counted bytes fell enough (see the header).
    func trimHeapIfReleased(now: Int64) {
        guard heapTrimmer.observe(counted: broker.countedBytes, now: now) else { return }
        Heap.trim()
        if logger.enabled(.debug) {
            let took = clock.monotonic() - now
            logger.debug("gave freed heap memory back (malloc_trim, \(took / 1000) µs; \(broker.countedBytes) bytes counted)")
        }
    }
}
