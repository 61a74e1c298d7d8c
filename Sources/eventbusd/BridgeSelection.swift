// The link to NATS inside eventbusd (`--bridge FILE`, `--bridge-user USER`;
// issue 36, docs/BRIDGE.md "Running it"): the file is eventbus-bridge's
// bridge.conf format, read by the same parser (EventBusBridge's ConfigFile);
// the link is EventBusBridge's `LinkInBroker`: the loop eventbus-bridge runs,
// for requests on this broker's own loop (`BrokerServer.attach`), for events
// and groups on a thread of its own; it reaches this broker through socketpairs the
// loop adopts as connections of the bridge user (`BrokerServer.handoff`), so
// the policy and the limits see that user, as they would see an
// eventbus-bridge process running as it.
//
// Before editing: `load` runs before any socket is bound (an invalid file or
// an unknown user is exit 78 with no socket left behind); `start` after the
// server exists and before it runs (the link's first connection waits in the
// handoff queue until the loop takes it). The file's `socket`, `bus` and
// `log-level` do not apply here (the link is on this broker, and logs through
// its logger): they are ignored with a notice.
import EventBusBridge
import EventBusCommandLine
import EventBusLog
import EventBusServer
import EventBusSystem

/// The link's settings and whose connection it is.
struct BridgeSelection {
    let file: String
    let configuration: BridgeConfiguration
    let uid: UInt32
    let gid: UInt32
    /// Keys of the file that do not apply inside the broker.
    let ignoredKeys: [String]
    /// (attacker) The file holds NATS credentials every local user may read.
    let credentialsWarning: String?

    /// Reads `--bridge FILE` and resolves `--bridge-user`.
    /// - Returns: nil without `--bridge`; a one-line reason when the file or the user is unusable.
    static func load(_ options: BrokerOptions) -> Result<BridgeSelection?, BridgeSelectionError> {
        guard let file = options.bridgeFile else {
            if options.bridgeUser != nil { return .failure(BridgeSelectionError("--bridge-user is given without --bridge")) }
            return .success(nil)
        }
        let settings: BridgeSettings
        let configuration: BridgeConfiguration
        switch read(file) {
        case .success(let read): (settings, configuration) = read
        case .failure(let error): return .failure(error)
        }
        var ignored: [String] = []
        if settings.bus != nil { ignored.append("socket/bus") }
        if settings.logLevel != nil { ignored.append("log-level") }
        let own = ProcessIdentity.current
        var (uid, gid) = (own.uid, own.gid)
        if let user = options.bridgeUser {
            if let number = UInt32(user) {
                // A number is uid and gid both (as `setpriv --reuid N --regid N`).
                (uid, gid) = (number, number)
            } else if let number = UserDatabase.uid(ofUser: user), let group = UserDatabase.primaryGID(ofUser: user) {
                (uid, gid) = (number, group)
            } else {
                return .failure(BridgeSelectionError("--bridge-user: no user named '\(user)'"))
            }
        }
        return .success(BridgeSelection(file: file, configuration: configuration, uid: uid, gid: gid, ignoredKeys: ignored,
                                        credentialsWarning: ConfigFile.credentialsWarning(file: file, settings: settings)))
    }

    /// (attacker6) For `--check-config`: the file read, what crosses, and each warning.
    var checkText: String {
        var text = "# bridge \(file): valid: node \(configuration.node.text), \(configuration.patternsSummary)\n"
        for warning in [credentialsWarning, configuration.groupsWarning].compactMap({ $0 }) { text += "# warning: \(warning)\n" }
        return text
    }

    /// The bridge file's settings and the configuration they resolve to.
    private static func read(_ file: String) -> Result<(BridgeSettings, BridgeConfiguration), BridgeSelectionError> {
        let text: String
        do {
            let bytes = try FileSystem.readFile(file, maxBytes: 1 << 20)
            guard let decoded = String(validating: bytes, as: UTF8.self) else { return .failure(BridgeSelectionError("cannot read the bridge file \(file): not UTF-8 text")) }
            text = decoded
        } catch {
            return .failure(BridgeSelectionError("cannot read the bridge file \(file): \(error)"))
        }
        do {
            let settings = try ConfigFile.parse(text, file: file)
            return .success((settings, try settings.resolved()))
        } catch let error as ConfigError {
            return .failure(BridgeSelectionError("\(error)"))
        } catch {
            return .failure(BridgeSelectionError("\(file): \(error)"))
        }
    }

    /// Starts the link connected to `server`: its requests on the server's
    /// loop (attached here, so call before `run`), the rest on a thread.
    /// - Throws: `SystemError` when its eventfds or epoll sets cannot be made.
    func start(server: BrokerServer, logger: Logger, environment: [String: String]) throws(SystemError) -> LinkInBroker {
        let linkLogger = Logger(level: logger.level, sink: PrefixedLogSink(prefix: "bridge: ", sink: logger.sink))
        if !ignoredKeys.isEmpty {
            linkLogger.notice("\(file): \(ignoredKeys.joined(separator: ", ")) ignored inside eventbusd (the link is on this broker and logs as it does)")
        }
        if let credentialsWarning { linkLogger.warning(credentialsWarning) }
        let statusPath = StatusFile.path(for: configuration, environment: environment, effectiveUID: ProcessIdentity.effectiveUID)
        let handoff = server.handoff
        let (pid, uid, gid) = (ProcessIdentity.current.pid, self.uid, self.gid)
        // The name reads after "the bus at" in the link's log lines and is the status's `bus_path`.
        let name = "this eventbusd over a socketpair, as uid \(uid) gid \(gid)"
        let endpoint = BusEndpoint.connector(name: name) { () throws(SystemError) in try handoff.connect(pid: pid, uid: uid, gid: gid) }
        // The request part's broker end is known to the loop as its attachment's (the hand-over).
        let requestEndpoint = BusEndpoint.connector(name: name) { () throws(SystemError) in
            try handoff.connect(pid: pid, uid: uid, gid: gid, attached: true)
        }
        linkLogger.info("node \(configuration.node.text), NATS \(configuration.servers.map(\.description).joined(separator: ",")), prefix \(configuration.prefix.text), \(configuration.patternsSummary), as uid \(uid), status \(statusPath ?? "(none)")")
        let link = try LinkInBroker(configuration: configuration, endpoint: endpoint, requestEndpoint: requestEndpoint, logger: linkLogger,
                                    statusPath: statusPath)
        if let requests = link.requests {
            server.attach(LoopAttachment(descriptor: requests.descriptor, nextDeadline: { requests.nextDeadline }, turn: { requests.turn(handedOver: $0) }))
        }
        return link
    }
}

struct BridgeSelectionError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
