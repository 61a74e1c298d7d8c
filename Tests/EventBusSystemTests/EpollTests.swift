// Tier 2: epoll(7) and signalfd(2) with real descriptors: readable, writable,
// peer half-close (EPOLLRDHUP) and full close (EPOLLHUP) are reported with the
// registration's token; modify and remove take effect; errors name epoll_ctl.
@_spi(Package) import EventBusSystem
import EventBusTestSupport
import Glibc
import Testing

/// Collects one `wait` worth of events as (token, events).
func waitEvents(_ epoll: Epoll, timeoutMilliseconds: Int32 = 1000) throws -> [(UInt64, EpollEvents)] {
    var events: [(UInt64, EpollEvents)] = []
    try epoll.wait(timeoutMilliseconds: timeoutMilliseconds) { token, mask in events.append((token, mask)) }
    return events
}

@Suite("Epoll")
struct EpollTests {
    @Test func aQuietSocketReportsNothingBeforeTheTimeout() throws {
        let epoll = try Epoll()
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try epoll.add(a, events: [.readable, .readHangup], token: 1)
        #expect(try epoll.wait(timeoutMilliseconds: 0) { _, _ in } == 0)
    }

    @Test func readableIsReportedWithTheToken() throws {
        let epoll = try Epoll()
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try epoll.add(a, events: [.readable, .readHangup], token: 0xDEAD_BEEF_0000_0001)
        try writeText(b, "x")
        let events = try waitEvents(epoll)
        #expect(events.count == 1)
        #expect(events.first?.0 == 0xDEAD_BEEF_0000_0001)
        #expect(events.first?.1.contains(.readable) == true)
        #expect(events.first?.1.contains(.hangup) == false)
        // Level-triggered: reported again until drained.
        #expect(try waitEvents(epoll, timeoutMilliseconds: 0).count == 1)
        _ = try readAvailable(a)
        #expect(try waitEvents(epoll, timeoutMilliseconds: 0).isEmpty)
    }

    @Test func aPeerShuttingDownItsWritingSideIsReadHangup() throws {
        let epoll = try Epoll()
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try epoll.add(a, events: [.readable, .readHangup], token: 7)
        try b.shutdown(.write)
        let mask = try #require(try waitEvents(epoll).first?.1)
        #expect(mask.contains(.readHangup))
        #expect(mask.contains(.readable), "EOF is readable")
        #expect(!mask.contains(.hangup), "the other direction is still open")
    }

    @Test func aPeerClosingCompletelyIsHangup() throws {
        let epoll = try Epoll()
        let (a, b) = try makeSocketPair()
        defer { a.close() }
        try epoll.add(a, events: [.readable, .readHangup], token: 9)
        b.close()
        let events = try waitEvents(epoll)
        #expect(events.first?.0 == 9)
        #expect(events.first?.1.contains(.hangup) == true)
        #expect(events.first?.1.contains(.readHangup) == true)
    }

    @Test func writableIsReportedAndModifyChangesTheInterest() throws {
        let epoll = try Epoll()
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try epoll.add(a, events: [.writable], token: 3)
        #expect(try waitEvents(epoll).first?.1.contains(.writable) == true)
        try epoll.modify(a, events: [.readable], token: 4)
        #expect(try waitEvents(epoll, timeoutMilliseconds: 0).isEmpty)
        try writeText(b, "y")
        let events = try waitEvents(epoll)
        #expect(events.map(\.0) == [4])
    }

    @Test func removedDescriptorsAreNoLongerReported() throws {
        let epoll = try Epoll()
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try epoll.add(a, events: [.readable], token: 1)
        epoll.remove(a)
        epoll.remove(a)  // removing twice is harmless
        try writeText(b, "z")
        #expect(try waitEvents(epoll, timeoutMilliseconds: 0).isEmpty)
    }

    @Test func addingTwiceIsAnEpollCtlError() throws {
        let epoll = try Epoll()
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try epoll.add(a, events: [.readable], token: 1)
        let error = #expect(throws: SystemError.self) { try epoll.add(a, events: [.readable], token: 2) }
        #expect(error?.call == "epoll_ctl")
        #expect(error?.errno == .fileExists)
        let bad = #expect(throws: SystemError.self) { try epoll.modify(FileDescriptor(rawValue: -1), events: [], token: 0) }
        #expect(bad?.call == "epoll_ctl")
    }

    @Test func severalDescriptorsReportTheirOwnTokens() throws {
        let epoll = try Epoll(maxEvents: 2)
        var pairs: [(FileDescriptor, FileDescriptor)] = []
        defer { for (a, b) in pairs { a.close(); b.close() } }
        for i in 0..<3 {
            let pair = try makeSocketPair()
            pairs.append(pair)
            try epoll.add(pair.0, events: [.readable], token: UInt64(100 + i))
            try writeText(pair.1, "m")
        }
        // maxEvents 2: the first wait returns two, the rest come next time.
        let first = try waitEvents(epoll)
        #expect(first.count == 2)
        for (token, _) in first { _ = try readAvailable(pairs[Int(token) - 100].0) }
        let second = try waitEvents(epoll)
        #expect(second.count == 1)
        #expect(Set((first + second).map(\.0)) == [100, 101, 102])
    }

    @Test func aListeningSocketIsReadableWhenAConnectionIsPending() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let listener = try FileDescriptor.unixStreamSocket()
        defer { listener.close() }
        try listener.bind(toPath: dir.file("l.sock"))
        try listener.listen(backlog: 4)
        let epoll = try Epoll()
        try epoll.add(listener, events: [.readable], token: 42)
        #expect(try waitEvents(epoll, timeoutMilliseconds: 0).isEmpty)
        let client = try FileDescriptor.connectedUnixSocket(toPath: dir.file("l.sock"))
        defer { client.close() }
        #expect(try waitEvents(epoll).map(\.0) == [42])
        let accepted = try #require(try listener.accept())
        accepted.close()
    }
}

@Suite("Signals")
struct SignalTests {
    @Test func aBlockedSignalIsReadFromTheSignalfd() throws {
        // SIGUSR2 is blocked for this thread only and sent to this thread only,
        // so no other test or thread sees it.
        let signals = try SignalDescriptor(signals: [SIGUSR2])
        #expect(signals.readSignals().isEmpty)
        let epoll = try Epoll()
        try epoll.add(signals.descriptor, events: [.readable], token: 5)
        pthread_kill(pthread_self(), SIGUSR2)
        #expect(try waitEvents(epoll).map(\.0) == [5])
        #expect(signals.readSignals() == [SIGUSR2])
        #expect(signals.readSignals().isEmpty)
    }
}
