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
    do {
        let bytes = reply.bytes.span.bytes
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
            // an object's members on lines of their own (`me.limits.connections`),
            // everything escaped for the terminal (TerminalText).
            var rows: [(name: String, value: [UInt8])] = []
            statsRows(bytes, reply.members, prefix: "", into: &rows)
            let width = rows.map { $0.name.count }.max() ?? 0
            for row in rows {
                TerminalText.appendEscaped(row.name.utf8, to: &out)
                out.append(contentsOf: repeatElement(0x20, count: max(0, width - row.name.count) + 2))
                TerminalText.appendEscaped(row.value, to: &out)
                out.append(0x0A)
            }
        }
    }
    return out
}

/// The table's rows for `members` of the object in `bytes`: a string as its
/// text, an object as one row per member named `name.member` (so `me`, the
/// caller's own uid's usage, reads as `me.queued_bytes  0`), anything else as
/// compact JSON, except a `null` limit (`me.limits.*`: none applies), which
/// reads `unlimited`.
private func statsRows(_ bytes: RawSpan, _ members: [JSONMember], prefix: String, into rows: inout [(name: String, value: [UInt8])]) {
    for member in members {
        let name = prefix + member.key
        let token = member.value
        if token.kind == .object {
            let inner = bytes.extracting(token.range)
            if let nested = try? JSONObject.members(inner), !nested.isEmpty {
                statsRows(inner, nested, prefix: name + ".", into: &rows)
                continue
            }
        }
        var value: [UInt8] = []
        if token.isString {
            value = JSONString.decodeBytes(bytes, token)
        } else if token.kind == .null && prefix.hasSuffix("limits.") {
            value = Array("unlimited".utf8)
        } else {
            JSONObject.appendCompacted(bytes, token, to: &value)
        }
        rows.append((name, value))
    }
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
            try DurableFile.replace(path, with: bytes.span.bytes, durable: false, mode: 0o644)
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
