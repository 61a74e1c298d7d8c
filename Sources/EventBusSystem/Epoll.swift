// epoll(7), signalfd(2), eventfd(2) for the broker's single-threaded event loop.
//
// Before editing: `Epoll` owns its epoll fd only; registered fds stay owned by
// their creators and must be removed (or closed, which removes them) by them.
// Level-triggered: a ready fd is reported again until drained.
import CEventBusShims
import Glibc

/// epoll event bits.
public struct EpollEvents: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `EPOLLIN`
    public static let readable = EpollEvents(rawValue: EVENTBUS_EPOLLIN)
    /// `EPOLLOUT`
    public static let writable = EpollEvents(rawValue: EVENTBUS_EPOLLOUT)
    /// `EPOLLERR` (always reported)
    public static let error = EpollEvents(rawValue: EVENTBUS_EPOLLERR)
    /// `EPOLLHUP` (always reported): both directions are shut down.
    public static let hangup = EpollEvents(rawValue: EVENTBUS_EPOLLHUP)
    /// `EPOLLRDHUP`: the peer shut down its writing side.
    public static let readHangup = EpollEvents(rawValue: EVENTBUS_EPOLLRDHUP)
}

/// An epoll instance (epoll_create1(EPOLL_CLOEXEC)). Each registration carries
/// a 64-bit token handed back with its events.
public final class Epoll {
    public let descriptor: FileDescriptor
    private var buffer: UnsafeMutablePointer<epoll_event>
    private let capacity: Int

    /// - Parameter maxEvents: events returned per `wait` at most.
    /// - Throws: `SystemError("epoll_create1", errno)`.
    public init(maxEvents: Int = 256) throws(SystemError) {
        let fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard fd >= 0 else { throw SystemError("epoll_create1", .current) }
        descriptor = FileDescriptor(rawValue: fd)
        capacity = maxEvents
        buffer = .allocate(capacity: maxEvents)
    }

    deinit {
        buffer.deallocate()
        descriptor.close()
    }

    private func control(_ op: Int32, _ fd: FileDescriptor, _ events: EpollEvents, _ token: UInt64) throws(SystemError) {
        var event = epoll_event()
        event.events = events.rawValue
        event.data.u64 = token
        guard epoll_ctl(descriptor.rawValue, op, fd.rawValue, &event) == 0 else {
            throw SystemError("epoll_ctl", .current)
        }
    }

    /// EPOLL_CTL_ADD. - Throws: `SystemError("epoll_ctl", errno)`.
    public func add(_ fd: FileDescriptor, events: EpollEvents, token: UInt64) throws(SystemError) {
        try control(EPOLL_CTL_ADD, fd, events, token)
    }

    /// EPOLL_CTL_MOD. - Throws: `SystemError("epoll_ctl", errno)`.
    public func modify(_ fd: FileDescriptor, events: EpollEvents, token: UInt64) throws(SystemError) {
        try control(EPOLL_CTL_MOD, fd, events, token)
    }

    /// EPOLL_CTL_DEL; errors (e.g. never added) are ignored.
    public func remove(_ fd: FileDescriptor) {
        var event = epoll_event()
        _ = epoll_ctl(descriptor.rawValue, EPOLL_CTL_DEL, fd.rawValue, &event)
    }

    /// epoll_wait(2); calls `body(token, events)` for each ready registration.
    /// - Parameter timeoutMilliseconds: -1 waits forever.
    /// - Returns: the number of events handled (0 on timeout or EINTR).
    /// - Throws: `SystemError("epoll_wait", errno)`.
    @discardableResult
    public func wait(timeoutMilliseconds: Int32, _ body: (UInt64, EpollEvents) -> Void) throws(SystemError) -> Int {
        let n = epoll_wait(descriptor.rawValue, buffer, Int32(capacity), timeoutMilliseconds)
        if n < 0 {
            if errno == EINTR { return 0 }
            throw SystemError("epoll_wait", .current)
        }
        for i in 0..<Int(n) {
            let event = buffer[i]
            body(event.data.u64, EpollEvents(rawValue: event.events))
        }
        return Int(n)
    }
}

/// A signalfd(2) for a set of signals, which it blocks for the calling thread
/// first (threads started later inherit the mask). Owns its fd.
public final class SignalDescriptor {
    public let descriptor: FileDescriptor

    /// - Throws: `SystemError("pthread_sigmask" | "signalfd", errno)`.
    public init(signals: [Int32]) throws(SystemError) {
        let blocked = signals.withUnsafeBufferPointer { eventbus_block_signals($0.baseAddress, Int32($0.count)) }
        guard blocked == 0 else { throw SystemError("pthread_sigmask", Errno(rawValue: blocked)) }
        let fd = signals.withUnsafeBufferPointer { eventbus_signalfd($0.baseAddress, Int32($0.count)) }
        guard fd >= 0 else { throw SystemError("signalfd", .current) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    deinit { descriptor.close() }

    /// Reads pending signals; returns their numbers (empty when none).
    public func readSignals() -> [Int32] {
        var result: [Int32] = []
        var info = signalfd_siginfo()
        while true {
            let n = withUnsafeMutableBytes(of: &info) { Glibc.read(descriptor.rawValue, $0.baseAddress, $0.count) }
            if n == MemoryLayout<signalfd_siginfo>.size {
                result.append(Int32(info.ssi_signo))
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return result
            }
        }
    }
}

/// Process-wide signal and resource settings.
public enum ProcessSettings {
    /// Ignores SIGPIPE for the process (writes use MSG_NOSIGNAL as well).
    public static func ignoreBrokenPipeSignal() { eventbus_ignore_sigpipe() }

    /// getrlimit(RLIMIT_NOFILE): (soft, hard).
    public static func openFileLimit() -> (soft: UInt64, hard: UInt64) {
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// Raises the soft RLIMIT_NOFILE to the hard limit (or to `cap` if lower).
    public static func raiseOpenFileLimit(cap: UInt64 = 1 << 20) {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let target = min(limit.rlim_max, rlim_t(cap))
        if limit.rlim_cur < target {
            limit.rlim_cur = target
            _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
    }
}

/// Clock readings (clock_gettime(2)).
public enum Clock {
    /// CLOCK_MONOTONIC in nanoseconds.
    public static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// CLOCK_REALTIME in nanoseconds since the Unix epoch.
    public static func wallNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
