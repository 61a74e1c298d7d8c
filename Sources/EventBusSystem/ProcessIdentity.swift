// The calling process's identity (getpid(2), getuid(2), getgid(2), geteuid(2)):
// the one place the executables and the client library read it. The client
// stamps locally delivered events with the pid/uid/gid the broker would
// report; every program resolves the default socket path from the effective
// uid and `ProcessEnvironment` (PROTOCOL.md "Transport", `SocketPath.resolve`).
//
// Before editing: these calls cannot fail; keep this file free of state.
import Glibc

/// The calling process's own credentials.
package enum ProcessIdentity {
    /// getpid(2), getuid(2), getgid(2): the values the broker reads with
    /// `SO_PEERCRED` for a connection this process opens.
    package static var current: PeerCredentials {
        PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())
    }

    /// geteuid(2): the effective uid (root is 0), used to pick the system or
    /// user bus.
    package static var effectiveUID: UInt32 { geteuid() }
}
