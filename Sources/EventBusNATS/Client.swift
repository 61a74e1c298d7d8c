// The I/O half of the NATS client: one thread that resolves and connects
// (TCP, in EventBusSystem), polls the socket and a wake-up descriptor, feeds
// what it reads to `ClientState`, writes the outbox, drives the timers and
// hands every other effect to the event handler. Other threads only publish,
// subscribe and read counters, under the state lock.
//
// Before editing, the rules that keep this simple:
// - the I/O thread owns the socket: only it connects, reads, writes and
//   closes it; other threads never touch a descriptor;
// - nothing is done under the state lock but state changes: effects run
//   after it is released, in order, on the I/O thread;
// - the event handler runs on the I/O thread and must not block: while it
//   runs nothing is read, and a server closes a client that stops reading
//   (slow consumer, DESIGN-NOTES-1.1 A.2);
// - a publish that makes the outbox writable wakes the thread (eventfd); the
//   thread otherwise sleeps until the socket is ready or the next deadline.
//   `publish(contentsOf:)` takes the lock and wakes once for a whole batch,
//   and `afterMessages` tells a consumer when one read's messages are done,
//   so that both sides pay for a wake-up per batch, not per message.
import Dispatch
import EventBusSystem
import Glibc
import Synchronization

/// A NATS client connection with automatic failover and reconnect (forever).
///
/// ```swift
/// let client = try Client(configuration: ClientConfiguration(
///     servers: [ServerAddress(url: "nats://127.0.0.1:4222")!],
///     connect: ConnectOptions(name: "eventbus-bridge host-a"))) { effect in
///     if case .message(let message) = effect { handle(message) }
/// }
/// client.start()
/// _ = client.subscribe(Subject(pattern: "eventbus.evt.*.>")!)
/// _ = client.publish(OutgoingMessage(subject: Subject("x.y")!, payload: Array("{}".utf8)))
/// client.close()
/// ```
public final class Client: Sendable {
    /// Called on the I/O thread, with no lock held, for every effect except
    /// `.connect` and `.closeConnection` (which the client performs itself).
    public typealias Handler = @Sendable (Effect) -> Void

    private let state: Mutex<ClientState>
    private let wakeup: Wakeup
    private let handler: Handler
    private let afterMessages: (@Sendable () -> Void)?
    private let connectTimeout: Duration
    /// Signalled by the I/O thread when it has exited.
    private let finished = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)

    /// A client that does nothing until `start()`.
    /// - Parameters:
    ///   - handler: gets every effect (see `Handler`).
    ///   - afterMessages: called on the I/O thread after the messages of one
    ///     read were handed to `handler`, so a consumer can act once per batch
    ///     (e.g. wake its writer once instead of once per message).
    /// - Throws: `SystemError("eventfd", …)` when the wake-up descriptor cannot be made.
    public init(configuration: ClientConfiguration, handler: @escaping Handler, afterMessages: (@Sendable () -> Void)? = nil) throws(SystemError) {
        state = Mutex(ClientState(configuration: configuration))
        wakeup = try Wakeup()
        self.handler = handler
        self.afterMessages = afterMessages
        connectTimeout = configuration.connectTimeout
    }

    deinit {
        // Only reachable without a running thread (the thread holds `self`).
        _ = state.withLock { $0.close() }
    }

    /// Starts the I/O thread, which connects to the first server. Once only.
    public func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        SystemThread.detach { [self] in self.run() }
    }

    /// Publishes `message` (see `ClientState.publish`); never blocks on the network.
    public func publish(_ message: OutgoingMessage) -> PublishOutcome {
        let (outcome, wake) = state.withLock { state -> (PublishOutcome, Bool) in
            let wasWritable = state.hasWritableBytes
            let outcome = state.publish(message)
            return (outcome, !wasWritable && state.hasWritableBytes)
        }
        if wake { wakeup.signal() }
        return outcome
    }

    /// Publishes `messages` in order under one lock and wakes the I/O thread
    /// at most once (see `ClientState.publish` for each outcome).
    public func publish(contentsOf messages: [OutgoingMessage]) -> [PublishOutcome] {
        let (outcomes, wake) = state.withLock { state -> ([PublishOutcome], Bool) in
            let wasWritable = state.hasWritableBytes
            let outcomes = messages.map { state.publish($0) }
            return (outcomes, !wasWritable && state.hasWritableBytes)
        }
        if wake { wakeup.signal() }
        return outcomes
    }

    /// Subscribes (see `ClientState.subscribe`); kept across reconnects.
    @discardableResult
    public func subscribe(_ subject: Subject, queue: Subject? = nil) -> SubscriptionID {
        let sid = state.withLock { $0.subscribe(subject, queue: queue) }
        wakeup.signal()
        return sid
    }

    /// Withdraws a subscription.
    public func unsubscribe(_ sid: SubscriptionID) {
        state.withLock { $0.unsubscribe(sid) }
        wakeup.signal()
    }

    /// The counters now.
    public var statistics: ClientStatistics { state.withLock { $0.statistics } }

    /// The link state now.
    public var link: LinkState { state.withLock { $0.link } }

    /// The pool now (seeds and discovered servers).
    public var pool: ServerPool { state.withLock { $0.pool } }

    /// Closes the client: unsent messages are discarded, the thread ends.
    /// Waits for the I/O thread to finish (at most about `connectTimeout`
    /// when it is inside a connect).
    public func close() {
        _ = state.withLock { $0.close() }
        wakeup.signal()
        if started.load(ordering: .relaxed) {
            finished.wait()
            finished.signal()  // let a second close() return too
        }
    }

    // MARK: The I/O thread

    private func run() {
        var connection = Connection()
        perform(state.withLock { $0.start(now: Clock.monotonicNanoseconds()) }, &connection)
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            if let server = connection.pendingConnect {
                connection.pendingConnect = nil
                open(server, &connection)
                continue
            }
            let (closed, wantsWrite, deadline) = state.withLock { ($0.isClosed, $0.hasWritableBytes, $0.nextDeadline) }
            if closed { break }
            var entries = [PollEntry(wakeup.descriptor, events: .readable)]
            if let fd = connection.fd {
                entries.append(PollEntry(fd, events: wantsWrite ? [.readable, .writable] : .readable))
            }
            let now = Clock.monotonicNanoseconds()
            let timeout: Int32 = deadline.map { Int32(clamping: max(0, ($0 - now + 999_999) / 1_000_000)) } ?? -1
            do {
                _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: timeout)
            } catch {
                // poll(2) fails only for bad arguments; wait a little instead of spinning.
                usleep(10_000)
            }
            let woken = !entries[0].returned.isEmpty
            if woken { wakeup.drain() }
            if entries.count > 1, let fd = connection.fd {
                let ready = entries[1].returned
                if !ready.intersection([.readable, .hangup, .error]).isEmpty {
                    readAvailable(fd, &buffer, &connection)
                }
                // Woken by a publish: write at once rather than poll again to
                // learn that the socket is writable (it nearly always is; if
                // not, the write would block and the next poll waits for it).
                if connection.fd == fd && (ready.contains(.writable) || (woken && state.withLock { $0.hasWritableBytes })) {
                    writeAvailable(fd, &connection)
                }
            }
            perform(state.withLock { $0.tick(now: Clock.monotonicNanoseconds()) }, &connection)
        }
        if let fd = connection.fd { fd.close() }
        finished.signal()
    }

    /// The socket the I/O thread holds, and a connect it must make next.
    private struct Connection {
        var fd: FileDescriptor?
        var pendingConnect: ServerAddress?
    }

    /// Resolves and connects (blocking, bounded by `connectTimeout` per address).
    private func open(_ server: ServerAddress, _ connection: inout Connection) {
        let timeout = Int32(clamping: connectTimeout.nanoseconds / 1_000_000)
        let result: Result<FileDescriptor, any Error>
        do {
            let addresses = try TCPResolver.resolve(host: server.host, port: server.port)
            result = .success(try FileDescriptor.connectedTCPSocket(to: addresses, timeoutMilliseconds: timeout))
        } catch {
            result = .failure(error)
        }
        let now = Clock.monotonicNanoseconds()
        switch result {
        case .success(let fd):
            connection.fd = fd
            perform(state.withLock { $0.connectionEstablished(now: now) }, &connection)
        case .failure(let error):
            perform(state.withLock { $0.connectFailed(reason: "\(error)", now: now) }, &connection)
        }
    }

    private func readAvailable(_ fd: FileDescriptor, _ buffer: inout [UInt8], _ connection: inout Connection) {
        while connection.fd == fd {
            let attempt = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(SystemError) -> IOResult<Int> in try fd.read(into: raw) }
            }
            switch attempt {
            case .failure(let error):
                lost(fd, reason: "\(error)", &connection)
                return
            case .success(.wouldBlock):
                return
            case .success(.complete(0)):
                lost(fd, reason: "the server closed the connection", &connection)
                return
            case .success(.complete(let count)):
                let now = Clock.monotonicNanoseconds()
                let chunk = buffer[0..<count]
                let step = state.withLock { state in
                    chunk.withUnsafeBytes { state.received($0, now: now) }
                }
                perform(step, &connection)
                if count < buffer.count { return }
            }
        }
    }

    private func writeAvailable(_ fd: FileDescriptor, _ connection: inout Connection) {
        while connection.fd == fd {
            let bytes = state.withLock { $0.writable() }
            if bytes.isEmpty { return }
            let attempt = bytes.withUnsafeBytes { raw in
                Result { () throws(SystemError) -> IOResult<Int> in try fd.write(raw) }
            }
            switch attempt {
            case .failure(let error):
                lost(fd, reason: "\(error)", &connection)
                return
            case .success(.wouldBlock):
                return
            case .success(.complete(let count)):
                state.withLock { $0.didWrite(count) }
                if count < bytes.count { return }
            }
        }
    }

    private func lost(_ fd: FileDescriptor, reason: String, _ connection: inout Connection) {
        fd.close()
        connection.fd = nil
        perform(state.withLock { $0.connectionLost(reason: reason, now: Clock.monotonicNanoseconds()) }, &connection)
    }

    /// Performs a step's effects in order, with no lock held.
    private func perform(_ step: Step, _ connection: inout Connection) {
        var messages = false
        defer { if messages { afterMessages?() } }
        for effect in step.effects {
            if case .message = effect { messages = true }
            switch effect {
            case .connect(let server):
                connection.pendingConnect = server
            case .closeConnection:
                connection.fd?.close()
                connection.fd = nil
            default:
                handler(effect)
            }
        }
    }
}
