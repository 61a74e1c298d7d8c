// One look at the broker for `eventbus types`, `top` and `stats --prometheus`:
// the `stats`, `types` (PROTOCOL.md "Per-type counters (1.2)") and `clients`
// ("Introspection (1.1)") replies read into plain rows, and the rates between
// two looks (issue 21: rates are differences of counters between two polls;
// nothing is computed per event).
//
// Before editing: strings in the rows are the broker's, decoded but not
// escaped: every printer escapes them for its medium (`TerminalText` for a
// terminal, `Exposition.label` for Prometheus, JSON quoting for --json). The
// 1.2 flow-control fields (`holding`, `held`, `behind`, `stats.held`...) are
// optional: a broker without them leaves them nil.
@_spi(Package) import EventBusCLI
@_spi(Package) import EventBusProtocol
import EventBusSystem

/// One event type as `types` reported it.
struct TypeRow {
    var name: String
    var published: UInt64 = 0
    var delivered: UInt64 = 0
    var dropped: UInt64 = 0
    var subscribers: UInt64 = 0
    var retained = false
    var lastSeq: UInt64? = nil
    var lastTime: String? = nil
    /// (1.3) Requests of this type (PROTOCOL.md "Request/reply"); nil from a broker without them.
    var requests: UInt64? = nil
}

/// One connection as `clients` reported it.
struct ClientRow {
    var conn: UInt64 = 0
    var client: String? = nil
    var pid: Int64 = 0
    var uid: UInt64 = 0
    var queuedBytes: UInt64 = 0
    var published: UInt64 = 0
    var delivered: UInt64 = 0
    var dropped: UInt64 = 0
    var overflow: String = ""
    /// When it connected (`since`), seconds since the epoch; nil if unreadable.
    var since: Int? = nil
    /// (1.2) Publisher connections it holds back now.
    var holding: UInt64? = nil
    /// (1.2) It is held back now.
    var held: Bool? = nil
    /// (1.2) It is behind (see PROTOCOL.md "Flow control").
    var behind: Bool? = nil
}

/// The three replies of one poll, and when it was taken.
struct BusSnapshot {
    /// The top-level integer members of `stats`, by wire name.
    var totals: [(key: String, value: UInt64)] = []
    var instance: String = ""
    var types: [TypeRow] = []
    var clients: [ClientRow] = []
    /// This poll's own connection (`conn` of its `hello` reply), nil if unknown.
    var ownConnection: UInt64? = nil
    /// CLOCK_MONOTONIC when the poll ended, ns.
    var takenAt: Int64 = 0

    func total(_ key: String) -> UInt64? { totals.first { $0.key == key }?.value }

    /// Asks `stats`, `types` (at most `typesLimit`, nil: the broker's
    /// default) and `clients` on `connection`.
    /// - Throws: `CLIError` from the connection (69 when the broker is gone),
    ///   or for an `error` reply, or 76 for a reply of the wrong shape.
    static func poll(_ connection: BrokerConnection, typesLimit: Int?, deadline: Int64? = nil) throws(CLIError) -> BusSnapshot {
        var snapshot = BusSnapshot()
        let stats = try connection.request(.stats, deadline: deadline)
        guard stats.isOK else { throw stats.failure("stats") }
        let types = try connection.request(.types(limit: typesLimit), deadline: deadline)
        guard types.isOK else { throw types.failure("types") }
        let clients = try connection.request(.clients, deadline: deadline)
        guard clients.isOK else { throw clients.failure("clients") }
        snapshot.read(stats: stats)
        snapshot.types = try rows(types, "types", readType)
        snapshot.clients = try rows(clients, "clients", readClient)
        snapshot.ownConnection = connection.connectionID
        snapshot.takenAt = Clock.monotonicNanoseconds()
        return snapshot
    }

    mutating func read(stats: Reply) {
        let bytes = stats.bytes.span.bytes
        for member in stats.members where member.key != "req" {
            if case .number(integer: true) = member.value.kind, let value = JSONInteger.unsigned(bytes, member.value) {
                totals.append((member.key, value))
            }
        }
        instance = stats.string("instance") ?? ""
    }

    /// Each object in the array `key` of `reply`, read by `read`.
    static func rows<Row>(_ reply: Reply, _ key: String, _ read: (ReplyObject) -> Row) throws(CLIError) -> [Row] {
        guard reply.member(key)?.value.kind == .array else {
            throw CLIError(.protocolError, "\(key) failed: the broker's reply has no list of objects in \"\(key)\"")
        }
        guard let rows = reply.withObjects(in: key, { _, _, objects in objects.map(read) }) else {
            throw CLIError(.protocolError, "\(key) failed: the broker's list in \"\(key)\" is not JSON")
        }
        return rows
    }

    static func readType(_ object: ReplyObject) -> TypeRow {
        let fields = Fields(object)
        var row = TypeRow(name: fields.string("type") ?? "?")
        row.published = fields.unsigned("published") ?? 0
        row.delivered = fields.unsigned("delivered") ?? 0
        row.dropped = fields.unsigned("dropped") ?? 0
        row.subscribers = fields.unsigned("subscribers") ?? 0
        row.retained = fields.bool("retained") ?? false
        row.lastSeq = fields.unsigned("last_seq")
        row.lastTime = fields.string("last_time")
        row.requests = fields.unsigned("requests")
        return row
    }

    static func readClient(_ object: ReplyObject) -> ClientRow {
        let fields = Fields(object)
        var row = ClientRow()
        row.conn = fields.unsigned("conn") ?? 0
        row.client = fields.string("client")
        row.pid = fields.signed("pid") ?? 0
        row.uid = fields.unsigned("uid") ?? 0
        row.queuedBytes = fields.unsigned("queued_bytes") ?? 0
        row.published = fields.unsigned("published") ?? 0
        row.delivered = fields.unsigned("delivered") ?? 0
        row.dropped = fields.unsigned("dropped") ?? 0
        row.overflow = fields.string("overflow") ?? ""
        row.since = fields.string("since").flatMap(LocalTime.epochSeconds(fromRFC3339:))
        row.holding = fields.unsigned("holding")
        row.held = fields.bool("held")
        row.behind = fields.bool("behind")
        return row
    }

    /// The members of one object with typed getters.
    private struct Fields {
        let bytes: [UInt8]
        let members: [JSONMember]
        init(_ object: ReplyObject) { (bytes, members) = (object.bytes, object.members) }
        func token(_ key: String) -> JSONToken? { members.first { $0.key == key }?.value }
        func string(_ key: String) -> String? { token(key).flatMap { $0.isString ? JSONString.decode(bytes.span.bytes, $0) : nil } }
        func unsigned(_ key: String) -> UInt64? { token(key).flatMap { JSONInteger.unsigned(bytes.span.bytes, $0) } }
        func signed(_ key: String) -> Int64? { token(key).flatMap { JSONInteger.signed(bytes.span.bytes, $0) } }
        func bool(_ key: String) -> Bool? {
            switch token(key)?.kind {
            case .true?: true
            case .false?: false
            default: nil
            }
        }
    }
}
