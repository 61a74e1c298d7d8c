// `eventbus stats --prometheus`: one `BusSnapshot` in the Prometheus text
// exposition format, version 0.0.4 (prometheus.io/docs/instrumenting/
// exposition_formats): `# HELP` and `# TYPE` once per metric family, counters
// named `..._total`, label values escaped (backslash, double quote, line
// feed). Per-type series carry a `type` label (at most `--max-types`, the
// busiest first). Per-client series carry `client`, `pid` and `uid` labels:
// the connections of one process with one client name are summed into one
// series, only connections older than `--min-client-age` count (a one-shot
// `eventbus publish`, or this exporter's own connection, would make a new
// series at every scrape: issue 33), and at most `--max-clients` series are
// written, the largest queues first. No label carries a connection id.
//
// Before editing: every string that came from the broker goes into a label
// value through `label`, never into a metric name or a comment; a family is
// written with its HELP and TYPE lines even when it has no sample, so the
// set of families does not depend on what the broker holds now.
@_spi(Package) import EventBusProtocol

enum Exposition {
    /// A family of samples: name, HELP text, `counter` or `gauge`.
    struct Family {
        let name: String
        let help: String
        let kind: String
        var samples: [(labels: [(String, String)], value: UInt64)] = []

        init(_ name: String, _ kind: String, _ help: String) {
            self.name = name
            self.kind = kind
            self.help = help
        }
    }

    /// The families of `stats` members an operator graphs: wire name, metric, kind, help.
    static let statsFamilies: [(key: String, name: String, kind: String, help: String)] = [
        ("connections", "eventbus_connections", "gauge", "Open connections."),
        ("subscriptions", "eventbus_subscriptions", "gauge", "Subscriptions of all connections."),
        ("published", "eventbus_published_total", "counter", "Events accepted from publishers."),
        ("delivered", "eventbus_delivered_total", "counter", "Event frames queued to subscribers."),
        ("dropped", "eventbus_dropped_total", "counter", "Events dropped for slow subscribers."),
        ("queued_bytes", "eventbus_queued_bytes", "gauge", "Bytes in all outbound queues."),
        ("uptime_s", "eventbus_uptime_seconds", "gauge", "Seconds since the broker started."),
        ("retained", "eventbus_retained_events", "gauge", "Retained events kept."),
        ("retained_bytes", "eventbus_retained_bytes", "gauge", "Bytes of the retained events."),
        ("history_events", "eventbus_history_events", "gauge", "Events in the history ring."),
        ("policy_generation", "eventbus_policy_generation", "gauge", "Access policy generation (1 at start, +1 per reload)."),
        ("held", "eventbus_held_publishers", "gauge", "Publisher connections held back now (flow control)."),
        ("holds", "eventbus_holds_total", "counter", "Times a publisher was held back (flow control)."),
        ("stalls", "eventbus_stalls_total", "counter", "Times a connection went behind (flow control)."),
    ]

    /// The whole exposition of `snapshot` (a broker that answered), LF-terminated.
    /// - Parameters:
    ///   - minClientAge: connections younger than this many seconds (by
    ///     their `since`, against `now`) get no per-client series.
    ///   - now: the wall clock, seconds since the epoch.
    static func render(_ snapshot: BusSnapshot, maxTypes: Int, maxClients: Int, minClientAge: Int, now: Int) -> String {
        var families: [Family] = []
        var up = Family("eventbus_up", "gauge", "Whether the broker answered (1) or not (0).")
        up.samples.append(([], 1))
        families.append(up)
        var info = Family("eventbus_info", "gauge", "The broker run: its instance id.")
        info.samples.append(([("instance", snapshot.instance)], 1))
        families.append(info)
        for entry in statsFamilies {
            guard let value = snapshot.total(entry.key) else { continue }
            var family = Family(entry.name, entry.kind, entry.help)
            family.samples.append(([], value))
            families.append(family)
        }
        families += typeFamilies(snapshot, maxTypes: maxTypes)
        families += clientFamilies(snapshot, maxClients: maxClients, minClientAge: minClientAge, now: now)
        return text(families)
    }

    /// A per-row family: metric, kind, help, and the row's sample (nil: none).
    typealias Column<Row> = (name: String, kind: String, help: String, value: @Sendable (Row) -> UInt64?)

    /// The per-type families, one sample per type.
    static let typeColumns: [Column<TypeRow>] = [
        ("eventbus_type_published_total", "counter", "Events of the type published in this broker run.", { $0.published }),
        ("eventbus_type_delivered_total", "counter", "Event frames of the type queued to subscribers.", { $0.delivered }),
        ("eventbus_type_dropped_total", "counter", "Deliveries of the type dropped for any connection.", { $0.dropped }),
        ("eventbus_type_subscribers", "gauge", "Connections whose patterns match the type now.", { $0.subscribers }),
        ("eventbus_type_retained", "gauge", "Whether the type has a retained event (1) or not (0).", { $0.retained ? 1 : 0 }),
    ]

    /// The per-client families, one sample per series (`held`, `behind` and
    /// `holding` only where the broker said).
    static let clientColumns: [Column<ClientRow>] = [
        ("eventbus_client_queued_bytes", "gauge", "Bytes in the outbound queues of the client's connections.", { $0.queuedBytes }),
        ("eventbus_client_published_total", "counter", "Events the client's connections published.", { $0.published }),
        ("eventbus_client_delivered_total", "counter", "Events queued to the client's connections.", { $0.delivered }),
        ("eventbus_client_dropped_total", "counter", "Events dropped for the client's connections.", { $0.dropped }),
        ("eventbus_client_held", "gauge", "Whether a connection of the client is held back now (1) or not (0).", { $0.held.map { $0 ? 1 : 0 } }),
        ("eventbus_client_behind", "gauge", "Whether a connection of the client is behind (1) or not (0).", { $0.behind.map { $0 ? 1 : 0 } }),
        ("eventbus_client_holding", "gauge", "Publisher connections the client's connections hold back now.", { $0.holding }),
        ("eventbus_client_connections", "gauge", "Connections of the client (at least --min-client-age old).", { $0.conn }),
    ]

    /// The per-type families: the `maxTypes` busiest types.
    private static func typeFamilies(_ snapshot: BusSnapshot, maxTypes: Int) -> [Family] {
        // The busiest types: most published, then by name (stable output).
        let types = snapshot.types.sorted { ($0.published, $1.name) > ($1.published, $0.name) }.prefix(max(0, maxTypes))
        return families(typeColumns, of: types) { [("type", $0.name)] }
    }

    /// The per-client families: at most `maxClients` series (`clientSeries`).
    private static func clientFamilies(_ snapshot: BusSnapshot, maxClients: Int, minClientAge: Int, now: Int) -> [Family] {
        let clients = clientSeries(snapshot, minClientAge: minClientAge, now: now).prefix(max(0, maxClients))
        return families(clientColumns, of: clients) { [("client", $0.client ?? ""), ("pid", "\($0.pid)"), ("uid", "\($0.uid)")] }
    }

    /// One family per column, each with a sample per row (in row order) under the row's labels.
    private static func families<Row>(_ columns: [Column<Row>], of rows: some Sequence<Row>, labels: (Row) -> [(String, String)]) -> [Family] {
        var families = columns.map { Family($0.name, $0.kind, $0.help) }
        for row in rows {
            let labels = labels(row)
            for (i, column) in columns.enumerated() {
                if let value = column.value(row) { families[i].samples.append((labels, value)) }
            }
        }
        return families
    }

    /// The per-client rows: the connections at least `minClientAge` seconds
    /// old, but not the snapshot's own, summed per (client, pid, uid) (`conn`
    /// holds how many connections), the largest queues first, then by client,
    /// pid and uid (stable output).
    static func clientSeries(_ snapshot: BusSnapshot, minClientAge: Int, now: Int) -> [ClientRow] {
        struct Identity: Hashable {
            var client: String?
            var pid: Int64
            var uid: UInt64
        }
        var rows: [Identity: ClientRow] = [:]
        for row in snapshot.clients where row.conn != snapshot.ownConnection {
            // A connection whose `since` cannot be read counts as young: no series.
            guard let since = row.since, now - since >= minClientAge else { continue }
            let identity = Identity(client: row.client, pid: row.pid, uid: row.uid)
            var sum = rows[identity] ?? ClientRow(conn: 0, client: row.client, pid: row.pid, uid: row.uid)
            sum.conn += 1
            sum.queuedBytes += row.queuedBytes
            sum.published += row.published
            sum.delivered += row.delivered
            sum.dropped += row.dropped
            if let held = row.held { sum.held = (sum.held ?? false) || held }
            if let behind = row.behind { sum.behind = (sum.behind ?? false) || behind }
            if let holding = row.holding { sum.holding = (sum.holding ?? 0) + holding }
            rows[identity] = sum
        }
        return rows.values.sorted {
            ($0.queuedBytes, $1.client ?? "", $1.pid, $1.uid) > ($1.queuedBytes, $0.client ?? "", $0.pid, $0.uid)
        }
    }

    /// The exposition of a broker that did not answer: `eventbus_up 0` only.
    static func unavailable() -> String {
        var up = Family("eventbus_up", "gauge", "Whether the broker answered (1) or not (0).")
        up.samples.append(([], 0))
        return text([up])
    }

    static func text(_ families: [Family]) -> String {
        var out = ""
        for family in families {
            out += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.kind)\n"
            for sample in family.samples {
                out += family.name
                if !sample.labels.isEmpty {
                    out += "{" + sample.labels.map { "\($0.0)=\"\(label($0.1))\"" }.joined(separator: ",") + "}"
                }
                out += " \(sample.value)\n"
            }
        }
        return out
    }

    /// A label value escaped as the format requires: `\` as `\\`, `"` as
    /// `\"`, LF as `\n` (other bytes, CR and other controls included, are
    /// allowed in a label value and pass through).
    static func label(_ value: String) -> String {
        var out = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
