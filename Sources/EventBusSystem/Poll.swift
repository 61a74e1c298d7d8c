// poll(2): waiting until one or several descriptors are ready, for the CLI
// and the client library (the broker waits with epoll, Epoll.swift).
//
// Before editing: EINTR is "nothing ready", not an error and not a retry
// (`systemCall(.returnZero)`): every caller waits in a loop that recomputes
// its deadline, so an interrupted wait never outlasts its timeout.
// `PollEvents` is `@_spi(Package) public`, not `package` (importers say
// `@_spi(Package) import EventBusSystem`), as `EpollEvents` is (Epoll.swift):
// as package it lost the default cross-module optimisation, and OptionSet's
// generic members (an array literal's `SetAlgebra.init`) were called
// unspecialised from the modules that wait with it.
import Glibc

/// poll(2) event bits.
@_spi(Package) public struct PollEvents: OptionSet, Sendable {
    @_spi(Package) public let rawValue: Int32
    @_spi(Package) public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `POLLIN`
    @_spi(Package) public static let readable = PollEvents(rawValue: Int32(POLLIN))
    /// `POLLOUT`
    @_spi(Package) public static let writable = PollEvents(rawValue: Int32(POLLOUT))
    /// `POLLHUP`
    @_spi(Package) public static let hangup = PollEvents(rawValue: Int32(POLLHUP))
    /// `POLLERR`
    @_spi(Package) public static let error = PollEvents(rawValue: Int32(POLLERR))
}

/// One descriptor of a multi-descriptor poll(2): what to wait for, what happened.
package struct PollEntry: Sendable {
    /// The descriptor watched (not owned).
    package var descriptor: FileDescriptor
    /// Events asked for; may be empty to hear only `.hangup` and `.error`
    /// (for example to notice that the reader of a pipe has gone).
    package var events: PollEvents
    /// Events that happened, filled in by `FileDescriptor.poll(_:timeoutMilliseconds:)`.
    package var returned: PollEvents = []

    package init(_ descriptor: FileDescriptor, events: PollEvents) {
        self.descriptor = descriptor
        self.events = events
    }
}

extension FileDescriptor {
    /// Waits with poll(2) until the fd is ready for `events` or the timeout passes.
    /// - Parameter timeoutMilliseconds: -1 waits forever; 0 does not wait.
    /// - Returns: the events that are ready (empty on timeout or EINTR).
    ///   `.hangup` and `.error` may be returned without being asked for.
    /// - Throws: `SystemError("poll", errno)`.
    package func poll(_ events: PollEvents, timeoutMilliseconds: Int32) throws(SystemError) -> PollEvents {
        var entry = pollfd(fd: rawValue, events: Int16(events.rawValue), revents: 0)
        let n = try checkedCall("poll", .returnZero) { Glibc.poll(&entry, 1, timeoutMilliseconds) }
        return n == 0 ? [] : PollEvents(rawValue: Int32(entry.revents))
    }

    /// poll(2) over several descriptors.
    /// - Parameters:
    ///   - entries: descriptors and wanted events; each entry's `returned` is
    ///     set (empty when nothing happened to it).
    ///   - timeoutMilliseconds: -1 waits forever; 0 does not wait.
    /// - Returns: how many entries have events (0 on timeout or EINTR).
    /// - Throws: `SystemError("poll", errno)`.
    package static func poll(_ entries: inout [PollEntry], timeoutMilliseconds: Int32) throws(SystemError) -> Int {
        var raw = entries.map { pollfd(fd: $0.descriptor.rawValue, events: Int16(truncatingIfNeeded: $0.events.rawValue), revents: 0) }
        let n = try checkedCall("poll", .returnZero) {
            Glibc.poll(&raw, nfds_t(raw.count), timeoutMilliseconds)
        }
        for i in entries.indices { entries[i].returned = n == 0 ? [] : PollEvents(rawValue: Int32(raw[i].revents)) }
        return Int(n)
    }
}
