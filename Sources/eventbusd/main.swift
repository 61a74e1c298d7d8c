// eventbusd: parse options, take or bind the listening sockets, run the loop.
//
// Before editing: the options and the --help text are BrokerOptions.swift; the
// version is `EventBusRelease.version` (EventBusProtocol), shared with the CLI
// and the `hello` reply.
import EventBusProtocol
import EventBusServer
import EventBusSystem
import EventBusSystemd
import Glibc

let stderrSink = StderrLogSink(program: "eventbusd")

/// Start-up failures: one line, which reaches the journal under systemd
/// however stderr is wired (`StartupFailureLogSink`), then exit.
func fail(_ message: String, status: Int32) -> Never {
    StartupFailureLogSink(program: "eventbusd").write(level: .error, message: message, fields: [])
    exit(status)
}

var options: BrokerOptions
do {
    options = try BrokerOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    fail("\(error)", status: 64)
}
if options.showHelp {
    print(BrokerOptions.usage)
    exit(0)
}
if options.showVersion {
    print("eventbusd \(EventBusRelease.version) (protocol \(ProtocolConstants.version))")
    exit(0)
}
// Under systemd, stderr is the journal: write structured entries there instead.
// The broker's own uid has no per-uid retained share (PROTOCOL.md "Quotas").
options.server.broker.retention.brokerUID = ProcessIdentity.effectiveUID
let logSink = RateLimitedLogSink(wrapping: stderrIsJournal() ? JournalLogSink(identifier: "eventbusd") : stderrSink)
let logger = Logger(level: options.logLevel, sink: logSink)
ProcessSettings.raiseOpenFileLimit()

let listeners: [ListeningSocket]
let path: String
let activated: [ActivatedSocket]?
do {
    activated = try SocketActivation.takeListeningSockets()
} catch {
    fail("\(error)", status: 69)
}
if let activated {
    // sd_listen_fds(3): serve the passed sockets; never bind or unlink a path.
    path = activated.map { "fd \($0.fd) (\($0.name))" }.joined(separator: ", ")
    do {
        listeners = try activated.map { try ListeningSocket(adopting: FileDescriptor(rawValue: $0.fd), path: nil) }
    } catch {
        fail("cannot use the passed sockets \(path): \(error)", status: 69)
    }
} else {
    do {
        path = try SocketPath.resolve(options.bus, environment: ProcessEnvironment.variables(), effectiveUID: ProcessIdentity.effectiveUID)
    } catch {
        fail("\(error)", status: 64)
    }
    do {
        listeners = [try ListeningSocket.bind(path: path, mode: mode_t(options.socketMode))]
    } catch {
        fail("\(error)", status: 69)
    }
}

// sd_notify(3): READY=1 once the listeners are in the loop, STOPPING=1 on the way
// out, WATCHDOG=1 from the loop itself, STATUS= with live counters every 5 s.
var hooks = ServerHooks()
hooks.ready = { ServiceManager.notifyReady() }
hooks.stopping = { ServiceManager.notifyStopping() }
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
    fail("failed to start the event loop: \(error)", status: 70)
}
logger.info("listening on \(path) (instance \(server.broker.instance))")
do {
    _ = try server.run()
} catch {
    fail("event loop failed: \(error)", status: 70)
}
logger.info("stopped")
logSink.flush(includingOpenWindows: true)
exit(0)
