// A typed file descriptor and the calls on one descriptor: read(2), write(2),
// sendmsg(2), close(2), shutdown(2), fcntl(2), isatty(3). Waiting for
// readiness is poll(2) in Poll.swift.
//
// Before editing: `FileDescriptor` is a plain value and owns nothing; whoever
// created it closes it exactly once. An epoll registration never owns an fd
// and must be removed before the fd is closed.
//
// Raw memory (issue 35): this is the syscall layer, one of the files where
// pointers are allowed. Callers hand spans (`read(into:)` appends what the
// kernel wrote to an `OutputSpan`, so no byte is ever read uninitialised;
// `write`/`writeAll` take a `RawSpan`); the pointers exist only inside these
// calls, for the length of one syscall. The pointer forms left (`read(into:)`
// of a raw buffer, `writev`) are for the broker's server, which owns its read
// buffer and its iovec array.
import CEventBusShims
import Glibc

/// A Linux file descriptor number. Not an owner: see the file comment.
package struct FileDescriptor: Hashable, Sendable, CustomStringConvertible {
    package let rawValue: CInt

    package init(rawValue: CInt) { self.rawValue = rawValue }

    package static let standardInput = FileDescriptor(rawValue: 0)
    package static let standardOutput = FileDescriptor(rawValue: 1)
    package static let standardError = FileDescriptor(rawValue: 2)

    package var description: String { "fd \(rawValue)" }

    /// read(2) into the free capacity of `buffer`, appending what was read.
    /// `.complete(0)` is end of file. Retries EINTR; EAGAIN gives `.wouldBlock`.
    /// - Throws: `SystemError("read", errno)`.
    package func read(into buffer: inout OutputSpan<UInt8>) throws(SystemError) -> IOResult<Int> {
        try buffer.withUnsafeMutableBufferPointer { (storage, initialized) throws(SystemError) -> IOResult<Int> in
            let free = UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: storage[initialized...]))
            let result = try read(into: free)
            if case .complete(let n) = result { initialized += n }
            return result
        }
    }

    /// read(2) of at most `limit` bytes, appended to `bytes` (e.g. a read
    /// buffer emptied with `removeAll(keepingCapacity: true)` first).
    /// - Throws: `SystemError("read", errno)`.
    package func read(appendingTo bytes: inout [UInt8], limit: Int) throws(SystemError) -> IOResult<Int> {
        var result = IOResult<Int>.wouldBlock
        try bytes.append(addingCapacity: limit) { (free: inout OutputSpan<UInt8>) throws(SystemError) in result = try read(into: &free) }
        return result
    }

    /// read(2) into `buffer` (memory the caller owns). `.complete(0)` is end
    /// of file. Retries EINTR; EAGAIN gives `.wouldBlock`.
    /// - Throws: `SystemError("read", errno)`.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        guard let n = try retryingInterrupts("read", { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }) else {
            return .wouldBlock
        }
        return .complete(n)
    }

    /// Writes with send(2) and `MSG_NOSIGNAL` on sockets (no SIGPIPE), write(2)
    /// otherwise. Retries EINTR; EAGAIN gives `.wouldBlock`.
    /// - Throws: `SystemError("write", errno)`, e.g. `EPIPE` when the peer is gone.
    package func write(_ bytes: RawSpan) throws(SystemError) -> IOResult<Int> {
        try bytes.withUnsafeBytes { (raw) throws(SystemError) in try write(raw) }
    }

    /// `write(_:)` of memory the caller owns.
    package func write(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        guard let n = try retryingInterrupts("write", { () -> Int in
            let sent = Glibc.send(rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if sent == -1 && Glibc.errno == ENOTSOCK { return Glibc.write(rawValue, bytes.baseAddress, bytes.count) }
            return sent
        }) else { return .wouldBlock }
        return .complete(n)
    }

    /// Writes all of `bytes`, waiting with poll(2) when the fd would block.
    /// - Throws: `SystemError` from write(2) or poll(2).
    package func writeAll(_ bytes: RawSpan) throws(SystemError) {
        var offset = 0
        while offset < bytes.byteCount {
            switch try write(bytes.extracting(droppingFirst: offset)) {
            case .complete(let n): offset += n
            case .wouldBlock: _ = try poll(.writable, timeoutMilliseconds: -1)
            }
        }
    }

    /// sendmsg(2) of up to `count` iovecs with `MSG_NOSIGNAL`: a gathered write.
    /// - Returns: bytes written, or `.wouldBlock`.
    /// - Throws: `SystemError("sendmsg", errno)`.
    package func writev(_ vectors: UnsafeMutablePointer<iovec>, count: Int) throws(SystemError) -> IOResult<Int> {
        var message = msghdr()
        message.msg_iov = vectors
        message.msg_iovlen = count
        guard let n = try retryingInterrupts("sendmsg", { Glibc.sendmsg(rawValue, &message, Int32(MSG_NOSIGNAL)) }) else {
            return .wouldBlock
        }
        return .complete(n)
    }

    /// close(2), once; errors are ignored (the fd is released on Linux regardless).
    package func close() {
        _ = Glibc.close(rawValue)
    }

    /// Which half of a socket to shut down (shutdown(2)).
    package enum ShutdownHow: Sendable {
        case read, write, both
    }

    /// shutdown(2).
    /// - Throws: `SystemError("shutdown", errno)`.
    package func shutdown(_ how: ShutdownHow) throws(SystemError) {
        let value: Int32 = switch how {
        case .read: Int32(SHUT_RD)
        case .write: Int32(SHUT_WR)
        case .both: Int32(SHUT_RDWR)
        }
        _ = try retryingInterrupts("shutdown") { Glibc.shutdown(rawValue, value) }
    }

    /// Sets or clears `O_NONBLOCK` (fcntl(2)).
    /// - Throws: `SystemError("fcntl", errno)`.
    package func setNonBlocking(_ on: Bool) throws(SystemError) {
        let flags = try checkedCall("fcntl") { fcntl(rawValue, F_GETFL) }
        let updated = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        _ = try checkedCall("fcntl") { fcntl(rawValue, F_SETFL, updated) }
    }

    /// fcntl(2) `F_GETFD`: whether the descriptor is open (EBADF means not).
    package var isOpen: Bool {
        if case .failure(let e) = systemCall(.retry, { fcntl(rawValue, F_GETFD) }), e.rawValue == EBADF { return false }
        return true
    }

    /// isatty(3): whether the descriptor is a terminal.
    package var isTerminal: Bool { isatty(rawValue) == 1 }

    /// Opens /dev/null (open(2)) on any of fds 0, 1, 2 that is not open, so
    /// that a socket opened later can never become "standard output"
    /// (`eventbus listen >&-` would otherwise write events into its own
    /// broker connection). Call first thing in `main`; failures are ignored
    /// (the descriptor then stays closed).
    package static func openNullOnClosedStandardDescriptors() {
        for fd: CInt in 0...2 where !FileDescriptor(rawValue: fd).isOpen {
            // open(2) returns the lowest free descriptor: this one.
            _ = systemCall { Glibc.open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) }
        }
    }
}
