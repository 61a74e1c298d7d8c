// A `ClientDriver` given a `BackgroundConnect` (issue 36: the link's request
// part on the broker's loop, which must not wait on DNS or a connect):
// `start` returns without a socket, the outcome arrives through
// `connectDescriptor`, and `connectFinished` goes on from there, against a
// real nats-server (up, handshake, a message through it) and a port nobody
// listens on (the failure reported, the retry scheduled).
//
// Before editing: the descriptor is waited on with poll(2), bounded; nothing
// is timed.
@testable import EventBusNATS
@_spi(Package) import EventBusSystem
import EventBusTestSupport
import Glibc
import Testing

@Suite(.serialized, .enabled(if: NATSCluster.isAvailable, "nats-server is not installed (scripts/deps installs it)"))
struct BackgroundConnectTests {
    static func driver(_ url: String) throws -> ClientDriver {
        var configuration = ClientConfiguration(servers: [ServerAddress(url: url)!], connect: ConnectOptions(name: "background", echo: true))
        configuration.randomize = false
        configuration.backoff = Backoff(initial: .milliseconds(20), maximum: .milliseconds(200))
        return ClientDriver(configuration: configuration, background: try BackgroundConnect())
    }

    /// A TCP port on 127.0.0.1 that nothing listens on (bound to 0, read, closed).
    static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        try #require(bound)
        return UInt16(bigEndian: address.sin_port)
    }

    /// Waits (poll, 20 s at most) until `fd` is readable.
    static func waitReadable(_ fd: FileDescriptor) throws {
        var entries = [PollEntry(fd, events: .readable)]
        _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: 20_000)
        try #require(entries[0].returned.contains(.readable), "the descriptor never became readable")
    }

    /// Serves `driver` (reads, writes, timers) until `done` says so, 20 s at most.
    static func serve(_ driver: inout ClientDriver, _ effects: inout [Effect], until done: ([Effect]) -> Bool) throws {
        let deadline = Clock.monotonicNanoseconds() + 20_000_000_000
        while !done(effects) {
            try #require(Clock.monotonicNanoseconds() < deadline, "gave up; effects: \(effects)")
            if let fd = driver.descriptor {
                var entries = [PollEntry(fd, events: driver.wantsWrite ? [.readable, .writable] : .readable)]
                _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: 20)
                if !entries[0].returned.intersection([.readable, .hangup, .error]).isEmpty { driver.readAvailable(&effects) }
            } else if let connected = driver.connectDescriptor {
                var entries = [PollEntry(connected, events: .readable)]
                _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: 20)
                if entries[0].returned.contains(.readable) { driver.connectFinished(&effects) }
            }
            driver.writeAvailable(&effects)
            driver.tick(&effects)
        }
    }

    @Test func startReturnsWithoutASocketAndTheConnectEndsThroughItsDescriptor() throws {
        let cluster = try NATSCluster(count: 1)
        var driver = try Self.driver(cluster.url(0))
        var effects: [Effect] = []
        driver.start(&effects)
        #expect(driver.descriptor == nil, "start connected on the caller's thread")
        let connected = try #require(driver.connectDescriptor)
        try Self.waitReadable(connected)
        driver.connectFinished(&effects)
        #expect(driver.descriptor != nil)
        try Self.serve(&driver, &effects) { $0.contains { if case .linkUp = $0 { true } else { false } } }
        // The link works: a message to ourselves (echo) comes back.
        let sid = driver.state.subscribe(Subject(pattern: "bg.test")!)
        _ = driver.publish(OutgoingMessage(subject: Subject("bg.test")!, payload: Array("hi".utf8)))
        try Self.serve(&driver, &effects) { $0.contains { if case .message(let m) = $0 { m.sid == sid } else { false } } }
        driver.close()
    }

    @Test func aRefusedConnectIsReportedAndRetriedInTheBackgroundToo() throws {
        // A port that was free a moment ago: nothing listens there.
        let port = try Self.freePort()
        var driver = try Self.driver("nats://127.0.0.1:\(port)")
        var effects: [Effect] = []
        driver.start(&effects)
        #expect(driver.descriptor == nil && effects.isEmpty)
        try Self.serve(&driver, &effects) { $0.filter { if case .attemptFailed = $0 { true } else { false } }.count >= 2 }
        #expect(driver.descriptor == nil)
        driver.close()
    }
}
