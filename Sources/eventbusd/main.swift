// eventbusd: parse options, take or resolve the listening sockets, load the
// access policy, bind, run the loop.
//
// Before editing: the options and the --help text are BrokerOptions.swift, the
// configuration file ConfigSelection.swift; the
// version is `EventBusRelease.version` (EventBusProtocol), shared with the CLI
// and the `hello` reply. The policy is loaded before a path is bound, so a
// broker that refuses to start on an invalid policy leaves no socket behind;
// which files it reads is PolicySelection.swift.
import EventBusBridge
import EventBusCommandLine
import EventBusLog
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import EventBusServer
import EventBusSystem
import EventBusSystemd
import Glibc

let stderrSink = StderrLogSink(program: "eventbusd")

/// Start-up failures: one line, which reaches the journal under systemd
/// however stderr is wired (`StartupFailureLogSink`), then exit.
func fail(_ message: String, status: ExitStatus) -> Never {
    StartupFailureLogSink(program: "eventbusd").write(level: .error, message: message, fields: [])
    exit(status.rawValue)
}

var options: BrokerOptions
let configFile: String?
do {
    (options, configFile) = try loadOptions(Array(CommandLine.arguments.dropFirst()),
                                            environment: ProcessEnvironment.variables(), effectiveUID: ProcessIdentity.effectiveUID)
} catch {
    switch error {
    case .usage(let usage): fail("\(usage)", status: .usage)
    case .config(let config): fail("invalid configuration: \(config)", status: .config)
    }
}
if options.showHelp {
    print(BrokerOptions.usage, terminator: "")
    exit(ExitStatus.success.rawValue)
}
if options.showVersion {
    print(EventBusRelease.versionText(program: "eventbusd"), terminator: "")
    exit(ExitStatus.success.rawValue)
}
if options.checkConfig {
    print(checkConfigText(options, file: configFile), terminator: "")
    // (attacker6) The bridge file too, with its warnings.
    switch BridgeSelection.load(options) {
    case .success(let selection?): print(selection.checkText, terminator: "")
    case .success(nil): break
    case .failure(let error): fail("invalid bridge settings: \(error)", status: .config)
    }
    exit(ExitStatus.success.rawValue)
}
if options.checkPolicy {
    exit(checkPolicy(options).rawValue)
}
// Under systemd, stderr is the journal: write structured entries there instead.
let logSink = RateLimitedLogSink(wrapping: stderrIsJournal() ? JournalLogSink(identifier: "eventbusd") : stderrSink)
let logger = Logger(level: options.logLevel, sink: logSink)
ProcessSettings.raiseOpenFileLimit()
// Connections beyond the open-file limit would wait unaccepted in the
// listen backlog, uid 0's included: one uid could then take every
// descriptor despite its per-uid limit and the slots kept for uid 0. Keep
// --max-connections within the limit, so they are refused with `limit`.
let descriptorHeadroom: UInt64 = 16  // stdio, listeners, epoll, signalfd, wakeup, log, state and policy files, one accept
let openFiles = ProcessSettings.openFileLimit().soft
if openFiles > 0, UInt64(options.server.broker.maxConnections) + descriptorHeadroom > openFiles {
    let fitting = Int(max(openFiles, descriptorHeadroom + 1) - descriptorHeadroom)
    logger.warning("the open-file limit (\(openFiles)) is too low for --max-connections \(options.server.broker.maxConnections); serving at most \(fitting) connections (raise LimitNOFILE= or ulimit -n)")
    options.server.broker.maxConnections = fitting
}

var listeners: [ListeningSocket]
let path: String
let activated: [ActivatedSocket]?
do {
    activated = try SocketActivation.takeListeningSockets()
} catch {
    fail("\(error)", status: .unavailable)
}
if let activated {
    // sd_listen_fds(3): serve the passed sockets; never bind or unlink a path.
    path = activated.map { "fd \($0.fd) (\($0.name))" }.joined(separator: ", ")
    do {
        listeners = try activated.map { try ListeningSocket(adopting: FileDescriptor(rawValue: $0.fd), path: nil) }
    } catch {
        fail("cannot use the passed sockets \(path): \(error)", status: .unavailable)
    }
} else {
    do {
        path = try SocketPath.resolve(options.bus, environment: ProcessEnvironment.variables(), effectiveUID: ProcessIdentity.effectiveUID)
    } catch {
        fail("\(error)", status: .usage)
    }
    listeners = []  // bound below, once the policy is loaded
}

// The access policy (PROTOCOL.md "Access policy (1.1)"): refuse to start on an
// invalid one rather than run without it.
let policyFiles = selectPolicyFiles(options, boundPath: activated == nil ? path : nil, activated: activated)
if let vendor = policyFiles.missingVendorFile {
    logger.warning("the system bus's vendor policy \(vendor) is missing (install config/policy.conf there with scripts/install); reading only /etc/eventbus")
}
switch policyFiles.load(brokerUID: ProcessIdentity.current.uid) {
case .success(let policy):
    options.server.broker.policy = policy
    options.server.policyFiles = policyFiles
case .failure(let error):
    for line in error.lines { logger.error("invalid access policy: \(line)") }
    let more = error.lines.count > 1 ? " (and \(error.lines.count - 1) more, logged above)" : ""
    fail("invalid access policy, not starting: \(error.lines.first ?? "")\(more)", status: .config)
}

// The link to NATS inside the broker (`--bridge`): refused (EX_CONFIG) on an
// invalid file or an unknown user, before a path is bound (BridgeSelection.swift).
let bridgeSelection: BridgeSelection?
switch BridgeSelection.load(options) {
case .success(let selection): bridgeSelection = selection
case .failure(let error): fail("invalid bridge settings, not starting: \(error)", status: .config)
}

// The state directory: refused (EX_CONFIG) when another uid owns it or
// others may write it, before a path is bound (StateDirectory.swift).
if let directory = options.server.stateDirectory {
    do {
        _ = try StateDirectory.open(directory)
    } catch {
        fail("\(error)", status: .config)
    }
}

if activated == nil {
    do {
        listeners = [try ListeningSocket.bind(path: path, mode: mode_t(options.socketMode))]
    } catch {
        fail("\(error)", status: .unavailable)
    }
}

// sd_notify(3): READY=1 once the listeners are in the loop, STOPPING=1 on the way
// out, WATCHDOG=1 from the loop itself, STATUS= with live counters every 5 s.
var hooks = ServerHooks()
hooks.ready = { ServiceManager.notifyReady() }
hooks.stopping = { ServiceManager.notifyStopping() }
hooks.reloading = { ServiceManager.notifyReloading() }
if let interval = ServiceManager.watchdogPingInterval() {
    let nanoseconds = interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000
    hooks.periodic.append((intervalNanoseconds: max(nanoseconds, 1_000_000), action: { _ in ServiceManager.notifyWatchdog() }))
}
final class PublishedCount { var value: UInt64 = 0 }
let lastPublished = PublishedCount()
let statusSeconds: UInt64 = 5
hooks.periodic.append((intervalNanoseconds: Int64(statusSeconds) * 1_000_000_000, action: { stats in
    let rate = (stats.published &- lastPublished.value) / statusSeconds
    lastPublished.value = stats.published
    ServiceManager.notifyStatus(ServiceManager.statusText(connections: stats.connections, subscriptions: stats.subscriptions, eventsPerSecond: rate))
    logSink.flush()
}))

let server: BrokerServer
do {
    server = try BrokerServer(configuration: options.server, listeners: listeners,
                              instance: InstanceID.random(), logger: logger, hooks: hooks)
} catch {
    fail("failed to start the event loop: \(error)", status: .software)
}
logger.info("listening on \(path) (instance \(server.broker.instance)); configuration \(configFile ?? "none"); \(BrokerServer.policySummary(server.broker.policy, generation: server.broker.policyGeneration))")
var link: LinkInBroker? = nil
if let bridgeSelection {
    do {
        link = try bridgeSelection.start(server: server, logger: logger, environment: ProcessEnvironment.variables())
    } catch {
        fail("failed to start the bridge: \(error)", status: .software)
    }
}
do {
    _ = try server.run()
} catch {
    fail("event loop failed: \(error)", status: .software)
}
link?.stop()
logger.info("stopped")
logSink.flush(includingOpenWindows: true)
exit(ExitStatus.success.rawValue)
