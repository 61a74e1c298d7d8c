// A NATS connect off the owner's thread (issue 36): the link's request part
// runs on the broker's own loop (EventBusBridge's LinkInBroker.swift), which
// must never wait on DNS or a TCP connect, so its `ClientDriver` resolves
// and connects on a short-lived thread of this type's and is told when the
// outcome is ready through an eventfd its owner polls (`descriptor`).
//
// Before editing: one connect at a time (the state machine asks for the
// next only after the outcome of the last); `begin` and `take` are called
// from the owner's thread, the helper thread only stores the outcome and
// signals. An outcome nobody took (the driver gone) is closed with this object.
import EventBusSystem
import Synchronization

package final class BackgroundConnect: Sendable {
    /// Readable once an outcome waits to be taken.
    private let wakeup: Wakeup
    private let outcome = Mutex<Outcome?>(nil)

    /// How a connect ended: a connected socket, or why not.
    enum Outcome: Sendable {
        case connected(FileDescriptor)
        case failed(String)
    }

    /// - Throws: `SystemError("eventfd", ...)`.
    package init() throws(SystemError) {
        wakeup = try Wakeup()
    }

    deinit {
        if case .connected(let fd)? = outcome.withLock({ $0 }) { fd.close() }
    }

    /// Poll this for `.readable`, then call `ClientDriver.connectFinished`.
    package var descriptor: FileDescriptor { wakeup.descriptor }

    /// Resolves `server` and connects to it on a new thread (bounded by
    /// `timeoutMilliseconds` per address, as the blocking connect is).
    func begin(_ server: ServerAddress, timeoutMilliseconds: Int32) {
        SystemThread.detach { [self] in
            let result: Outcome
            do {
                let addresses = try TCPResolver.resolve(host: server.host, port: server.port)
                result = .connected(try FileDescriptor.connectedTCPSocket(to: addresses, timeoutMilliseconds: timeoutMilliseconds))
            } catch {
                result = .failed("\(error)")
            }
            outcome.withLock { $0 = result }
            wakeup.signal()
        }
    }

    /// The outcome of the last `begin`, once (nil while it is still connecting).
    func take() -> Outcome? {
        wakeup.drain()
        return outcome.withLock { outcome in
            defer { outcome = nil }
            return outcome
        }
    }
}
