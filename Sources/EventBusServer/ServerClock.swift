// The server's one source of time (issue 35): every reading of the clock in
// EventBusServer goes through `BrokerServer.clock` (from
// `ServerConfiguration.clock`), so a test can hand a clock it moves by hand
// and judge a timeout without waiting for it. The core reads no clock: the
// server hands it the time (`BrokerTime`) with every step.
//
// Before editing: `monotonic` serves every deadline and interval, `wall`
// only stamps events (it can jump); both are called on the loop's thread.
import EventBusCore
import EventBusSystem

/// Where the server reads the time.
package struct ServerClock: Sendable {
    /// Monotonic nanoseconds (deadlines, intervals, the turns' slices).
    package var monotonic: @Sendable () -> Int64
    /// Wall-clock nanoseconds since the Unix epoch (events' timestamps).
    package var wall: @Sendable () -> Int64

    package init(monotonic: @escaping @Sendable () -> Int64, wall: @escaping @Sendable () -> Int64) {
        self.monotonic = monotonic
        self.wall = wall
    }

    /// clock_gettime(2): CLOCK_MONOTONIC and CLOCK_REALTIME (the default).
    package static let system = ServerClock(monotonic: { Clock.monotonicNanoseconds() }, wall: { Clock.wallNanoseconds() })

    /// Both readings, as the core takes them.
    func now() -> BrokerTime {
        BrokerTime(wallNanoseconds: wall(), monotonicNanoseconds: monotonic())
    }
}
