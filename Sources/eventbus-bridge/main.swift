// eventbus-bridge: parse the options (BridgeOptions.swift), then run the
// bridge (EventBusBridge's Bridge.swift, its decisions; BridgeLoop.swift, the
// one thread and its epoll loop over the bus, NATS and the signals) on this
// thread, writing the status file (StatusFile.swift) and systemd's STATUS=
// once a second; or, with `--status`, print the status files of the running
// bridges. The same library code runs inside eventbusd (`--bridge`).
//
// Before editing: the signals are blocked (signalfd) before anything else, so
// only the loop's signalfd sees SIGTERM. The process has one thread.
import EventBusBridge
import EventBusCommandLine
import EventBusLog
@_spi(Package) import EventBusProtocol
import EventBusSystem
import EventBusSystemd
import Glibc

FileDescriptor.openNullOnClosedStandardDescriptors()
ProcessSettings.ignoreBrokenPipeSignal()

/// Start-up failures: one line (reaching the journal under systemd), then exit.
func fail(_ message: String, _ status: ExitStatus) -> Never {
    StartupFailureLogSink(program: "eventbus-bridge").write(level: .error, message: message, fields: [])
    exit(status.rawValue)
}

let options: BridgeOptions
do {
    options = try BridgeOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    fail(error.message, error.status)
}
let environment = ProcessEnvironment.variables()
switch options.mode {
case .help:
    print(BridgeOptions.usage, terminator: "")
    exit(0)
case .version:
    print(EventBusRelease.versionText(program: "eventbus-bridge"), terminator: "")
    exit(0)
case .status:
    exit(StatusFile.printStatus(options.settings, environment: environment))
case .run:
    break
}

let configuration: BridgeConfiguration
let socketPath: String
do {
    configuration = try options.settings.resolved()
    socketPath = try SocketPath.resolve(configuration.bus, environment: environment, effectiveUID: ProcessIdentity.effectiveUID)
} catch {
    fail("\(error) (see eventbus-bridge --help)", .usage)
}

let logSink = RateLimitedLogSink(wrapping: stderrIsJournal() ? JournalLogSink(identifier: "eventbus-bridge") : StderrLogSink(program: "eventbus-bridge"))
let logger = Logger(level: configuration.logLevel, sink: logSink)
if let file = options.configFile, let warning = ConfigFile.credentialsWarning(file: file, settings: options.settings) {
    logger.warning(warning)
}

let loop: BridgeLoop
do {
    let signals = try SignalDescriptor(signals: [SIGTERM, SIGINT, SIGHUP])
    let bridge = Bridge(configuration: configuration, bridgeInstance: BridgeThread.randomInstance(), logger: logger)
    loop = try BridgeLoop(bridge: bridge, endpoint: .path(socketPath), stop: .signals(signals), logger: logger)
} catch {
    fail("failed to start: \(error)", .software)
}
let statusPath = StatusFile.path(for: configuration, environment: environment, effectiveUID: ProcessIdentity.effectiveUID)

logger.info("eventbus-bridge \(EventBusRelease.version): node \(configuration.node.text), bus \(socketPath), NATS \(configuration.servers.map(\.description).joined(separator: ",")), prefix \(configuration.prefix.text), \(configuration.patternsSummary), status \(statusPath ?? "(none)")")
if statusPath == nil {
    logger.notice("no status file (no RUNTIME_DIRECTORY or XDG_RUNTIME_DIR): give --status-file PATH for --status to see this bridge")
}
ServiceManager.notifyReady()

var statusWriter = StatusWriter(path: statusPath, logger: logger)
let signal = loop.run { current in
    let status = statusWriter.write(current)
    let dropped = status.dropped.values.reduce(0, +)
    ServiceManager.notifyStatus("bus \(status.bus.up ? "up" : "down"), NATS \(status.linkUp ? "up" : "down")\(status.server.map { " (\($0))" } ?? ""); exported \(status.exported), imported \(status.imported), dropped \(dropped), held \(status.bufferedEvents)\(status.bus.gaps > 0 ? ", bus gaps \(status.bus.gaps)" : "")")
    logSink.flush()
}
logger.info("stopping on signal \(signal)")
ServiceManager.notifyStopping()
loop.stop()
statusWriter.remove()
logger.info("stopped")
logSink.flush(includingOpenWindows: true)
exit(0)
