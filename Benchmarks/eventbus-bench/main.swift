// eventbus-bench: the load generator behind scripts/bench (issues 6 and 14).
// It speaks our NDJSON protocol, RESP, NATS, MQTT 3.1.1 and the C relay's
// lines, runs one case against brokers that are already running, times the
// one-shot shell publishers, and renders the collected results.
//
// Before editing: `sub` and `pub` are internal roles this binary spawns of
// itself; `scripts/bench` drives `wait`, `run` and `report`.
import CEventBusShims
import Glibc

let usage = """
    usage:
      eventbus-bench wait --proto PROTO --socket ADDRESS [--timeout-ms MS]
          exit 0 once the broker answers its greeting and a ping
      eventbus-bench run CASE --proto PROTO --socket ADDRESS --pid BROKER_PID[,PID...]
                     [--sub-proto PROTO --sub-socket ADDRESS]
                     [--seconds S] [--count N] [--rate N] [--latency-seconds S] [--client PATH]
                     [--node-pid PID[,PID...]]
          run one case and print `key=value ...`; CASE is one of:
          \(BenchCase.allCases.map(\.rawValue).joined(separator: " "))
          the subscribers use --sub-proto/--sub-socket when given (a case
          through a bridge); CPU and memory are summed over the pids;
          --rate paces a throughput case's publisher (default: flood);
          --client runs PATH (scripts/bench-client.c) as a throughput case's
          publisher and subscriber instead of this binary's own roles;
          --node-pid: some of the pids whose CPU a throughput case also gives
          apart, as nodes_cpu_us (case 9: the NATS nodes); c9-ce and c9-ce4
          are case 9's NATS row with the link's header block on every
          message, and with CloudEvents' four required attributes only
      eventbus-bench shell --tool TOOL --cli PATH [--socket SOCKET] [--runs N]
          case 8: time N runs of a one-shot publisher; TOOL is one of:
          \(ShellTool.allCases.map(\.rawValue).joined(separator: " "))
      eventbus-bench report RESULTS_FILE
          print the markdown tables for result lines `rep=R case=C broker=B key=value ...`

    PROTO is one of \(Wire.allCases.map(\.rawValue).joined(separator: " ")); ADDRESS is a
    Unix socket path or tcp:127.0.0.1:PORT (loopback only).

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

    var wire: Wire { wire("proto") }

    func wire(_ key: String) -> Wire {
        let name = string(key)
        guard let wire = Wire(rawValue: name) else {
            fail("--\(key) is one of \(Wire.allCases.map(\.rawValue).joined(separator: ", ")), not \(name)")
        }
        return wire
    }
}

/// `wait`: connects, greets and syncs until the broker answers, up to the timeout.
func waitForBroker(_ options: Options) -> Never {
    let wire = options.wire
    let socket = options.string("socket")
    let timeoutMs = options.int("timeout-ms", default: 5000)
    let deadline = monotonicNanos() + Int64(timeoutMs) * 1_000_000
    while monotonicNanos() < deadline {
        if let fd = tryConnect(socket) {
            greet(fd, wire, timeoutMs: timeoutMs)
            if wire == .relay {
                subscribe(fd, .relay, types: [], timeoutMs: timeoutMs)
            } else {
                writeAll(fd, syncRequest(wire))
                readFrames(fd, wire, timeoutMs: timeoutMs) { isSyncReply($0, wire) || isErrorReply($0, wire) }
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
    let pids = options.string("pid").split(separator: ",").compactMap { Int32($0) }
    if pids.isEmpty || pids.contains(where: { $0 <= 0 }) { fail("run needs --pid BROKER_PID[,PID...]") }
    var run = RunOptions(
        benchCase: benchCase, wire: options.wire, socket: options.string("socket"),
        subscriberWire: options.named["sub-proto"] == nil ? options.wire : options.wire("sub-proto"),
        subscriberSocket: options.named["sub-socket"] ?? options.string("socket"),
        brokerPIDs: pids)
    run.seconds = options.double("seconds", default: run.seconds)
    run.count = options.int("count", default: run.count)
    run.latencySeconds = options.double("latency-seconds", default: run.latencySeconds)
    run.rate = options.int("rate", default: 0)
    run.client = options.named["client"]
    run.nodePIDs = (options.named["node-pid"] ?? "").split(separator: ",").compactMap { Int32($0) }
    if run.nodePIDs.contains(where: { !pids.contains($0) }) { fail("--node-pid lists only pids of --pid") }
    runCase(run)
case "shell":
    let name = options.string("tool")
    guard let tool = ShellTool(rawValue: name) else {
        fail("--tool is one of \(ShellTool.allCases.map(\.rawValue).joined(separator: ", ")), not \(name)")
    }
    var shell = ShellOptions(tool: tool, cli: options.string("cli"))
    shell.socket = options.named["socket"] ?? ""
    shell.runs = options.int("runs", default: shell.runs)
    shell.monitor = options.named["monitor"] ?? shell.monitor
    if tool != .floor && shell.socket.isEmpty { fail("shell --tool \(name) needs --socket") }
    runShell(shell)
case "report":
    guard let path = options.positional.first else { fail("report needs a results file\n\(usage)") }
    printReport(path: path)
case "sub":
    var sub = SubscriberOptions(wire: options.wire, socket: options.string("socket"))
    sub.type = options.named["type"] ?? sub.type
    sub.live = options.int("live", default: sub.live)
    sub.stalled = options.int("stalled", default: sub.stalled)
    sub.latencySamples = options.int("latency-samples", default: 0)
    sub.group = options.named["group"]
    sub.natsHeaders = options.named["headers"] == "1"
    if sub.natsHeaders && sub.wire != .nats { fail("sub --headers applies to --proto nats only") }
    runSubscriber(sub)
case "pub":
    var pub = PublisherOptions(wire: options.wire, socket: options.string("socket"))
    pub.type = options.named["type"] ?? pub.type
    pub.payloadBytes = options.int("payload", default: pub.payloadBytes)
    pub.rate = options.int("rate", default: 0)
    pub.count = options.int("count", default: pub.count)
    pub.seconds = options.double("seconds", default: pub.seconds)
    if let name = options.named["headers"] {
        guard let set = NATSHeaderSet(rawValue: name) else {
            fail("--headers is one of \(NATSHeaderSet.allCases.map(\.rawValue).joined(separator: ", ")), not \(name)")
        }
        if pub.wire != .nats { fail("pub --headers applies to --proto nats only") }
        pub.headers = set
    }
    runPublisher(pub)
case "-h", "--help", "help":
    writeAll(1, usage)
default:
    fail("unknown command \(command)\n\(usage)")
}
