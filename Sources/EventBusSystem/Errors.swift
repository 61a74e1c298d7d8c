// Error policy of the syscall layer, after swift-system and swift-nio:
// - EINTR is retried inside each wrapper and never seen by callers;
// - EAGAIN/EWOULDBLOCK is not an error: wrappers return `IOResult.wouldBlock`;
// - any other -1 becomes a thrown `SystemError` carrying errno and the call's name;
// - `close` is called once and never retried (Linux closes the fd even on EINTR).
import Glibc

/// An errno value. `description` is strerror(3)'s text.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: CInt

    public init(rawValue: CInt) { self.rawValue = rawValue }

    /// The calling thread's current errno.
    public static var current: Errno { Errno(rawValue: errno) }

    /// `EAGAIN` (same as `EWOULDBLOCK` on Linux)
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    /// `EINTR`
    public static let interrupted = Errno(rawValue: EINTR)
    /// `ECONNREFUSED`
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    /// `ENOENT`
    public static let noSuchFile = Errno(rawValue: ENOENT)
    /// `EPIPE`
    public static let brokenPipe = Errno(rawValue: EPIPE)
    /// `ECONNRESET`
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    /// `EMFILE`
    public static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    /// `ENFILE`
    public static let tooManyOpenFilesInSystem = Errno(rawValue: ENFILE)
    /// `ENOBUFS`
    public static let noBufferSpace = Errno(rawValue: ENOBUFS)
    /// `ENOMEM`
    public static let outOfMemory = Errno(rawValue: ENOMEM)
    /// `EADDRINUSE`
    public static let addressInUse = Errno(rawValue: EADDRINUSE)
    /// `ENAMETOOLONG`
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    /// `EACCES`
    public static let permissionDenied = Errno(rawValue: EACCES)
    /// `EEXIST`
    public static let fileExists = Errno(rawValue: EEXIST)
    /// `ECONNABORTED`
    public static let connectionAborted = Errno(rawValue: ECONNABORTED)
    /// `EINVAL`
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// `ENOTSOCK`
    public static let notSocket = Errno(rawValue: ENOTSOCK)

    public var description: String { String(cString: strerror(rawValue)) }
}

/// A failed system call: which call and the errno it set.
/// `description` reads `connect: Connection refused`.
public struct SystemError: Error, Sendable, CustomStringConvertible {
    /// The C function that failed, e.g. `"accept4"`.
    public let call: String
    public let errno: Errno

    public init(_ call: String, _ errno: Errno) {
        self.call = call
        self.errno = errno
    }

    public var description: String { "\(call): \(errno)" }
}

/// The result of a non-blocking operation: done, or it would have blocked.
public enum IOResult<T> {
    case complete(T)
    case wouldBlock
}

/// Calls `body` until it does not fail with EINTR. Returns its result, or
/// `nil` for EAGAIN; throws `SystemError(call, errno)` for other failures.
@inline(__always)
func retryingInterrupts<T: BinaryInteger>(_ call: String, _ body: () -> T) throws(SystemError) -> T? {
    while true {
        let result = body()
        if result != -1 { return result }
        let e = Glibc.errno
        if e == EINTR { continue }
        if e == EAGAIN || e == EWOULDBLOCK { return nil }
        throw SystemError(call, Errno(rawValue: e))
    }
}
