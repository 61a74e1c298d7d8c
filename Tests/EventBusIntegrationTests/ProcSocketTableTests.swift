// The test support's view of /proc/net/unix (`isListeningUnixSocket`), which
// many integration tests wait on before they connect.
//
// Before editing: the table must be read to its end; with only its first read
// (about 4 KiB, 58 sockets) a socket further down is never found, and on a
// machine with many sockets every such wait times out.
import EventBusTestSupport
import Glibc
import Testing

@Suite("Test support: /proc/net/unix")
struct ProcSocketTableTests {
    @Test("A listening socket is found however far down /proc/net/unix it is (100 listeners, more than a first read holds)")
    func findsAListenerPastTheFirstRead() throws {
        let tmp = try TemporaryDirectory()
        var descriptors: [Int32] = []
        defer { descriptors.forEach { _ = close($0) } }
        let paths = (0..<100).map { tmp.path + "/l\($0)" }
        for path in paths {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            try #require(fd >= 0)
            descriptors.append(fd)
            var address = try unixAddress(path)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            try #require(bound == 0 && listen(fd, 1) == 0, "bind/listen \(path): errno \(errno)")
        }
        #expect((readProcFile("/proc/net/unix")?.utf8.count ?? 0) > 100 * 60)
        let missing = paths.filter { !isListeningUnixSocket($0) }.count
        #expect(missing == 0, "\(missing) of \(paths.count) listeners not found in /proc/net/unix")
        #expect(!isListeningUnixSocket(tmp.path + "/never-bound"))
    }
}
