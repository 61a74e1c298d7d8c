// The NATS client on a thread of its own: `ClientDriver` (the socket and the
// state machine) under a lock, polled with a wake-up descriptor by one I/O
// thread, which hands every effect to the event handler. Other threads only
// publish, subscribe and read counters, under the lock. (The bridge drives a
// `ClientDriver` from its own loop instead, with no thread and no lock.)
//
// Before editing, the rules that keep this simple:
// - the I/O thread owns the socket (through the driver); other threads never
//   touch a descriptor. It reads, writes and connects under the lock (a
//   publisher may wait for a read, or for a connect of at most
//   `connectTimeout`);
// - effects run after the lock is released, in order, on the I/O thread;
// - the event handler runs on the I/O thread and must not block: while it
//   runs nothing is read, and a server closes a client that stops reading
//   (slow consumer, DESIGN-NOTES-1.1 A.2);
// - a publish that makes the outbox writable wakes the thread (eventfd); the
//   thread otherwise sleeps until the socket is ready or the next deadline.
//   `publish(contentsOf:)` takes the lock and wakes once for a whole batch,
//   and `afterMessages` tells a consumer when one read's messages are done,
//   so that both sides pay for a wake-up per batch, not per message.
@_spi(Package) import EventBusSystem
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
package final class Client: Sendable {
    /// Called on the I/O thread, with no lock held, for every effect except
    /// `.connect` and `.closeConnection` (which the client performs itself).
    package typealias Handler = @Sendable (Effect) -> Void

    private let state: Mutex<ClientDriver>
    private let wakeup: Wakeup
    private let handler: Handler
    private let afterMessages: (@Sendable () -> Void)?
    private let connectTimeout: Duration
    /// Set by the I/O thread when it has exited.
    private let finished = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)

    /// A client that does nothing until `start()`.
    /// - Parameters:
    ///   - handler: gets every effect (see `Handler`).
    ///   - afterMessages: called on the I/O thread after the messages of one
    ///     read were handed to `handler`, so a consumer can act once per batch
    ///     (e.g. wake its writer once instead of once per message).
    /// - Throws: `SystemError("eventfd", …)` when the wake-up descriptor cannot be made.
    package init(configuration: ClientConfiguration, handler: @escaping Handler, afterMessages: (@Sendable () -> Void)? = nil) throws(SystemError) {
        state = Mutex(ClientDriver(configuration: configuration))
        wakeup = try Wakeup()
        self.handler = handler
        self.afterMessages = afterMessages
        connectTimeout = configuration.connectTimeout
    }

    deinit {
        // Only reachable without a running thread (the thread holds `self`).
        state.withLock { $0.close() }
    }

    /// Starts the I/O thread, which connects to the first server. Once only.
    package func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        SystemThread.detach { [self] in self.run() }
    }

    /// Publishes `message` (see `ClientState.publish`); never blocks on the network.
    package func publish(_ message: OutgoingMessage) -> PublishOutcome {
        let (outcome, wake) = state.withLock { state -> (PublishOutcome, Bool) in
            let wasWritable = state.state.hasWritableBytes
            let outcome = state.publish(message)
            return (outcome, !wasWritable && state.state.hasWritableBytes)
        }
        if wake { wakeup.signal() }
        return outcome
    }

    /// Publishes `messages` in order under one lock and wakes the I/O thread
    /// at most once (see `ClientState.publish` for each outcome).
    package func publish(contentsOf messages: [OutgoingMessage]) -> [PublishOutcome] {
        let (outcomes, wake) = state.withLock { state -> ([PublishOutcome], Bool) in
            let wasWritable = state.state.hasWritableBytes
            let outcomes = messages.map { state.publish($0) }
            return (outcomes, !wasWritable && state.state.hasWritableBytes)
        }
        if wake { wakeup.signal() }
        return outcomes
    }

    /// Subscribes (see `ClientState.subscribe`); kept across reconnects.
    @discardableResult
    package func subscribe(_ subject: Subject, queue: Subject? = nil) -> SubscriptionID {
        let sid = state.withLock { $0.state.subscribe(subject, queue: queue) }
        wakeup.signal()
        return sid
    }

    /// Withdraws a subscription.
    package func unsubscribe(_ sid: SubscriptionID) {
        state.withLock { $0.state.unsubscribe(sid) }
        wakeup.signal()
    }

    /// The counters now.
    package var statistics: ClientStatistics { state.withLock { $0.state.statistics } }

    /// The link state now.
    package var link: LinkState { state.withLock { $0.state.link } }

    /// The pool now (seeds and discovered servers).
    package var pool: ServerPool { state.withLock { $0.state.pool } }

    /// Closes the client: unsent messages are discarded, the thread ends.
    /// Waits for the I/O thread to finish (at most about `connectTimeout`
    /// when it is inside a connect).
    package func close() {
        state.withLock { $0.close() }
        wakeup.signal()
        if started.load(ordering: .relaxed) {
            while !finished.load(ordering: .acquiring) { usleep(1_000) }
        }
    }

    // MARK: The I/O thread

    private func run() {
        var effects: [Effect] = []
        state.withLock { $0.start(&effects) }
        deliver(&effects)
        while true {
            let (closed, fd, wantsWrite, deadline) = state.withLock { ($0.state.isClosed, $0.descriptor, $0.wantsWrite, $0.nextDeadline) }
            if closed { break }
            var entries = [PollEntry(wakeup.descriptor, events: .readable)]
            if let fd { entries.append(PollEntry(fd, events: wantsWrite ? [.readable, .writable] : .readable)) }
            let now = Clock.monotonicNanoseconds()
            let timeout: Int32 = deadline.map { Int32(clamping: max(0, ($0 - now + 999_999) / 1_000_000)) } ?? -1
            do {
                _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: timeout)
            } catch {
                // poll(2) fails only for bad arguments; wait a little instead of spinning.
                usleep(10_000)
            }
            if !entries[0].returned.isEmpty { wakeup.drain() }
            let readable = entries.count > 1 && !entries[1].returned.intersection([.readable, .hangup, .error]).isEmpty
            state.withLock { driver in
                let generation = driver.generation
                if readable { driver.readAvailable(&effects) }
                // Write at once rather than poll again to learn that the socket
                // is writable (it nearly always is; if not, the write would
                // block and the next poll waits for it).
                if driver.generation == generation && driver.wantsWrite { driver.writeAvailable(&effects) }
                driver.tick(&effects)
            }
            deliver(&effects)
        }
        finished.store(true, ordering: .releasing)
    }

    /// Hands the effects to the handler (no lock held), then `afterMessages` once if any was a message.
    private func deliver(_ effects: inout [Effect]) {
        var messages = false
        for effect in effects {
            if case .message = effect { messages = true }
            handler(effect)
        }
        effects.removeAll(keepingCapacity: effects.capacity <= 4096)
        if messages { afterMessages?() }
    }
}
