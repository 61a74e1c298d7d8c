// `eventbus types [PATTERN] [--format table|json] [--json] [--limit N]`: the broker's per-type
// counters (PROTOCOL.md "Per-type counters (1.2)", the `types` op), most
// recently published first: a table, or one JSON object per line. The
// broker lists only the types the caller may receive.
//
// Before editing: type names come from the socket: the table prints them
// through `TerminalText`; the JSON lines quote them (JSONString).
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSystem

/// Types asked for when a PATTERN filters them here (the broker keeps at most 65,536).
let allTypesLimit = 1 << 20

func runTypes(_ args: ParsedArguments, socket: String) throws(CLIError) {
    guard args.operands.count <= 1 else { throw .usage("types", "unexpected argument '\(args.operands[1])'") }
    var pattern: Pattern? = nil
    if let text = args.operands.first {
        guard let parsed = Pattern(text) else { throw .usage("types", "invalid pattern '\(TerminalText.escaped(text))'") }
        pattern = parsed
    }
    let limit = try args.value("limit", command: "types", as: parseCount) ?? ProtocolConstants.defaultTypesLimit
    let json = try args.asksForJSON(command: "types", plain: "table")
    let connection = try BrokerConnection.connect(to: socket, client: "eventbus-types")
    let reply = try connection.request(.types(limit: pattern == nil ? limit : allTypesLimit))
    guard reply.isOK else { throw reply.failure("types") }
    var rows = try BusSnapshot.rows(reply, "types", BusSnapshot.readType)
    if let pattern { rows = Array(rows.filter { EventType($0.name).map(pattern.matches) ?? false }.prefix(limit)) }
    var out: [UInt8] = []
    if json {
        for row in rows {
            appendJSON(row, to: &out)
            out.append(0x0A)
        }
    } else {
        appendTypesTable(rows, to: &out)
    }
    try StandardOutput.write(out)
}

/// The rows as a table, type names escaped for the terminal.
private func appendTypesTable(_ rows: [TypeRow], to out: inout [UInt8]) {
    // (1.3) REQUESTS when the broker counts them.
    let requests = rows.contains { $0.requests != nil }
    var columns: [(header: String, right: Bool)] = [
        ("TYPE", false), ("PUBLISHED", true), ("DELIVERED", true), ("DROPPED", true), ("SUBS", true),
        ("RETAINED", false), ("LAST SEQ", true), ("LAST TIME", false),
    ]
    if requests { columns.insert(("REQUESTS", true), at: 4) }
    let cells = rows.map { row in
        var cells = [TerminalText.escaped(row.name), "\(row.published)", "\(row.delivered)", "\(row.dropped)", "\(row.subscribers)",
                     row.retained ? "yes" : "no", row.lastSeq.map { "\($0)" } ?? "-", row.lastTime.map(TerminalText.escaped) ?? "-"]
        if requests { cells.insert(row.requests.map { "\($0)" } ?? "-", at: 4) }
        return cells
    }
    appendTable(columns, cells, to: &out)
}

/// `{"type":"order.created","published":12,"delivered":40,"dropped":0,
/// "subscribers":2,"retained":false,"last_seq":42,"last_time":"..."}`, the
/// broker's members in its order (null `last_seq`/`last_time` when not published in this run).
func appendJSON(_ row: TypeRow, to out: inout [UInt8]) {
    FrameEncoder.appendASCII("{\"type\":", to: &out)
    JSONString.appendQuoted(row.name, to: &out)
    FrameEncoder.appendField("published", int: row.published, to: &out)
    FrameEncoder.appendField("delivered", int: row.delivered, to: &out)
    FrameEncoder.appendField("dropped", int: row.dropped, to: &out)
    if let requests = row.requests { FrameEncoder.appendField("requests", int: requests, to: &out) }
    FrameEncoder.appendField("subscribers", int: row.subscribers, to: &out)
    FrameEncoder.appendField("retained", bool: row.retained, to: &out)
    FrameEncoder.appendASCII(",\"last_seq\":", to: &out)
    if let seq = row.lastSeq { FrameEncoder.appendInt(seq, to: &out) } else { FrameEncoder.appendASCII("null", to: &out) }
    FrameEncoder.appendASCII(",\"last_time\":", to: &out)
    if let time = row.lastTime { JSONString.appendQuoted(time, to: &out) } else { FrameEncoder.appendASCII("null", to: &out) }
    out.append(0x7D)
}
