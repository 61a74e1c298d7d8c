// The I/O half of the NATS client, without a thread: it owns `ClientState`
// and the TCP socket, resolves and connects, reads what the socket has and
// feeds it to the state machine, writes the outbox, and runs the timers. Its
// owner's event loop polls `descriptor` (readable; writable while
// `wantsWrite`) and calls `readAvailable`, `writeAvailable` and `tick`; every
// call hands back, in order, the effects the user of the client must see
// (`.connect` and `.closeConnection` are the driver's own business and never
// leave it). The bridge runs one on the loop that also serves its bus
// socket; `Client` runs one on a thread of its own, under a lock.
//
// Before editing, the rules that keep this simple:
// - only the driver touches the socket: it connects, reads, writes and
//   closes it; the owner only polls it, and must poll the descriptor again
//   whenever `generation` changed (a new connection, maybe under the same
//   number as the old one);
// - a connect is blocking, bounded by `connectTimeout` per address (the
//   servers are meant to be a leaf node on 127.0.0.1, DESIGN-NOTES-1.1 A.7),
//   unless the driver is given a `BackgroundConnect` (the link's request part
//   on the broker's loop, which must not wait): then it resolves and connects
//   on a helper thread, and the owner also polls `connectDescriptor` and calls
//   `connectFinished` when it is readable;
// - the owner may stop calling `readAvailable` (flow control: whoever takes
//   the messages is full); the server then applies its own slow-consumer
//   rules, which is what a NATS client should get when it cannot keep up.
@_spi(Package) import EventBusProtocol
import EventBusSystem

/// A NATS client connection driven by its owner's loop (see the file comment).
package struct ClientDriver {
    /// The state machine: publish, subscribe and read counters through it.
    package var state: ClientState
    /// The connected socket, if any.
    package private(set) var descriptor: FileDescriptor?
    /// Changes whenever `descriptor` does (a connection opened or closed).
    package private(set) var generation: UInt64 = 0
    private var pendingConnect: ServerAddress?
    private let connectTimeoutMilliseconds: Int32
    private var buffer: [UInt8]
    private let background: BackgroundConnect?
    /// The most one read takes.
    private let readBufferBytes: Int

    /// - Parameters:
    ///   - readBufferBytes: bytes read from the socket at once.
    ///   - background: connect on a helper thread through it (nil: a blocking connect).
    package init(configuration: ClientConfiguration, readBufferBytes: Int = 64 << 10, background: BackgroundConnect? = nil) {
        self.background = background
        state = ClientState(configuration: configuration)
        connectTimeoutMilliseconds = Int32(clamping: configuration.connectTimeout.nanoseconds / 1_000_000)
        self.readBufferBytes = readBufferBytes
        buffer = []
        buffer.reserveCapacity(readBufferBytes)
    }

    /// Whether the owner should poll for writability.
    package var wantsWrite: Bool { descriptor != nil && state.hasWritableBytes }

    /// When `tick` must be called next (monotonic ns), or nil.
    package var nextDeadline: Int64? { state.nextDeadline }

    /// With a `BackgroundConnect`: readable when a connect has ended (then call `connectFinished`).
    package var connectDescriptor: FileDescriptor? { background?.descriptor }

    /// Takes the outcome of a background connect, if one has ended.
    package mutating func connectFinished(_ effects: inout [Effect]) {
        guard let outcome = background?.take() else { return }
        switch outcome {
        case .connected(let fd): established(fd, &effects)
        case .failed(let reason): perform(state.connectFailed(reason: reason, now: Clock.monotonicNanoseconds()), &effects)
        }
    }

    /// Starts connecting to the first server (blocking connect).
    package mutating func start(_ effects: inout [Effect]) {
        perform(state.start(now: Clock.monotonicNanoseconds()), &effects)
    }

    /// Reads at most `maxReads` times (or until the socket would block),
    /// feeding each read to the state machine.
    /// - Returns: true when the last read filled the buffer (more may be waiting).
    @discardableResult
    package mutating func readAvailable(maxReads: Int = 16, _ effects: inout [Effect]) -> Bool {
        guard let fd = descriptor else { return false }
        let current = generation
        for _ in 0..<maxReads {
            buffer.removeAll(keepingCapacity: true)
            let attempt = Result { () throws(SystemError) -> IOResult<Int> in try fd.read(appendingTo: &buffer, limit: readBufferBytes) }
            switch attempt {
            case .failure(let error):
                lost(reason: "\(error)", &effects)
                return false
            case .success(.wouldBlock):
                return false
            case .success(.complete(0)):
                lost(reason: "the server closed the connection", &effects)
                return false
            case .success(.complete(let count)):
                let now = Clock.monotonicNanoseconds()
                let chunk = buffer  // (a borrow of `buffer` would overlap `state`'s in this struct)
                let step = state.received(chunk.span.bytes, now: now)
                perform(step, &effects)
                guard generation == current else { return false }  // the state machine dropped the connection
                if count < readBufferBytes { return false }
            }
        }
        return true
    }

    /// Writes what the socket takes now.
    package mutating func writeAvailable(_ effects: inout [Effect]) {
        let current = generation
        while let fd = descriptor, generation == current {
            guard state.hasWritableBytes else { return }
            // Written from the outbox's own buffer (no copy).
            let (attempt, offered) = state.withWritable { bytes in
                (Result { () throws(SystemError) -> IOResult<Int> in try fd.write(bytes) }, bytes.byteCount)
            }
            switch attempt {
            case .failure(let error):
                lost(reason: "\(error)", &effects)
                return
            case .success(.wouldBlock):
                return
            case .success(.complete(let count)):
                state.didWrite(count)
                if count < offered { return }
            }
        }
    }

    /// Timers: backoff expiry (then a blocking connect), handshake timeout, PINGs.
    package mutating func tick(_ effects: inout [Effect]) {
        perform(state.tick(now: Clock.monotonicNanoseconds()), &effects)
    }

    /// Publishes (see `ClientState.publish`).
    package mutating func publish(_ message: OutgoingMessage) -> PublishOutcome { state.publish(message) }

    /// (issue 36) `ClientState.publish(_:writing:)`.
    package mutating func publish(_ message: PlacedMessage, writing write: (inout RawWriter) -> Void) -> PublishOutcome {
        state.publish(message, writing: write)
    }

    /// Closes for good: unsent messages are discarded, the socket closed.
    package mutating func close() {
        var ignored: [Effect] = []
        perform(state.close(), &ignored)
        closeSocket()
    }

    private mutating func closeSocket() {
        guard let fd = descriptor else { return }
        fd.close()
        descriptor = nil
        generation &+= 1
    }

    private mutating func lost(reason: String, _ effects: inout [Effect]) {
        closeSocket()
        perform(state.connectionLost(reason: reason, now: Clock.monotonicNanoseconds()), &effects)
    }

    /// Performs a step: connects and closes here, hands everything else to the owner in order.
    private mutating func perform(_ step: Step, _ effects: inout [Effect]) {
        // The usual step (messages read): handed over whole, no copy per effect.
        if effects.isEmpty && pendingConnect == nil && !step.effects.contains(where: Self.isDriversOwn) {
            effects = step.effects
            return
        }
        for effect in step.effects {
            switch effect {
            case .connect(let server): pendingConnect = server
            case .closeConnection: closeSocket()
            default: effects.append(effect)
            }
        }
        while let server = pendingConnect {
            pendingConnect = nil
            open(server, &effects)
        }
    }

    private static func isDriversOwn(_ effect: Effect) -> Bool {
        switch effect {
        case .connect, .closeConnection: true
        default: false
        }
    }

    /// Resolves and connects (blocking, bounded by `connectTimeout` per address;
    /// with a `BackgroundConnect`, on its thread: `connectFinished` goes on).
    private mutating func open(_ server: ServerAddress, _ effects: inout [Effect]) {
        if let background {
            background.begin(server, timeoutMilliseconds: connectTimeoutMilliseconds)
            return
        }
        let result: Result<FileDescriptor, any Error>
        do {
            let addresses = try TCPResolver.resolve(host: server.host, port: server.port)
            result = .success(try FileDescriptor.connectedTCPSocket(to: addresses, timeoutMilliseconds: connectTimeoutMilliseconds))
        } catch {
            result = .failure(error)
        }
        switch result {
        case .success(let fd): established(fd, &effects)
        case .failure(let error): perform(state.connectFailed(reason: "\(error)", now: Clock.monotonicNanoseconds()), &effects)
        }
    }

    private mutating func established(_ fd: FileDescriptor, _ effects: inout [Effect]) {
        closeSocket()
        descriptor = fd
        generation &+= 1
        perform(state.connectionEstablished(now: Clock.monotonicNanoseconds()), &effects)
    }
}
