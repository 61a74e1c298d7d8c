// The reconnect delay: exponential from `initial` to `maximum`, with jitter,
// and no attempt limit at all. Giving up after N attempts (nats.go's default
// MaxReconnect of 60) is the usual cause of bridges that silently stop
// (nats-io/nats.go#181; DESIGN-NOTES-1.1 A.3), so there is no such setting.
//
// Before editing: the delay is applied after a full pass over the server pool
// has failed (as nats.go's `doReconnect` does), never between the servers of
// one pass, so failing over to a live node is immediate.

/// Jittered exponential backoff: after `n` failed passes the ceiling is
/// `min(maximum, initial × 2^(n-1))` and the delay is drawn from
/// `ceiling × (1 - jitter) ..< ceiling` ("equal jitter" with `jitter` 0.5).
package struct Backoff: Equatable, Sendable {
    /// Ceiling after the first failed pass (default 250 ms).
    package var initial: Duration
    /// Largest ceiling (default 30 s).
    package var maximum: Duration
    /// Fraction of the ceiling taken off at random, 0...1 (default 0.5).
    package var jitter: Double

    /// - Precondition: `initial` > 0, `maximum` ≥ `initial`, 0 ≤ `jitter` ≤ 1.
    package init(initial: Duration = .milliseconds(250), maximum: Duration = .seconds(30), jitter: Double = 0.5) {
        precondition(initial > .zero && maximum >= initial && jitter >= 0 && jitter <= 1, "bad backoff bounds")
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
    }

    /// The ceiling after `failedPasses` (≥ 1) consecutive failed passes, in nanoseconds.
    package func ceilingNanoseconds(afterFailedPasses failedPasses: Int) -> Int64 {
        let initialNS = initial.nanoseconds
        let maximumNS = maximum.nanoseconds
        let doublings = max(0, failedPasses - 1)
        guard doublings < 62 else { return maximumNS }
        let (value, overflow) = initialNS.multipliedReportingOverflow(by: Int64(1) << doublings)
        return overflow ? maximumNS : min(value, maximumNS)
    }

    /// The delay in nanoseconds after `failedPasses` failed passes.
    /// - Parameter random: a value in 0..<1 (`SplitMix64.unit()`).
    package func delayNanoseconds(afterFailedPasses failedPasses: Int, random: Double) -> Int64 {
        let ceiling = Double(ceilingNanoseconds(afterFailedPasses: failedPasses))
        return Int64(ceiling * (1 - jitter * min(max(random, 0), 1)))
    }
}

extension Duration {
    /// This duration in whole nanoseconds (clamped to Int64).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return whole &+ attoseconds / 1_000_000_000
    }
}
