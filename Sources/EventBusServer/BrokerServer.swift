// The broker's event loop: one thread, one epoll set holding the listening
// sockets, a signalfd and every connection; it owns one `Broker` and performs
// the effects the core asks for (write these queues, close those connections,
// pause reading that one).
//
// Before editing: level-triggered epoll. Reads go into one shared buffer and
// complete frames are handled in place, so an idle connection holds no buffer.
// Writes are batched: after each epoll batch every connection with new output
// gets one gathered sendmsg(2). A connection is removed from epoll before its
// fd is closed, and its slot is cleared in the same step.
import CEventBusShims
import EventBusCore
import EventBusProtocol
import EventBusSystem
import Glibc

/// Settings of the server around the core.
public struct ServerConfiguration: Sendable {
    /// Limits and identity passed to the core.
    public var broker = BrokerConfiguration()
    /// How long SIGTERM/SIGINT waits for queues to drain, ns (default 2 s).
    public var shutdownFlushNanoseconds: Int64 = 2_000_000_000
    /// Exit after this long with no connections (`--exit-idle-time`), ns; nil never.
    public var exitIdleNanoseconds: Int64? = nil
    /// Bytes read per read(2), and from one connection per loop turn: small
    /// enough that a fast publisher's events are written out between reads
    /// (a 64 KiB read is about 1,000 small publishes), large enough to keep
    /// syscalls rare.
    public var readChunkBytes = 64 * 1024

    public init() {}
}

/// Callbacks for the service manager, run on the loop thread.
public struct ServerHooks {
    /// After every listener is in the epoll set (sd_notify READY=1).
    public var ready: () -> Void = {}
    /// When a graceful stop begins (sd_notify STOPPING=1).
    public var stopping: () -> Void = {}
    /// Timers: every `intervalNanoseconds`, `action(stats)` runs from the loop
    /// itself (so a stuck loop stops them: sd_watchdog_enabled(3)).
    public var periodic: [(intervalNanoseconds: Int64, action: (BrokerStatistics) -> Void)] = []

    public init() {}
}

/// Why `run` returned.
public enum ServerExit: Equatable, Sendable {
    case signal(Int32)
    case idle
}

public final class BrokerServer {
    public let configuration: ServerConfiguration
    public let broker: Broker
    let logger: Logger
    let listeners: [ListeningSocket]
    var hooks: ServerHooks

    let epoll: Epoll
    let signals: SignalDescriptor
    var slots: [Connection?] = []
    let readBuffer: UnsafeMutableRawBufferPointer
    let iovecs: UnsafeMutablePointer<iovec>
    let maxIovecs = 1024  // IOV_MAX

    var listenersEnabled = true
    var acceptRetryAt: Int64? = nil
    var lastAcceptFailureLog: Int64? = nil
    var shutdownDeadline: Int64? = nil
    var idleSince: Int64
    var nextPeriodic: [Int64]
    /// Connections whose slow-consumer state was already logged at notice
    /// level; later episodes go to debug so a flood cannot fill the journal.
    var loggedSlowConsumers: Set<ConnectionID> = []

    // Tokens: connections carry (id-derived tag << 32 | fd); specials have tag 0.
    static let signalToken: UInt64 = 0xFFFF_FFFF
    static func listenerToken(_ i: Int) -> UInt64 { UInt64(i) }

    /// - Parameters:
    ///   - listeners: sockets to accept on (owned by the server from now on).
    ///   - instance: this run's id for the core.
    /// - Throws: `SystemError` when epoll or the signalfd cannot be created.
    public init(configuration: ServerConfiguration, listeners: [ListeningSocket], instance: String, logger: Logger, hooks: ServerHooks = ServerHooks()) throws(SystemError) {
        self.configuration = configuration
        self.listeners = listeners
        self.logger = logger
        self.hooks = hooks
        let now = Clock.monotonicNanoseconds()
        self.broker = Broker(configuration: configuration.broker, instance: instance,
                             startTime: BrokerTime(wallNanoseconds: Clock.wallNanoseconds(), monotonicNanoseconds: now))
        self.epoll = try Epoll(maxEvents: 256)
        self.signals = try SignalDescriptor(signals: [SIGTERM, SIGINT, SIGHUP])
        self.readBuffer = .allocate(byteCount: configuration.readChunkBytes, alignment: 16)
        self.iovecs = .allocate(capacity: 1024)
        self.idleSince = now
        self.nextPeriodic = hooks.periodic.map { now + $0.intervalNanoseconds }
        ProcessSettings.ignoreBrokenPipeSignal()
    }

    deinit {
        readBuffer.deallocate()
        iovecs.deallocate()
    }

    /// Runs until SIGTERM/SIGINT (after flushing for up to the configured time)
    /// or the idle timeout. Closes every connection and listener before returning.
    /// - Throws: `SystemError` only for failures of the loop itself (epoll).
    public func run() throws(SystemError) -> ServerExit {
        for (i, listener) in listeners.enumerated() {
            try epoll.add(listener.descriptor, events: .readable, token: BrokerServer.listenerToken(i))
        }
        try epoll.add(signals.descriptor, events: .readable, token: BrokerServer.signalToken)
        hooks.ready()
        var exitReason: ServerExit? = nil
        while true {
            let now = Clock.monotonicNanoseconds()
            if let reason = checkTimers(now: now) { exitReason = reason }
            if let deadline = shutdownDeadline, broker.connectionCount == 0 || now >= deadline {
                break
            }
            if exitReason == .idle { break }
            try epoll.wait(timeoutMilliseconds: nextTimeout(now: now)) { token, events in
                dispatch(token: token, events: events, exitReason: &exitReason)
            }
            flushAll()
            logNotices()
        }
        closeEverything()
        return exitReason ?? .idle
    }

    // MARK: Dispatch

    func dispatch(token: UInt64, events: EpollEvents, exitReason: inout ServerExit?) {
        if token == BrokerServer.signalToken {
            for signal in signals.readSignals() {
                if signal == SIGHUP {
                    logger.info("received SIGHUP; it reloads nothing (logs go to stderr/the journal): ignoring")
                } else if shutdownDeadline == nil {
                    logger.info("received signal \(signal); stopping: no new connections, flushing queues for up to \(configuration.shutdownFlushNanoseconds / 1_000_000) ms")
                    exitReason = .signal(signal)
                    beginShutdown()
                }
            }
            return
        }
        if token >> 32 == 0 {
            acceptConnections(from: Int(token))
            return
        }
        let fd = Int(token & 0xFFFF_FFFF)
        guard fd < slots.count, let connection = slots[fd], BrokerServer.tag(connection.id) == token >> 32 else { return }
        if events.contains(.readable) && connection.wantsInput {
            readAvailable(connection, fd: FileDescriptor(rawValue: CInt(fd)))
        }
        if connection.isClosed { release(connection); return }
        if events.contains(.error) || (events.contains(.hangup) && !connection.wantsInput) {
            // Peer gone completely. Frames it sent before closing still count
            // (PROTOCOL.md "Semantics": every frame is read before EOF is
            // handled), even when its reading was paused by backpressure.
            if !connection.inputClosed && shutdownDeadline == nil && !events.contains(.error) {
                drainInput(connection, fd: FileDescriptor(rawValue: CInt(fd)))
            }
            broker.close(connection)
            release(connection)
            return
        }
        if events.contains(.writable) { flush(connection) }
    }

    static func tag(_ id: ConnectionID) -> UInt64 { (id % 0xFFFF_FFFE) + 1 }

    func token(for connection: Connection) -> UInt64 {
        (BrokerServer.tag(connection.id) << 32) | UInt64(connection.serverTag)
    }

    // MARK: Accept

    func acceptConnections(from index: Int) {
        guard index < listeners.count, shutdownDeadline == nil else { return }
        let listener = listeners[index]
        for _ in 0..<64 {
            let fd: FileDescriptor
            do {
                guard let accepted = try listener.descriptor.accept() else { return }
                fd = accepted
            } catch {
                handleAcceptFailure(error)
                return
            }
            admit(fd)
        }
    }

    func handleAcceptFailure(_ error: SystemError) {
        switch error.errno {
        case .connectionAborted, .interrupted:
            return
        case .tooManyOpenFiles, .tooManyOpenFilesInSystem, .noBufferSpace, .outOfMemory:
            // Out of descriptors: stop watching the listeners (level-triggered
            // epoll would spin) until a connection closes or 200 ms pass.
            let now = Clock.monotonicNanoseconds()
            setListenersEnabled(false)
            acceptRetryAt = now + 200_000_000
            if lastAcceptFailureLog.map({ now - $0 > 10_000_000_000 }) ?? true {
                lastAcceptFailureLog = now
                logger.warning("failed to accept connection: \(error); pausing accepts until descriptors free up")
            }
        default:
            logger.warning("failed to accept connection: \(error); ignoring")
        }
    }

    func setListenersEnabled(_ enabled: Bool) {
        guard enabled != listenersEnabled, shutdownDeadline == nil else { return }
        listenersEnabled = enabled
        for (i, listener) in listeners.enumerated() {
            try? epoll.modify(listener.descriptor, events: enabled ? .readable : [], token: BrokerServer.listenerToken(i))
        }
        if enabled { acceptRetryAt = nil }
    }

    func admit(_ fd: FileDescriptor) {
        let credentials: PeerCredentials
        do {
            credentials = try fd.peerCredentials()
        } catch {
            logger.warning("failed to read peer credentials of new connection: \(error); closing it")
            fd.close()
            return
        }
        switch broker.open(credentials: Credentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)) {
        case .failure(let refused):
            refused.frame.withUnsafeBytes { _ = try? fd.write($0) }
            fd.close()
            logger.notice("refused connection from pid \(credentials.pid): connection limit \(configuration.broker.maxConnections) reached",
                          fields: [("EVENTBUS_PID", "\(credentials.pid)"), ("EVENTBUS_UID", "\(credentials.uid)")])
        case .success(let connection):
            let index = Int(fd.rawValue)
            if index >= slots.count { slots.append(contentsOf: repeatElement(nil, count: max(index + 1 - slots.count, slots.count))) }
            connection.serverTag = index
            connection.serverInterest = EpollEvents.readable.rawValue
            slots[index] = connection
            do {
                try epoll.add(fd, events: .readable, token: token(for: connection))
            } catch {
                logger.warning("failed to watch new connection: \(error); closing it")
                broker.close(connection)
                release(connection)
                return
            }
            if logger.enabled(.debug) {
                logger.debug("connection \(connection.id) opened by pid \(credentials.pid) uid \(credentials.uid)",
                             fields: [("EVENTBUS_CONN", "\(connection.id)"), ("EVENTBUS_PID", "\(credentials.pid)"), ("EVENTBUS_UID", "\(credentials.uid)")])
            }
        }
    }

    // MARK: Read

    func readAvailable(_ connection: Connection, fd: FileDescriptor) {
        // One read per turn keeps one busy client from starving the others and
        // lets queued events be written before more input is taken in;
        // level-triggered epoll brings us back.
        guard connection.wantsInput else { return }
        let result: IOResult<Int>
        do {
            result = try fd.read(into: readBuffer)
        } catch {
            logger.debug("failed to read from connection \(connection.id): \(error); closing it")
            broker.close(connection)
            return
        }
        switch result {
        case .wouldBlock:
            return
        case .complete(0):
            broker.endOfInput(connection, at: currentTime())
            updateInterest(connection)
        case .complete(let n):
            broker.receive(connection, UnsafeRawBufferPointer(rebasing: readBuffer[0..<n]), at: currentTime())
        }
    }

    /// Reads and handles everything a departed peer left in the socket, then
    /// its EOF; its replies are dropped with the connection.
    func drainInput(_ connection: Connection, fd: FileDescriptor) {
        while !connection.isClosed && !connection.inputClosed {
            guard case .complete(let n) = (try? fd.read(into: readBuffer)) ?? .complete(0) else { return }
            if n == 0 {
                broker.endOfInput(connection, at: currentTime())
                return
            }
            broker.resumeReading(connection)
            broker.receive(connection, UnsafeRawBufferPointer(rebasing: readBuffer[0..<n]), at: currentTime())
        }
    }

    func currentTime() -> BrokerTime {
        BrokerTime(wallNanoseconds: Clock.wallNanoseconds(), monotonicNanoseconds: Clock.monotonicNanoseconds())
    }

    // MARK: Write

    func flushAll() {
        for connection in broker.takeConnectionsToFlush() where !connection.isClosed {
            flush(connection)
        }
    }

    /// Writes as much of the connection's queue as the socket takes, then
    /// closes it or updates its epoll interest.
    func flush(_ connection: Connection) {
        guard !connection.isClosed, connection.serverTag >= 0 else { return }
        let fd = FileDescriptor(rawValue: CInt(connection.serverTag))
        var blocked = false
        while !connection.outbound.isEmpty {
            var count = 0
            _ = connection.outbound.forEachChunk(maxChunks: maxIovecs) { pointer, length in
                iovecs[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: pointer), iov_len: length)
                count += 1
            }
            do {
                switch try fd.writev(iovecs, count: count) {
                case .wouldBlock:
                    blocked = true
                case .complete(let n):
                    broker.didWrite(connection, bytes: n)
                    continue
                }
            } catch {
                logger.debug("failed to write to connection \(connection.id): \(error); closing it")
                broker.close(connection)
                release(connection)
                return
            }
            break
        }
        if connection.closeAfterNextWrite || connection.readyToClose {
            broker.close(connection)
            release(connection)
            return
        }
        updateInterest(connection, writeBlocked: blocked)
    }

    func updateInterest(_ connection: Connection, writeBlocked: Bool? = nil) {
        guard !connection.isClosed else { return }
        var events: EpollEvents = []
        if connection.wantsInput { events.insert(.readable) }
        let blocked = writeBlocked ?? (connection.serverInterest & EpollEvents.writable.rawValue != 0)
        if blocked && !connection.outbound.isEmpty { events.insert(.writable) }
        if connection.readyToClose {
            broker.close(connection)
            release(connection)
            return
        }
        guard events.rawValue != connection.serverInterest else { return }
        connection.serverInterest = events.rawValue
        try? epoll.modify(FileDescriptor(rawValue: CInt(connection.serverTag)), events: events, token: token(for: connection))
    }

    /// Removes a closed connection from epoll and closes its fd (once).
    func release(_ connection: Connection) {
        let index = connection.serverTag
        guard index >= 0 else { return }
        connection.serverTag = -1
        let fd = FileDescriptor(rawValue: CInt(index))
        epoll.remove(fd)
        fd.close()
        slots[index] = nil
        loggedSlowConsumers.remove(connection.id)
        if broker.connectionCount == 0 { idleSince = Clock.monotonicNanoseconds() }
        if !listenersEnabled { setListenersEnabled(true) }
        if logger.enabled(.debug) {
            logger.debug("connection \(connection.id) closed", fields: [("EVENTBUS_CONN", "\(connection.id)")])
        }
    }

    // MARK: Timers and shutdown

    func checkTimers(now: Int64) -> ServerExit? {
        if let retry = acceptRetryAt, now >= retry { setListenersEnabled(true) }
        for (i, timer) in hooks.periodic.enumerated() where now >= nextPeriodic[i] {
            timer.action(broker.statistics)
            nextPeriodic[i] = now + timer.intervalNanoseconds
        }
        if shutdownDeadline == nil, let idle = configuration.exitIdleNanoseconds,
           broker.connectionCount == 0, now - idleSince >= idle, !listenersHavePendingConnections() {
            logger.info("no connections for \(idle / 1_000_000_000) s; exiting (--exit-idle-time)")
            hooks.stopping()
            return .idle
        }
        return nil
    }

    func listenersHavePendingConnections() -> Bool {
        listeners.contains { ((try? $0.descriptor.poll(.readable, timeoutMilliseconds: 0)) ?? []).contains(.readable) }
    }

    func nextTimeout(now: Int64) -> Int32 {
        var deadline: Int64 = .max
        if let retry = acceptRetryAt { deadline = min(deadline, retry) }
        if let stop = shutdownDeadline { deadline = min(deadline, stop) }
        for t in nextPeriodic { deadline = min(deadline, t) }
        if let idle = configuration.exitIdleNanoseconds, broker.connectionCount == 0 { deadline = min(deadline, idleSince + idle) }
        if deadline == .max { return -1 }
        let ms = (deadline - now + 999_999) / 1_000_000
        return Int32(clamping: max(0, ms))
    }

    func beginShutdown() {
        hooks.stopping()
        shutdownDeadline = Clock.monotonicNanoseconds() + configuration.shutdownFlushNanoseconds
        for listener in listeners {
            epoll.remove(listener.descriptor)
            listener.close()
        }
        broker.beginShutdown()
        for case let connection? in slots {
            if connection.outbound.isEmpty {
                broker.close(connection)
                release(connection)
            } else {
                updateInterest(connection, writeBlocked: true)
            }
        }
    }

    func closeEverything() {
        for case let connection? in slots {
            broker.close(connection)
            release(connection)
        }
        for listener in listeners {
            epoll.remove(listener.descriptor)
            listener.close()
        }
    }

    func logNotices() {
        for notice in broker.takeNotices() {
            switch notice {
            case .startedDropping(let id, let pid):
                let level: LogLevel = loggedSlowConsumers.insert(id).inserted ? .notice : .debug
                logger.log(level, "connection \(id) (pid \(pid)) is a slow consumer: dropping events for it",
                              fields: [("EVENTBUS_CONN", "\(id)"), ("EVENTBUS_PID", "\(pid)")])
            case .limitReached(let id, let pid, let message):
                logger.notice("connection \(id) (pid \(pid)) reached a limit: \(message)",
                              fields: [("EVENTBUS_CONN", "\(id)"), ("EVENTBUS_PID", "\(pid)")])
            case .slowConsumerDisconnected(let id, let pid):
                logger.notice("connection \(id) (pid \(pid)) closed as a slow consumer (overflow: disconnect)",
                              fields: [("EVENTBUS_CONN", "\(id)"), ("EVENTBUS_PID", "\(pid)")])
            }
        }
    }
}
