// Clock readings (clock_gettime(2)) as nanoseconds in an Int64.
//
// Before editing: use the monotonic clock for every deadline and interval;
// the wall clock only stamps events (it can jump).
import Glibc

/// Clock readings (clock_gettime(2)).
package enum Clock {
    /// CLOCK_MONOTONIC in nanoseconds.
    package static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// CLOCK_REALTIME in nanoseconds since the Unix epoch.
    package static func wallNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
