// AF_UNIX stream sockets (unix(7)): socket(2), bind(2), listen(2), accept4(2),
// connect(2), SO_PEERCRED, SO_PEERGROUPS. The `sockaddr_un` of a path, and
// getsockname(2), are in SocketAddress.swift.
//
// Before editing: every socket is created with SOCK_CLOEXEC, and accepted ones
// with SOCK_NONBLOCK|SOCK_CLOEXEC at creation (never a separate fcntl), so no
// fd leaks into a child and none can block the event loop.
import CEventBusShims
import Glibc

/// The kernel-verified identity of a socket's peer (`SO_PEERCRED`, unix(7)),
/// captured at connect time.
package struct PeerCredentials: Equatable, Sendable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32

    package init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

extension FileDescriptor {
    /// socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC [| SOCK_NONBLOCK], 0). The caller owns the fd.
    /// - Throws: `SystemError("socket", errno)`, e.g. EMFILE.
    package static func unixStreamSocket(nonBlocking: Bool = true) throws(SystemError) -> FileDescriptor {
        var type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if nonBlocking { type |= Int32(SOCK_NONBLOCK.rawValue) }
        let fd = try checkedCall("socket") { Glibc.socket(AF_UNIX, type, 0) }
        return FileDescriptor(rawValue: fd)
    }

    /// socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK): two
    /// connected ends, both non-blocking, both owned by the caller.
    /// - Throws: `SystemError("socketpair", errno)`, e.g. EMFILE.
    package static func unixStreamPair() throws(SystemError) -> (FileDescriptor, FileDescriptor) {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        _ = try checkedCall("socketpair") { Glibc.socketpair(AF_UNIX, type, 0, &fds) }
        return (FileDescriptor(rawValue: fds[0]), FileDescriptor(rawValue: fds[1]))
    }

    /// bind(2) to a filesystem path.
    /// - Throws: `SystemError("bind", errno)` (EADDRINUSE when the path exists), or the
    ///   `UnixAddress` errors.
    package func bind(toPath path: String) throws(SystemError) {
        let address = try UnixAddress(path: path)
        _ = try checkedCall("bind") { address.withSockaddr { Glibc.bind(rawValue, $0, $1) } }
    }

    /// listen(2).
    /// - Parameter backlog: queue length (the kernel caps it at somaxconn).
    /// - Throws: `SystemError("listen", errno)`.
    package func listen(backlog: Int32) throws(SystemError) {
        _ = try checkedCall("listen") { Glibc.listen(rawValue, backlog) }
    }

    /// accept4(2) with SOCK_NONBLOCK|SOCK_CLOEXEC. The caller owns the new fd.
    /// - Returns: nil when no connection is pending (EAGAIN).
    /// - Throws: `SystemError("accept4", errno)`: EMFILE/ENFILE/ENOBUFS/ENOMEM mean
    ///   resources ran out; ECONNABORTED means the peer gave up (try again).
    package func accept() throws(SystemError) -> FileDescriptor? {
        guard let fd = try retryingInterrupts("accept4", { eventbus_accept_nonblocking(rawValue) }) else { return nil }
        return FileDescriptor(rawValue: fd)
    }

    /// connect(2) to a filesystem path. On a non-blocking socket a full
    /// backlog gives `SystemError("connect", EAGAIN)`.
    /// - Throws: `SystemError("connect", errno)`: ENOENT (no socket file),
    ///   ECONNREFUSED (nobody listening), EACCES, or the `UnixAddress` errors.
    package func connect(toPath path: String) throws(SystemError) {
        let address = try UnixAddress(path: path)
        _ = try checkedCall("connect") { address.withSockaddr { Glibc.connect(rawValue, $0, $1) } }
    }

    /// getsockopt(SO_PEERCRED): the peer's pid, uid, gid as of connect(2).
    /// - Throws: `SystemError("getsockopt(SO_PEERCRED)", errno)`.
    package func peerCredentials() throws(SystemError) -> PeerCredentials {
        var credentials = eventbus_ucred()
        _ = try checkedCall("getsockopt(SO_PEERCRED)") { eventbus_peer_credentials(rawValue, &credentials) }
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
    }

    /// getsockopt(SO_PEERGROUPS) (Linux 4.13+, socket(7)): the peer's
    /// supplementary groups as of connect(2), in the kernel's order (the
    /// primary gid is in `peerCredentials` and may be absent here). Asks
    /// again with a larger buffer on ERANGE.
    /// - Throws: `SystemError("getsockopt(SO_PEERGROUPS)", errno)`, e.g.
    ///   ENOPROTOOPT on a kernel older than 4.13.
    package func peerGroups() throws(SystemError) -> [UInt32] {
        var capacity: Int32 = 64
        while true {
            var groups = [gid_t](repeating: 0, count: Int(capacity))
            var count = capacity
            let result = systemCall { eventbus_peer_groups(rawValue, &groups, &count) }
            switch result {
            case .success:
                return Array(groups.prefix(Int(count)))
            case .failure(let e) where e.rawValue == ERANGE && count > capacity:
                capacity = count
            case .failure(let e):
                throw SystemError("getsockopt(SO_PEERGROUPS)", e)
            }
        }
    }

    /// Sets SO_SNDBUF (bytes; the kernel doubles it) with setsockopt(2).
    /// - Throws: `SystemError("setsockopt(SO_SNDBUF)", errno)`.
    package func setSendBufferSize(_ bytes: Int32) throws(SystemError) {
        var value = bytes
        _ = try checkedCall("setsockopt(SO_SNDBUF)") { setsockopt(rawValue, SOL_SOCKET, SO_SNDBUF, &value, socklen_t(MemoryLayout<Int32>.size)) }
    }

    /// Connects a new blocking-or-not socket to `path`; closes it on failure.
    /// - Throws: the `socket` or `connect` `SystemError`.
    package static func connectedUnixSocket(toPath path: String, nonBlocking: Bool = false) throws(SystemError) -> FileDescriptor {
        let fd = try unixStreamSocket(nonBlocking: nonBlocking)
        do {
            try fd.connect(toPath: path)
        } catch {
            fd.close()
            throw error
        }
        return fd
    }
}
