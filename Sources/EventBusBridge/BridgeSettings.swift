// The bridge's settings: what `/etc/eventbus/bridge.conf` and the command
// line can set (each field optional, so the two can be overlaid: the command
// line wins), and the resolved configuration with every default filled in,
// from which the NATS client's configuration is built.
//
// Before editing: defaults live in `BridgeConfiguration` only, and every
// setting has the same name in the file as its flag (`--export` is `export`).
import EventBusLog
import EventBusNATS
@_spi(Package) import EventBusProtocol

/// Settings as given (nil: not given). Lists are replaced whole by an overlay.
package struct BridgeSettings: Equatable, Sendable {
    /// `.path`, `.system` or `.user` (`.automatic` when not given: PROTOCOL.md "Transport").
    package var bus: BusSelection?
    package var servers: [ServerAddress]?
    package var node: NodeName?
    package var exports: [Pattern]?
    package var imports: [Pattern]?
    /// (issue 36) Request types that may be asked on other machines, and that other machines may ask here.
    package var requestExports: [Pattern]?
    package var requestImports: [Pattern]?
    /// (issue 36) Queue groups whose events may leave when no local member takes them, and may come in.
    package var groupExports: [GroupSpec]?
    package var groupImports: [GroupSpec]?
    package var prefix: SubjectPrefix?
    package var reconnectInitial: Duration?
    package var reconnectMaximum: Duration?
    package var bufferBytes: Int?
    package var bufferEvents: Int?
    package var pingInterval: Duration?
    /// CONNECT `name` (default `eventbus-bridge NODE`).
    package var name: String?
    package var statusFile: String?
    package var logLevel: LogLevel?
    /// NATS credentials (`nats-user`, `nats-password`, `nats-token`: file only).
    package var user: String?
    package var password: String?
    package var token: String?

    package init() {}

    /// These settings with every field `other` sets taken from `other`.
    package func overlaid(by other: BridgeSettings) -> BridgeSettings {
        var result = self
        if let v = other.bus { result.bus = v }
        if let v = other.servers { result.servers = v }
        if let v = other.node { result.node = v }
        if let v = other.exports { result.exports = v }
        if let v = other.imports { result.imports = v }
        if let v = other.requestExports { result.requestExports = v }
        if let v = other.requestImports { result.requestImports = v }
        if let v = other.groupExports { result.groupExports = v }
        if let v = other.groupImports { result.groupImports = v }
        if let v = other.prefix { result.prefix = v }
        if let v = other.reconnectInitial { result.reconnectInitial = v }
        if let v = other.reconnectMaximum { result.reconnectMaximum = v }
        if let v = other.bufferBytes { result.bufferBytes = v }
        if let v = other.bufferEvents { result.bufferEvents = v }
        if let v = other.pingInterval { result.pingInterval = v }
        if let v = other.name { result.name = v }
        if let v = other.statusFile { result.statusFile = v }
        if let v = other.logLevel { result.logLevel = v }
        if let v = other.user { result.user = v }
        if let v = other.password { result.password = v }
        if let v = other.token { result.token = v }
        return result
    }

    /// Fills in the defaults and checks what only the whole can tell.
    /// - Throws: `SettingsError` when `nats` or `node` is missing, when there
    ///   is neither an export nor an import, or when the reconnect bounds are reversed.
    package func resolved() throws(SettingsError) -> BridgeConfiguration {
        guard let servers, !servers.isEmpty else { throw SettingsError("no NATS server: give --nats URL[,URL...] (or nats = ... in the config file)") }
        guard let node else { throw SettingsError("no node name: give --node NAME (or node = ... in the config file)") }
        let exports = self.exports ?? []
        let imports = self.imports ?? []
        let requestExports = self.requestExports ?? []
        let requestImports = self.requestImports ?? []
        let groupExports = self.groupExports ?? []
        let groupImports = self.groupImports ?? []
        guard !exports.isEmpty || !imports.isEmpty || !requestExports.isEmpty || !requestImports.isEmpty || !groupExports.isEmpty || !groupImports.isEmpty else {
            throw SettingsError("nothing to bridge: give at least one --export or --import pattern (or --export-requests, --import-requests, --export-group, --import-group)")
        }
        if let conflict = GroupSpec.conflict(exports: groupExports, imports: groupImports) { throw SettingsError(conflict) }
        var configuration = BridgeConfiguration(servers: servers, node: node)
        if let bus { configuration.bus = bus }
        configuration.exports = exports
        configuration.imports = imports
        configuration.requestExports = requestExports
        configuration.requestImports = requestImports
        configuration.groupExports = groupExports
        configuration.groupImports = groupImports
        if let prefix { configuration.prefix = prefix }
        if let reconnectInitial { configuration.reconnectInitial = reconnectInitial }
        if let reconnectMaximum { configuration.reconnectMaximum = reconnectMaximum }
        guard configuration.reconnectInitial <= configuration.reconnectMaximum else {
            throw SettingsError("reconnect-initial (\(configuration.reconnectInitial)) is longer than reconnect-max (\(configuration.reconnectMaximum))")
        }
        if let bufferBytes { configuration.bufferBytes = bufferBytes }
        if let bufferEvents { configuration.bufferEvents = bufferEvents }
        if let pingInterval { configuration.pingInterval = pingInterval }
        configuration.name = name ?? "eventbus-bridge \(node.text)"
        configuration.statusFile = statusFile
        if let logLevel { configuration.logLevel = logLevel }
        configuration.user = user
        configuration.password = password
        configuration.token = token
        return configuration
    }
}

/// A setting that is missing or inconsistent as a whole.
package struct SettingsError: Error, Equatable, Sendable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Every setting resolved, defaults filled in.
package struct BridgeConfiguration: Equatable, Sendable {
    /// Which local bus (default: the usual resolution, PROTOCOL.md "Transport").
    package var bus = BusSelection.automatic
    package var servers: [ServerAddress]
    package var node: NodeName
    package var exports: [Pattern] = []
    package var imports: [Pattern] = []
    /// (issue 36) Request types asked on other machines when no local server
    /// takes them, and request types other machines may ask here (RemoteRequests.swift).
    package var requestExports: [Pattern] = []
    package var requestImports: [Pattern] = []
    /// (issue 36) Queue groups (`NAME:PATTERN`) whose events leave when no local
    /// member takes them, and whose events other machines may hand to local members (RemoteGroups.swift).
    package var groupExports: [GroupSpec] = []
    package var groupImports: [GroupSpec] = []
    package var prefix = SubjectPrefix.standard
    /// Backoff between failed passes over the servers (defaults 250 ms and 30 s); retried forever.
    package var reconnectInitial: Duration = .milliseconds(250)
    package var reconnectMaximum: Duration = .seconds(30)
    /// Exports held while NATS is unreachable (defaults 8 MiB and 10,000 events), then dropped and counted.
    package var bufferBytes = 8 << 20
    package var bufferEvents = 10_000
    /// PING interval (default 20 s, faster than NATS's 2 min to notice a dead link).
    package var pingInterval: Duration = .seconds(20)
    package var name: String
    /// Where the counters are written for `eventbus-bridge --status` (nil: the default place, see the executable).
    package var statusFile: String?
    package var logLevel = LogLevel.info
    package var user: String?
    package var password: String?
    package var token: String?

    package init(servers: [ServerAddress], node: NodeName) {
        self.servers = servers
        self.node = node
        name = "eventbus-bridge \(node.text)"
    }

    package var mapping: SubjectMapping { SubjectMapping(prefix: prefix, node: node) }

    /// What crosses, for the start-up log line: `export [order.>], import
    /// [order.>]`, then the request patterns when there are any.
    package var patternsSummary: String {
        func list(_ patterns: [Pattern]) -> String { "[" + patterns.map(\.text).joined(separator: " ") + "]" }
        var text = "export \(list(exports)), import \(list(imports))"
        if !requestExports.isEmpty { text += ", export-requests \(list(requestExports))" }
        if !requestImports.isEmpty { text += ", import-requests \(list(requestImports))" }
        if !groupExports.isEmpty { text += ", export-group [" + groupExports.map(\.description).joined(separator: " ") + "]" }
        if !groupImports.isEmpty { text += ", import-group [" + groupImports.map(\.description).joined(separator: " ") + "]" }
        return text
    }

    /// (attacker6) The warning for groups given without `@USER` (nil: none).
    package var groupsWarning: String? { GroupSpec.unqualifiedWarning(exports: groupExports, imports: groupImports) }

    /// (issue 36) The link inside eventbusd runs in two parts: the requests on
    /// the broker's own loop, the rest on a thread (LinkInBroker.swift). The
    /// request part: these settings with only the request patterns; nil when
    /// there are none.
    package var requestPart: BridgeConfiguration? {
        guard !requestExports.isEmpty || !requestImports.isEmpty else { return nil }
        var part = self
        part.exports = []
        part.imports = []
        part.groupExports = []
        part.groupImports = []
        return part
    }

    /// The other part: these settings without the request patterns; nil when
    /// there is nothing else (events and groups).
    package var eventPart: BridgeConfiguration? {
        guard !exports.isEmpty || !imports.isEmpty || !groupExports.isEmpty || !groupImports.isEmpty else { return nil }
        var part = self
        part.requestExports = []
        part.requestImports = []
        return part
    }

    /// The NATS client's configuration for `core`: `echo:false`, the hello
    /// announced after every link-up, and the drop report at every gap.
    /// - Parameter brokerInstance: the local broker's current instance; called
    ///   under the NATS client's lock, so it must only read (e.g. a Mutex
    ///   that nothing holds while calling into the client).
    package func clientConfiguration(core: BridgeCore, brokerInstance: @escaping @Sendable () -> String) -> ClientConfiguration {
        var configuration = ClientConfiguration(
            servers: servers,
            connect: ConnectOptions(name: name, echo: false, user: user, password: password, token: token)
        )
        configuration.backoff = Backoff(initial: reconnectInitial, maximum: reconnectMaximum)
        configuration.bufferLimitBytes = bufferBytes
        configuration.bufferLimitMessages = bufferEvents
        configuration.pingInterval = pingInterval
        configuration.announcements = [core.hello]
        let mapping = self.mapping
        let bridgeInstance = core.bridgeInstance
        configuration.gapReport = { summary in
            BridgeCore.droppedReport(summary, mapping: mapping, bridgeInstance: bridgeInstance, brokerInstance: brokerInstance())
        }
        return configuration
    }
}
