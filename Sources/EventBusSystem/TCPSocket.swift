// TCP client sockets (tcp(7), ip(7), ipv6(7)): socket(2), a non-blocking
// connect(2) bounded by poll(2) and read back with SO_ERROR, and TCP_NODELAY;
// their addresses (getaddrinfo(3)) are in SocketAddress.swift. Used by the
// NATS client (EventBusNATS); the broker itself never opens TCP.
//
// Before editing: sockets are created with SOCK_CLOEXEC|SOCK_NONBLOCK at
// creation, like every socket of this package.
import CEventBusShims
import Glibc

extension FileDescriptor {
    /// socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0). The caller owns the fd.
    /// - Parameter family: `AF_INET` or `AF_INET6` (`SocketAddress.family`).
    /// - Throws: `SystemError("socket", errno)`, e.g. EMFILE.
    package static func tcpSocket(family: Int32) throws(SystemError) -> FileDescriptor {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        return FileDescriptor(rawValue: try checkedCall("socket") { Glibc.socket(family, type, 0) })
    }

    /// connect(2) on a non-blocking socket, waiting with poll(2) for at most
    /// `timeoutMilliseconds`, then reading the outcome with getsockopt(SO_ERROR).
    /// EINTR is retried by `systemCall`; the retry finds the attempt under way
    /// in the kernel (EALREADY) or done (EISCONN).
    /// - Throws: `SystemError("connect", errno)`: ECONNREFUSED (nobody
    ///   listening), ETIMEDOUT (no answer within the timeout), ENETUNREACH...
    package func connect(to address: SocketAddress, timeoutMilliseconds: Int32) throws(SystemError) {
        let started = systemCall { address.withSockaddr { Glibc.connect(rawValue, $0, $1) } }
        switch started {
        case .success: return
        case .failure(let e) where e.rawValue == EISCONN: return
        case .failure(let e) where e.rawValue == EINPROGRESS || e.rawValue == EALREADY: break
        case .failure(let e): throw SystemError("connect", e)
        }
        let deadline = Clock.monotonicNanoseconds() + Int64(timeoutMilliseconds) * 1_000_000
        while true {
            let left = (deadline - Clock.monotonicNanoseconds()) / 1_000_000
            guard left > 0 else { throw SystemError("connect", Errno(rawValue: ETIMEDOUT)) }
            let ready = try poll(.writable, timeoutMilliseconds: Int32(min(left, Int64(Int32.max))))
            if !ready.isEmpty { break }
        }
        var pending: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try checkedCall("getsockopt(SO_ERROR)") { getsockopt(rawValue, SOL_SOCKET, SO_ERROR, &pending, &length) }
        if pending != 0 { throw SystemError("connect", Errno(rawValue: pending)) }
    }

    /// setsockopt(IPPROTO_TCP, TCP_NODELAY): send small writes at once (no Nagle delay).
    /// - Throws: `SystemError("setsockopt(TCP_NODELAY)", errno)`.
    package func setNoDelay(_ on: Bool = true) throws(SystemError) {
        var value: Int32 = on ? 1 : 0
        _ = try checkedCall("setsockopt(TCP_NODELAY)") {
            setsockopt(rawValue, Int32(IPPROTO_TCP), TCP_NODELAY, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// A non-blocking TCP socket connected to the first of `addresses` that
    /// accepts within `timeoutMilliseconds` each, with TCP_NODELAY set. The
    /// caller owns the fd; sockets of failed attempts are closed here.
    /// - Throws: the `SystemError` of the last address tried.
    package static func connectedTCPSocket(to addresses: [SocketAddress], timeoutMilliseconds: Int32) throws(SystemError) -> FileDescriptor {
        var last = SystemError("connect", .invalidArgument)
        for address in addresses {
            do throws(SystemError) {
                let fd = try tcpSocket(family: address.family)
                do {
                    try fd.connect(to: address, timeoutMilliseconds: timeoutMilliseconds)
                    try fd.setNoDelay()
                    return fd
                } catch {
                    fd.close()
                    throw error
                }
            } catch {
                last = error
            }
        }
        throw last
    }
}
