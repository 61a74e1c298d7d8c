// `eventbus clients`: who is connected and what each connection holds
// (PROTOCOL.md "Introspection (1.1)", the `clients` op): a table on a
// terminal, one JSON object per line when piped (like `listen`). uid 0 sees
// every connection, other users their own uid's.
//
// Before editing: every string in the table comes from the broker and is
// printed through `TerminalText` (a connection's `client` name is the
// broker's to check, but the CLI does not trust its socket peer either).
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSystem

/// How `clients` prints.
enum ClientsFormat: String {
    /// Aligned columns (default on a terminal).
    case table
    /// Each connection's object as the broker sent it, compact, one per line
    /// (default when standard output is not a terminal).
    case json
}

/// The columns of the table: header, member, right-aligned.
private let clientColumns: [(header: String, key: String, right: Bool)] = [
    ("CONN", "conn", true), ("UID", "uid", true), ("GID", "gid", true), ("PID", "pid", true),
    ("CLIENT", "client", false), ("SINCE", "since", false), ("SUBS", "subscriptions", true),
    ("QUEUED", "queued_bytes", true), ("PUBLISHED", "published", true), ("DELIVERED", "delivered", true),
    ("DROPPED", "dropped", true), ("OVERFLOW", "overflow", false), ("ECHO", "echo", false),
    ("HOLDING", "holding", true), ("HELD", "held", false), ("BEHIND", "behind", false),
    ("PENDING", "pending", true), ("SERVING", "serving", true),  // 1.3: requests waited on, and given and not answered
    ("PATTERNS", "patterns", false), ("SERVES", "serve_patterns", false), ("GROUPS", "groups", false),  // 1.3
]

func runClients(_ args: ParsedArguments, socket: String) throws(CLIError) {
    guard args.operands.isEmpty else { throw .usage("clients", "unexpected argument '\(args.operands[0])'") }
    let format: ClientsFormat
    if let value = try args.format(command: "clients") {
        guard let chosen = ClientsFormat(rawValue: value) else { throw .usage("clients", "unknown format '\(value)'; use table or json") }
        format = chosen
    } else {
        format = isStandardOutputTerminal ? .table : .json
    }
    let connection = try BrokerConnection.connect(to: socket, client: "eventbus-clients")
    let reply = try connection.request(.clients)
    guard reply.isOK else { throw reply.failure("clients") }
    var out: [UInt8] = []
    let ok = reply.withObjects(in: "clients") { bytes, tokens, objects -> Bool in
        switch format {
        case .json:
            for token in tokens {
                JSONObject.appendCompacted(bytes, token, to: &out)
                out.append(0x0A)
            }
        case .table:
            appendClientsTable(objects, to: &out)
        }
        return true
    } ?? false
    guard ok else { throw CLIError(.protocolError, "clients failed: the broker's reply has no list of objects in \"clients\"") }
    try StandardOutput.write(out)
}

/// One cell: strings decoded and escaped for the terminal, lists joined by
/// `,` (at most 60 bytes, then `…`), other values compacted; `-` when absent,
/// null or an empty list.
private func cell(_ members: [JSONMember], _ key: String, _ bytes: RawSpan) -> String {
    guard let value = members.first(where: { $0.key == key })?.value, value.kind != .null else { return "-" }
    if value.kind == .array, (try? JSONArray.elements(bytes, value))?.isEmpty ?? false {
        return "-"
    }
    var raw: [UInt8] = []
    if key == "groups" && value.kind == .array {
        raw = groupsCell(bytes, value)
    } else if value.isString {
        raw = JSONString.decodeBytes(bytes, value)
    } else if value.kind == .array {
        let items = (try? JSONArray.elements(bytes, value)) ?? []
        let parts = items.filter(\.isString).map { JSONString.decodeBytes(bytes, $0) }
        raw = Array(parts.joined(separator: [0x2C]))
        if raw.count > 60 { raw = Array(raw.prefix(60)) + Array("…".utf8) }
    } else {
        JSONObject.appendCompacted(bytes, value, to: &raw)
    }
    var safe: [UInt8] = []
    TerminalText.appendEscaped(raw, to: &safe)
    return String(decoding: safe, as: UTF8.self)
}

/// (1.3) The `groups` of a connection, `[{"type":"job.>","group":"workers","serve":false,"members":3}]`,
/// as `job.>@workers(3)` (`serve` ones with ` serve`, a bridge's fallback
/// membership with ` fallback`), joined by `,` (at most 60 bytes, then `…`).
private func groupsCell(_ bytes: RawSpan, _ value: JSONToken) -> [UInt8] {
    var parts: [String] = []
    for item in (try? JSONArray.elements(bytes, value)) ?? [] {
        let object = bytes.extracting(item.start..<item.end)
        guard item.kind == .object, let members = try? JSONObject.members(object) else { continue }
        func string(_ key: String, in object: RawSpan) -> String? {
            guard let value = members.first(where: { $0.key == key })?.value, value.isString else { return nil }
            return JSONString.decode(object, value)
        }
        let type = string("type", in: object), group = string("group", in: object)
        let count = members.first { $0.key == "members" }.flatMap { JSONInteger.unsigned(object, $0.value) }
        let serve = members.first { $0.key == "serve" }?.value.kind == .true
        let fallback = members.first { $0.key == "fallback" }?.value.kind == .true
        parts.append("\(type ?? "?")@\(group ?? "?")\(count.map { "(\($0))" } ?? "")\(serve ? " serve" : "")\(fallback ? " fallback" : "")")
    }
    var raw = Array(parts.joined(separator: ",").utf8)
    if raw.count > 60 { raw = Array(raw.prefix(60)) + Array("…".utf8) }
    return raw
}

private func appendClientsTable(_ objects: [ReplyObject], to out: inout [UInt8]) {
    let rows = objects.map { object in clientColumns.map { cell(object.members, $0.key, object.bytes.span.bytes) } }
    appendTable(clientColumns.map { ($0.header, $0.right) }, rows, to: &out)
}

/// Aligned columns, two spaces apart, a header line first; cells are text
/// already safe for the terminal. The last column is not padded.
func appendTable(_ columns: [(header: String, right: Bool)], _ rows: [[String]], to out: inout [UInt8]) {
    var widths = columns.map { $0.header.count }
    for row in rows { for (i, text) in row.enumerated() { widths[i] = max(widths[i], text.count) } }
    func line(_ cells: [String]) {
        var text = ""
        for (i, cell) in cells.enumerated() {
            let pad = String(repeating: " ", count: widths[i] - cell.count)
            let last = i == cells.count - 1
            text += columns[i].right ? pad + cell : (last ? cell : cell + pad)
            if !last { text += "  " }
        }
        out.append(contentsOf: text.utf8)
        out.append(0x0A)
    }
    line(columns.map(\.header))
    for row in rows { line(row) }
}
