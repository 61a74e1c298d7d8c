// `eventbus stats [--format table|json | --json]` and `eventbus ping [--wait DURATION]`: one
// request each (PROTOCOL.md "Requests", `stats` and `ping`).
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
@_spi(Package) import EventBusSystem


func runStats(_ args: ParsedArguments, socket: String) throws(CLIError) {
    guard args.operands.isEmpty else { throw .usage("stats", "unexpected argument '\(args.operands[0])'") }
    if args.has("prometheus") { return try runPrometheus(args, socket: socket) }
    for name in ["max-types", "max-clients", "min-client-age", "output"] where args.has(name) {
        throw .usage("stats", "--\(name) goes with --prometheus")
    }
    let format = try args.format(command: "stats") ?? "table"
    guard format == "table" || format == "json" else { throw .usage("stats", "unknown format '\(format)'; use table or json") }
    let connection = try BrokerConnection.connect(to: socket, client: "eventbus-stats")
    let reply = try connection.request(.stats)
    guard reply.isOK else { throw reply.failure("stats") }
    try StandardOutput.write(statsText(reply, json: format == "json"))
}

/// The `stats` reply as `--format json` (one compact object) or `table` (`name  value` lines).
private func statsText(_ reply: Reply, json: Bool) -> [UInt8] {
    var out: [UInt8] = []
    reply.bytes.withUnsafeBytes { bytes in
        if json {
            // The reply's fields as one compact object, without `op` and `req`.
            out.append(0x7B)
            for (index, member) in reply.members.enumerated() {
                if index > 0 { out.append(0x2C) }
                JSONString.appendQuoted(member.key, to: &out)
                out.append(0x3A)
                JSONObject.appendCompacted(bytes, member.value, to: &out)
            }
            out.append(0x7D)
            out.append(0x0A)
        } else {
            // `name  value` lines in the broker's order, names as on the wire,
            // everything escaped for the terminal (TerminalText).
            let width = reply.members.map { $0.key.count }.max() ?? 0
            for member in reply.members {
                TerminalText.appendEscaped(member.key.utf8, to: &out)
                out.append(contentsOf: repeatElement(0x20, count: max(0, width - member.key.count) + 2))
                var value: [UInt8] = []
                if member.value.isString {
                    value = JSONString.decodeBytes(bytes, member.value)
                } else {
                    JSONObject.appendCompacted(bytes, member.value, to: &value)
                }
                TerminalText.appendEscaped(value, to: &out)
                out.append(0x0A)
            }
        }
    }
    return out
}

/// Per-type and per-client series at most, by default (`--max-types`, `--max-clients`).
let defaultMaxMetricTypes = 100
let defaultMaxMetricClients = 100

/// `stats --prometheus [--max-types N] [--max-clients N] [--output FILE]`:
/// the exposition (Exposition.swift) on standard output, or replacing FILE
/// atomically (mode 0644: node_exporter's textfile collector reads it as
/// another user). A broker that does not answer gives `eventbus_up 0` (and
/// exit status 69), so the file never keeps stale figures.
func runPrometheus(_ args: ParsedArguments, socket: String) throws(CLIError) {
    if args.has("json") { throw .usage("stats", "give --json or --prometheus, not both") }
    if let format = args.value("format") { throw .usage("stats", "give --format \(format) or --prometheus, not both") }
    let maxTypes = try args.value("max-types", command: "stats", as: parseCount) ?? defaultMaxMetricTypes
    let maxClients = try args.value("max-clients", command: "stats", as: parseCount) ?? defaultMaxMetricClients
    let minAge = try args.value("min-client-age", command: "stats", as: parseDuration) ?? (try! parseDuration(defaultMinClientAgeText))
    var text: String
    var failure: CLIError? = nil
    do throws(CLIError) {
        let connection = try BrokerConnection.connect(to: socket, client: "eventbus-stats")
        let deadline = Clock.monotonicNanoseconds() + 10_000_000_000
        let snapshot = try BusSnapshot.poll(connection, typesLimit: allTypesLimit, deadline: deadline)
        text = Exposition.render(snapshot, maxTypes: maxTypes, maxClients: maxClients,
                                 minClientAge: Int(minAge.totalNanoseconds / 1_000_000_000), now: Int(Clock.wallNanoseconds() / 1_000_000_000))
    } catch where error.status == ExitStatus.unavailable.rawValue || error.status == ExitStatus.timedOut.rawValue {
        text = Exposition.unavailable()
        failure = error.status == ExitStatus.timedOut.rawValue ? CLIError(.unavailable, "the broker at \(socket) did not answer within 10s") : error
    }
    if let path = args.value("output") {
        let bytes = Array(text.utf8)
        do throws(SystemError) {
            try bytes.withBytes { (raw) throws(SystemError) in try DurableFile.replace(path, with: [raw], durable: false, mode: 0o644) }
        } catch {
            throw CLIError(.ioError, "cannot write \(path): \(error)")
        }
    } else {
        try StandardOutput.write(text)
    }
    if let failure { throw failure }
}

/// Pause between connection attempts of `ping --wait`, in milliseconds.
private let pingRetryMilliseconds: Int32 = 50

func runPing(_ args: ParsedArguments, socket: String) throws(CLIError) {
    guard args.operands.isEmpty else { throw .usage("ping", "unexpected argument '\(args.operands[0])'") }
    var deadline: Int64? = nil
    if let wait = try args.value("wait", command: "ping", as: parseDuration) {
        deadline = Clock.monotonicNanoseconds() + wait.totalNanoseconds
    }
    while true {
        do throws(CLIError) {
            let connection = try BrokerConnection.connect(to: socket, client: "eventbus-ping")
            let reply = try connection.request(.ping, deadline: deadline)
            guard reply.isOK else { throw reply.failure("ping") }
            return
        } catch where error.status == ExitStatus.unavailable.rawValue && deadline != nil {
            // Not there yet (or it went away while starting): try again until the deadline.
            let remaining = BrokerConnection.pollTimeout(until: deadline)
            if remaining == 0 { throw error }
            var none: [PollEntry] = []
            _ = try? FileDescriptor.poll(&none, timeoutMilliseconds: min(pingRetryMilliseconds, remaining))
        } catch where error.status == ExitStatus.timedOut.rawValue {
            let text = args.value("wait") ?? ""
            throw CLIError(.unavailable, "the broker at \(socket) did not answer within \(text.last?.isNumber == true ? text + "s" : text)")
        }
    }
}
