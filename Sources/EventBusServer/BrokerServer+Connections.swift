// The server's side of each connection: its record (fd, epoll interest,
// what the core asked), accepting, reading, writing, and `apply`, the one
// place where a `BrokerStep` from the core is carried out.
//
// Before editing: a connection is closed only by `close` (the server gave up
// on it) or by the core (`.close(id, .now)`); both end in `apply`, which
// calls `release` — the only code that removes a connection from epoll,
// closes its fd and drops its record, in that order.
import CEventBusShims
import EventBusCore
import EventBusLog
@_spi(Package) import EventBusProtocol
@_spi(Package) import EventBusSystem
import Glibc

/// What the server keeps per connection, next to the core's `Connection`.
final class ServerConnection {
    let connection: Connection
    /// Owned by this record; closed by `BrokerServer.release`.
    let fd: FileDescriptor
    /// The epoll mask last registered (input edge-triggered).
    var interest: EpollEvents = [.readable, .readHangup, .edgeTriggered]
    /// epoll reported EPOLLRDHUP: after the data, a read will give EOF, so a
    /// short read does not end the connection's readiness.
    var peerShutWriting = false
    /// epoll reported EPOLLHUP: the peer closed its socket. What it sent
    /// before is still read and handled, in turn like any input (a read at a
    /// time, BrokerServer+Scheduling.swift), and whatever is queued for it
    /// is discarded, since nobody can read it; it is closed once EOF is read.
    var peerGone = false
    /// In its uid's ready queue (BrokerServer+Scheduling.swift).
    var ready = false
    /// EOF was read.
    var inputClosed = false
    /// The core said `.pauseReading` (and not yet `.resumeReading`).
    var readPaused = false
    /// The core is closing it (`.afterFlush` or `.afterWrite`).
    var closing: CloseTiming?
    /// The last write would have blocked with bytes left: watch for EPOLLOUT.
    var writeBlocked = false
    /// In `BrokerServer.pendingFlush`.
    var flushPending = false
    /// Out of epoll, fd closed, record dropped.
    var released = false
    /// Its peer is an attachment of the loop (`BrokerServer.attachedPeers`).
    var attached = false

    init(connection: Connection, fd: FileDescriptor) {
        self.connection = connection
        self.fd = fd
    }

    /// Its epoll token.
    var token: UInt64 { connection.id }

    /// Whether to read it (or hand the core the input it kept: a publisher
    /// held by flow control may have read its EOF already).
    var wantsInput: Bool { (!inputClosed || connection.hasBufferedInput) && !readPaused && closing == nil }
}

extension BrokerServer {
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
            let now = clock.monotonic()
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
        let groups: [UInt32]
        do {
            credentials = try fd.peerCredentials()
            // Supplementary groups decide `group=` rules: without them a
            // `deny ... group=G` could be bypassed, so fail closed.
            groups = try fd.peerGroups()
        } catch {
            logger.warning("failed to read peer credentials of new connection: \(error); closing it")
            fd.close()
            return
        }
        admit(fd, credentials: Credentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, supplementaryGroups: groups))
    }

    /// Serves `fd` as a connection of `credentials` (the kernel's, or those a
    /// connection was handed with: BrokerServer+Handoff.swift; `attached`:
    /// its peer is an attachment of the loop).
    func admit(_ fd: FileDescriptor, credentials: Credentials, attached: Bool = false) {
        switch broker.open(credentials: credentials, at: currentTime()) {
        case .failure(let refused):
            _ = try? fd.write(refused.frame.span.bytes)
            fd.close()
            let fields = [("EVENTBUS_PID", "\(credentials.pid)"), ("EVENTBUS_UID", "\(credentials.uid)")]
            if refused.forbidden {
                if let line = refused.logLine { logger.notice("refused connection: \(line)", fields: fields) }
            } else {
                logger.notice("refused connection from pid \(credentials.pid) uid \(credentials.uid): \(refused.logLine ?? "connection limit reached")", fields: fields)
            }
        case .success(let connection):
            let record = ServerConnection(connection: connection, fd: fd)
            records[connection.id] = record
            if attached {
                record.attached = true
                attachedPeers.append(record)
            }
            do {
                try epoll.add(fd, events: record.interest, token: record.token)
            } catch {
                logger.warning("failed to watch new connection: \(error); closing it")
                close(record)
                return
            }
            if logger.enabled(.debug) {
                logger.debug("connection \(connection.publicID) opened by pid \(credentials.pid) uid \(credentials.uid)",
                             fields: [("EVENTBUS_CONN", "\(connection.publicID)"), ("EVENTBUS_PID", "\(credentials.pid)"), ("EVENTBUS_UID", "\(credentials.uid)")])
            }
        }
    }

    // MARK: Read (the turns are in BrokerServer+Scheduling.swift)

    /// The peers that closed their sockets (EPOLLHUP) in the epoll batch
    /// just read (`hungUp`, each marked `peerGone` by `dispatch`): their
    /// input is still handled, in their uid's turns rather than all at once
    /// (a hostile client could leave a full socket buffer of costly frames
    /// on each of many connections), even while the core has paused their
    /// reading; their output is discarded from now on (`flush`), which also
    /// lifts an outbound pause. The core is told of them together, so a
    /// queue group's members hanging up at once do not hand their events on
    /// to one another (issue 38; `Broker.peersClosed`).
    func peersHungUp() {
        guard !hungUp.isEmpty else { return }
        let batch = hungUp.filter { !$0.released }
        hungUp.removeAll(keepingCapacity: true)
        for record in batch { record.peerShutWriting = true }
        apply(broker.peersClosed(batch.map(\.connection), at: currentTime()))  // (1.3) their queue groups' events go to others first
        for record in batch where !record.released {
            flush(record)
            markReady(record)
        }
    }

    /// (issue 38) One slice of the queue group hand-ons of closed members
    /// still pending (`Broker.continueHandOns`: the events a closing member
    /// never got go to the members left, a bounded piece of work per loop
    /// turn), its time charged to the closing uid's share of the loop.
    func continueHandOns() {
        guard broker.hasPendingHandOns, let uid = broker.pendingHandOnUID else { return }
        let start = clock.monotonic()
        apply(broker.continueHandOns(at: currentTime()))
        chargeWrite(uid, nanoseconds: clock.monotonic() - start)
    }

    func currentTime() -> BrokerTime {
        clock.now()
    }

    // MARK: Write

    /// Writes every connection that got output since the last call (and any
    /// that writing them gave output to).
    /// - Parameter payer: the uid being served, whose reads caused this
    ///   output: the time the writes take is charged to it in the read
    ///   scheduling (its replies, and the events it published to others'
    ///   subscribers; issue 37: charged to the subscriber's uid, another
    ///   uid's flood of a type root subscribes to spent root's slice and
    ///   root's ping waited turns, p99 16 ms). nil (output of timers, after
    ///   the turn): each write to its connection's uid while that uid has
    ///   input waiting.
    /// A connection whose write stopped at `flushBudgetBytes` with more to
    /// write is written again in the next call (after the turn's reads), not
    /// in this one.
    func flushPending(chargingTo payer: ReadyQueue? = nil) {
        var start = clock.monotonic()
        var again: [ServerConnection] = []
        while !pendingFlush.isEmpty {
            let list = pendingFlush
            pendingFlush.removeAll(keepingCapacity: true)
            for record in list {
                record.flushPending = false
                let handed = attachedBytesWritten
                if flush(record) { again.append(record) }
                if let payer, attachedBytesWritten > handed {
                    attachmentFeeders[payer.uid, default: 0] += attachedBytesWritten - handed  // the attachment's work is payer's
                }
                let end = clock.monotonic()
                if let payer {
                    payer.charge(end - start)
                } else {
                    chargeWrite(record.connection.credentials.uid, nanoseconds: end - start)
                }
                start = end
            }
        }
        for record in again { scheduleFlush(record) }
    }

    /// Puts a connection in `pendingFlush` (once).
    func scheduleFlush(_ record: ServerConnection) {
        guard !record.flushPending, !record.released else { return }
        record.flushPending = true
        pendingFlush.append(record)
    }

    /// Bytes one `flush` writes to a connection at most (unless it is
    /// closing): a subscriber that reads as fast as the broker writes would
    /// otherwise keep one flush going for as long as its queue lasts (1-2 MiB,
    /// 0.6-1.2 ms, seen with another uid's flood), and a ping of root's behind it
    /// waited for that (issue 37). 256 KiB is about 150 us of writing.
    static let flushBudgetBytes = 256 * 1024

    /// Writes as much of the connection's queue as the socket takes, up to
    /// `flushBudgetBytes`, with gathered writes of up to `vectors.capacity`
    /// runs of frames, then closes it (after a final write the core asked
    /// for) or updates its epoll interest.
    /// - Returns: true when it stopped at the budget with more to write and
    ///   room in the socket: the caller writes it again later (`scheduleFlush`).
    @discardableResult
    func flush(_ record: ServerConnection) -> Bool {
        guard !record.released else { return false }
        let connection = record.connection
        if record.peerGone {
            // Nobody reads it: discard what is queued as if it were written.
            while !record.released && !connection.outbound.isEmpty {
                apply(broker.didWrite(connection, bytes: connection.outbound.byteCount))
            }
            if !record.released && record.closing == .afterWrite { close(record) }
            return false
        }
        var blocked = false, overBudget = false, written = 0
        while !connection.outbound.isEmpty {
            // The ranges point into the queue's chunks, which stay put until `didWrite`.
            vectors.removeAll()
            _ = connection.outbound.forEachChunk(maxChunks: vectors.capacity) { vectors.append($0) }
            do {
                switch try record.fd.write(vectors) {
                case .wouldBlock:
                    blocked = true
                case .complete(let n):
                    apply(broker.didWrite(connection, bytes: n))
                    if record.released { return false }
                    written += n
                    if written >= BrokerServer.flushBudgetBytes && record.closing == nil && !connection.outbound.isEmpty {
                        overBudget = true
                        break
                    }
                    continue
                }
            } catch {
                logger.debug("failed to write to connection \(connection.publicID): \(error); closing it")
                close(record)
                return false
            }
            break
        }
        if written > 0 && record.attached {
            attachedPeerWritten = true  // the hand-over (BrokerServer+Attachments.swift)
            attachedBytesWritten &+= written  // who pays for the attachment's work (`flushPending`)
        }
        if record.closing == .afterWrite {
            close(record)
            return false
        }
        record.writeBlocked = blocked
        updateInterest(record)
        return overBudget
    }

    /// Registers what to watch: input (edge-triggered) until it ended or the
    /// connection is closing (a pause keeps it: readiness is tracked in the
    /// ready queues), EPOLLOUT while a write is blocked with bytes left.
    func updateInterest(_ record: ServerConnection) {
        guard !record.released else { return }
        var events: EpollEvents = []
        if !record.inputClosed && record.closing == nil { events.formUnion([.readable, .readHangup, .edgeTriggered]) }
        if record.writeBlocked && !record.connection.outbound.isEmpty { events.insert(.writable) }
        guard events != record.interest else { return }
        record.interest = events
        try? epoll.modify(record.fd, events: events, token: record.token)
    }

    // MARK: Effects and closing

    /// Carries out what the core decided: the one place its steps take effect.
    func apply(_ step: BrokerStep) {
        for id in step.output {
            // A connection whose last write would have blocked, and that is
            // watched for EPOLLOUT, is written then (`handle`), not now: a
            // write now would fail again, after gathering up to 1,024
            // frames (a queue-group member that does not read has one frame
            // per event, none adjacent: that gathering per event cost another
            // uid's publisher most of its rate, issue 38's `group-members`
            // row). One not watched (its queue was emptied meanwhile and its
            // interest updated), closing, or whose peer is gone is flushed now.
            guard let record = records[id], !record.flushPending,
                  !(record.writeBlocked && record.interest.contains(.writable)) || record.peerGone || record.closing != nil else { continue }
            record.flushPending = true
            pendingFlush.append(record)
        }
        for effect in step.effects {
            switch effect {
            case .notice(let notice):
                log(notice)
            case .pauseReading(let id):
                guard let record = records[id] else { continue }
                record.readPaused = true
            case .resumeReading(let id):
                guard let record = records[id] else { continue }
                record.readPaused = false
                markReady(record)  // input may have arrived meanwhile, or the core kept some
            case .close(let id, .now):
                if let record = records[id] { release(record) }
            case .close(let id, let timing):
                guard let record = records[id] else { continue }
                record.closing = timing
                if !record.flushPending {
                    record.flushPending = true
                    pendingFlush.append(record)
                }
                updateInterest(record)
            }
        }
    }

    /// Closes a connection the server gives up on (peer gone, I/O error, a
    /// final write done, shutdown): the core forgets it and answers
    /// `.close(id, .now)`, which `apply` carries out.
    func close(_ record: ServerConnection) {
        guard !record.released else { return }
        apply(broker.close(record.connection))
        precondition(record.released, "the core did not close connection \(record.connection.id)")
    }

    /// Removes a connection from epoll, closes its fd and drops its record
    /// (once; only `apply` calls it).
    func release(_ record: ServerConnection) {
        guard !record.released else { return }
        let id = record.connection.id
        record.released = true
        records[id] = nil
        if record.attached { attachedPeers.removeAll { $0 === record } }
        epoll.remove(record.fd)
        record.fd.close()
        loggedSlowConsumers.remove(id)
        if broker.connectionCount == 0 { idleSince = clock.monotonic() }
        if !listenersEnabled { setListenersEnabled(true) }
        if logger.enabled(.debug) {
            logger.debug("connection \(Broker.publicConnectionID(id)) closed", fields: [("EVENTBUS_CONN", "\(Broker.publicConnectionID(id))")])
        }
    }

    /// Logs a notice of the core. Each line about a connection names its uid
    /// (text and `EVENTBUS_UID`), which is also what the rate limit in front
    /// of the journal (RateLimitedLogSink) counts per: one uid's repeated
    /// lines never hide another uid's.
    func log(_ notice: BrokerNotice) {
        /// The uid of a connection still open, for its lines.
        func about(_ id: ConnectionID, pid: Int32) -> (text: String, fields: [(String, String)]) {
            let conn = Broker.publicConnectionID(id)
            guard let uid = records[id]?.connection.credentials.uid else {
                return ("connection \(conn) (pid \(pid))", [("EVENTBUS_CONN", "\(conn)"), ("EVENTBUS_PID", "\(pid)")])
            }
            return ("connection \(conn) (pid \(pid), uid \(uid))", [("EVENTBUS_CONN", "\(conn)"), ("EVENTBUS_PID", "\(pid)"), ("EVENTBUS_UID", "\(uid)")])
        }
        switch notice {
        case .startedDropping(let id, let pid):
            let level: LogLevel = loggedSlowConsumers.insert(id).inserted ? .notice : .debug
            let who = about(id, pid: pid)
            logger.log(level, "\(who.text) is a slow consumer: dropping events for it", fields: who.fields)
        case .limitReached(let id, let pid, let message):
            let who = about(id, pid: pid)
            logger.notice("\(who.text) reached a limit: \(message)", fields: who.fields)
        case .stalled(let id, let pid):
            let who = about(id, pid: pid)
            logger.info("\(who.text) took nothing for the stall timeout: it is behind, and the publishers it held run on", fields: who.fields)
        case .slowConsumerDisconnected(let id, let pid):
            let who = about(id, pid: pid)
            logger.notice("\(who.text) closed as a slow consumer (overflow: disconnect)", fields: who.fields)
        case .denied(let id, let pid, let uid, let line):
            logger.notice("denied: \(line)", fields: [("EVENTBUS_CONN", "\(Broker.publicConnectionID(id))"), ("EVENTBUS_PID", "\(pid)"), ("EVENTBUS_UID", "\(uid)")])
        case .policyReloaded(let generation, let revoked):
            logger.info("reloaded: \(BrokerServer.policySummary(broker.policy, generation: generation)); \(revoked) subscription\(revoked == 1 ? "" : "s") revoked",
                        fields: [("EVENTBUS_POLICY_GENERATION", "\(generation)")])
        }
    }
}
