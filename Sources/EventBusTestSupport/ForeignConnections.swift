// Connections made as another uid, for tests of per-uid rules (PROTOCOL.md
// "Access policy", "Quotas"): a child process run through `setpriv --reuid N
// --regid N --clear-groups` (numeric ids, no /etc/passwd entry needed)
// connects and passes each socket back over a socketpair (SCM_RIGHTS,
// unix(7)), so SO_PEERCRED says uid N while the test drives the connection
// with a `RawClient` of its own.
//
// Before editing: needs root (setpriv) and a socket the other uid can reach:
// a 0755 directory and socket mode 0666 (`BrokerProcess` makes both). The
// child is `eventbus-uid-peer` from the build products (a test dependency).
import Foundation
import Glibc

/// Opens `count` connections to the broker at `path` as uid `uid` (and gid
/// `gid`, default the same number).
/// - Returns: the connections, each a `RawClient` owned by the caller. A
///   connection the broker refused is returned too: its first frame is the
///   `limit` error, then EOF.
/// - Throws: `TestFailure` when the peer cannot run or passes fewer sockets.
public func connectAs(uid: UInt32, gid: UInt32? = nil, path: String, count: Int = 1, timeout: Duration = .seconds(20)) throws -> [RawClient] {
    let peer = try builtProduct("eventbus-uid-peer")
    guard let setpriv = findInPath("setpriv") else { throw TestFailure("setpriv is not installed") }
    var pair: [Int32] = [-1, -1]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
        throw TestFailure("socketpair failed: errno \(errno)")
    }
    defer { close(pair[0]) }
    let pid: pid_t
    do {
        pid = try spawnChild(setpriv, ["--reuid=\(uid)", "--regid=\(gid ?? uid)", "--clear-groups", peer, path, String(count)],
                             stderrPath: "/dev/null", passDescriptor: pair[1])
    } catch {
        close(pair[1])
        throw error
    }
    close(pair[1])
    var clients: [RawClient] = []
    let deadline = ContinuousClock.now + timeout
    while clients.count < count {
        guard let fd = try receiveDescriptor(pair[0], deadline: deadline) else { break }
        clients.append(RawClient(adopting: fd, path: path))
    }
    let status = waitForChild(pid, timeout: max(deadline - ContinuousClock.now, .seconds(1)))
    if status == nil { kill(pid, SIGKILL); _ = waitForChild(pid, timeout: .seconds(5)) }
    guard clients.count == count else {
        throw TestFailure("eventbus-uid-peer as uid \(uid) passed \(clients.count) of \(count) connections (\(status.map { "\($0)" } ?? "still running"))")
    }
    return clients
}

/// Receives one descriptor (SCM_RIGHTS) from `socket`; nil at EOF.
private func receiveDescriptor(_ socket: Int32, deadline: ContinuousClock.Instant) throws -> Int32? {
    var entry = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
    let milliseconds = max(1, Int32(clamping: (deadline - ContinuousClock.now).components.seconds * 1000 + 1))
    guard poll(&entry, 1, milliseconds) == 1 else { throw TestFailure("no socket from eventbus-uid-peer in time") }
    let headerSize = MemoryLayout<Int>.size + 2 * MemoryLayout<Int32>.size
    var control = [UInt8](repeating: 0, count: headerSize + 8)
    var byte: UInt8 = 0
    let received = withUnsafeMutablePointer(to: &byte) { bytePointer in
        control.withUnsafeMutableBytes { controlRaw in
            var vector = iovec(iov_base: UnsafeMutableRawPointer(bytePointer), iov_len: 1)
            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                var message = msghdr()
                message.msg_iov = vectorPointer
                message.msg_iovlen = 1
                message.msg_control = controlRaw.baseAddress
                message.msg_controllen = controlRaw.count
                return recvmsg(socket, &message, Int32(MSG_CMSG_CLOEXEC))
            }
        }
    }
    if received == 0 { return nil }
    guard received == 1 else { throw TestFailure("recvmsg failed: errno \(errno)") }
    let (level, type, fd) = control.withUnsafeBytes { raw in
        (raw.load(fromByteOffset: MemoryLayout<Int>.size, as: Int32.self),
         raw.load(fromByteOffset: MemoryLayout<Int>.size + 4, as: Int32.self),
         raw.load(fromByteOffset: headerSize, as: Int32.self))
    }
    guard level == SOL_SOCKET, type == Int32(SCM_RIGHTS), fd >= 0 else { throw TestFailure("eventbus-uid-peer sent no descriptor") }
    return fd
}
