// Talking to the service manager: readiness, reloading, status, stopping and watchdog pings.
//
// Before editing: every call is a no-op when NOTIFY_SOCKET is unset (not under
// systemd, or Type= is not notify), so callers never need to check first.
import CSystemd
import EventBusSystem
import Glibc

/// `sd_notify(3)` messages for a `Type=notify` service (`systemd.service(5)`).
///
/// Each call sends one datagram to `$NOTIFY_SOCKET` and leaves the variable set; failures
/// are ignored (there is nobody to tell, and the manager treats a missing READY=1 or
/// WATCHDOG=1 as the failure it is). Safe to call from any thread.
package enum ServiceManager {
    /// Sends `READY=1`: startup is finished and the listening sockets are served
    /// (`sd_notify(3)`). systemd starts ordering dependants after this.
    package static func notifyReady() { send("READY=1") }

    /// Sends `RELOADING=1` with `MONOTONIC_USEC=` (CLOCK_MONOTONIC, µs): a
    /// configuration reload has begun (`sd_notify(3)`); send `READY=1` when it
    /// is over. systemd shows the unit as reloading meanwhile (systemd 253's
    /// `Type=notify-reload` needs the timestamp; older managers ignore it).
    package static func notifyReloading() {
        send("RELOADING=1\nMONOTONIC_USEC=\(Clock.monotonicNanoseconds() / 1000)")
    }

    /// Sends `STOPPING=1`: shutdown has begun (`sd_notify(3)`); send it before flushing
    /// clients so `systemctl stop` shows the unit as deactivating.
    package static func notifyStopping() { send("STOPPING=1") }

    /// Sends `STATUS=<text>`, shown by `systemctl status` (`sd_notify(3)`), e.g.
    /// `"12 connections, 40 subscriptions, 350 events/s"`.
    ///
    /// - Parameter text: one line; line breaks are replaced by spaces, since a newline
    ///   would start a new assignment in the notification datagram.
    package static func notifyStatus(_ text: String) {
        let line = String(text.map { $0.isNewline ? " " : $0 })
        send("STATUS=" + line)
    }

    /// The broker's `STATUS=` text: `"1 connection, 0 subscriptions, 350 events/s"`,
    /// each count with its noun in the singular for exactly 1 and the plural otherwise.
    package static func statusText(connections: Int, subscriptions: Int, eventsPerSecond: UInt64) -> String {
        "\(counted(connections, "connection")), \(counted(subscriptions, "subscription")), \(eventsPerSecond) events/s"
    }

    /// `"1 connection"`, `"0 connections"`, `"2 connections"`.
    private static func counted(_ count: Int, _ noun: String) -> String {
        count == 1 ? "1 \(noun)" : "\(count) \(noun)s"
    }

    /// Sends `WATCHDOG=1` (`sd_notify(3)`, `sd_watchdog_enabled(3)`). Send it from the
    /// event loop itself every `watchdogPingInterval()`, so a stuck loop is caught.
    package static func notifyWatchdog() { send("WATCHDOG=1") }

    /// The interval at which `WATCHDOG=1` must be sent: half the `WatchdogSec=` the
    /// manager passed in `$WATCHDOG_USEC`, as `sd_watchdog_enabled(3)` recommends.
    ///
    /// - Returns: nil when the watchdog is off: `WATCHDOG_USEC` unset, or
    ///   `WATCHDOG_PID` set for another process, or either malformed. The variables are
    ///   left in place.
    package static func watchdogPingInterval() -> Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(clamping: usec / 2))
    }

    /// `sd_notify(0, state)`; the result is ignored (see the type's comment).
    private static func send(_ state: String) {
        _ = sd_notify(0, state)
    }
}
