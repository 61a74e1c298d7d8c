// The running bridge's decisions: the pure ones of `BridgeCore`, applied to
// what the bus session (`LocalBus`) reports and what the NATS client
// (`ClientDriver`) reads, and the log line for everything that happens. It
// owns neither connection: `BridgeLoop` (the one thread, its epoll loop and
// both sockets) hands each report and effect here together with the session
// and the driver to act on, so a batch of events goes from one socket's read
// to the other's outbox without a thread switch or a lock.
//
// Before editing: nothing here blocks or touches a descriptor; the loop
// writes what was queued once the batch is handled.
import EventBusCommandLine
import EventBusLog
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession
import EventBusSystem
import Synchronization

/// The bridge's state and decisions (one owner: the loop).
package struct Bridge {
    package let configuration: BridgeConfiguration
    let logger: Logger
    package private(set) var core: BridgeCore
    /// (issue 36) Requests across machines (RemoteRequests.swift).
    package private(set) var requests: RemoteRequests
    /// (issue 36) Queue groups across machines (RemoteGroups.swift).
    package private(set) var groups: RemoteGroups
    /// The local broker's instance, for the drop reports the NATS client builds.
    let brokerInstance = SharedText()
    /// Set once a `hello` reply lacked `origin` in `features` (warned once per run).
    private var warnedAboutOrigin = false
    /// What the warning about a NATS server without credentials says a client
    /// of it could do here (nil: this bridge does not warn; `carriedFromNATS`).
    private let carried: String?

    /// - Parameters:
    ///   - bridgeInstance: this process's random id (hellos, drop reports).
    ///   - warnFor: whose patterns the warning about a server without
    ///     credentials lists: this bridge's (nil), or, for a part of the link
    ///     inside eventbusd, the whole link's; `.some(nil)`: the other part warns.
    package init(configuration: BridgeConfiguration, bridgeInstance: String, logger: Logger, warnFor: BridgeConfiguration?? = nil) {
        self.configuration = configuration
        self.logger = logger
        switch warnFor {
        case .none: carried = Bridge.carriedFromNATS(configuration)
        case .some(.none): carried = nil
        case .some(.some(let link)): carried = Bridge.carriedFromNATS(link)
        }
        core = BridgeCore(mapping: configuration.mapping, exports: configuration.exports, imports: configuration.imports, bridgeInstance: bridgeInstance)
        requests = RemoteRequests(mapping: configuration.mapping, bridgeInstance: bridgeInstance,
                                  exports: configuration.requestExports, imports: configuration.requestImports)
        groups = RemoteGroups(mapping: configuration.mapping, exports: configuration.groupExports, imports: configuration.groupImports)
        // (attacker6) Once per run: the request part of the link inside eventbusd has no groups.
        if let warning = configuration.groupsWarning { logger.warning(warning) }
    }

    /// The NATS client's settings (its gap reports read `brokerInstance`).
    var natsConfiguration: ClientConfiguration {
        let instance = brokerInstance
        return configuration.clientConfiguration(core: core) { instance.value }
    }

    /// Subscribes the NATS client to the bridge's subjects (once, before it starts).
    mutating func subscribe(_ nats: inout ClientDriver) {
        for subject in core.natsSubscriptions {
            let sid = nats.state.subscribe(subject)
            core.subscribed(sid, to: subject)
        }
        requests.subscribe { subject, queue in nats.state.subscribe(subject, queue: queue) }
    }

    /// Once a second: forgets requests sent to NATS whose deadline passed.
    mutating func everySecond(now: Int64) {
        requests.expire(now: now)
    }

    /// The counters now.
    func status(nats: ClientStatistics, bus: BusStatus) -> BridgeStatus {
        var status = core.status(nats: nats, bus: bus)
        if !requests.isEmpty { status.requests = requests.counters }
        if !groups.isEmpty { status.groups = groups.counters }
        return status
    }

    // MARK: The bus side

    mutating func handle(_ report: BusReport, path: String, bus: inout LocalBus, nats: inout ClientDriver) {
        switch report {
        case .events(let events):
            for event in events {
                guard case .publish(let message) = core.export(event) else { continue }
                exported(nats.publish(message), subject: message.subject, seq: event.metadata.seq)
            }
        case .dropped(let count, let since):
            let report = core.localOverflow(count: count, sinceSeq: since)
            logger.warning("the broker dropped \(count) events for the bridge (from seq \(since)): the bridge fell behind the bus; reporting the gap on NATS")
            _ = nats.publish(report)
        case .imported(let count):
            core.imported(.accepted, count: count)
        case .importRefused(let outcome, let message):
            core.imported(outcome)
            // Notice, not warning: notices are rate-limited per message shape, and a policy can refuse every import.
            logger.log(outcome == .denied ? .notice : .info, "the broker did not take an imported event: \(message)")
        case .up(let instance, let features, let isReconnect):
            brokerInstance.value = instance
            core.localBusConnected(instance: instance)
            logger.notice("\(isReconnect ? "reconnected" : "connected") to the bus at \(path) (broker instance \(instance))")
            if !features.contains("origin"), !warnedAboutOrigin {
                warnedAboutOrigin = true
                logger.warning("the broker at \(path) does not list \"origin\" in its features: imported events arrive without origin, and a second bridge on this bus would export them again")
            }
        case .down(let reason, let unconfirmed):
            core.imported(.lost, count: unconfirmed)
            requests.busLost()
            for pattern in requests.watchedImports { serving(pattern, [], nats: &nats) }
            for spec in groups.watchedImports { members(spec, [], nats: &nats) }
            logger.warning("lost the bus at \(path): \(reason)\(unconfirmed > 0 ? " (\(unconfirmed) imports unconfirmed, counted lost)" : ""); reconnecting, imports are dropped meanwhile")
        case .gap(let gap, let instance):
            if let old = gap.previousRun {
                logger.warning("the broker at \(path) is a new run (instance \(instance), it restarted): exports the old run \(old.instance ?? "?") published after seq \(old.seq) and the bridge had not read are lost; exporting what the new run published meanwhile (its history from seq \(gap.firstSeq))")
            } else {
                logger.warning("the broker's history no longer reaches back to seq \(gap.sinceSeq + 1) (it starts at \(gap.firstSeq)): exports of \(gap.pattern) between may be lost")
            }
        case .attemptFailed(let reason, let failures):
            // The first failure in a row, then every 20th: the reconnect goes on forever.
            if failures == 1 || failures % 20 == 0 {
                logger.warning("cannot connect to the bus at \(path): \(reason) (attempt \(failures); retrying)")
            }
        case .refused(let request, let code, let message):
            logger.error("the broker refused \(request): \(message) (\(code))")
        case .notice(let text):
            logger.warning(text)
        case .request(let request):
            // (issue 36) No local server took it: ask the other machines.
            guard nats.state.isConnected, let message = requests.send(request, instance: brokerInstance.value, now: Clock.monotonicNanoseconds()) else {
                bus.relay(RemoteRequests.unreachable(request))
                return
            }
            switch nats.publish(message) {
            case .queued, .held: break
            case .tooLarge(let size, let limit):
                bus.relay(.reply(to: request.token, error: "the request is \(size) bytes with headers, over the NATS server's max_payload of \(limit)"))
            case .dropped, .closed:
                bus.relay(RemoteRequests.unreachable(request))
            }
        case .answer(let tag, let reply):
            if let message = requests.replied(tag: tag, reply) { _ = nats.publish(message) }
        case .serving(let pattern, let servers):
            serving(pattern, servers, nats: &nats)
        case .members(let spec, let patterns):
            members(spec, patterns, nats: &nats)
        case .groupEvent(let event, let group):
            // (issue 36) No local member of the group took it: one machine's member will.
            guard let message = groups.send(event, group: group, instance: brokerInstance.value) else { return }
            let outcome = nats.publish(message)
            if case .tooLarge(let size, let limit) = outcome {
                logger.notice("dropped the group event \(message.subject.text) (seq \(event.metadata.seq)): \(size) bytes with headers, over the NATS server's max_payload of \(limit)")
            }
        }
    }

    /// (issue 36) Exports the event of a frame read in place (`ExportFrame`):
    /// its header block and payload written straight into the NATS outbox,
    /// the bytes `export(_:)` of its `RawEvent` would queue.
    mutating func export(_ frame: ExportFrame, nats: inout ClientDriver) {
        guard let message = core.export(frame) else { return }
        exported(nats.publish(message) { core.writeExport(frame, into: &$0) }, subject: message.subject, seq: frame.seq)
    }

    /// Counts an export handed to the NATS client; logs one it refused as too large.
    private mutating func exported(_ outcome: PublishOutcome, subject: Subject, seq: UInt64) {
        core.exported(outcome)
        if case .tooLarge(let size, let limit) = outcome {
            logger.notice("dropped the export of \(subject.text) (seq \(seq)): \(size) bytes with headers, over the NATS server's max_payload of \(limit)")
        }
    }

    /// (issue 36) The request import subscriptions follow what the bus serves.
    private mutating func serving(_ pattern: Pattern, _ servers: [Pattern], nats: inout ClientDriver) {
        let (added, removed) = requests.serving(pattern, servers, subscribe: { nats.state.subscribe($0, queue: $1) },
                                                unsubscribe: { nats.state.unsubscribe($0) })
        for subject in added { logger.info("taking requests from other machines on \(subject) (a server of it on this bus)") }
        for subject in removed { logger.info("no longer taking requests from other machines on \(subject) (no server of it on this bus)") }
    }

    /// (issue 36) The group import subscriptions follow the local members.
    private mutating func members(_ spec: GroupSpec, _ patterns: [Pattern], nats: inout ClientDriver) {
        let (added, removed) = groups.members(spec, patterns, subscribe: { nats.state.subscribe($0, queue: $1) },
                                              unsubscribe: { nats.state.unsubscribe($0) })
        for subject in added { logger.info("taking group \(spec.name)'s events from other machines on \(subject) (a member of it on this bus)") }
        for subject in removed { logger.info("no longer taking group \(spec.name)'s events from other machines on \(subject) (no member of it on this bus)") }
    }

    // MARK: The NATS side

    mutating func handle(_ effect: Effect, bus: inout LocalBus, nats: inout ClientDriver) {
        switch effect {
        case .message(let message) where groups.owns(message):
            // (Asked first: a group import's sid may be above the request table's fixed ones.)
            // (issue 36) Another machine's group event, for one local member.
            switch groups.receive(message) {
            case .publish(let event):
                if !bus.publish(event) {
                    core.imported(.lost)
                    logger.debug("dropped the group event \(event.event.type.name) from \(event.event.origin.node): the bus is down")
                }
            case .drop(let reason):
                logger.notice("dropped a group event from NATS: \(reason)")
            }
        case .message(let message) where requests.owns(message.sid):
            handleRequestMessage(message, bus: &bus, nats: &nats)
        case .message(let message):
            // (issue 36, third pass) The usual import is written into the bus output as it is decided.
            var decision = BridgeCore.Inbound.ignored
            if !bus.publish(writing: { out in
                decision = core.handle(message, frame: &out)
                if case .written = decision { return true }
                return false
            }) {
                decision = core.handle(message)
            }
            switch decision {
            case .written:
                break
            case .publishLocally(let event):
                if !bus.publish(event) {
                    core.imported(.lost)
                    logger.debug("dropped the import of \(event.type.name) from \(event.origin.node): the bus is down")
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
            if !info.authRequired, let carried {
                // (attacker) A leaf node on 127.0.0.1 without an
                // authorization block is open to every local user: what it
                // carries in reaches the bus as this bridge's uid, past the
                // access policy that binds the user's own connections.
                logger.warning("the NATS server at \(server) asks for no credentials: any process that can connect to it (every local user, for one on 127.0.0.1) can \(carried) as this bridge's uid; give it an authorization block and this bridge nats-user/nats-password in a file only root and the bridge read (docs/BRIDGE.md \"Trust: origin\")")
            }
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

    /// What a NATS client could make this bridge do on its bus, said for the
    /// warning about a server without credentials; nil when it carries
    /// nothing in (exports only).
    package static func carriedFromNATS(_ configuration: BridgeConfiguration) -> String? {
        var what: [String] = []
        if !configuration.imports.isEmpty { what.append("publish the imported types") }
        if !configuration.requestImports.isEmpty { what.append("ask this bus's servers") }
        if !configuration.requestExports.isEmpty { what.append("answer requests sent to other machines") }
        if !configuration.groupImports.isEmpty { what.append("give events to the imported queue groups' members") }
        guard !what.isEmpty else { return nil }
        return what.count == 1 ? what[0] : what.dropLast().joined(separator: ", ") + " and " + what[what.count - 1]
    }

    /// (issue 36) A message on a request subscription: an answer from
    /// another machine (relayed to the bus as the `reply`), or a request
    /// from one (asked on the bus; its answer goes back in `.answer`).
    private mutating func handleRequestMessage(_ message: Message, bus: inout LocalBus, nats: inout ClientDriver) {
        if message.subject.hasPrefix(requests.replySubscription.text.dropLast()) {
            if let reply = requests.answer(message) { bus.relay(reply) }
            return
        }
        switch requests.receive(message) {
        case .ask(let request, let tag):
            if !bus.ask(request, tag: tag) {
                requests.forget(tag: tag)
                logger.debug("dropped a request from NATS on \(message.subject): the bus is down")
            }
        case .drop(let reason):
            logger.notice("dropped a request from NATS: \(reason)")
        case .refuse(let refusal):
            _ = nats.publish(refusal)
        }
    }
}

/// A string several threads read and one writes.
package final class SharedText: Sendable {
    private let storage = Mutex("")

    package var value: String {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
