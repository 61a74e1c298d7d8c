// Process-wide settings the executables make at start-up: the SIGPIPE
// disposition and the open-file limit (getrlimit(2), setrlimit(2)).
//
// Before editing: these change the whole process, threads included; call them
// from `main` before any thread starts, never from a library.
import CEventBusShims
import Glibc

/// Process-wide signal and resource settings.
package enum ProcessSettings {
    /// Ignores SIGPIPE for the process (writes use MSG_NOSIGNAL as well).
    package static func ignoreBrokenPipeSignal() { eventbus_ignore_sigpipe() }

    /// getrlimit(RLIMIT_NOFILE): (soft, hard); (0, 0) if the call fails.
    package static func openFileLimit() -> (soft: UInt64, hard: UInt64) {
        var limit = rlimit()
        guard case .success = systemCall(.retry, { getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }) else { return (0, 0) }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// Raises the soft RLIMIT_NOFILE to the hard limit (or to `cap` if lower)
    /// with setrlimit(2); failures are ignored (the limit stays as it was).
    package static func raiseOpenFileLimit(cap: UInt64 = 1 << 20) {
        var limit = rlimit()
        guard case .success = systemCall(.retry, { getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }) else { return }
        let target = min(limit.rlim_max, rlim_t(cap))
        if limit.rlim_cur < target {
            limit.rlim_cur = target
            _ = systemCall { setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }
        }
    }
}
