// The event as every client of the bus sees it (PROTOCOL.md "Events"): the
// metadata the broker stamps on it and its `data` bytes, shared by the
// library (`EventBus`), the CLI and the bridge, plus the `gap` a resume
// could not close and the `hello` reply's fields.
//
// Before editing: these are plain values with no Foundation; the library
// adds its Foundation conveniences (`date`, `decode`) in extensions, and
// re-exports them under the same names (EventBusClient's typealiases), so
// a field added here is public API of the `EventBus` library.
@_spi(Package) import EventBusProtocol

/// What the broker says about an event besides its data (PROTOCOL.md "Events").
public struct EventMetadata: Hashable, Sendable {
    /// The event type, e.g. `order.created`.
    public var type: String
    /// Broker-wide sequence number, increasing within one broker run.
    public var seq: UInt64
    /// When the broker received it: RFC 3339 UTC with milliseconds,
    /// `2026-11-29T13:00:00.123Z`.
    public var time: String
    /// The publisher's `source`, or its client name, or `pid/<pid>`.
    public var source: String
    /// The publisher's `id`, or `<instance>-<seq>`.
    public var id: String
    /// The publisher's process id (`SO_PEERCRED`, so it cannot be forged).
    public var pid: Int32
    /// The publisher's user id (`SO_PEERCRED`).
    public var uid: UInt32
    /// The publisher's group id (`SO_PEERCRED`).
    public var gid: UInt32
    /// True when this process published the event and the library delivered
    /// it in-process (the broker does not echo a connection's own events,
    /// PROTOCOL.md "Semantics"); `time` is then this process's clock when the
    /// broker's `ok` arrived, and `seq` the one in that `ok`.
    public var isLocal: Bool
    /// (1.1) The retained event of its type, sent as the current value
    /// (`initial: .last`, `current(_:)`) rather than as it happened; `seq`
    /// and `time` are those of its publication.
    public var isRetained: Bool
    /// (1.1) Replayed from the broker's history after a reconnect: it was
    /// published while this process was not connected.
    public var isReplayed: Bool
    /// (1.1) Set on the first event a registration gets after a reconnect
    /// that could not recover everything: events before this one may have
    /// been missed (also reported once as `BusNotice.gap`).
    public var gap: BusGap?
    /// (1.1) The event carries `origin`: it came through a bridge from
    /// another node (PROTOCOL.md "Bridged events").
    public var isBridged: Bool
    /// (1.3) The publisher's queue-group `key`, nil when it gave none
    /// (PROTOCOL.md "Queue groups").
    public var key: String?
    /// (1.3) A queue-group member closed before this event was written to
    /// it, so the group gave it to this member instead (`"redelivered":true`).
    public var isRedelivered: Bool

    /// Metadata as an event frame carries it (for tests and custom decoding).
    public init(type: String, seq: UInt64, time: String, source: String, id: String, pid: Int32, uid: UInt32, gid: UInt32, isLocal: Bool = false,
                isRetained: Bool = false, isReplayed: Bool = false, gap: BusGap? = nil, isBridged: Bool = false,
                key: String? = nil, isRedelivered: Bool = false) {
        self.type = type
        self.seq = seq
        self.time = time
        self.source = source
        self.id = id
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.isLocal = isLocal
        self.isRetained = isRetained
        self.isReplayed = isReplayed
        self.gap = gap
        self.isBridged = isBridged
        self.key = key
        self.isRedelivered = isRedelivered
    }
}

/// An event whose `data` is still the JSON text the publisher sent, as yielded
/// by `EventBus.events(matching:)` and exported by the bridge.
public struct RawEvent: Hashable, Sendable {
    /// seq, type, time, source, id, pid, uid, gid.
    public var metadata: EventMetadata
    /// The `data` value exactly as published: UTF-8 JSON, `null` when absent.
    public var data: [UInt8]

    /// - Parameter data: one JSON value, UTF-8.
    public init(metadata: EventMetadata, data: [UInt8]) {
        self.metadata = metadata
        self.data = data
    }

    /// The event type, e.g. `order.created`.
    public var type: String { metadata.type }

    /// `data` as a string (valid UTF-8: the broker validated it).
    public var dataString: String { String(decoding: data, as: UTF8.self) }

    /// The event of an `event` frame read by `BrokerFrame.read` from `frame`.
    /// Absent `time`, `source`, `id` are empty; `pid`, `uid`, `gid` that do
    /// not fit their types are 0; absent `data` is `null`.
    package init(_ fields: EventFields, in frame: RawSpan) {
        func string(_ token: JSONToken?) -> String { token.map { JSONString.decode(frame, $0) } ?? "" }
        let metadata = EventMetadata(
            type: JSONString.decode(frame, fields.type), seq: fields.seq, time: string(fields.time),
            source: string(fields.source), id: string(fields.id),
            pid: fields.pid.flatMap { Int32(exactly: $0) } ?? 0,
            uid: fields.uid.flatMap { UInt32(exactly: $0) } ?? 0,
            gid: fields.gid.flatMap { UInt32(exactly: $0) } ?? 0,
            isRetained: fields.retained, isReplayed: fields.replayed, isBridged: fields.origin != nil,
            key: fields.key.map { JSONString.decode(frame, $0) }, isRedelivered: fields.redelivered
        )
        let data = fields.data.map { [UInt8](copying: frame.extracting($0.start..<$0.end)) } ?? Array("null".utf8)
        self.init(metadata: metadata, data: data)
    }
}

/// (1.1) What a reconnect could not recover (PROTOCOL.md "Retained events
/// and history": the `gap` frame).
public struct BusGap: Hashable, Sendable {
    /// The last seq this process had seen, in the broker run it was seen in
    /// (0 when the broker restarted: the seqs of the old run mean nothing in the new).
    public var sinceSeq: UInt64
    /// The first seq the broker could still replay; events between may be lost.
    public var firstSeq: UInt64
    /// Whether the broker restarted (a new `instance`) while this process was away.
    public var brokerRestarted: Bool

    public init(sinceSeq: UInt64, firstSeq: UInt64, brokerRestarted: Bool) {
        self.sinceSeq = sinceSeq
        self.firstSeq = firstSeq
        self.brokerRestarted = brokerRestarted
    }
}

/// What the broker said in its `hello` reply (PROTOCOL.md "Requests").
public struct ConnectionInfo: Equatable, Sendable {
    /// The broker's name, e.g. `eventbusd`.
    public var server: String
    /// The broker's version string.
    public var version: String
    /// The random id of this broker run; it changes when the broker restarts.
    public var instance: String
    /// This connection's id within the broker run.
    public var connection: UInt64
    /// Optional features the broker has, e.g. `overflow`, `echo`; (1.2)
    /// `flow` when it holds publishers for subscribers that keep reading.
    public var features: [String]
    /// (1.2) The broker's process id; nil from a 1.1 broker.
    public var pid: Int32?

    /// The fields of a `hello` reply.
    public init(server: String, version: String, instance: String, connection: UInt64, features: [String], pid: Int32? = nil) {
        self.server = server
        self.version = version
        self.instance = instance
        self.connection = connection
        self.features = features
        self.pid = pid
    }

    /// The fields of the `ok` that answered a `hello`.
    package init(helloReply reply: Reply) {
        self.init(
            server: reply.string("server") ?? "",
            version: reply.string("version") ?? "",
            instance: reply.string("instance") ?? "",
            connection: reply.unsigned("conn") ?? 0,
            features: reply.strings("features") ?? [],
            pid: reply.unsigned("pid").flatMap { Int32(exactly: $0) }
        )
    }
}
