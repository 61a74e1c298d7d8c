// A typed file descriptor and the I/O calls on it (read(2), write(2),
// sendmsg(2), close(2), poll(2), fcntl(2), shutdown(2)).
//
// Before editing: `FileDescriptor` is a plain value and owns nothing; whoever
// created it closes it exactly once. An epoll registration never owns an fd
// and must be removed before the fd is closed.
import CEventBusShims
import Glibc

/// A Linux file descriptor number. Not an owner: see the file comment.
public struct FileDescriptor: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: CInt

    public init(rawValue: CInt) { self.rawValue = rawValue }

    public static let standardInput = FileDescriptor(rawValue: 0)
    public static let standardOutput = FileDescriptor(rawValue: 1)
    public static let standardError = FileDescriptor(rawValue: 2)

    public var description: String { "fd \(rawValue)" }

    /// read(2) into `buffer`. `.complete(0)` is end of file. Retries EINTR;
    /// EAGAIN gives `.wouldBlock`.
    /// - Throws: `SystemError("read", errno)`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        guard let n = try retryingInterrupts("read", { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }) else {
            return .wouldBlock
        }
        return .complete(n)
    }

    /// Writes with send(2) and `MSG_NOSIGNAL` on sockets (no SIGPIPE), write(2)
    /// otherwise. Retries EINTR; EAGAIN gives `.wouldBlock`.
    /// - Throws: `SystemError("write", errno)`, e.g. `EPIPE` when the peer is gone.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        guard let n = try retryingInterrupts("write", { () -> Int in
            let sent = Glibc.send(rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if sent == -1 && Glibc.errno == ENOTSOCK { return Glibc.write(rawValue, bytes.baseAddress, bytes.count) }
            return sent
        }) else { return .wouldBlock }
        return .complete(n)
    }

    /// Writes all of `bytes`, waiting with poll(2) when the fd would block.
    /// - Throws: `SystemError` from write(2) or poll(2).
    public func writeAll(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            switch try write(rest) {
            case .complete(let n): offset += n
            case .wouldBlock: _ = try poll(.writable, timeoutMilliseconds: -1)
            }
        }
    }

    /// sendmsg(2) of up to `count` iovecs with `MSG_NOSIGNAL`: a gathered write.
    /// - Returns: bytes written, or `.wouldBlock`.
    /// - Throws: `SystemError("sendmsg", errno)`.
    public func writev(_ vectors: UnsafeMutablePointer<iovec>, count: Int) throws(SystemError) -> IOResult<Int> {
        var message = msghdr()
        message.msg_iov = vectors
        message.msg_iovlen = count
        guard let n = try retryingInterrupts("sendmsg", { Glibc.sendmsg(rawValue, &message, Int32(MSG_NOSIGNAL)) }) else {
            return .wouldBlock
        }
        return .complete(n)
    }

    /// close(2), once; errors are ignored (the fd is released on Linux regardless).
    public func close() {
        _ = Glibc.close(rawValue)
    }

    /// Which half of a socket to shut down (shutdown(2)).
    public enum ShutdownHow: Sendable {
        case read, write, both
    }

    /// shutdown(2).
    /// - Throws: `SystemError("shutdown", errno)`.
    public func shutdown(_ how: ShutdownHow) throws(SystemError) {
        let value: Int32 = switch how {
        case .read: Int32(SHUT_RD)
        case .write: Int32(SHUT_WR)
        case .both: Int32(SHUT_RDWR)
        }
        _ = try retryingInterrupts("shutdown") { Glibc.shutdown(rawValue, value) }
    }

    /// Sets or clears `O_NONBLOCK` (fcntl(2)).
    /// - Throws: `SystemError("fcntl", errno)`.
    public func setNonBlocking(_ on: Bool) throws(SystemError) {
        let flags = fcntl(rawValue, F_GETFL)
        guard flags >= 0 else { throw SystemError("fcntl", .current) }
        let updated = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        guard fcntl(rawValue, F_SETFL, updated) == 0 else { throw SystemError("fcntl", .current) }
    }

    /// Waits with poll(2) until the fd is ready for `events` or the timeout passes.
    /// - Parameter timeoutMilliseconds: -1 waits forever; 0 does not wait.
    /// - Returns: the events that are ready (empty on timeout). `.hangup` and
    ///   `.error` may be returned without being asked for.
    /// - Throws: `SystemError("poll", errno)`; EINTR returns an empty set.
    public func poll(_ events: PollEvents, timeoutMilliseconds: Int32) throws(SystemError) -> PollEvents {
        var entry = pollfd(fd: rawValue, events: Int16(events.rawValue), revents: 0)
        let n = Glibc.poll(&entry, 1, timeoutMilliseconds)
        if n < 0 {
            if Glibc.errno == EINTR { return [] }
            throw SystemError("poll", .current)
        }
        return PollEvents(rawValue: Int32(entry.revents))
    }
}

/// poll(2) event bits.
public struct PollEvents: OptionSet, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `POLLIN`
    public static let readable = PollEvents(rawValue: Int32(POLLIN))
    /// `POLLOUT`
    public static let writable = PollEvents(rawValue: Int32(POLLOUT))
    /// `POLLHUP`
    public static let hangup = PollEvents(rawValue: Int32(POLLHUP))
    /// `POLLERR`
    public static let error = PollEvents(rawValue: Int32(POLLERR))
}
