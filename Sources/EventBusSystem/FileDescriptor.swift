// A typed file descriptor and the calls on one descriptor that move no
// bytes: close(2), shutdown(2), fcntl(2), isatty(3). Reading and writing
// (read(2), write(2), sendmsg(2)) and the buffers they use are in
// FileDescriptor+IO.swift; waiting for readiness is poll(2) in Poll.swift.
//
// Before editing: `FileDescriptor` is a plain value and owns nothing; whoever
// created it closes it exactly once. An epoll registration never owns an fd
// and must be removed before the fd is closed.
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
