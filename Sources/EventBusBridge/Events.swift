// The two shapes the bridge moves between the bus and NATS: an event read
// from the local bus (to export) and a publish for the local bus (an import,
// with `origin`, PROTOCOL.md "Bridged events (1.1)").
//
// Before editing: these are plain values so the bridge's logic stays pure;
// the bridge's bus connection fills `LocalEvent` from the raw event frame and
// turns `LocalPublish` into a publish request. `LocalEvent` lists the same
// event fields as the client library's `EventMetadata` (PROTOCOL.md
// "Events") on purpose, not by accident: EventBusClient and EventBusBridge
// are siblings over EventBusProtocol, and a shared struct would have to
// live there and change the public `EventMetadata` of the `EventBus`
// library (or make the bridge link the whole client), for eight stored
// properties whose types differ anyway (`EventType` here, `String` there;
// the bytes of `data` and `hasOrigin` here, delivery flags there).
import EventBusProtocol

/// An event delivered to the bridge by the local broker (PROTOCOL.md "Events").
public struct LocalEvent: Equatable, Sendable {
    public var type: EventType
    public var seq: UInt64
    /// RFC 3339 UTC as the broker stamped it, e.g. `2026-11-29T13:00:00.123Z`.
    public var time: String
    public var source: String
    public var id: String
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// The `data` value's exact bytes (one line of JSON; `null` when absent).
    public var data: [UInt8]
    /// Whether the event carries `origin` (it came through a bridge).
    public var hasOrigin: Bool

    public init(type: EventType, seq: UInt64, time: String, source: String, id: String, pid: Int32, uid: UInt32, gid: UInt32, data: [UInt8], hasOrigin: Bool = false) {
        self.type = type
        self.seq = seq
        self.time = time
        self.source = source
        self.id = id
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.data = data
        self.hasOrigin = hasOrigin
    }
}

/// What a remote bridge asserted about an event: PROTOCOL.md's `origin`.
/// Fields the remote side did not send are nil and left out of the JSON.
/// Trust: an assertion by the remote bridge, authenticated only by NATS
/// credentials; never compare `uid` with local uids.
public struct Origin: Equatable, Sendable {
    public var node: String
    /// The remote broker's instance (its `seq` counts within it).
    public var instance: String?
    public var seq: UInt64?
    public var time: String?
    public var pid: Int64?
    public var uid: UInt64?
    public var gid: UInt64?

    public init(node: String, instance: String? = nil, seq: UInt64? = nil, time: String? = nil, pid: Int64? = nil, uid: UInt64? = nil, gid: UInt64? = nil) {
        self.node = node
        self.instance = instance
        self.seq = seq
        self.time = time
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// `{"node":"host-b","instance":"…","seq":9123,"time":"…","pid":811,"uid":1000,"gid":1000}`,
    /// in that order, absent fields left out.
    public var json: JSONText {
        var object = JSONText.ObjectWriter()
        object.add("node", node)
        if let instance { object.add("instance", instance) }
        if let seq { object.add("seq", seq) }
        if let time { object.add("time", time) }
        if let pid { object.add("pid", pid) }
        if let uid { object.add("uid", uid) }
        if let gid { object.add("gid", gid) }
        return object.text
    }
}

/// A publish for the local bus, made from a NATS message.
public struct LocalPublish: Equatable, Sendable {
    public var type: EventType
    /// One line of valid JSON, or nil for none (an empty NATS payload).
    public var data: JSONText?
    /// `ce-source` and `ce-id` as the remote side sent them (nil: absent; the broker fills in its defaults).
    public var source: String?
    public var id: String?
    public var origin: Origin

    public init(type: EventType, data: JSONText?, source: String?, id: String?, origin: Origin) {
        self.type = type
        self.data = data
        self.source = source
        self.id = id
        self.origin = origin
    }
}
