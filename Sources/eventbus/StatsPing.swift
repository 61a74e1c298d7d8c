// `eventbus stats [--json]` and `eventbus ping [--wait DURATION]`: one
// request each (PROTOCOL.md "Requests", `stats` and `ping`).
import EventBusCommandLine
import EventBusProtocol
import EventBusSystem

let statsOptions: [OptionSpec] = globalOptions + [OptionSpec("json", "j")]
let pingOptions: [OptionSpec] = globalOptions + [OptionSpec("wait", "w", value: true)]

func runStats(_ args: ParsedArguments, socket: String) throws(CLIError) {
    guard args.operands.isEmpty else { throw .usage("stats", "unexpected argument '\(args.operands[0])'") }
    let connection = try BrokerConnection.connect(to: socket)
    let reply = try connection.request(Array("{\"op\":\"stats\",\"req\":1}\n".utf8), req: 1)
    guard reply.isOK else { throw reply.failure("stats") }
    var out: [UInt8] = []
    if args.has("json") {
        // The reply's fields as one compact object, without `op` and `req`.
        out.append(0x7B)
        for (index, field) in reply.fields.enumerated() {
            if index > 0 { out.append(0x2C) }
            JSONString.appendQuoted(field.key, to: &out)
            out.append(0x3A)
            field.raw.withUnsafeBytes { JSONObject.appendCompacted($0, JSONToken(start: 0, end: field.raw.count, kind: field.kind), to: &out) }
        }
        out.append(0x7D)
        out.append(0x0A)
    } else {
        // `name  value` lines in the broker's order, names as on the wire.
        let width = reply.fields.map { $0.key.count }.max() ?? 0
        for field in reply.fields {
            out.append(contentsOf: field.key.utf8)
            out.append(contentsOf: repeatElement(0x20, count: width - field.key.count + 2))
            if case .string = field.kind {
                out.append(contentsOf: reply.string(field.key)?.utf8 ?? "".utf8)
            } else {
                field.raw.withUnsafeBytes { JSONObject.appendCompacted($0, JSONToken(start: 0, end: field.raw.count, kind: field.kind), to: &out) }
            }
            out.append(0x0A)
        }
    }
    try StandardOutput.write(out)
}

/// Pause between connection attempts of `ping --wait`, in milliseconds.
private let pingRetryMilliseconds: Int32 = 50

func runPing(_ args: ParsedArguments, socket: String) throws(CLIError) {
    guard args.operands.isEmpty else { throw .usage("ping", "unexpected argument '\(args.operands[0])'") }
    var deadline: Int64? = nil
    if let wait = try args.value("wait", command: "ping", as: parseDuration) {
        deadline = Clock.monotonicNanoseconds() + wait.totalNanoseconds
    }
    let frame = Array("{\"op\":\"ping\",\"req\":1}\n".utf8)
    while true {
        do throws(CLIError) {
            let connection = try BrokerConnection.connect(to: socket)
            let reply = try connection.request(frame, req: 1, deadline: deadline)
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
