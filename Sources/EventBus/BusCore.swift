// The I/O half of the client: one reader thread per bus that connects,
// reads and dispatches frames, sweeps dead observers and reconnects with
// backoff; writes happen on the caller's thread under the writer lock.
//
// Before editing, the locking rules (they prevent deadlock and reordering):
// - lock order is writer, then state; nothing takes the writer lock while
//   holding the state lock;
// - a state change that writes bytes holds the writer lock from the decision
//   to the end of the write, so frames reach the socket in decision order
//   (a `subscribe` can never overtake the `unsubscribe` decided before it);
// - the reader thread never waits for the writer lock while connected (only
//   `withLockIfAvailable`): a writer blocked on a full socket needs the reader
//   to keep reading, or the broker stops reading us (PROTOCOL.md back-pressure);
// - the reader thread owns the socket: only it closes the fd, and only after
//   clearing `shutdownHandle`, so `close()` can never shut down a reused fd
//   number; effects (deliveries, completions) run with no lock held;
// - (1.2 flow control) the reader never blocks handing an event to a sink:
//   it asks the `FlowGate` before each read, and while the local queues are
//   full it does not read (the broker then holds our publishers), waiting on
//   `wake` until consumers took half or one of them stalled;
// - async requests (`publish`, `ping`, `stats`, `current`, 1.3 `request`
//   and replies) write from `writeQueue`, not from the caller's thread, so a
//   write blocked on a connection the broker holds never ties up the
//   cooperative pool the observers that would free it run on; `enqueue`
//   queues there too, and `post` waits there for its turn (`sync`), so all
//   keep one order (issue 34);
// - the reader never writes: a change it decides that must write (a 1.3
//   reply, a group rejoined) is an `Effect.deferred`, made on `writeQueue`.
import Dispatch
@_spi(Package) import EventBusProtocol
@_spi(Package) import EventBusSystem
import Foundation
import Synchronization

/// What the writer lock guards: the connected socket, if any.
struct Writer {
    var fd: FileDescriptor?
}

/// Shared core of an `EventBus`: state, writer, reader thread.
final class BusCore: Sendable {
    let configuration: EventBus.Configuration
    /// The socket path this bus connects to (resolved once).
    let path: String
    let state: Locked<ClientState>
    let writer = Locked(Writer())
    /// The fd `close()` may shut down to wake the reader; set and cleared by the reader.
    let shutdownHandle = Locked<FileDescriptor?>(nil)
    /// Wakes the reader thread from its backoff sleep (close, a publish started waiting).
    let wake = DispatchSemaphore(value: 0)
    /// `notices()` streams by id.
    let noticeStreams = Locked<[UInt64: AsyncStream<BusNotice>.Continuation]>([:])
    let nextNoticeStream = Atomic<UInt64>(0)
    /// (1.2) The count of events waiting in local queues (`Configuration.bufferLimit`).
    let flow: FlowGate
    /// Where async requests, `post` and `enqueue` write (see the locking rules above).
    let writeQueue = DispatchQueue(label: "EventBus writer")
    /// `enqueue` calls not yet taken by `writeQueue` (`Configuration.maxEnqueued`).
    let enqueued = Atomic<Int>(0)
    /// `run()` calls waiting for the bus to close, and how it closed once it did.
    let closing = Locked<(waiters: [@Sendable (EventBusError?) -> Void], closed: EventBusError??)>(([], nil))

    init(configuration: EventBus.Configuration, path: String, firstConnect: @escaping Completion<ConnectionInfo>) {
        self.configuration = configuration
        self.path = path
        let me = ProcessIdentity.current
        self.state = Locked(ClientState(
            path: path,
            clientName: configuration.clientName,
            overflow: configuration.overflow,
            whileDisconnected: configuration.whileDisconnected,
            identity: (me.pid, me.uid, me.gid),
            firstConnect: firstConnect,
            runtimeDirectory: configuration.environment["XDG_RUNTIME_DIR"]
        ))
        self.flow = FlowGate(maxEvents: configuration.bufferLimit, maxBytes: configuration.bufferLimitBytes,
                             stallTimeout: configuration.localStallTimeout, wake: wake)
        flow.noticeTarget.withLock { $0 = { [weak self] notice in self?.post(notice) } }
    }

    /// Starts the reader thread. It holds the core until the bus is closed.
    func start() {
        let thread = Thread { [self] in self.run() }
        thread.name = "EventBus reader"
        thread.start()
    }

    // MARK: Changing state

    /// Runs `decide` under the writer and state locks, writes the bytes it
    /// asks for, then performs its effects with no lock held.
    func change(_ decide: (inout ClientState) -> Step) {
        let effects = writer.withLock { writer -> [Effect] in
            let step = state.withLock { decide(&$0) }
            if !step.write.isEmpty, let fd = writer.fd { write(step.write, to: fd) }
            return step.effects
        }
        perform(effects)
    }

    /// As `change(_:)`, run later on `writeQueue`: for async requests, whose
    /// caller must not block its thread on a full socket.
    func changeOffThread(_ decide: @escaping @Sendable (inout ClientState) -> Step) {
        writeQueue.async { self.change(decide) }
    }

    /// Runs `decide` under the state lock only, for changes that never write.
    func update(_ decide: (inout ClientState) -> Step) {
        let step = state.withLock { decide(&$0) }
        precondition(step.write.isEmpty, "a state change that writes must go through change(_:)")
        perform(step.effects)
    }

    /// Writes `bytes`, blocking until the kernel took them. A failed write
    /// shuts the socket down so the reader sees the loss and handles it.
    private func write(_ bytes: [UInt8], to fd: FileDescriptor) {
        do throws(SystemError) {
            try fd.writeAll(bytes.span.bytes)
        } catch {
            try? fd.shutdown(.both)
        }
    }

    /// Performs effects in order; runs with no lock held.
    func perform(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .deliver(let event, let sinks):
                for sink in sinks { report(sink.deliver(event), sink: sink, event: event) }
            case .published(let event, let sinks, let delivered, let completion):
                var local = 0
                for sink in sinks {
                    let outcome = sink.deliver(event)
                    if outcome == .delivered { local += 1 }
                    report(outcome, sink: sink, event: event)
                }
                completion(.success(PublishReceipt(seq: event.metadata.seq, delivered: delivered, deliveredLocally: local)))
            case .reply(let completion, let result):
                completion(result)
            case .failPublish(let completion, let error):
                completion(.failure(error))
            case .finish(let sinks, let error, let discard):
                for sink in sinks { sink.finish(error, discardQueued: discard) }
            case .notice(let notice):
                post(notice)
            case .firstConnect(let completion, let result):
                completion(result)
            case .wakeReader:
                wake.signal()
            case .dropConnection:
                shutdownHandle.withLock { fd in _ = try? fd?.shutdown(.both) }
                wake.signal()
            case .completeCurrent(let completion, let result):
                completion(result)
            case .markGap(let sinks, let gap):
                for sink in sinks { sink.markGap(gap) }
            case .serve(let sink, let request):
                if !sink.offer(request) {
                    let token = request.token
                    changeOffThread { $0.reply(to: token, data: nil, error: "the server is busy (its queue of requests is full)") }
                }
            case .call(let body):
                body()
            case .deferred(let decide):
                changeOffThread(decide)
            case .closed(let error):
                let waiters = closing.withLock { closing in
                    closing.closed = .some(error)
                    defer { closing.waiters = [] }
                    return closing.waiters
                }
                for waiter in waiters { waiter(error) }
            }
        }
        if effects.contains(where: { if case .dropConnection = $0 { true } else { false } }) {
            finishNotices()
        }
    }

    /// (issue 37) An event a typed receiver cannot decode is lost for it:
    /// told why (`.undecodable`) and counted as a loss through the path of
    /// every local loss (`.droppedLocally` for its pattern, that one event),
    /// never only skipped.
    private func report(_ outcome: SinkOutcome, sink: any EventSink, event: RawEvent) {
        switch outcome {
        case .delivered, .inactive, .droppedBehind: break  // a loss is reported once per run, by the gate
        case .undecodable(let error):
            post(.undecodable(error))
            post(.droppedLocally(pattern: sink.pattern, count: 1, sinceSeq: event.metadata.seq))
        }
    }

    // MARK: Notices

    func notices() -> AsyncStream<BusNotice> {
        let (stream, continuation) = AsyncStream<BusNotice>.makeStream(bufferingPolicy: .bufferingNewest(1000))
        let id = nextNoticeStream.add(1, ordering: .relaxed).newValue
        let closed = state.withLock { $0.isClosed }
        if closed {
            continuation.finish()
            return stream
        }
        noticeStreams.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.noticeStreams.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func post(_ notice: BusNotice) {
        let targets = noticeStreams.withLock { Array($0.values) }
        for continuation in targets { continuation.yield(notice) }
    }

    private func finishNotices() {
        let targets = noticeStreams.withLock { streams in
            defer { streams = [:] }
            return Array(streams.values)
        }
        for continuation in targets { continuation.finish() }
    }

    /// Closes the bus: fails what is pending, ends every stream, stops the reader.
    func close() {
        update { $0.close(error: nil) }
    }

    /// Calls `waiter` once the bus is closed (at once if it is), with the
    /// error that closed it (nil after `close()`).
    func whenClosed(_ waiter: @escaping @Sendable (EventBusError?) -> Void) {
        let closed = closing.withLock { closing -> EventBusError?? in
            if closing.closed == nil { closing.waiters.append(waiter) }
            return closing.closed
        }
        if let closed { waiter(closed) }
    }

    // MARK: Reader thread

    /// The reader thread's body: connect, read until the connection ends,
    /// back off, reconnect; until the bus is closed.
    private func run() {
        var failures = 0
        while !state.withLock({ $0.isClosed }) {
            let fd: FileDescriptor
            do {
                fd = try FileDescriptor.connectedUnixSocket(toPath: path, nonBlocking: false)
            } catch {
                // No broker there: say how to start one, as the CLI does.
                let noBroker = error.errno == .noSuchFile || error.errno == .connectionRefused
                let reason = error.description + (noBroker ? " (is eventbusd running? \(SocketPath.startCommand(for: path)))" : "")
                update { $0.connectFailed(reason: reason) }
                failures += 1
                if !backOff(failures: failures, reason: reason) { break }
                continue
            }
            guard handshake(fd) else { break }
            let reason = readUntilLoss(fd)
            let wasGreeted = state.withLock { $0.connectionInfo != nil }
            let effects = writer.withLock { writer -> [Effect] in
                shutdownHandle.withLock { $0 = nil }
                fd.close()
                writer.fd = nil
                return state.withLock { $0.connectionLost(reason: reason).effects }
            }
            perform(effects)
            failures = wasGreeted ? 0 : failures + 1
            if !backOff(failures: failures, reason: reason) { break }
        }
    }

    /// Makes `fd` the connection and writes the handshake.
    /// - Returns: false when the bus was closed meanwhile (fd closed here).
    private func handshake(_ fd: FileDescriptor) -> Bool {
        writer.withLock { writer -> Bool in
            guard let step = state.withLock({ $0.connectionEstablished() }) else {
                fd.close()
                return false
            }
            shutdownHandle.withLock { $0 = fd }
            writer.fd = fd
            write(step.write, to: fd)
            return true
        }
    }

    /// Reads and dispatches frames until EOF or an error; sweeps dead
    /// observers every `sweepInterval`.
    /// - Returns: why the connection ended, for `EventBusError.connectionLost`.
    private func readUntilLoss(_ fd: FileDescriptor) -> String {
        var splitter = FrameSplitter(maxFrameBytes: configuration.maxIncomingFrameBytes)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(64 << 10)
        let interval = configuration.sweepInterval
        let sweepNanoseconds = Int64(interval.seconds * 1e9)
        var nextSweep = Clock.monotonicNanoseconds() + sweepNanoseconds
        while true {
            if let milliseconds = flow.readerWait(longest: interval.pollMilliseconds) {
                // The local queues are full: read nothing until consumers take
                // some (FlowGate), so the broker holds the publishers.
                if state.withLock({ $0.isClosed }) { return "the bus was closed" }
                _ = wake.wait(timeout: .now() + .milliseconds(Int(milliseconds)))
                let now = Clock.monotonicNanoseconds()
                if now >= nextSweep {
                    nextSweep = now + sweepNanoseconds
                    sweep()
                }
                continue
            }
            let ready: PollEvents
            do {
                ready = try fd.poll(.readable, timeoutMilliseconds: interval.pollMilliseconds)
            } catch {
                return error.description
            }
            if !ready.isEmpty {
                buffer.removeAll(keepingCapacity: true)
                let result: IOResult<Int>
                do throws(SystemError) {
                    result = try fd.read(appendingTo: &buffer, limit: 64 << 10)
                } catch {
                    return error.description
                }
                switch result {
                case .wouldBlock:
                    break
                case .complete(0):
                    splitter.finish { self.dispatch($0) }
                    return "the broker closed the connection"
                case .complete:
                    _ = splitter.feed(buffer.span.bytes) { self.dispatch($0) }
                }
            }
            let now = Clock.monotonicNanoseconds()
            if now >= nextSweep {
                nextSweep = now + sweepNanoseconds
                sweep()
            }
        }
    }

    /// Handles one frame from the splitter. Always continues with the next.
    private func dispatch(_ piece: SplitFrame) -> Bool {
        switch piece {
        case .frame(let bytes):
            let wall = Clock.wallNanoseconds()
            update { $0.handle(bytes, wallNanoseconds: wall) }
        case .tooLarge(let bytes):
            post(.brokerError(.malformedFrame("skipped a \(bytes)-byte frame, over maxIncomingFrameBytes")))
        }
        return true
    }

    /// Removes registrations whose observer is gone and unsubscribes their
    /// patterns, unless a writer holds the socket (then: next time).
    private func sweep() {
        guard state.withLock({ $0.hasDeadRegistrations }) else { return }
        let effects = writer.withLockIfAvailable { writer -> [Effect] in
            let step = state.withLock { $0.sweep() }
            if !step.write.isEmpty, let fd = writer.fd { write(step.write, to: fd) }
            return step.effects
        }
        if let effects { perform(effects) }
    }

    /// Waits before the next connection attempt, failing waiting publishes
    /// whose deadline passes meanwhile.
    /// - Returns: false when the bus is closed (by `close()` or by giving up).
    private func backOff(failures: Int, reason: String) -> Bool {
        let policy = configuration.reconnect
        if !policy.enabled || (policy.maxAttempts.map { failures > $0 } ?? false) {
            update { $0.close(error: .unavailable(path: path, reason: reason)) }
            return false
        }
        let delay = policy.delay(afterFailures: max(0, failures - 1), random: Double.random(in: 0...1))
        let until = Clock.monotonicNanoseconds() + Int64(delay.seconds * 1e9)
        while true {
            let now = Clock.monotonicNanoseconds()
            update { $0.expireWaiting(now: now) }
            let (closed, earliest) = state.withLock { ($0.isClosed, $0.earliestWaitingDeadline) }
            if closed { return false }
            if now >= until { return true }
            let wakeAt = min(until, earliest ?? until)
            let nanoseconds = max(0, wakeAt - now)
            _ = wake.wait(timeout: .now() + .nanoseconds(Int(min(nanoseconds, Int64(Int.max)))))
        }
    }
}
