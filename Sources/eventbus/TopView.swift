// What `eventbus top` shows, as text: rates from two `BusSnapshot`s (counter
// differences over the time between the polls, nothing per event), the
// header with the totals and uptime, the types table, the connections table
// with a queue-fill bar and the held/behind marks (PROTOCOL.md 1.2 "Flow
// control" fields, shown when the broker sends them), and the same as one
// JSON object for `--json`. Pure functions of their inputs: Top.swift does
// the terminal and the polling.
//
// Before editing: every string from the broker goes through
// `TerminalText.escaped` before it is cut to its column, so no cut can make
// an escape sequence; lines are cut to the width so the terminal never wraps.
@_spi(Package) import EventBusCLI
@_spi(Package) import EventBusProtocol

/// How the types table is sorted (keys e, d, x, n).
enum TypeSort: String {
    case events = "events/s", deliveries = "deliveries/s", drops = "drops/s", name
}

/// How the connections table is sorted (key c toggles).
enum ClientSort: String {
    case queue = "queue", conn = "conn"
}

/// The rates between two polls of one broker run.
struct TopRates {
    /// Seconds between the polls; nil for a first poll or a new broker run (no rates).
    let seconds: Double?
    let previous: BusSnapshot?

    init(previous: BusSnapshot?, current: BusSnapshot) {
        if let previous, previous.instance == current.instance, current.takenAt > previous.takenAt {
            seconds = Double(current.takenAt - previous.takenAt) / 1e9
            self.previous = previous
        } else {
            seconds = nil
            self.previous = nil
        }
    }

    /// Per second from `old` to `new` (a counter that went back counts as 0).
    func rate(_ new: UInt64, _ old: UInt64?) -> Double? {
        guard let seconds else { return nil }
        let old = old ?? 0
        return new >= old ? Double(new - old) / seconds : 0
    }

    func total(_ key: String, _ current: BusSnapshot) -> Double? {
        rate(current.total(key) ?? 0, previous?.total(key))
    }

    func type(_ row: TypeRow) -> (events: Double?, deliveries: Double?, drops: Double?) {
        let old = previous?.types.first { $0.name == row.name }
        return (rate(row.published, old?.published), rate(row.delivered, old?.delivered), rate(row.dropped, old?.dropped))
    }

    func client(_ row: ClientRow) -> (deliveries: Double?, drops: Double?) {
        let old = previous?.clients.first { $0.conn == row.conn }
        return (rate(row.delivered, old?.delivered), rate(row.dropped, old?.dropped))
    }
}

/// One frame of `top`.
struct TopView {
    var snapshot: BusSnapshot
    var rates: TopRates
    var socket: String
    var typeSort = TypeSort.events
    var clientSort = ClientSort.queue
    /// A connection's outbound limit, for the fill bar (`--queue-limit`).
    var queueLimitBytes = 8 << 20
    /// Why the last poll failed, shown instead of the key help.
    var status: String? = nil

    /// The text lines of the frame, each at most `width` characters; at most
    /// `height` lines (nil: every row, for plain snapshots).
    func lines(width: Int, height: Int?, keys: Bool) -> [String] {
        var head: [String] = []
        let uptime = snapshot.total("uptime_s").map(Self.duration) ?? "-"
        head.append("eventbus top  \(TerminalText.escaped(socket))  up \(uptime)  instance \(TerminalText.escaped(snapshot.instance))")
        func figure(_ key: String, _ label: String) -> String { "\(label) \(snapshot.total(key).map { "\($0)" } ?? "-")" }
        head.append([figure("connections", "connections"), figure("subscriptions", "subscriptions"),
                     "queued \(Self.bytes(snapshot.total("queued_bytes") ?? 0))", figure("retained", "retained"),
                     "events/s \(Self.rate(rates.total("published", snapshot)))",
                     "deliveries/s \(Self.rate(rates.total("delivered", snapshot)))",
                     "drops/s \(Self.rate(rates.total("dropped", snapshot)))"].joined(separator: "  "))
        if snapshot.total("holds") != nil || snapshot.total("stalls") != nil {
            head.append([figure("held", "held"), figure("holds", "holds"), figure("stalls", "stalls")].joined(separator: "  "))
        }
        let typeTable = self.typeTable()
        let clientTable = self.clientTable()
        var footer: [String] = []
        if let status { footer.append("! \(status)") }
        if keys { footer.append("q quit  e/d/x/n sort types (\(typeSort.rawValue))  c connections by \(clientSort == .queue ? "conn" : "queue")") }
        var typeRows = typeTable.count - 1, clientRows = clientTable.count - 1
        if let height {
            // Header, a blank line, two table headers with a blank line between, the footer.
            let room = max(0, height - head.count - footer.count - 4)
            let half = room / 2
            typeRows = min(typeRows, max(half, room - clientRows))
            clientRows = min(clientRows, room - typeRows)
        }
        var all = head + [""] + typeTable.prefix(1 + typeRows) + [""] + clientTable.prefix(1 + clientRows)
        if let height { all += Array(repeating: "", count: max(0, height - all.count - footer.count)) }
        all += footer
        return all.map { Self.cut(Self.trimmed($0), width) }
    }

    private func typeTable() -> [String] {
        var rows = snapshot.types.map { ($0, rates.type($0)) }
        switch typeSort {
        case .events: rows.sort { ($0.1.events ?? 0, $1.0.name) > ($1.1.events ?? 0, $0.0.name) }
        case .deliveries: rows.sort { ($0.1.deliveries ?? 0, $1.0.name) > ($1.1.deliveries ?? 0, $0.0.name) }
        case .drops: rows.sort { ($0.1.drops ?? 0, $1.0.name) > ($1.1.drops ?? 0, $0.0.name) }
        case .name: rows.sort { $0.0.name < $1.0.name }
        }
        let nameWidth = max(20, min(48, rows.map { TerminalText.escaped($0.0.name).count }.max() ?? 0))
        func line(_ name: String, _ cells: [String]) -> String {
            Self.pad(name, nameWidth) + cells.map { " " + Self.padLeft($0, 10) }.joined()
        }
        var out = [line("TYPE", ["EVENTS/S", "DELIV/S", "DROPS/S", "SUBS", "PUBLISHED", "DROPPED"])]
        for (row, rate) in rows {
            out.append(line(Self.cut(TerminalText.escaped(row.name), nameWidth),
                            [Self.rate(rate.events), Self.rate(rate.deliveries), Self.rate(rate.drops),
                             "\(row.subscribers)", "\(row.published)", "\(row.dropped)"]))
        }
        return out
    }

    private func clientTable() -> [String] {
        var rows = snapshot.clients
        switch clientSort {
        case .queue: rows.sort { ($0.queuedBytes, $1.conn) > ($1.queuedBytes, $0.conn) }
        case .conn: break  // the reply's order, the order they came: `conn` ids are not ordered (PROTOCOL-NOTES.md)
        }
        let header = Self.padLeft("CONN", 15) + " " + Self.padLeft("UID", 6) + " " + Self.padLeft("PID", 7) + "  " + Self.pad("CLIENT", 16)
            + "  " + Self.pad("QUEUE", 12) + " " + Self.padLeft("FILL", 4) + " " + Self.padLeft("QUEUED", 8)
            + " " + Self.padLeft("DELIV/S", 9) + " " + Self.padLeft("DROPS/S", 9) + "  MARKS"
        var out = [header]
        for row in rows {
            let rate = rates.client(row)
            let fill = queueLimitBytes > 0 ? min(1, Double(row.queuedBytes) / Double(queueLimitBytes)) : 0
            out.append(Self.padLeft("\(row.conn)", 15) + " " + Self.padLeft("\(row.uid)", 6) + " " + Self.padLeft("\(row.pid)", 7)
                + "  " + Self.pad(Self.cut(row.client.map(TerminalText.escaped) ?? "-", 16), 16)
                + "  " + Self.bar(fill, 12) + " " + Self.padLeft("\(Int((fill * 100).rounded()))%", 4)
                + " " + Self.padLeft(Self.bytes(row.queuedBytes), 8)
                + " " + Self.padLeft(Self.rate(rate.deliveries), 9) + " " + Self.padLeft(Self.rate(rate.drops), 9)
                + "  " + Self.marks(row))
        }
        return out
    }

    /// `held`, `BEHIND`, `holding 2` (PROTOCOL.md 1.2 "Flow control"), as the broker said.
    static func marks(_ row: ClientRow) -> String {
        var marks: [String] = []
        if row.behind == true { marks.append("BEHIND") }
        if row.held == true { marks.append("held") }
        if let holding = row.holding, holding > 0 { marks.append("holding \(holding)") }
        if row.dropped > 0 { marks.append("drops") }
        return marks.joined(separator: " ")
    }

    /// `[#####.......]` for `fill` in 0...1.
    static func bar(_ fill: Double, _ width: Int) -> String {
        let inner = width - 2
        let filled = fill > 0 ? max(1, Int((fill * Double(inner)).rounded())) : 0
        return "[" + String(repeating: "#", count: min(inner, filled)) + String(repeating: ".", count: inner - min(inner, filled)) + "]"
    }

    /// The frame as one JSON object (`--json`): totals, rates (null on a
    /// first poll), each type and each connection.
    func json() -> [UInt8] {
        var out: [UInt8] = []
        FrameEncoder.appendASCII("{\"instance\":", to: &out)
        JSONString.appendQuoted(snapshot.instance, to: &out)
        for (key, value) in snapshot.totals { out.append(0x2C); JSONString.appendQuoted(key, to: &out); out.append(0x3A); FrameEncoder.appendInt(value, to: &out) }
        Self.appendRate("events_per_s", rates.total("published", snapshot), &out)
        Self.appendRate("deliveries_per_s", rates.total("delivered", snapshot), &out)
        Self.appendRate("drops_per_s", rates.total("dropped", snapshot), &out)
        FrameEncoder.appendASCII(",\"types\":[", to: &out)
        for (i, row) in snapshot.types.enumerated() {
            if i > 0 { out.append(0x2C) }
            appendJSON(row, to: &out)
        }
        FrameEncoder.appendASCII("],\"clients\":[", to: &out)
        for (i, row) in snapshot.clients.enumerated() {
            if i > 0 { out.append(0x2C) }
            appendJSON(row, to: &out)
        }
        FrameEncoder.appendASCII("]}\n", to: &out)
        return out
    }

    /// One type of `json()`, with its rates.
    private func appendJSON(_ row: TypeRow, to out: inout [UInt8]) {
        let rate = rates.type(row)
        FrameEncoder.appendASCII("{\"type\":", to: &out)
        JSONString.appendQuoted(row.name, to: &out)
        Self.appendRate("events_per_s", rate.events, &out)
        Self.appendRate("deliveries_per_s", rate.deliveries, &out)
        Self.appendRate("drops_per_s", rate.drops, &out)
        FrameEncoder.appendField("subscribers", int: row.subscribers, to: &out)
        FrameEncoder.appendField("published", int: row.published, to: &out)
        FrameEncoder.appendField("delivered", int: row.delivered, to: &out)
        FrameEncoder.appendField("dropped", int: row.dropped, to: &out)
        out.append(0x7D)
    }

    /// One connection of `json()`, with its rates.
    private func appendJSON(_ row: ClientRow, to out: inout [UInt8]) {
        let rate = rates.client(row)
        FrameEncoder.appendASCII("{\"conn\":", to: &out)
        FrameEncoder.appendInt(row.conn, to: &out)
        FrameEncoder.appendASCII(",\"client\":", to: &out)
        if let client = row.client { JSONString.appendQuoted(client, to: &out) } else { FrameEncoder.appendASCII("null", to: &out) }
        FrameEncoder.appendASCII(",\"pid\":", to: &out)
        FrameEncoder.appendInt(row.pid, to: &out)
        FrameEncoder.appendField("uid", int: row.uid, to: &out)
        FrameEncoder.appendField("queued_bytes", int: row.queuedBytes, to: &out)
        Self.appendRate("delivered_per_s", rate.deliveries, &out)
        Self.appendRate("dropped_per_s", rate.drops, &out)
        if let holding = row.holding { FrameEncoder.appendField("holding", int: holding, to: &out) }
        if let held = row.held { FrameEncoder.appendField("held", bool: held, to: &out) }
        if let behind = row.behind { FrameEncoder.appendField("behind", bool: behind, to: &out) }
        out.append(0x7D)
    }

    private static func appendRate(_ key: String, _ value: Double?, _ out: inout [UInt8]) {
        out.append(0x2C)
        JSONString.appendQuoted(key, to: &out)
        out.append(0x3A)
        out.append(contentsOf: (value.map { decimal($0, places: 1) } ?? "null").utf8)
    }

    // MARK: Text helpers

    /// `812.0` below 1000 a second, `48161` above; `-` without a rate.
    static func rate(_ value: Double?) -> String {
        guard let value else { return "-" }
        return value < 1000 ? decimal(value, places: 1) : "\(Int(value.rounded()))"
    }

    /// `value` with `places` decimals (no Foundation in the CLI).
    static func decimal(_ value: Double, places: Int) -> String {
        var scale = 1
        for _ in 0..<places { scale *= 10 }
        let scaled = Int((max(0, value) * Double(scale)).rounded())
        guard places > 0 else { return "\(scaled)" }
        let fraction = String(scaled % scale)
        return "\(scaled / scale)." + String(repeating: "0", count: places - fraction.count) + fraction
    }

    /// `512`, `1.5K`, `8.0M`, `2.0G` (1024-based, like sizes given to eventbusd).
    static func bytes(_ value: UInt64) -> String {
        if value < 1024 { return "\(value)" }
        let units = ["K", "M", "G", "T"]
        var scaled = Double(value) / 1024
        var unit = 0
        while scaled >= 1024 && unit < units.count - 1 { scaled /= 1024; unit += 1 }
        return decimal(scaled, places: 1) + units[unit]
    }

    /// `3d 04:12:09`, `00:00:07`.
    static func duration(_ seconds: UInt64) -> String {
        let days = seconds / 86_400, h = seconds / 3600 % 24, m = seconds / 60 % 60, s = seconds % 60
        func two(_ n: UInt64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return (days > 0 ? "\(days)d " : "") + "\(two(h)):\(two(m)):\(two(s))"
    }

    static func cut(_ text: String, _ width: Int) -> String {
        guard text.count > width else { return text }
        return width <= 1 ? String(text.prefix(width)) : String(text.prefix(width - 1)) + "…"
    }

    static func trimmed(_ text: String) -> String {
        var text = Substring(text)
        while text.last == " " { text.removeLast() }
        return String(text)
    }

    static func pad(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }
    static func padLeft(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }
}
