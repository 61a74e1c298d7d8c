// Sending a signal to another process (kill(2)): `eventbus reload` asks the
// broker to re-read its policy with SIGHUP.
//
// Before editing: the target pid comes from SO_PEERCRED of a connection to
// the broker, never from a pid file, so it cannot name a stranger.
import Glibc

/// Signals to other processes.
package enum ProcessSignals {
    /// kill(2): sends `signal` (e.g. SIGHUP) to process `pid`.
    /// - Throws: `SystemError("kill", errno)`: EPERM (not ours to signal:
    ///   another uid, and we are not root), ESRCH (no such process).
    package static func send(_ signal: Int32, to pid: Int32) throws(SystemError) {
        _ = try checkedCall("kill") { Glibc.kill(pid, signal) }
    }
}
