// The NATS client as a state machine: the link (connecting, handshaking,
// connected, waiting to retry), the server pool, subscriptions, the outbox,
// PING/PONG and the counters. Every method updates the state and returns a
// `Step` of effects for the driver (`Client`) to perform; bytes to write wait
// in the outbox (`writable`/`didWrite`). No I/O, no threads, no clock reads:
// time comes in as `now`, monotonic nanoseconds.
//
// Before editing, the order after every (re)connect is the contract
// (DESIGN-NOTES-1.1 A.7; the MQTT bridges' ordering bugs): INFO, then CONNECT
// and PING; on its PONG, every SUB, then the held messages in order, then the
// gap report, then the announcements, and only then anything published later.
@_spi(Package) import EventBusProtocol

/// The whole client state; one owner (the driver, under its lock).
package struct ClientState {
    package let configuration: ClientConfiguration
    package private(set) var link: LinkState = .idle
    package private(set) var pool: ServerPool
    package private(set) var statistics = ClientStatistics()
    /// Subscriptions by sid: subject and queue group. Re-sent after every reconnect.
    package private(set) var subscriptions: [SubscriptionID: (subject: Subject, queue: Subject?)] = [:]
    /// `max_payload` of the current (or last) server; the server default until the first INFO.
    package private(set) var maxPayload = 1 << 20

    var outbox: Outbox
    var parser: Parser
    /// `received`'s operations, kept for their storage.
    private var parsed: [ServerOperation] = []
    /// Bound on unwritten protocol lines (PONGs, SUBs) before the link is dropped.
    static let maxUnwrittenControlBytes = 1 << 20
    var random: SplitMix64
    private var nextSID: UInt64 = 1
    private var pingsOutstanding = 0
    private var nextPingAt: Int64 = 0
    /// Failed connection attempts in the current pass over the pool, and passes failed in a row.
    private(set) var failedAttemptsThisPass = 0
    private(set) var failedPasses = 0
    private var everLinked = false
    /// Drops not reported yet.
    private(set) var unreported: DropSummary? = nil

    package init(configuration: ClientConfiguration) {
        self.configuration = configuration
        var system = SplitMix64()
        random = SplitMix64(seed: configuration.randomSeed ?? system.next())
        pool = ServerPool(seeds: configuration.servers, randomize: configuration.randomize, random: &random)
        outbox = Outbox(limitBytes: configuration.bufferLimitBytes, limitMessages: configuration.bufferLimitMessages)
        parser = Parser(maxControlLineBytes: configuration.maxControlLineBytes, maxInfoLineBytes: configuration.maxInfoLineBytes)
    }

    package var isClosed: Bool { link == .closed }

    package var isConnected: Bool {
        if case .connected = link { return true }
        return false
    }

    /// Whether the driver has bytes to write on the current connection.
    package var hasWritableBytes: Bool { outbox.hasWritableBytes }

    /// Up to `limit` bytes to write next; call `didWrite` with how many were written.
    package func writable(limit: Int = 256 << 10) -> [UInt8] { outbox.writable(limit: limit) }

    /// Calls `body` with what `writable(limit:)` returns, without copying it
    /// (the driver's write; then `didWrite` with what reached the socket).
    package func withWritable<R>(limit: Int = 256 << 10, _ body: (RawSpan) -> R) -> R {
        outbox.withWritable(limit: limit, body)
    }

    /// `count` bytes of `writable()` reached the socket.
    package mutating func didWrite(_ count: Int) {
        outbox.didWrite(count)
        refreshBufferStatistics()
    }

    /// When `tick` must be called next (monotonic ns), or nil.
    package var nextDeadline: Int64? {
        switch link {
        case .handshaking(_, _, let deadline): deadline
        case .connected: nextPingAt
        case .waiting(let until, _): until
        case .idle, .connecting, .closed: nil
        }
    }

    // MARK: Connection lifecycle

    /// Starts connecting to the first server of the pool.
    package mutating func start(now: Int64) -> Step {
        guard link == .idle else { return Step() }
        return connect(to: pool.first)
    }

    private mutating func connect(to server: ServerAddress) -> Step {
        link = .connecting(server)
        statistics.connectAttempts += 1
        return Step(effects: [.connect(server)])
    }

    /// TCP is up: wait for the server's INFO.
    package mutating func connectionEstablished(now: Int64) -> Step {
        guard case .connecting(let server) = link else {
            return isClosed ? Step(effects: [.closeConnection]) : Step()
        }
        parser.reset()
        link = .handshaking(server, info: nil, deadline: now + configuration.connectTimeout.nanoseconds)
        return Step()
    }

    /// The TCP connect failed (`reason`: the connect error).
    package mutating func connectFailed(reason: String, now: Int64) -> Step {
        guard case .connecting(let server) = link else { return Step() }
        var step = Step(effects: [.attemptFailed(server, reason: reason)])
        step.effects += retry(after: server, failed: true, now: now).effects
        return step
    }

    /// The connection ended (EOF, reset, write error).
    package mutating func connectionLost(reason: String, now: Int64) -> Step {
        end(reason: reason, closeSocket: false, now: now)
    }

    /// Ends the current connection (if any) as the state machine's own decision.
    private mutating func drop(reason: String, now: Int64) -> Step {
        end(reason: reason, closeSocket: true, now: now)
    }

    /// Ends the current connection, if any: a handshake that did not finish
    /// is a failed attempt (retried), a link that was up is lost (`lose`);
    /// `closeSocket` when the socket is still open (our own decision).
    private mutating func end(reason: String, closeSocket: Bool, now: Int64) -> Step {
        switch link {
        case .handshaking(let server, _, _):
            outbox.connectionEnded()
            var step = Step(effects: closeSocket ? [.closeConnection] : [])
            step.effects.append(.attemptFailed(server, reason: reason))
            step.effects += retry(after: server, failed: true, now: now).effects
            return step
        case .connected(let server, _, let since):
            return lose(server, since: since, reason: reason, closeSocket: closeSocket, now: now)
        default:
            return Step()
        }
    }

    private mutating func lose(_ server: ServerAddress, since: Int64, reason: String, closeSocket: Bool, now: Int64) -> Step {
        outbox.connectionEnded()
        statistics.linkUp = false
        statistics.server = nil
        refreshBufferStatistics()
        var step = Step(effects: closeSocket ? [.closeConnection] : [])
        step.effects.append(.linkDown(reason: reason))
        let healthy = now - since >= configuration.healthyLinkDuration.nanoseconds
        if healthy {
            failedAttemptsThisPass = 0
            failedPasses = 0
        }
        step.effects += retry(after: server, failed: !healthy, now: now).effects
        return step
    }

    /// Picks the next server: at once while the current pass over the pool
    /// has servers left, after the backoff delay once a whole pass failed.
    private mutating func retry(after server: ServerAddress, failed: Bool, now: Int64) -> Step {
        let next = pool.rotate(after: server)
        if failed {
            failedAttemptsThisPass += 1
            if failedAttemptsThisPass >= pool.count {
                failedAttemptsThisPass = 0
                failedPasses += 1
                let delay = configuration.backoff.delayNanoseconds(afterFailedPasses: failedPasses, random: random.unit())
                link = .waiting(until: now + delay, next: next)
                return Step()
            }
        }
        return connect(to: next)
    }

    /// Timers: backoff expiry, handshake timeout, PING interval and stale links.
    package mutating func tick(now: Int64) -> Step {
        switch link {
        case .waiting(let until, let next) where now >= until:
            return connect(to: next)
        case .handshaking(_, _, let deadline) where now >= deadline:
            return drop(reason: "no INFO and PONG within \(configuration.connectTimeout)", now: now)
        case .connected where now >= nextPingAt:
            if pingsOutstanding >= configuration.maxPingsOutstanding {
                return drop(reason: "stale connection: \(pingsOutstanding) PINGs unanswered", now: now)
            }
            pingsOutstanding += 1
            nextPingAt = now + configuration.pingInterval.nanoseconds
            outbox.appendControl(Encoder.ping)
            return Step()
        default:
            return Step()
        }
    }

    /// Closes the client for good: nothing is sent any more, the outbox is emptied.
    package mutating func close() -> Step {
        let hadSocket: Bool
        switch link {
        case .handshaking, .connected, .connecting: hadSocket = true
        default: hadSocket = false
        }
        link = .closed
        outbox.removeAll()
        statistics.linkUp = false
        statistics.server = nil
        refreshBufferStatistics()
        return Step(effects: hadSocket ? [.closeConnection] : [])
    }

    // MARK: Incoming bytes

    /// Bytes read from the connection.
    package mutating func received(_ bytes: RawSpan, now: Int64) -> Step {
        switch link {
        case .handshaking, .connected: break
        default: return Step()
        }
        // The operations array is kept between reads (its storage reused).
        var operations = parsed
        parsed = []
        defer {
            operations.removeAll(keepingCapacity: operations.capacity <= 4096)
            parsed = operations
        }
        var violation: ProtocolViolation? = nil
        do {
            try parser.feed(bytes, into: &operations)
        } catch {
            violation = error
        }
        var step = Step()
        step.effects.reserveCapacity(operations.count)
        for operation in operations {
            if case .message(let message) = operation {
                // The hot case inline: no `Step` (an array) per message.
                statistics.received += 1
                step.effects.append(.message(message))
                continue
            }
            step.effects += handle(operation, now: now).effects
            switch link {
            case .handshaking, .connected: continue
            default: return step  // the connection was dropped: ignore the rest
            }
        }
        if let violation {
            step.effects += drop(reason: "protocol violation: \(violation)", now: now).effects
        }
        return step
    }

    private mutating func handle(_ operation: ServerOperation, now: Int64) -> Step {
        switch operation {
        case .info(let info):
            return handleInfo(info, now: now)
        case .message(let message):
            statistics.received += 1
            return Step(effects: [.message(message)])
        case .oversized(let subject, _, let bytes):
            statistics.skippedOversized += 1
            return Step(effects: [.skippedOversized(subject: subject, bytes: bytes)])
        case .ping:
            // A server that PINGs while not reading our PONGs would grow the
            // outbox without bound; 1 MiB of unwritten protocol lines ends it.
            if outbox.controlBytes > ClientState.maxUnwrittenControlBytes {
                return drop(reason: "the server sends PINGs faster than it reads the PONGs", now: now)
            }
            outbox.appendControl(Encoder.pong)
            return Step()
        case .pong:
            if case .handshaking(let server, let info?, _) = link { return linkUp(server, info, now: now) }
            pingsOutstanding = 0
            return Step()
        case .ok:
            return Step()
        case .error(let text):
            statistics.serverErrors += 1
            let fatal = ErrorClassification.closesConnection(text)
            var step = Step(effects: [.serverError(text, closesConnection: fatal)])
            if fatal { step.effects += drop(reason: "server error: \(text)", now: now).effects }
            return step
        }
    }

    private mutating func handleInfo(_ info: ServerInfo, now: Int64) -> Step {
        var step = Step()
        let current: ServerAddress
        switch link {
        case .handshaking(let server, nil, let deadline):
            current = server
            guard info.headers else {
                return drop(reason: "\(server) does not support headers (nats-server 2.2 or later needed)", now: now)
            }
            link = .handshaking(server, info: info, deadline: deadline)
            outbox.appendControl(Encoder.connect(configuration.connect))
            outbox.appendControl(Encoder.ping)
        case .handshaking(let server, _?, let deadline):
            current = server
            link = .handshaking(server, info: info, deadline: deadline)
        case .connected(let server, _, let since):
            current = server
            link = .connected(server, info, since: since)
        default:
            return step
        }
        maxPayload = info.maxPayload
        parser.maxPayloadBytes = info.maxPayload
        let joined = pool.apply(connectURLs: info.connectURLs, current: current, randomize: configuration.randomize, random: &random)
        if !joined.isEmpty { step.effects.append(.discovered(joined)) }
        if info.lameDuckMode {
            step.effects.append(.lameDuck(current))
            step.effects += drop(reason: "\(current) entered lame duck mode", now: now).effects
        }
        return step
    }

    /// The PONG to our handshake PING: re-subscribe, release, report, announce.
    private mutating func linkUp(_ server: ServerAddress, _ info: ServerInfo, now: Int64) -> Step {
        var step = Step()
        link = .connected(server, info, since: now)
        pingsOutstanding = 0
        nextPingAt = now + configuration.pingInterval.nanoseconds
        for sid in subscriptions.keys.sorted() {
            let entry = subscriptions[sid]!
            outbox.appendControl(Encoder.sub(entry.subject, queue: entry.queue, sid: sid))
        }
        for message in outbox.takeHeld() {
            if message.size > maxPayload {
                statistics.refusedTooLarge += 1
                step.effects.append(.refusedTooLarge(subject: message.subject, size: message.size, limit: maxPayload, tag: message.tag))
                continue
            }
            outbox.append(message, toWire: true)
        }
        queueGapReport()
        for announcement in configuration.announcements {
            queueExempt(announcement)
        }
        let isReconnect = everLinked
        if everLinked { statistics.reconnects += 1 }
        everLinked = true
        statistics.linkUp = true
        statistics.server = server
        refreshBufferStatistics()
        step.effects.append(.linkUp(server: server, info: info, isReconnect: isReconnect))
        return step
    }

    // MARK: Publishing and subscribing

    /// Publishes `message`: queued on a ready connection, held otherwise.
    /// Refused when header block plus payload exceeds the server's
    /// `max_payload` (the server would close the whole connection), dropped
    /// when the outbox is full; both are counted, never sent.
    package mutating func publish(_ message: OutgoingMessage) -> PublishOutcome {
        let size = message.size
        if let refused = refusal(size: size, encodedCount: message.encodedCount, tag: message.tag) { return refused }
        if isConnected {
            // Encoded straight into the wire buffer (no array of its own).
            _ = outbox.appendToWire(message, size: size)
        } else {
            outbox.append(QueuedMessage(bytes: message.encoded().bytes, size: size, tag: message.tag, subject: message.subject, exempt: false), toWire: false)
        }
        return published()
    }

    /// (issue 36) `publish(_:)` for a message whose header block and payload
    /// `write` writes straight into the outbox (the bridge's export): the
    /// same refusals, counts and order; held, it gets an array of its own.
    package mutating func publish(_ message: PlacedMessage, writing write: (inout RawWriter) -> Void) -> PublishOutcome {
        if let refused = refusal(size: message.size, encodedCount: message.encodedCount, tag: message.tag) { return refused }
        if isConnected {
            outbox.appendToWire(message, write)
        } else {
            var bytes: [UInt8] = []
            _ = message.append(to: &bytes, write)
            outbox.append(QueuedMessage(bytes: bytes, size: message.size, tag: message.tag, subject: message.subject, exempt: false), toWire: false)
        }
        return published()
    }

    /// Why a message of `size` (`encodedCount` queued) is not taken, counted;
    /// nil when it is (then the gap report, if one is due, is queued ahead of it).
    private mutating func refusal(size: Int, encodedCount: Int, tag: UInt64?) -> PublishOutcome? {
        if isClosed { return .closed }
        if size > maxPayload {
            statistics.refusedTooLarge += 1
            return .tooLarge(size: size, limit: maxPayload)
        }
        guard outbox.fits(encodedCount) else {
            statistics.droppedBufferFull += 1
            if var summary = unreported {
                summary.count += 1
                unreported = summary
            } else {
                unreported = DropSummary(count: 1, firstTag: tag)
            }
            return .dropped
        }
        queueGapReport()
        return nil
    }

    /// Counts a message taken. - Returns: whether it went to the wire or is held.
    private mutating func published() -> PublishOutcome {
        statistics.published += 1
        refreshBufferStatistics()
        return isConnected ? .queued : .held
    }

    /// Queues the gap report, if drops are unreported and a builder is set.
    private mutating func queueGapReport() {
        guard let summary = unreported else { return }
        unreported = nil
        if let build = configuration.gapReport { queueExempt(build(summary)) }
    }

    private mutating func queueExempt(_ message: OutgoingMessage) {
        let (bytes, size) = message.encoded()
        guard size <= maxPayload else { return }
        outbox.append(QueuedMessage(bytes: bytes, size: size, tag: message.tag, subject: message.subject, exempt: true), toWire: isConnected)
    }

    /// Subscribes to `subject` (optionally in queue group `queue`); sent now
    /// when connected, and after every reconnect.
    /// - Returns: the new subscription's sid.
    package mutating func subscribe(_ subject: Subject, queue: Subject? = nil) -> SubscriptionID {
        let sid = SubscriptionID(nextSID)
        nextSID += 1
        subscriptions[sid] = (subject, queue)
        if isConnected { outbox.appendControl(Encoder.sub(subject, queue: queue, sid: sid)) }
        return sid
    }

    /// Withdraws a subscription (UNSUB when connected).
    package mutating func unsubscribe(_ sid: SubscriptionID) {
        guard subscriptions.removeValue(forKey: sid) != nil else { return }
        if isConnected { outbox.appendControl(Encoder.unsub(sid)) }
    }

    private mutating func refreshBufferStatistics() {
        statistics.bufferedMessages = outbox.messageCount
        statistics.bufferedBytes = outbox.messageBytes
    }
}
