// Connections made as another uid, for tests of per-uid rules (PROTOCOL.md
// "Access policy", "Quotas"): a child process run through `setpriv --reuid N
// --regid N --clear-groups` (numeric ids, no /etc/passwd entry needed)
// connects and passes each socket back over a socketpair (SCM_RIGHTS,
// DescriptorPassing.swift), so SO_PEERCRED says uid N while the test drives the connection
// with a `RawClient` of its own.
//
// Before editing: needs root (setpriv) and a socket the other uid can reach:
// a 0755 directory and socket mode 0666 (`BrokerProcess` makes both). The
// child is `eventbus-uid-peer` from the build products (a test dependency).
import Foundation
import Glibc

/// Opens `count` connections to the broker at `path` as uid `uid` (and gid
/// `gid`, default the same number), with exactly `groups` as supplementary
/// groups (none by default).
/// - Returns: the connections, each a `RawClient` owned by the caller. A
///   connection the broker refused is returned too: its first frame is the
///   `limit` error, then EOF.
/// - Throws: `TestFailure` when the peer cannot run or passes fewer sockets.
package func connectAs(uid: UInt32, gid: UInt32? = nil, groups: [UInt32] = [], path: String, count: Int = 1, timeout: Duration = .seconds(20)) throws -> [RawClient] {
    let peer = try builtProduct("eventbus-uid-peer")
    guard let setpriv = findInPath("setpriv") else { throw TestFailure("setpriv is not installed") }
    var pair: [Int32] = [-1, -1]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
        throw TestFailure("socketpair failed: errno \(errno)")
    }
    defer { close(pair[0]) }
    let pid: pid_t
    do {
        let groupArgument = groups.isEmpty ? "--clear-groups" : "--groups=" + groups.map(String.init).joined(separator: ",")
        pid = try spawnChild(setpriv, ["--reuid=\(uid)", "--regid=\(gid ?? uid)", groupArgument, peer, path, String(count)],
                             stderrPath: "/dev/null", passDescriptor: pair[1])
    } catch {
        close(pair[1])
        throw error
    }
    close(pair[1])
    var clients: [RawClient] = []
    let deadline = ContinuousClock.now + timeout
    while clients.count < count {
        guard let fd = try receiveDescriptor(pair[0], from: "eventbus-uid-peer", deadline: deadline) else { break }
        clients.append(RawClient(adopting: fd, path: path))
    }
    let status = waitForChild(pid, timeout: max(deadline - ContinuousClock.now, .seconds(1)))
    if status == nil { kill(pid, SIGKILL); _ = waitForChild(pid, timeout: .seconds(5)) }
    guard clients.count == count else {
        throw TestFailure("eventbus-uid-peer as uid \(uid) passed \(clients.count) of \(count) connections (\(status.map { "\($0)" } ?? "still running"))")
    }
    return clients
}
