// The running bridge: the pure decisions of `BridgeCore` wired between the
// bus connection (`LocalBus`) and the NATS client (`Client`), and the log
// line for everything that happens.
//
// Before editing, the lock rules (no lock is ever taken while another is held):
// - the NATS handler runs on the NATS thread: it decides under `core`,
//   releases it, then queues the import on the bus (never blocking); after
//   each read's messages the client calls `afterMessages`, which wakes the bus
//   thread once for the whole batch;
// - the bus handler runs on the bus thread, the only exporter (so exports
//   keep their `seq` order): a batch of events is decided under `core`, handed
//   to `Client.publish(contentsOf:)` (one lock, one wake), and the outcomes
//   counted under `core` again;
// - the client's `gapReport` closure runs under the NATS lock and reads only
//   `brokerInstance`, a lock of its own that nothing holds while calling out.
import EventBusBridge
import EventBusCommandLine
import EventBusLog
import EventBusNATS
import EventBusProtocol
import EventBusSystem
import Synchronization

/// One bridge process's moving parts.
final class Bridge: Sendable {
    let configuration: BridgeConfiguration
    let logger: Logger
    private let core: Mutex<BridgeCore>
    /// The local broker's instance, for the drop reports the NATS client builds under its lock.
    private let brokerInstance = SharedText()
    let bus: LocalBus
    let nats: Client
    /// Set once a `hello` reply lacked `origin` in `features` (warned once per run).
    private let warnedAboutOrigin = Atomic<Bool>(false)

    /// Builds the parts (nothing runs before `start`).
    /// - Parameters:
    ///   - socketPath: the local bus, resolved.
    ///   - bridgeInstance: this process's random id (hellos, drop reports).
    /// - Throws: `SystemError` when an eventfd cannot be made.
    init(configuration: BridgeConfiguration, socketPath: String, bridgeInstance: String, logger: Logger) throws(SystemError) {
        self.configuration = configuration
        self.logger = logger
        let initial = BridgeCore(mapping: configuration.mapping, exports: configuration.exports, imports: configuration.imports, bridgeInstance: bridgeInstance)
        let subjects = initial.natsSubscriptions
        let instance = brokerInstance
        let natsConfiguration = configuration.clientConfiguration(core: initial) { instance.value }
        bus = try LocalBus(path: socketPath, patterns: initial.exports)
        core = Mutex(initial)
        // The handler is made before `self` exists; it reaches the bridge through `reference`.
        let reference = Reference()
        self.reference = reference
        let bus = self.bus
        nats = try Client(configuration: natsConfiguration, handler: { effect in reference.bridge?.handle(effect) },
                          afterMessages: { bus.wake() })
        reference.bridge = self
        for subject in subjects {
            let sid = nats.subscribe(subject)
            core.withLock { $0.subscribed(sid, to: subject) }
        }
    }

    /// The bridge, for the NATS handler; emptied by `stop` (which ends the cycle bridge → client → handler → bridge).
    private final class Reference: Sendable {
        private let value = Mutex<Bridge?>(nil)
        var bridge: Bridge? {
            get { value.withLock { $0 } }
            set { value.withLock { $0 = newValue } }
        }
    }

    private let reference: Reference

    /// Starts both connections.
    func start() {
        bus.start { [self] report in self.handle(report) }
        nats.start()
    }

    /// Stops: the bus first (no new exports), then up to `flushTimeout` for
    /// the NATS client to write what it holds, then NATS.
    func stop(flushTimeout: Duration = .seconds(2)) {
        bus.close()
        let deadline = Clock.monotonicNanoseconds() + flushTimeout.totalNanoseconds
        while nats.statistics.linkUp && nats.statistics.bufferedMessages > 0 && Clock.monotonicNanoseconds() < deadline {
            var none: [PollEntry] = []
            _ = try? FileDescriptor.poll(&none, timeoutMilliseconds: 10)
        }
        let held = nats.statistics.bufferedMessages
        if held > 0 { logger.warning("stopping with \(held) exported events not yet written to NATS: they are lost") }
        nats.close()
        reference.bridge = nil
    }

    /// The counters now.
    var status: BridgeStatus {
        let nats = self.nats.statistics
        let bus = self.bus.status
        return core.withLock { $0.status(nats: nats, bus: bus) }
    }

    // MARK: The bus side

    private func handle(_ report: BusReport) {
        switch report {
        case .events(let events):
            let messages = core.withLock { core in
                events.compactMap { event -> OutgoingMessage? in
                    if case .publish(let message) = core.export(event) { message } else { nil }
                }
            }
            guard !messages.isEmpty else { return }
            let outcomes = nats.publish(contentsOf: messages)
            core.withLock { core in for outcome in outcomes { core.exported(outcome) } }
            for (message, outcome) in zip(messages, outcomes) {
                if case .tooLarge(let size, let limit) = outcome {
                    logger.notice("dropped the export of \(message.subject.text) (seq \(message.tag ?? 0)): \(size) bytes with headers, over the NATS server's max_payload of \(limit)")
                }
            }
        case .dropped(let count, let since):
            let report = core.withLock { $0.localOverflow(count: count, sinceSeq: since) }
            logger.warning("the broker dropped \(count) events for the bridge (from seq \(since)): the bridge fell behind the bus; reporting the gap on NATS")
            _ = nats.publish(report)
        case .imported(let count):
            core.withLock { $0.imported(.accepted, count: count) }
        case .importRefused(let outcome, let message):
            core.withLock { $0.imported(outcome) }
            // Notice, not warning: notices are rate-limited per message shape, and a policy can refuse every import.
            logger.log(outcome == .denied ? .notice : .info, "the broker did not take an imported event: \(message)")
        case .up(let instance, let features, let isReconnect):
            brokerInstance.value = instance
            core.withLock { $0.localBusConnected(instance: instance) }
            logger.notice("\(isReconnect ? "reconnected" : "connected") to the bus at \(bus.path) (broker instance \(instance))")
            if !features.contains("\"origin\""), !warnedAboutOrigin.exchange(true, ordering: .relaxed) {
                logger.warning("the broker at \(bus.path) does not list \"origin\" in its features: imported events arrive without origin, and a second bridge on this bus would export them again")
            }
        case .down(let reason, let unconfirmed):
            core.withLock { $0.imported(.lost, count: unconfirmed) }
            logger.warning("lost the bus at \(bus.path): \(reason)\(unconfirmed > 0 ? " (\(unconfirmed) imports unconfirmed, counted lost)" : ""); reconnecting, imports are dropped meanwhile")
        case .gap(let pattern, let since, let first, let position):
            if let old = position.previousRun {
                logger.warning("the broker at \(bus.path) is a new run (instance \(position.instance ?? "?"), it restarted): exports the old run \(old) published after seq \(position.previousLastSeq) and the bridge had not read are lost; exporting what the new run published meanwhile (its history from seq \(first))")
            } else {
                logger.warning("the broker's history no longer reaches back to seq \(since + 1) (it starts at \(first)): exports of \(pattern) between may be lost")
            }
        case .attemptFailed(let reason, let failures):
            // The first failure in a row, then every 20th: the reconnect goes on forever.
            if failures == 1 || failures % 20 == 0 {
                logger.warning("cannot connect to the bus at \(bus.path): \(reason) (attempt \(failures); retrying)")
            }
        case .refused(let request, let code, let message):
            logger.error("the broker refused \(request): \(message) (\(code))")
        case .notice(let text):
            logger.warning(text)
        }
    }

    // MARK: The NATS side

    private func handle(_ effect: Effect) {
        switch effect {
        case .message(let message):
            let decision = core.withLock { $0.handle(message) }
            switch decision {
            case .publishLocally(let event):
                if !bus.publish(event) {
                    core.withLock { $0.imported(.lost) }
                    logger.debug("dropped the import of \(event.type.name) from \(event.origin.node): the bus is down or not keeping up")
                }
            case .dropped(let reason, let detail):
                logger.debug("dropped an import (\(reason.rawValue)): \(detail)")
            case .duplicateNode(let other, let reply):
                logger.error("another bridge (instance \(other)) claims node \(configuration.node.text) on this NATS system: exporting has stopped for the rest of this run; give each bridge its own --node")
                if let reply { _ = nats.publish(reply) }
            case .remoteGap(let node, let count, let since, let instance):
                logger.warning("node \(node.text) reports \(count) exported events lost before they reached NATS\(since.map { " (from seq \($0)" } ?? "")\(instance.map { " of broker instance \($0))" } ?? (since == nil ? "" : ")"))")
            case .ignored:
                break
            }
        case .linkUp(let server, let info, let isReconnect):
            logger.notice("\(isReconnect ? "reconnected" : "connected") to NATS at \(server) (\(info.serverName.isEmpty ? info.serverID : info.serverName), nats-server \(info.version), max_payload \(info.maxPayload))")
        case .linkDown(let reason):
            logger.warning("lost the NATS link: \(reason); holding exports in order and reconnecting")
        case .attemptFailed(let server, let reason):
            logger.info("cannot connect to NATS at \(server): \(reason)")
        case .serverError(let text, let closes):
            logger.warning("NATS server error: \(text)\(closes ? " (it closes the connection; reconnecting)" : "")")
        case .refusedTooLarge(let subject, let size, let limit, let tag):
            logger.notice("dropped the held export \(subject.text)\(tag.map { " (seq \($0))" } ?? ""): \(size) bytes, over the new server's max_payload of \(limit)")
        case .skippedOversized(let subject, let bytes):
            logger.warning("skipped a NATS message on \(subject) of \(bytes) bytes, over max_payload")
        case .discovered(let servers):
            logger.info("NATS servers discovered: \(servers.map(\.description).joined(separator: ", "))")
        case .lameDuck(let server):
            logger.notice("NATS server \(server) entered lame duck mode; moving to another")
        case .connect, .closeConnection:
            break
        }
    }
}

/// A string several threads read and one writes.
final class SharedText: Sendable {
    private let storage = Mutex("")

    var value: String {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
