// Socket addresses, the one place their C structures are built and read:
// `UnixAddress` (a filesystem path as a `sockaddr_un`, and getsockname(2) of
// an AF_UNIX socket back to its path), `SocketAddress` (an IPv4 or IPv6
// address as a copy of its `sockaddr_in`/`sockaddr_in6` bytes) and
// `TCPResolver` (getaddrinfo(3)). The sockets that use them are in
// Socket.swift and TCPSocket.swift.
//
// Before editing: getaddrinfo(3) may block on DNS and reports its own EAI_*
// codes rather than errno, so it has its own error type; call it from a thread
// that may block (never from an event loop).
//
// Raw memory (issue 35): the syscall layer's file for address memory. Every
// address is a value this file owns: a `sockaddr_un` is a local, filled (path
// and NUL within `sun_path`, checked by `UnixAddress.init` first) and read
// back within `sun_path` (getsockname's length, clamped); an inet address is
// an array holding a copy of its `sockaddr` bytes (the getaddrinfo list is
// freed before `resolve` returns). Both are lent to bind/connect as a
// `sockaddr` pointer for the call only (`withSockaddr`); no pointer leaves
// this file.
import CEventBusShims
import Glibc

/// A filled `sockaddr_un` for a filesystem path.
package struct UnixAddress: Sendable {
    /// The path, at most 107 bytes (sun_path holds 108 with the NUL).
    package let path: String

    /// - Throws: `SystemError("socket path", ENAMETOOLONG)` when the path does not fit
    ///   sun_path, `EINVAL` when it is empty or contains NUL.
    package init(path: String) throws(SystemError) {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, !bytes.contains(0) else { throw SystemError("socket path", .invalidArgument) }
        guard bytes.count <= UnixAddress.maxPathBytes else { throw SystemError("socket path", .nameTooLong) }
        self.path = path
    }

    /// Longest path that fits (107 bytes).
    package static var maxPathBytes: Int { MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1 }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}

extension FileDescriptor {
    /// getsockname(2) of an AF_UNIX socket: the filesystem path it is bound
    /// to, e.g. a listening socket passed by systemd.
    /// - Returns: nil for an unbound or abstract-namespace socket.
    /// - Throws: `SystemError("getsockname", errno)` (ENOTSOCK...).
    package func localPath() throws(SystemError) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        _ = try checkedCall("getsockname") {
            withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(rawValue, $0, &length) } }
        }
        guard address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let pathBytes = Int(length) - MemoryLayout.offset(of: \sockaddr_un.sun_path)!
        guard pathBytes > 0 else { return nil }
        let path = withUnsafeBytes(of: address.sun_path) { raw in Array(raw.prefix(min(pathBytes, raw.count)).prefix { $0 != 0 }) }
        guard !path.isEmpty else { return nil }  // abstract: starts with NUL
        return String(decoding: path, as: UTF8.self)
    }
}

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
