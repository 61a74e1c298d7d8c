// Tier 2: the TCP client wrappers and the eventfd wake-up against the real
// kernel on 127.0.0.1: resolving names and literals, connecting (accepted,
// refused), TCP_NODELAY, bytes both ways, and errors that name the call.
@_spi(Package) import EventBusSystem
import Glibc
import Testing

/// A listening TCP socket on 127.0.0.1 with a kernel-chosen port. The caller closes `fd`.
func listeningLoopback() throws -> (fd: Int32, port: UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    try #require(fd >= 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            bind(fd, raw, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, raw, &length) == 0
        }
    }
    try #require(bound, "bind/listen: \(Errno.current)")
    return (fd, UInt16(bigEndian: address.sin_port))
}

@Suite("TCP sockets")
struct TCPSocketTests {
    @Test(arguments: [("127.0.0.1", "127.0.0.1:4222"), ("::1", "[::1]:4222")])
    func ipLiteralsResolveToThemselves(host: String, expected: String) throws {
        let addresses = try TCPResolver.resolve(host: host, port: 4222)
        #expect(addresses.map(\.description) == [expected])
    }

    @Test func localhostResolvesToALoopbackAddress() throws {
        let addresses = try TCPResolver.resolve(host: "localhost", port: 1)
        #expect(!addresses.isEmpty)
        #expect(addresses.allSatisfy { $0.description.hasPrefix("127.") || $0.description.hasPrefix("[::1]") })
    }

    @Test func anUnknownNameIsAResolutionErrorThatNamesHostAndPort() {
        do {
            _ = try TCPResolver.resolve(host: "no-such-host.invalid", port: 4222)
            Issue.record("resolved an .invalid name")
        } catch {
            #expect(error.description.hasPrefix("getaddrinfo no-such-host.invalid:4222: "))
        }
    }

    @Test func connectingToAListenerWorksAndBytesFlowBothWays() throws {
        let (listener, port) = try listeningLoopback()
        defer { close(listener) }
        let client = try FileDescriptor.connectedTCPSocket(to: TCPResolver.resolve(host: "127.0.0.1", port: port), timeoutMilliseconds: 2000)
        defer { client.close() }
        let server = accept(listener, nil, nil)
        try #require(server >= 0)
        defer { close(server) }
        var noDelay: Int32 = 0
        var size = socklen_t(4)
        getsockopt(client.rawValue, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, &size)
        #expect(noDelay == 1, "TCP_NODELAY is set")
        #expect(fcntl(client.rawValue, F_GETFL) & O_NONBLOCK != 0, "non-blocking")
        #expect(fcntl(client.rawValue, F_GETFD) & FD_CLOEXEC != 0, "close-on-exec")
        let hello = Array("PING\r\n".utf8)
        try client.writeAll(hello.span.bytes)
        var buffer = [UInt8](repeating: 0, count: 16)
        let n = buffer.withUnsafeMutableBytes { recv(server, $0.baseAddress, $0.count, 0) }
        #expect(Array(buffer.prefix(max(0, n))) == hello)
        _ = "PONG\r\n".withCString { send(server, $0, 6, 0) }
        _ = try client.poll(.readable, timeoutMilliseconds: 2000)
        var reply: [UInt8] = []
        guard case .complete = try client.read(appendingTo: &reply, limit: 16) else { Issue.record("nothing read"); return }
        #expect(String(decoding: reply, as: UTF8.self) == "PONG\r\n")
    }

    @Test func connectingToAClosedPortIsRefusedAndNamesTheCall() throws {
        let (listener, port) = try listeningLoopback()
        close(listener)  // nobody listens on `port` any more
        do {
            _ = try FileDescriptor.connectedTCPSocket(to: TCPResolver.resolve(host: "127.0.0.1", port: port), timeoutMilliseconds: 2000)
            Issue.record("connected to a closed port")
        } catch let error as SystemError {
            #expect(error.call == "connect" && error.errno == .connectionRefused)
            #expect(error.description == "connect: Connection refused")
        }
    }

    @Test func aWakeupIsReadableAfterASignalUntilDrained() throws {
        let wakeup = try Wakeup()
        #expect(try wakeup.descriptor.poll(.readable, timeoutMilliseconds: 0).isEmpty)
        wakeup.signal()
        wakeup.signal()
        #expect(try wakeup.descriptor.poll(.readable, timeoutMilliseconds: 0).contains(.readable))
        wakeup.drain()
        #expect(try wakeup.descriptor.poll(.readable, timeoutMilliseconds: 0).isEmpty)
        wakeup.drain()  // nothing to drain: no error, no block
    }
}
