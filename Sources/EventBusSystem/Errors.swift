// Error policy of the syscall layer, after swift-system and swift-nio:
// - EINTR is handled by `systemCall` below and nowhere else: retried inside
//   each wrapper, except that poll(2) and epoll_wait(2) return "nothing
//   ready" so their callers recompute the deadline; callers never see it;
// - EAGAIN/EWOULDBLOCK is not an error: I/O wrappers return `IOResult.wouldBlock`
//   (connect(2), where it means a full backlog, throws it instead);
// - any other -1 becomes a thrown `SystemError` carrying errno and the call's name;
// - `close` is called once and never retried (Linux closes the fd even on EINTR).
import Glibc

/// An errno value. `description` is strerror(3)'s text.
@usableFromInline package struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    package let rawValue: CInt

    @usableFromInline package init(rawValue: CInt) { self.rawValue = rawValue }

    /// The calling thread's current errno.
    package static var current: Errno { Errno(rawValue: errno) }

    /// `EAGAIN` (same as `EWOULDBLOCK` on Linux)
    package static let wouldBlock = Errno(rawValue: EAGAIN)
    /// `EINTR`
    package static let interrupted = Errno(rawValue: EINTR)
    /// `ECONNREFUSED`
    package static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    /// `ENOENT`
    package static let noSuchFile = Errno(rawValue: ENOENT)
    /// `EPIPE`
    package static let brokenPipe = Errno(rawValue: EPIPE)
    /// `ECONNRESET`
    package static let connectionReset = Errno(rawValue: ECONNRESET)
    /// `EMFILE`
    package static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    /// `ENFILE`
    package static let tooManyOpenFilesInSystem = Errno(rawValue: ENFILE)
    /// `ENOBUFS`
    package static let noBufferSpace = Errno(rawValue: ENOBUFS)
    /// `ENOMEM`
    package static let outOfMemory = Errno(rawValue: ENOMEM)
    /// `EADDRINUSE`
    package static let addressInUse = Errno(rawValue: EADDRINUSE)
    /// `ENAMETOOLONG`
    package static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    /// `EACCES`
    package static let permissionDenied = Errno(rawValue: EACCES)
    /// `EEXIST`
    package static let fileExists = Errno(rawValue: EEXIST)
    /// `ECONNABORTED`
    package static let connectionAborted = Errno(rawValue: ECONNABORTED)
    /// `EINVAL`
    package static let invalidArgument = Errno(rawValue: EINVAL)
    /// `ENOTSOCK`
    package static let notSocket = Errno(rawValue: ENOTSOCK)

    @usableFromInline package var description: String { String(cString: strerror(rawValue)) }
}

/// A failed system call: which call and the errno it set.
/// `description` reads `connect: Connection refused`.
package struct SystemError: Error, Sendable, CustomStringConvertible {
    /// The C function that failed, e.g. `"accept4"`.
    package let call: String
    package let errno: Errno

    package init(_ call: String, _ errno: Errno) {
        self.call = call
        self.errno = errno
    }

    package var description: String { "\(call): \(errno)" }
}

/// The result of a non-blocking operation: done, or it would have blocked.
package enum IOResult<T> {
    case complete(T)
    case wouldBlock
}

/// What a wrapper does when its call fails with EINTR (signal(7),
/// "Interruption of system calls by signal handlers").
@usableFromInline package enum InterruptHandling: Sendable {
    /// Call again: the caller expects the call to finish (read, write,
    /// connect, accept4, waitpid, ...).
    case retry
    /// Return 0, as if the wait timed out: for poll(2) and epoll_wait(2),
    /// whose callers recompute their deadline and wait again, so a stop and
    /// SIGCONT never stretches a timeout.
    case returnZero
}

/// The one place EINTR is handled: calls `body` (a libc call that returns -1
/// and sets errno on failure) again while it fails with EINTR, or returns 0
/// for `.returnZero`. Shared (`package`) with the code that calls libc itself (the test
/// support, eventbus-bench), so that it has no EINTR loop of its own.
/// Example: `systemCall { Glibc.send(fd, p, n, Int32(MSG_NOSIGNAL)) }`.
/// - Returns: the call's result, or the errno of its failure (never EINTR).
@inlinable @inline(__always)
package func systemCall<T: BinaryInteger>(_ interrupt: InterruptHandling = .retry, _ body: () -> T) -> Result<T, Errno> {
    while true {
        let result = body()
        if result != -1 { return .success(result) }
        let e = Glibc.errno
        if e != EINTR { return .failure(Errno(rawValue: e)) }
        if interrupt == .returnZero { return .success(0) }
    }
}

/// `systemCall` for non-blocking I/O: EAGAIN/EWOULDBLOCK is `nil`, any other
/// failure throws `SystemError(call, errno)`.
@inline(__always)
func retryingInterrupts<T: BinaryInteger>(_ call: String, _ body: () -> T) throws(SystemError) -> T? {
    switch systemCall(.retry, body) {
    case .success(let result): return result
    case .failure(let e) where e == .wouldBlock: return nil
    case .failure(let e): throw SystemError(call, e)
    }
}

/// `systemCall` for calls where EAGAIN is an error like any other (connect(2)
/// on a full backlog) or cannot happen: every failure throws
/// `SystemError(call, errno)`.
@inline(__always)
func checkedCall<T: BinaryInteger>(_ call: String, _ interrupt: InterruptHandling = .retry, _ body: () -> T) throws(SystemError) -> T {
    switch systemCall(interrupt, body) {
    case .success(let result): return result
    case .failure(let e): throw SystemError(call, e)
    }
}
