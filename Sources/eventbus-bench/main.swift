// eventbus-bench: the load generator behind scripts/bench (issue 6). It
// speaks our NDJSON protocol and RESP over Unix sockets, runs one case
// against one already-running broker, and renders the collected results.
//
// Before editing: `sub` and `pub` are internal roles this binary spawns of
// itself; `scripts/bench` drives `wait`, `run` and `report`.
import CEventBusShims
import Glibc

let usage = """
    usage:
      eventbus-bench wait --proto eventbus|redis --socket PATH [--timeout-ms MS]
          exit 0 once the broker answers a ping (eventbus: {"op":"ping","req":…} → ok; redis: PING)
      eventbus-bench run CASE --proto eventbus|redis --socket PATH --pid BROKER_PID
                     [--seconds S] [--count N] [--latency-seconds S] [--shell-runs N] [--cli PATH]
          run one case and print `key=value ...`; CASE is one of:
          \(BenchCase.allCases.map(\.rawValue).joined(separator: " "))
      eventbus-bench report RESULTS_FILE
          print the markdown table for result lines `rep=R case=C broker=B key=value ...`

    """

/// `--key value` pairs after the positional arguments.
struct Options {
    var positional: [String] = []
    var named: [String: String] = [:]

    init(_ arguments: ArraySlice<String>) {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument.hasPrefix("--") {
                guard let value = rest.popFirst() else { fail("\(argument) needs a value\n\(usage)") }
                named[String(argument.dropFirst(2))] = value
            } else {
                positional.append(argument)
            }
        }
    }

    func string(_ key: String) -> String {
        guard let value = named[key] else { fail("missing --\(key)\n\(usage)") }
        return value
    }

    func int(_ key: String, default value: Int) -> Int {
        guard let text = named[key] else { return value }
        guard let number = Int(text) else { fail("--\(key) wants an integer, got \(text)") }
        return number
    }

    func double(_ key: String, default value: Double) -> Double {
        guard let text = named[key] else { return value }
        guard let number = Double(text) else { fail("--\(key) wants a number, got \(text)") }
        return number
    }

    var wire: Wire {
        let name = string("proto")
        guard let wire = Wire(rawValue: name) else { fail("--proto is eventbus or redis, not \(name)") }
        return wire
    }
}

/// `wait`: connects and pings until the broker answers, up to the timeout.
func waitForBroker(_ options: Options) -> Never {
    let wire = options.wire
    let socket = options.string("socket")
    let deadline = monotonicNanos() + Int64(options.int("timeout-ms", default: 5000)) * 1_000_000
    while monotonicNanos() < deadline {
        if let fd = tryConnectUnix(socket) {
            writeAll(fd, pingFrame(wire))
            readFrames(fd, wire, timeoutMs: 2000) { frame in
                frame.hasPrefix(#"{"op":"ok""#) || frame.hasPrefix("+PONG") || frame.hasPrefix("-")
            }
            close(fd)
            exit(0)
        }
        sleepMillis(20)
    }
    fail("no broker answered on \(socket)")
}

eventbus_ignore_sigpipe()
let arguments = CommandLine.arguments.dropFirst()
guard let command = arguments.first else {
    writeAll(2, usage)
    exit(64)
}
let options = Options(arguments.dropFirst())

switch command {
case "wait":
    waitForBroker(options)
case "run":
    guard let name = options.positional.first, let benchCase = BenchCase(rawValue: name) else {
        fail("run needs a case name\n\(usage)")
    }
    var run = RunOptions(
        benchCase: benchCase, wire: options.wire, socket: options.string("socket"),
        brokerPID: Int32(options.int("pid", default: 0)))
    run.seconds = options.double("seconds", default: run.seconds)
    run.count = options.int("count", default: run.count)
    run.latencySeconds = options.double("latency-seconds", default: run.latencySeconds)
    run.shellRuns = options.int("shell-runs", default: run.shellRuns)
    run.cli = options.named["cli"] ?? ""
    if run.brokerPID <= 0 { fail("run needs --pid BROKER_PID") }
    runCase(run)
case "report":
    guard let path = options.positional.first else { fail("report needs a results file\n\(usage)") }
    printReport(path: path)
case "sub":
    var sub = SubscriberOptions(wire: options.wire, socket: options.string("socket"))
    sub.type = options.named["type"] ?? sub.type
    sub.live = options.int("live", default: sub.live)
    sub.stalled = options.int("stalled", default: sub.stalled)
    sub.latencySamples = options.int("latency-samples", default: 0)
    runSubscriber(sub)
case "pub":
    var pub = PublisherOptions(wire: options.wire, socket: options.string("socket"))
    pub.type = options.named["type"] ?? pub.type
    pub.payloadBytes = options.int("payload", default: pub.payloadBytes)
    pub.rate = options.int("rate", default: 0)
    pub.count = options.int("count", default: pub.count)
    pub.seconds = options.double("seconds", default: pub.seconds)
    runPublisher(pub)
case "-h", "--help", "help":
    writeAll(1, usage)
default:
    fail("unknown command \(command)\n\(usage)")
}
