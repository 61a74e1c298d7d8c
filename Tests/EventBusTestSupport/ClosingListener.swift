// A fake broker socket that accepts every connection and closes it at once,
// without a byte: what a client sees when systemd accepted the connection on
// behalf of a broker that then failed to start.
//
// Before editing: the accept thread is woken for `stop()` by shutdown(2) of
// the listening socket (accept(2) then fails with EINVAL on Linux), and only
// after the thread has finished is the descriptor closed, so its number can
// never be reused under a running accept.
import EventBusSystem
import Foundation
import Glibc
import Synchronization

/// A listening `AF_UNIX` stream socket at `path` whose connections are closed
/// as soon as they are accepted. Stopped (and the path unlinked) by `stop()` or deinit.
package final class ClosingListener: Sendable {
    /// The socket path.
    package let path: String
    private let fd: Int32
    private let finished = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    /// Connections accepted (and closed) so far.
    package var acceptedCount: Int { counter.accepted.load(ordering: .relaxed) }
    private let counter = Counter()

    /// Shared with the accept thread (which must not hold the listener itself).
    private final class Counter: Sendable {
        let accepted = Atomic<Int>(0)
    }

    /// Binds and listens at `path` (which must not exist), then accepts on a thread.
    /// - Throws: `TestFailure` naming the failed call.
    package init(path: String) throws {
        self.path = path
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
        var address: sockaddr_un
        do { address = try unixAddress(path) } catch { Glibc.close(fd); throw TestFailure("\(error)") }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw TestFailure("bind/listen \(path) failed: errno \(code)")
        }
        self.fd = fd
        let thread = Thread { [counter, finished] in
            accepting: while true {
                switch systemCall(.retry, { accept(fd, nil, nil) }) {
                case .success(let client):
                    counter.accepted.add(1, ordering: .relaxed)
                    Glibc.close(client)
                case .failure(let e) where e.rawValue == ECONNABORTED: continue
                case .failure: break accepting
                }
            }
            finished.signal()
        }
        thread.start()
    }

    /// Stops accepting, closes the socket and unlinks the path; idempotent.
    package func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        finished.wait()
        Glibc.close(fd)
        unlink(path)
    }

    deinit { stop() }
}
