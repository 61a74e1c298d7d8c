// The bridge's counters (issue 13: link state, buffered, exported, imported,
// dropped by reason, reconnects) and their JSON form for `--status` or a
// status event.
//
// Before editing: `buffer` and `too_large` drops, the buffered amounts, the
// link state and reconnects are counted by the NATS client (EventBusNATS
// `ClientStatistics`) and merged in by `BridgeStatus.init`, never counted
// twice here.
import EventBusNATS
@_spi(Package) import EventBusProtocol

/// Why the bridge dropped something. Raw values are the names used in status output.
package enum DropReason: String, CaseIterable, Sendable {
    /// An export found the outbox full while NATS was unreachable or slow.
    case buffer
    /// An export whose header block plus data exceeds the server's `max_payload`.
    case tooLarge = "too_large"
    /// An import whose subject is not `PREFIX.evt.NODE.TYPE` with a valid node and eventbus type.
    case badType = "bad_type"
    /// An import from our own node id (it would be an echo of our own export).
    case loop
    /// An import the local broker refused (`forbidden`: the policy denies the bridge that type).
    case denied
    /// An import whose header block or `ce-*` headers are malformed.
    case badHeader = "bad_header"
    /// An import whose payload is not one JSON value.
    case badData = "bad_data"
    /// An import lost because the local bus was unreachable, refused it for
    /// another reason, or did not take it fast enough (the bridge's own bound
    /// on what waits for the bus socket: it never stops reading NATS).
    case localBus = "local_bus"
    /// Exports the local broker dropped before the bridge read them (its
    /// `dropped` notice: the bridge fell behind the bus).
    case localOverflow = "local_overflow"
}

/// What the bridge itself counts.
package struct BridgeCounters: Equatable, Sendable {
    /// Events handed to the NATS client (queued or held).
    package var exported = 0
    /// Imports handed to the local bus.
    package var imported = 0
    /// Drops counted by the bridge (all reasons but `buffer` and `too_large`).
    package var dropped: [DropReason: Int] = [:]
    /// Local events not exported because they carry `origin` (bridged already).
    package var skippedBridged = 0
    /// Local events not exported while another bridge claims our node id.
    package var suspended = 0
    /// Drop reports received from other nodes (`PREFIX.ctl.NODE.dropped`), and the events they say were lost.
    package var remoteReports = 0
    package var remoteLost = 0

    package init() {}

    package mutating func count(_ reason: DropReason) { dropped[reason, default: 0] += 1 }
}

/// The local bus connection's state, as the executable's connection keeps it.
package struct BusStatus: Equatable, Sendable {
    /// Whether the connection is up and greeted (`hello` answered).
    package var up = false
    /// The socket path.
    package var path = ""
    /// Connections after the first.
    package var reconnects = 0
    /// Events the broker replayed from its history after a reconnect (`since`).
    package var replayed = 0
    /// Reconnects after which the broker said, with a `gap` frame, that
    /// exports may have been missed (its history did not reach back, or it restarted).
    package var gaps = 0

    package init(up: Bool = false, path: String = "", reconnects: Int = 0, replayed: Int = 0, gaps: Int = 0) {
        self.up = up
        self.path = path
        self.reconnects = reconnects
        self.replayed = replayed
        self.gaps = gaps
    }
}

/// Everything `--status` shows, merged from the bridge's, the NATS client's
/// and the bus connection's counters.
package struct BridgeStatus: Equatable, Sendable {
    package var node: String
    /// The bridge's pid and the time of this snapshot (RFC 3339 UTC), set by
    /// the executable; left out of the JSON while `updated` is empty.
    package var pid: Int32 = 0
    package var updated = ""
    package var bus: BusStatus
    package var linkUp: Bool
    package var server: String?
    package var bufferedEvents: Int
    package var bufferedBytes: Int
    package var exported: Int
    package var imported: Int
    package var dropped: [DropReason: Int]
    package var reconnects: Int
    package var exporting: Bool
    package var remoteReports: Int
    package var remoteLost: Int
    /// (issue 36) Requests across machines; nil (left out of the JSON) when
    /// the bridge carries none.
    package var requests: RemoteRequests.Counters?
    /// (issue 36) Queue groups across machines; nil (left out) when the bridge carries none.
    package var groups: RemoteGroups.Counters?

    package init(node: NodeName, counters: BridgeCounters, nats: ClientStatistics, bus: BusStatus = BusStatus(), exporting: Bool) {
        self.node = node.text
        self.bus = bus
        linkUp = nats.linkUp
        server = nats.server?.description
        bufferedEvents = nats.bufferedMessages
        bufferedBytes = nats.bufferedBytes
        exported = counters.exported
        imported = counters.imported
        var dropped = counters.dropped
        dropped[.buffer] = nats.droppedBufferFull
        dropped[.tooLarge] = nats.refusedTooLarge
        self.dropped = dropped
        reconnects = nats.reconnects
        self.exporting = exporting
        remoteReports = counters.remoteReports
        remoteLost = counters.remoteLost
    }

    /// One line of JSON, every reason present (`pid` and `updated` only once set):
    /// `{"node":"host-a","pid":812,"updated":"2026-11-29T13:00:00.123Z","bus":"up","bus_path":"/run/eventbus/bus.sock","bus_reconnects":0,"bus_replayed":0,"bus_gaps":0,"link":"up","server":"nats://127.0.0.1:4222","buffered":0,"buffered_bytes":0,"exported":12,"imported":3,"dropped":{"buffer":0,"too_large":0,"bad_type":0,"loop":0,"denied":0,"bad_header":0,"bad_data":0,"local_bus":0,"local_overflow":0},"reconnects":1,"exporting":true,"remote_reports":0,"remote_lost":0}`
    package var json: String {
        var out: [UInt8] = Array("{\"node\":".utf8)
        JSONString.appendQuoted(node, to: &out)
        if !updated.isEmpty {
            out.append(contentsOf: ",\"pid\":\(pid),\"updated\":".utf8)
            JSONString.appendQuoted(updated, to: &out)
        }
        out.append(contentsOf: ",\"bus\":\"\(bus.up ? "up" : "down")\",\"bus_path\":".utf8)
        JSONString.appendQuoted(bus.path, to: &out)
        out.append(contentsOf: ",\"bus_reconnects\":\(bus.reconnects),\"bus_replayed\":\(bus.replayed),\"bus_gaps\":\(bus.gaps)".utf8)
        out.append(contentsOf: ",\"link\":\"\(linkUp ? "up" : "down")\",\"server\":".utf8)
        if let server { JSONString.appendQuoted(server, to: &out) } else { out.append(contentsOf: "null".utf8) }
        out.append(contentsOf: ",\"buffered\":\(bufferedEvents),\"buffered_bytes\":\(bufferedBytes),\"exported\":\(exported),\"imported\":\(imported),\"dropped\":{".utf8)
        out.append(contentsOf: DropReason.allCases.map { "\"\($0.rawValue)\":\(dropped[$0] ?? 0)" }.joined(separator: ",").utf8)
        out.append(contentsOf: "},\"reconnects\":\(reconnects),\"exporting\":\(exporting)".utf8)
        out.append(contentsOf: ",\"remote_reports\":\(remoteReports),\"remote_lost\":\(remoteLost)".utf8)
        if let r = requests {
            out.append(contentsOf: (",\"requests\":{\"sent\":\(r.sent),\"answered\":\(r.answered),\"no_responders\":\(r.noResponders)"
                + ",\"received\":\(r.received),\"replied\":\(r.replied),\"dropped\":\(r.dropped),\"limited\":\(r.limited)}").utf8)
        }
        if let g = groups {
            out.append(contentsOf: ",\"groups\":{\"sent\":\(g.sent),\"received\":\(g.received),\"dropped\":\(g.dropped)}".utf8)
        }
        out.append(0x7D)
        return String(decoding: out, as: UTF8.self)
    }
}
