// The broker's event loop: one thread, one epoll set holding the listening
// sockets, a signalfd and every connection; it owns one `Broker`, feeds it
// what it reads, and applies the `BrokerStep` each call returns (write these
// queues, close those connections, pause reading that one) in
// BrokerServer+Connections.swift. This file: setup, the loop, dispatch of
// epoll events, timers and shutdown.
//
// Before editing: connections are edge-triggered for input: an epoll event
// only puts a connection in its uid's ready queue, and each loop turn serves
// those queues fairly per uid (BrokerServer+Scheduling.swift). Reads go into
// one shared buffer and complete frames are handled in place, so an idle
// connection holds no buffer. Writes are batched: after each turn every
// connection with new output is written with gathered sendmsg(2) calls
// (`MSG_NOSIGNAL`, up to 1,024 ranges each; `IOVectors`) until its
// queue is empty or the socket is full. Epoll tokens
// are connection ids, so an event for a connection already closed finds no
// record and is ignored.
import CEventBusShims
import EventBusCore
import EventBusLog
@_spi(Package) import EventBusProtocol
@_spi(Package) import EventBusSystem
import Glibc

/// Settings of the server around the core.
package struct ServerConfiguration: Sendable {
    /// Limits and identity passed to the core.
    package var broker = BrokerConfiguration()
    /// How long SIGTERM/SIGINT waits for queues to drain, ns (default 2 s).
    package var shutdownFlushNanoseconds: Int64 = 2_000_000_000
    /// Exit after this long with no connections (`--exit-idle-time`), ns; nil never.
    package var exitIdleNanoseconds: Int64? = nil
    /// Bytes read per read(2), and from one connection per loop turn: small
    /// enough that a fast publisher's events are written out between reads
    /// (a 64 KiB read is about 1,000 small publishes), large enough to keep
    /// syscalls rare.
    package var readChunkBytes = 64 * 1024
    /// (issue 38) The same while one uid alone has input (no peeking: the
    /// core handles a whole read, and the uid's slice is
    /// `soleSliceNanoseconds`, 10 ms): a lone fast publisher's events in a
    /// quarter of the reads and turns (case 10 about +20 % delivered on the
    /// quiet machine, docs/BENCHMARKS.md). While several uids have input a
    /// read stays `readChunkBytes`, so the rest of a read bounded by
    /// `turnBytes` that waits in a connection is no larger than before.
    package var soleReadChunkBytes = 256 * 1024
    /// (1.1) Where retained events are kept across restarts (`--state-dir`);
    /// nil: they last for the run (StatePersistence.swift).
    package var stateDirectory: String? = nil
    /// The access-policy files SIGHUP reads again (`broker.policy` holds the
    /// policy loaded from them at start; BrokerServer+Policy.swift).
    package var policyFiles = PolicyFiles.none
    /// Where the server reads the time (ServerClock.swift); tests hand a
    /// clock they move by hand.
    package var clock = ServerClock.system

    /// Defaults; the broker's own credentials are this process's.
    package init() {
        let own = ProcessIdentity.current
        broker.ownCredentials = Credentials(pid: own.pid, uid: own.uid, gid: own.gid)
        // A read is handled 8 KiB of frames at a time, so another uid's
        // request waits for that at most (BrokerServer+Scheduling.swift).
        broker.turnBytes = 8192
    }
}

/// Callbacks for the service manager, run on the loop thread.
package struct ServerHooks {
    /// After every listener is in the epoll set (sd_notify READY=1).
    package var ready: () -> Void = {}
    /// When a graceful stop begins (sd_notify STOPPING=1).
    package var stopping: () -> Void = {}
    /// When a policy reload (SIGHUP) begins (sd_notify RELOADING=1); `ready`
    /// runs again when it is over, whether or not the new policy was taken.
    package var reloading: () -> Void = {}
    /// Timers: every `intervalNanoseconds`, `action(stats)` runs from the loop
    /// itself (so a stuck loop stops them: sd_watchdog_enabled(3)).
    package var periodic: [(intervalNanoseconds: Int64, action: (BrokerStatistics) -> Void)] = []

    package init() {}
}

/// Why `run` returned.
package enum ServerExit: Equatable, Sendable {
    case signal(Int32)
    case idle
}

package final class BrokerServer {
    package let configuration: ServerConfiguration
    package let broker: Broker
    /// The one source of time (`configuration.clock`).
    let clock: ServerClock
    let logger: Logger
    let listeners: [ListeningSocket]
    var hooks: ServerHooks

    let epoll: Epoll
    let signals: SignalDescriptor
    /// The server's side of every open connection, by id (fd, epoll interest).
    var records: [ConnectionID: ServerConnection] = [:]
    /// Connections with output to write after the current epoll batch.
    var pendingFlush: [ServerConnection] = []
    /// Connections whose peer hung up in the current epoll batch, handed to
    /// the core together once the batch is read (`peersHungUp`).
    var hungUp: [ServerConnection] = []
    /// Connections with input, by uid, and the uids that have some, in turn
    /// order (BrokerServer+Scheduling.swift).
    var readyQueues: [UInt32: ReadyQueue] = [:]
    var activeQueues: [ReadyQueue] = []
    /// When a turn last looked at epoll between reads (`peekForInput`).
    var lastPeek: Int64 = 0
    /// An exit reason (a signal) seen by `peekForInput`, for the main loop.
    var peekedExitReason: ServerExit? = nil
    /// When the read being handled has had its time: the core's stops for a
    /// time check (`Broker.stoppedForTimeCheck`) go on until then (`receive`).
    var turnEnds: Int64 = .max
    /// When the core's `tick` is due next (frame timeouts).
    var nextTick: Int64 = 0
    /// The one buffer every connection is read into (`soleReadChunkBytes`
    /// or `readChunkBytes`, whichever is larger).
    let readBuffer: ReadBuffer
    /// The ranges of one gathered write, up to IOV_MAX (1,024).
    var vectors = IOVectors(capacity: 1024)

    var listenersEnabled = true
    var acceptRetryAt: Int64? = nil
    var lastAcceptFailureLog: Int64? = nil
    var shutdownDeadline: Int64? = nil
    var idleSince: Int64
    var nextPeriodic: [Int64]
    /// Connections whose slow-consumer state was already logged at notice
    /// level; later episodes go to debug so a flood cannot fill the journal.
    var loggedSlowConsumers: Set<ConnectionID> = []
    /// The state file of the retained events, with `--state-dir`.
    let persistence: StatePersistence?
    /// When to give freed memory back (BrokerServer+Memory.swift).
    var heapTrimmer = HeapTrimmer()
    /// Connections other threads hand to the loop (BrokerServer+Handoff.swift).
    package let handoff: ConnectionHandoff
    /// Work run on this loop's thread (BrokerServer+Attachments.swift), and which of it epoll found ready.
    var attachments: [LoopAttachment] = []
    var attachmentsReady: [Bool] = []
    /// (issue 36) The broker ends of the socketpairs attachments hold (handed
    /// with `attached`), whether the loop wrote to one since its last epoll
    /// wait, and whether the last turn skipped its wait for that
    /// (BrokerServer+Attachments.swift, "The hand-over").
    var attachedPeers: [ServerConnection] = []
    var attachedPeerWritten = false
    var skippedWait = false
    /// (bridgerr) Bytes written to attached connections since the attachments
    /// last turned, by the uid whose service caused them (`flushPending`'s
    /// payer): their next turns' time is charged to those uids
    /// (BrokerServer+Attachments.swift, "Who pays").
    var attachedBytesWritten = 0
    var attachmentFeeders: [UInt32: Int] = [:]
    /// Nanoseconds of attachment turns charged to each uid so far (at most
    /// 1,024 uids kept; `attachmentCharged`).
    var attachmentCharges: [UInt32: Int64] = [:]

    // Tokens: a connection's is its id (1, 2, 3...); the specials count down from the top.
    static let signalToken: UInt64 = .max
    static func listenerToken(_ i: Int) -> UInt64 { .max - 1 - UInt64(i) }

    /// - Parameters:
    ///   - listeners: sockets to accept on (owned by the server from now on).
    ///   - instance: this run's id for the core.
    /// - Throws: `SystemError` when epoll or the signalfd cannot be created.
    package init(configuration: ServerConfiguration, listeners: [ListeningSocket], instance: String, logger: Logger, hooks: ServerHooks = ServerHooks()) throws(SystemError) {
        self.configuration = configuration
        self.listeners = listeners
        self.logger = logger
        self.hooks = hooks
        self.clock = configuration.clock
        let start = configuration.clock.now()
        let now = start.monotonicNanoseconds
        self.broker = Broker(configuration: configuration.broker, instance: instance, startTime: start)
        self.epoll = try Epoll(maxEvents: 1024)
        self.signals = try SignalDescriptor(signals: [SIGTERM, SIGINT, SIGHUP])
        self.handoff = try ConnectionHandoff()
        self.readBuffer = ReadBuffer(capacity: max(configuration.readChunkBytes, configuration.soleReadChunkBytes))
        self.idleSince = now
        self.nextPeriodic = hooks.periodic.map { now + $0.intervalNanoseconds }
        self.persistence = configuration.stateDirectory.map { StatePersistence(directory: $0, logger: logger) }
        persistence?.load(into: broker)
        self.nextTick = now + broker.tickIntervalNanoseconds
        ProcessSettings.ignoreBrokenPipeSignal()
    }

    /// Runs until SIGTERM/SIGINT (after flushing for up to the configured time)
    /// or the idle timeout. Closes every connection and listener before returning.
    /// - Throws: `SystemError` only for failures of the loop itself (epoll).
    package func run() throws(SystemError) -> ServerExit {
        for (i, listener) in listeners.enumerated() {
            try epoll.add(listener.descriptor, events: .readable, token: BrokerServer.listenerToken(i))
        }
        try epoll.add(signals.descriptor, events: .readable, token: BrokerServer.signalToken)
        try epoll.add(handoff.wakeup.descriptor, events: .readable, token: BrokerServer.handoffToken)
        try registerAttachments()
        hooks.ready()
        var exitReason: ServerExit? = nil
        while true {
            let now = clock.monotonic()
            if let reason = checkTimers(now: now) { exitReason = reason }
            if let deadline = shutdownDeadline, broker.connectionCount == 0 || now >= deadline {
                break
            }
            if exitReason == .idle { break }
            // Output a timer gave (an expired request's `timeout`, a tick's
            // error frame) is written in this turn, not after the next wake.
            let handedOver = handOverToAttachments()
            if !handedOver {
                try epoll.wait(timeoutMilliseconds: hasReadyConnections || !pendingFlush.isEmpty || broker.hasPendingHandOns ? 0 : nextTimeout(now: now)) { token, events in
                    dispatch(token: token, events: events, exitReason: &exitReason)
                }
            }
            if turnAttachments(handedOver: handedOver) { markAttachedPeersReady() }
            peersHungUp()
            serveReadyConnections()
            continueHandOns()  // (issue 38) a slice of closed members' queue group hand-ons
            if let reason = peekedExitReason {
                peekedExitReason = nil
                if exitReason == nil || exitReason == .idle { exitReason = reason }
            }
            flushPending()
        }
        closeEverything()
        persistence?.finish(broker, now: clock.monotonic())
        return exitReason ?? .idle
    }

    // MARK: Dispatch

    func dispatch(token: UInt64, events: EpollEvents, exitReason: inout ServerExit?) {
        if token == BrokerServer.signalToken {
            for signal in signals.readSignals() {
                if signal == SIGHUP {
                    if shutdownDeadline == nil { reloadPolicy() }
                } else if shutdownDeadline == nil {
                    logger.info("received signal \(signal); stopping: no new connections, flushing queues for up to \(configuration.shutdownFlushNanoseconds / 1_000_000) ms")
                    exitReason = .signal(signal)
                    beginShutdown()
                }
            }
            return
        }
        if token == BrokerServer.handoffToken {
            adoptHandedConnections()
            return
        }
        if markAttachmentReady(token: token) { return }
        let listenerIndex = UInt64.max - 1 - token  // the signal token is handled above
        if listenerIndex < UInt64(listeners.count) {
            acceptConnections(from: Int(listenerIndex))
            return
        }
        guard let record = records[token] else { return }
        if events.contains(.error) || events.contains(.hangup) {
            // Peer gone completely. Frames it sent before closing still count
            // (PROTOCOL.md "Semantics": every frame is read before EOF is
            // handled), even when its reading was paused by backpressure:
            // they are read in turn and the connection closes at their EOF.
            // EPOLLERR too: a peer that closes with replies unread leaves
            // ECONNRESET, which read(2) reports only after the data it sent.
            if !record.inputClosed && record.closing == nil && shutdownDeadline == nil {
                if !record.peerGone {
                    record.peerGone = true
                    hungUp.append(record)  // with the batch's others (`peersHungUp`)
                }
                return
            }
            close(record)
            return
        }
        if events.contains(.readHangup) { record.peerShutWriting = true }
        if events.contains(.readable) || events.contains(.readHangup) { markReady(record) }
        if events.contains(.writable) && flush(record) { scheduleFlush(record) }
    }

    // MARK: Timers and shutdown

    func checkTimers(now: Int64) -> ServerExit? {
        if let retry = acceptRetryAt, now >= retry { setListenersEnabled(true) }
        persistence?.tick(broker, now: now)
        trimHeapIfReleased(now: now)
        if now >= nextTick {
            apply(broker.tick(at: currentTime()))
            nextTick = now + broker.tickIntervalNanoseconds
        }
        // (1.3) Request deadlines: the earliest pending one, nothing while none is.
        if let due = broker.nextRequestDeadline, now >= due { apply(broker.expireRequests(at: currentTime())) }
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
        if broker.needsTicks { deadline = min(deadline, nextTick) }
        if let due = broker.nextRequestDeadline { deadline = min(deadline, due) }
        if let stop = shutdownDeadline { deadline = min(deadline, stop) }
        for t in nextPeriodic { deadline = min(deadline, t) }
        if let write = persistence?.nextDeadline(broker, now: now) { deadline = min(deadline, write) }
        if let trim = heapTrimmer.dueAt { deadline = min(deadline, trim) }
        if let idle = configuration.exitIdleNanoseconds, broker.connectionCount == 0 { deadline = min(deadline, idleSince + idle) }
        let attached = attachmentTimeout() ?? -1
        if deadline == .max { return attached }
        let ms = Int32(clamping: max(0, (deadline - now + 999_999) / 1_000_000))
        return attached < 0 ? ms : min(ms, attached)
    }

    func beginShutdown() {
        hooks.stopping()
        shutdownDeadline = clock.monotonic() + configuration.shutdownFlushNanoseconds
        for listener in listeners {
            epoll.remove(listener.descriptor)
            listener.close()
        }
        apply(broker.beginShutdown())
    }

    func closeEverything() {
        for record in records.values.sorted(by: { $0.connection.id < $1.connection.id }) {
            close(record)
        }
        for listener in listeners {
            epoll.remove(listener.descriptor)
            listener.close()
        }
    }
}
