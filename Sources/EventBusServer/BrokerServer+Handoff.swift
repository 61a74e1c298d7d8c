// Connections handed to the loop by another thread of the same process, with
// the credentials the broker is to see for them: the NATS link inside
// eventbusd (`--bridge`, issue 36) reaches its broker through a socketpair
// whose broker end comes here, admitted as a connection of the bridge user
// (`--bridge-user`), so the policy (`bridge`, `hold`, publish and subscribe
// rules), the quotas and flow control apply to the link exactly as to an
// eventbus-bridge process of that user. SO_PEERCRED on a socketpair would say
// the broker's own uid, which is why the credentials travel with the fd.
//
// Before editing: `hand` may be called from any thread; the loop takes the
// queued ends when the eventfd wakes it (`adoptHandedConnections`), on its own
// thread, and admits each like an accepted one (`admit(_:credentials:)`).
// A broker that is stopping closes what it is handed.
import EventBusCore
import EventBusSystem
import Synchronization

/// The queue of connections handed to a running `BrokerServer` (`BrokerServer.handoff`).
package final class ConnectionHandoff: Sendable {
    let wakeup: Wakeup
    private let queue = Mutex<[(FileDescriptor, Credentials, attached: Bool)]>([])

    init() throws(SystemError) {
        wakeup = try Wakeup()
    }

    /// Hands `fd` (owned by the server from now on) to the loop, to be served
    /// as a connection of `pid`, `uid`, `gid` and `groups`. `attached`: its
    /// peer is an attachment of the loop (the hand-over,
    /// BrokerServer+Attachments.swift).
    package func hand(_ fd: FileDescriptor, pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = [], attached: Bool = false) {
        queue.withLock { $0.append((fd, Credentials(pid: pid, uid: uid, gid: gid, supplementaryGroups: groups), attached)) }
        wakeup.signal()
    }

    /// A new socketpair: one end is handed to the loop as above, the other returned.
    /// - Throws: `SystemError("socketpair", ...)`.
    package func connect(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = [], attached: Bool = false) throws(SystemError) -> FileDescriptor {
        let (mine, theirs) = try FileDescriptor.unixStreamPair()
        hand(theirs, pid: pid, uid: uid, gid: gid, groups: groups, attached: attached)
        return mine
    }

    func take() -> [(FileDescriptor, Credentials, attached: Bool)] {
        wakeup.drain()
        return queue.withLock { queue in
            defer { queue.removeAll() }
            return queue
        }
    }
}

extension BrokerServer {
    static let handoffToken: UInt64 = .max - 1_000_000

    /// Admits every connection handed since the last call (on the loop's thread).
    func adoptHandedConnections() {
        for (fd, credentials, attached) in handoff.take() {
            if shutdownDeadline != nil {
                fd.close()
                continue
            }
            admit(fd, credentials: credentials, attached: attached)
        }
    }
}
