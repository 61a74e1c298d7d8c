// Helpers for the tier-2 tests: real kernel objects (socketpairs, sockets on
// short temporary paths in EventBusTestSupport's `TemporaryDirectory`), each
// owned by the test that made it and closed or removed before it returns.
//
// Before editing: keep paths short (sun_path holds 108 bytes) and unique per
// test so the tests can run in parallel.
import EventBusSystem
import Glibc
import Testing

/// A connected, non-blocking, close-on-exec AF_UNIX stream socketpair. The caller owns both fds.
func makeSocketPair(sourceLocation: SourceLocation = #_sourceLocation) throws -> (FileDescriptor, FileDescriptor) {
    var fds: [Int32] = [-1, -1]
    let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    let result = socketpair(AF_UNIX, type, 0, &fds)
    try #require(result == 0, "socketpair: \(Errno.current)", sourceLocation: sourceLocation)
    return (FileDescriptor(rawValue: fds[0]), FileDescriptor(rawValue: fds[1]))
}

/// The fd's file status flags (fcntl F_GETFL) and descriptor flags (F_GETFD).
func flags(_ fd: FileDescriptor) -> (status: Int32, descriptor: Int32) {
    (fcntl(fd.rawValue, F_GETFL), fcntl(fd.rawValue, F_GETFD))
}

/// Reads what is available now (non-blocking fd), up to `max` bytes.
func readAvailable(_ fd: FileDescriptor, max: Int = 65536) throws -> [UInt8] {
    var buffer: [UInt8] = []
    _ = try fd.read(appendingTo: &buffer, limit: max)
    return buffer
}

/// A copy of the bytes `span` covers.
func bytes(of span: RawSpan) -> [UInt8] {
    span.withUnsafeBytes { Array($0) }
}

/// Writes `text` and expects it to be taken whole.
func writeText(_ fd: FileDescriptor, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let bytes = Array(text.utf8)
    let result = try fd.write(bytes.span.bytes)
    guard case .complete(let n) = result else {
        Issue.record("write would block", sourceLocation: sourceLocation)
        return
    }
    #expect(n == bytes.count, sourceLocation: sourceLocation)
}
