// Tier 2: the syscall layer against the real kernel (socketpairs and sockets
// on temporary paths, no daemon): EAGAIN surfaces as `.wouldBlock`,
// SO_PEERCRED gives our own pid/uid/gid, errors name the failing call,
// `UnixAddress` enforces sun_path's 108 bytes, flags are set at creation.
@_spi(Package) import EventBusSystem
import EventBusTestSupport
import Glibc
import Testing

@Suite("Sockets")
struct SocketTests {
    @Test func readingAnEmptyNonBlockingSocketWouldBlock() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        var buffer: [UInt8] = []
        let result = try a.read(appendingTo: &buffer, limit: 16)
        guard case .wouldBlock = result else {
            Issue.record("expected wouldBlock, got \(result)")
            return
        }
    }

    @Test func writingIntoAFullSocketWouldBlockThenDrains() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try a.setSendBufferSize(4096)
        let chunk = [UInt8](repeating: 0x61, count: 4096)
        var written = 0
        var blocked = false
        for _ in 0..<10_000 {  // bounded: the buffer is a few hundred KiB at most
            let result = try a.write(chunk.span.bytes)
            if case .complete(let n) = result { written += n } else { blocked = true; break }
        }
        #expect(blocked, "the send buffer never filled")
        #expect(written > 0)
        // The reader gets every byte written, then would block.
        var read = 0
        while true {
            let bytes = try readAvailable(b)
            if bytes.isEmpty { break }
            read += bytes.count
        }
        #expect(read == written)
        #expect(try a.poll(.writable, timeoutMilliseconds: 0).contains(.writable))
    }

    @Test func bytesWrittenOnOneEndAreReadOnTheOther() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try writeText(a, "{\"op\":\"ping\"}\n")
        #expect(try b.poll(.readable, timeoutMilliseconds: 1000).contains(.readable))
        #expect(try readAvailable(b) == Array("{\"op\":\"ping\"}\n".utf8))
    }

    @Test func shutdownOfTheWritingSideGivesEndOfFile() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try writeText(a, "last")
        try a.shutdown(.write)
        #expect(try readAvailable(b) == Array("last".utf8))
        var buffer: [UInt8] = []
        let result = try b.read(appendingTo: &buffer, limit: 8)
        guard case .complete(0) = result else {
            Issue.record("expected EOF, got \(result)")
            return
        }
        // The other direction still works (half-close).
        try writeText(b, "reply")
        #expect(try readAvailable(a) == Array("reply".utf8))
    }

    @Test func writingToAClosedPeerThrowsEPIPEWithoutSIGPIPE() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close() }
        b.close()
        let bytes = Array("x".utf8)
        let error = #expect(throws: SystemError.self) {
            _ = try a.write(bytes.span.bytes)
        }
        #expect(error?.call == "write")
        #expect(error?.errno == .brokenPipe)
        #expect(error?.description == "write: Broken pipe")
    }

    @Test func aGatheredWriteSendsEveryRangeInOrderInOneCall() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        let parts = ["{\"op\":", "\"ok\"", "}\n"].map { Array($0.utf8) }
        var vectors = IOVectors(capacity: 3)
        let (emptyAtFirst, fullAtFirst) = (vectors.isEmpty, vectors.isFull)
        #expect(emptyAtFirst && !fullAtFirst)
        for part in parts { vectors.append(part.span.bytes) }
        let (count, full) = (vectors.count, vectors.isFull)
        #expect(count == 3 && full)
        let result = try withExtendedLifetime(parts) { try a.write(vectors) }
        guard case .complete(let n) = result else {
            Issue.record("sendmsg would block")
            return
        }
        #expect(n == 12)
        #expect(try readAvailable(b) == Array("{\"op\":\"ok\"}\n".utf8))
        vectors.removeAll()
        let emptied = vectors.isEmpty
        #expect(emptied)
    }

    @Test func aReadBufferTakesAtMostItsLimitAndLendsWhatWasRead() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try writeText(a, "0123456789ab")
        let buffer = ReadBuffer(capacity: 8)
        let capacity = buffer.capacity
        #expect(capacity == 8)
        guard case .complete(let first) = try b.read(into: buffer, limit: 3) else { Issue.record("nothing read"); return }
        #expect(first == 3)
        #expect(buffer.withBytes(count: first) { bytes(of: $0) } == Array("012".utf8))
        guard case .complete(let second) = try b.read(into: buffer, limit: 100) else { Issue.record("nothing read"); return }
        #expect(second == 8, "a limit over the capacity reads the capacity")
        #expect(buffer.withBytes(count: second) { bytes(of: $0) } == Array("3456789a".utf8))
        guard case .complete(let third) = try b.read(into: buffer, limit: 8) else { Issue.record("nothing read"); return }
        #expect(buffer.withBytes(count: third) { bytes(of: $0) } == Array("b".utf8))
        guard case .wouldBlock = try b.read(into: buffer, limit: 8) else { Issue.record("expected wouldBlock"); return }
        a.close()
        guard case .complete(0) = try b.read(into: buffer, limit: 8) else { Issue.record("expected EOF"); return }
    }

    @Test func writeAllWaitsOutAFullBuffer() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        try a.setSendBufferSize(4096)
        let total = 1 << 20
        let payload = [UInt8]((0..<total).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        // A reader thread drains while writeAll blocks in poll.
        let reader = ReaderThread(fd: b, expected: total)
        try a.writeAll(payload.span.bytes)
        let received = reader.join()
        #expect(received.count == total)
        #expect(received == payload)
    }

    @Test func peerCredentialsOfASocketpairAreOurOwn() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        let expected = PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())
        #expect(try a.peerCredentials() == expected)
        #expect(try b.peerCredentials() == expected)
    }

    @Test func peerCredentialsFailOnANonSocketAndNameTheCall() throws {
        var fds: [Int32] = [-1, -1]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let error = #expect(throws: SystemError.self) {
            try FileDescriptor(rawValue: fds[0]).peerCredentials()
        }
        #expect(error?.call == "getsockopt(SO_PEERCRED)")
        #expect(error?.errno == .notSocket)
    }

    @Test func listenAcceptAndConnectOnATemporaryPath() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("bus.sock")
        let listener = try FileDescriptor.unixStreamSocket()
        defer { listener.close() }
        try listener.bind(toPath: path)
        try listener.listen(backlog: 8)
        #expect(try FileSystem.kind(ofPath: path) == .socket)
        #expect(try listener.accept() == nil, "nothing pending: accept4's EAGAIN is nil")

        let client = try FileDescriptor.connectedUnixSocket(toPath: path)
        defer { client.close() }
        let server = try #require(try listener.accept())
        defer { server.close() }
        // accept4 sets non-blocking and close-on-exec at creation.
        let f = flags(server)
        #expect(f.status & O_NONBLOCK != 0)
        #expect(f.descriptor & FD_CLOEXEC != 0)
        // The client socket asked for blocking mode but still has close-on-exec.
        #expect(flags(client).status & O_NONBLOCK == 0)
        #expect(flags(client).descriptor & FD_CLOEXEC != 0)
        #expect(try server.peerCredentials() == PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()))
        try writeText(client, "hi\n")
        #expect(try server.poll(.readable, timeoutMilliseconds: 1000).contains(.readable))
        #expect(try readAvailable(server) == Array("hi\n".utf8))
    }

    @Test func newSocketsAreNonBlockingAndCloseOnExecByDefault() throws {
        let fd = try FileDescriptor.unixStreamSocket()
        defer { fd.close() }
        #expect(flags(fd).status & O_NONBLOCK != 0)
        #expect(flags(fd).descriptor & FD_CLOEXEC != 0)
        try fd.setNonBlocking(false)
        #expect(flags(fd).status & O_NONBLOCK == 0)
        try fd.setNonBlocking(true)
        #expect(flags(fd).status & O_NONBLOCK != 0)
    }

    @Test func connectingToAMissingPathNamesTheCallAndThePath() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let error = #expect(throws: SystemError.self) {
            try FileDescriptor.connectedUnixSocket(toPath: dir.file("missing.sock")).close()
        }
        #expect(error?.call == "connect")
        #expect(error?.errno == .noSuchFile)
        #expect(error?.description == "connect: No such file or directory")
    }

    @Test func connectingToAStaleSocketIsRefused() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("stale.sock")
        let dead = try FileDescriptor.unixStreamSocket()
        try dead.bind(toPath: path)
        try dead.listen(backlog: 1)
        dead.close()  // the file stays, nobody listens
        #expect(try FileSystem.kind(ofPath: path) == .socket)
        let error = #expect(throws: SystemError.self) {
            try FileDescriptor.connectedUnixSocket(toPath: path).close()
        }
        #expect(error?.call == "connect")
        #expect(error?.errno == .connectionRefused)
    }

    @Test func bindingAnExistingPathIsAddressInUse() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("b.sock")
        let first = try FileDescriptor.unixStreamSocket()
        defer { first.close() }
        try first.bind(toPath: path)
        let second = try FileDescriptor.unixStreamSocket()
        defer { second.close() }
        let error = #expect(throws: SystemError.self) { try second.bind(toPath: path) }
        #expect(error?.call == "bind")
        #expect(error?.errno == .addressInUse)
    }

    @Test func listenOnAnUnboundSocketpairEndNamesListen() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        let error = #expect(throws: SystemError.self) { try a.listen(backlog: 1) }
        #expect(error?.call == "listen")
    }

    @Test("UnixAddress takes paths of 1 to 107 bytes", arguments: [1, 50, 107])
    func unixAddressAcceptsPathsThatFit(_ length: Int) throws {
        let path = "/" + String(repeating: "p", count: length - 1)
        #expect(try UnixAddress(path: path).path == path)
    }

    @Test("UnixAddress rejects paths of 108 bytes and more", arguments: [108, 109, 4096])
    func unixAddressRejectsPathsThatDoNotFit(_ length: Int) {
        let path = "/" + String(repeating: "p", count: length - 1)
        let error = #expect(throws: SystemError.self) { try UnixAddress(path: path) }
        #expect(error?.errno == .nameTooLong)
        #expect(error?.call == "socket path")
    }

    @Test func unixAddressRejectsEmptyPathsAndNUL() {
        for path in ["", "/tmp/a\u{0}b"] {
            #expect(throws: SystemError.self) { try UnixAddress(path: path) }
            #expect((try? UnixAddress(path: path)) == nil)
        }
        #expect(UnixAddress.maxPathBytes == 107)
    }

    @Test func bindingATooLongPathFailsBeforeTheSyscall() throws {
        let fd = try FileDescriptor.unixStreamSocket()
        defer { fd.close() }
        let path = "/tmp/" + String(repeating: "x", count: 103)  // 108 bytes
        let error = #expect(throws: SystemError.self) { try fd.bind(toPath: path) }
        #expect(error?.errno == .nameTooLong)
        #expect(try FileSystem.kind(ofPath: path) == .missing)
    }
}

/// A thread that reads `expected` bytes from a (non-blocking) fd, polling as needed.
final class ReaderThread: @unchecked Sendable {
    // @unchecked Sendable: `bytes` is written only by the thread and read only
    // after `join` has returned (pthread_join orders the accesses).
    private var bytes: [UInt8] = []
    private var thread = pthread_t()
    private let fd: FileDescriptor
    private let expected: Int

    init(fd: FileDescriptor, expected: Int) {
        self.fd = fd
        self.expected = expected
        let box = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { context in
            let me = Unmanaged<ReaderThread>.fromOpaque(context!).takeRetainedValue()
            me.run()
            return nil
        }, box)
    }

    private func run() {
        while bytes.count < expected {
            let result = try? fd.read(appendingTo: &bytes, limit: 65536)
            switch result {
            case .complete(let n)?: if n == 0 { return }
            case .wouldBlock?: _ = try? fd.poll(.readable, timeoutMilliseconds: 5000)
            case nil: return
            }
        }
    }

    func join() -> [UInt8] {
        pthread_join(thread, nil)
        return bytes
    }
}
