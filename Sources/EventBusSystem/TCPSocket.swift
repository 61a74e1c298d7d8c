// TCP client sockets (tcp(7), ip(7), ipv6(7)): getaddrinfo(3) for a host and
// port, socket(2), a non-blocking connect(2) bounded by poll(2) and read back
// with SO_ERROR, and TCP_NODELAY. Used by the NATS client (EventBusNATS); the
// broker itself never opens TCP.
//
// Before editing: getaddrinfo(3) may block on DNS and reports its own EAI_*
// codes rather than errno, so it has its own error type; call it from a thread
// that may block (never from an event loop). Sockets are created with
// SOCK_CLOEXEC|SOCK_NONBLOCK at creation, like every socket of this package.
//
// Raw memory (issue 35): a syscall wrapper that owns what it hands the
// kernel. An address is kept as a copy of its `sockaddr` bytes (the
// getaddrinfo list is freed before `resolve` returns) and lent to connect(2)
// as a pointer for the call only.
import CEventBusShims
import Glibc

/// One resolved socket address (a copy of a `sockaddr_in` or `sockaddr_in6`).
package struct SocketAddress: Sendable, Equatable, CustomStringConvertible {
    /// `AF_INET` or `AF_INET6`.
    package let family: Int32
    /// The raw `sockaddr` bytes, `length` of them.
    let bytes: [UInt8]

    init(_ pointer: UnsafePointer<sockaddr>, length: socklen_t) {
        family = Int32(pointer.pointee.sa_family)
        bytes = Array(UnsafeRawBufferPointer(start: UnsafeRawPointer(pointer), count: Int(length)))
    }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        bytes.withUnsafeBytes { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
    }

    /// `127.0.0.1:4222` or `[::1]:4222` (inet_ntop(3)).
    package var description: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        return bytes.withUnsafeBytes { raw -> String in
            if family == AF_INET6 {
                var address = raw.loadUnaligned(as: sockaddr_in6.self)
                inet_ntop(AF_INET6, &address.sin6_addr, &text, socklen_t(text.count))
                return "[\(cText(text))]:\(UInt16(bigEndian: address.sin6_port))"
            }
            var address = raw.loadUnaligned(as: sockaddr_in.self)
            inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(text.count))
            return "\(cText(text)):\(UInt16(bigEndian: address.sin_port))"
        }
    }
}

/// A NUL-terminated C buffer as a String.
private func cText(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// getaddrinfo(3) failed: `code` is its `EAI_*` return value.
/// `description` reads `getaddrinfo nats.example:4222: Name or service not known`.
package struct AddressResolutionError: Error, Sendable, CustomStringConvertible {
    package let host: String
    package let port: UInt16
    /// The `EAI_*` code (negative on glibc).
    package let code: Int32
    /// errno when `code` is `EAI_SYSTEM`, else 0.
    package let systemErrno: Int32

    package var description: String {
        let reason = code == EAI_SYSTEM ? String(cString: strerror(systemErrno)) : String(cString: gai_strerror(code))
        return "getaddrinfo \(host):\(port): \(reason)"
    }
}

/// Host name resolution for TCP.
package enum TCPResolver {
    /// getaddrinfo(3) with `AF_UNSPEC`, `SOCK_STREAM`, `AI_NUMERICSERV`: the
    /// addresses of `host` (a name or an IPv4/IPv6 literal without brackets),
    /// in the order the resolver gives them. Blocks while DNS answers.
    /// - Throws: `AddressResolutionError` (for example `EAI_NONAME`).
    package static func resolve(host: String, port: UInt16) throws(AddressResolutionError) -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        var code: Int32 = 0
        // getaddrinfo(3) reports failure by its return value, not -1: an
        // interrupted call (EAI_SYSTEM with EINTR) is handed to `systemCall`
        // as -1, so the one EINTR helper retries it.
        _ = systemCall { () -> Int32 in
            code = getaddrinfo(host, String(port), &hints, &list)
            return code == EAI_SYSTEM && errno == EINTR ? -1 : 0
        }
        guard code == 0 else {
            throw AddressResolutionError(host: host, port: port, code: code, systemErrno: code == EAI_SYSTEM ? errno : 0)
        }
        defer { freeaddrinfo(list) }
        var result: [SocketAddress] = []
        var entry = list
        while let current = entry {
            if let address = current.pointee.ai_addr,
               current.pointee.ai_family == AF_INET || current.pointee.ai_family == AF_INET6 {
                let candidate = SocketAddress(address, length: current.pointee.ai_addrlen)
                if !result.contains(candidate) { result.append(candidate) }
            }
            entry = current.pointee.ai_next
        }
        if result.isEmpty { throw AddressResolutionError(host: host, port: port, code: EAI_NONAME, systemErrno: 0) }
        return result
    }
}

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
