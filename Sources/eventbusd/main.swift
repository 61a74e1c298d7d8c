// eventbusd: parse options, take or bind the listening sockets, run the loop.
import EventBusProtocol
import EventBusServer
import EventBusSystem
import Glibc

let version = "0.1.0"
let stderrSink = StderrLogSink(program: "eventbusd")

func fail(_ message: String, status: Int32) -> Never {
    stderrSink.write(level: .error, message: message, fields: [])
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
    print("eventbusd \(version) (protocol 1)")
    exit(0)
}
options.server.broker.version = version
let logger = Logger(level: options.logLevel, sink: stderrSink)
ProcessSettings.raiseOpenFileLimit()

let listeners: [ListeningSocket]
let path: String
do {
    path = try SocketPath.resolve(options.bus, environment: Environment.variables(), effectiveUID: geteuid())
} catch {
    fail("\(error)", status: 64)
}
do {
    listeners = [try ListeningSocket.bind(path: path, mode: mode_t(options.socketMode))]
} catch {
    fail("\(error)", status: 69)
}

let server: BrokerServer
do {
    server = try BrokerServer(configuration: options.server, listeners: listeners,
                              instance: InstanceID.random(), logger: logger)
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
exit(0)
