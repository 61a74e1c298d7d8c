// epoll(7) for the broker's single-threaded event loop: epoll_create1(2),
// epoll_ctl(2), epoll_wait(2).
//
// Before editing: `Epoll` owns its epoll fd only; registered fds stay owned by
// their creators and must be removed (or closed, which removes them) by them.
// Level-triggered unless a registration asks for `.edgeTriggered` (EPOLLET):
// a level-triggered fd is reported again until drained, an edge-triggered one
// once per change, so its owner reads until it would block (the broker
// registers its connections edge-triggered, its listeners and signalfd not).
// EINTR from epoll_wait is "nothing ready" (the loop recomputes its timers),
// never a retry. `EpollEvents` is `@_spi(Package) public`, not `package`
// (importers say `@_spi(Package) import EventBusSystem`): as package it lost
// the default cross-module optimisation, and an array literal of it became an
// unspecialised SetAlgebra.init (~3,300 Ir per call in the broker's server).
//
// Raw memory (issue 35): `Epoll` owns the `epoll_event` array `wait` hands
// the kernel (`capacity` entries, allocated once, freed in deinit); the
// kernel writes at most `capacity` of them and only those it returned are read.
import CEventBusShims
import Glibc

/// epoll event bits.
@_spi(Package) public struct EpollEvents: OptionSet, Sendable {
    @_spi(Package) public let rawValue: UInt32
    @_spi(Package) public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `EPOLLIN`
    @_spi(Package) public static let readable = EpollEvents(rawValue: EVENTBUS_EPOLLIN)
    /// `EPOLLOUT`
    @_spi(Package) public static let writable = EpollEvents(rawValue: EVENTBUS_EPOLLOUT)
    /// `EPOLLERR` (always reported)
    @_spi(Package) public static let error = EpollEvents(rawValue: EVENTBUS_EPOLLERR)
    /// `EPOLLHUP` (always reported): both directions are shut down.
    @_spi(Package) public static let hangup = EpollEvents(rawValue: EVENTBUS_EPOLLHUP)
    /// `EPOLLRDHUP`: the peer shut down its writing side.
    @_spi(Package) public static let readHangup = EpollEvents(rawValue: EVENTBUS_EPOLLRDHUP)
    /// `EPOLLET`: report a change of readiness once (edge-triggered), not
    /// for as long as it lasts; the owner must then read until it would block.
    @_spi(Package) public static let edgeTriggered = EpollEvents(rawValue: EVENTBUS_EPOLLET)
}

/// An epoll instance (epoll_create1(EPOLL_CLOEXEC)). Each registration carries
/// a 64-bit token handed back with its events.
package final class Epoll {
    package let descriptor: FileDescriptor
    private var buffer: UnsafeMutablePointer<epoll_event>
    private let capacity: Int

    /// - Parameter maxEvents: events returned per `wait` at most.
    /// - Throws: `SystemError("epoll_create1", errno)`.
    package init(maxEvents: Int = 256) throws(SystemError) {
        let fd = try checkedCall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
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
        _ = try checkedCall("epoll_ctl") { epoll_ctl(descriptor.rawValue, op, fd.rawValue, &event) }
    }

    /// EPOLL_CTL_ADD. - Throws: `SystemError("epoll_ctl", errno)`.
    package func add(_ fd: FileDescriptor, events: EpollEvents, token: UInt64) throws(SystemError) {
        try control(EPOLL_CTL_ADD, fd, events, token)
    }

    /// EPOLL_CTL_MOD. - Throws: `SystemError("epoll_ctl", errno)`.
    package func modify(_ fd: FileDescriptor, events: EpollEvents, token: UInt64) throws(SystemError) {
        try control(EPOLL_CTL_MOD, fd, events, token)
    }

    /// EPOLL_CTL_DEL; errors (e.g. never added) are ignored.
    package func remove(_ fd: FileDescriptor) {
        var event = epoll_event()
        _ = systemCall { epoll_ctl(descriptor.rawValue, EPOLL_CTL_DEL, fd.rawValue, &event) }
    }

    /// epoll_wait(2); calls `body(token, events)` for each ready registration.
    /// - Parameter timeoutMilliseconds: -1 waits forever.
    /// - Returns: the number of events handled (0 on timeout or EINTR).
    /// - Throws: `SystemError("epoll_wait", errno)`.
    @discardableResult
    package func wait(timeoutMilliseconds: Int32, _ body: (UInt64, EpollEvents) -> Void) throws(SystemError) -> Int {
        let n = try checkedCall("epoll_wait", .returnZero) {
            epoll_wait(descriptor.rawValue, buffer, Int32(capacity), timeoutMilliseconds)
        }
        for i in 0..<Int(n) {
            let event = buffer[i]
            body(event.data.u64, EpollEvents(rawValue: event.events))
        }
        return Int(n)
    }
}
