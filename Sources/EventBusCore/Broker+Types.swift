// The `types` op and the counting behind it (PROTOCOL.md "Per-type counters
// (1.2)"): `fanOut` counts each event's publish and deliveries for its type,
// `recordDrops` and `makeRoom` its drops (the counters are TypeCounters.swift);
// `types` lists the types the caller may receive, most recently published
// first, then the retained types not published in this run.
//
// Before editing: the counting runs once per event and once per drop, never
// per delivery (`fanOut` adds its own `delivered` total); the reply is built
// only from the counters, the retained store and the index's route lists, and
// leaves out every type the caller's policy view does not let it receive.
@_spi(Package) import EventBusProtocol

extension Broker {
    /// Counts a publish of `type` (seq `seq`, now) and makes it the type
    /// being routed (`typeCounters.routed`) until `countDelivered`.
    /// - Parameters:
    ///   - entry: the type's entry in `types`, which keeps its slot; nil
    ///     for a type that has none (the broker's own, escaped names): found by name.
    ///   - owner: the publisher's uid (issue 37: the type counts against its share).
    @inline(__always)
    func countPublished(_ type: EventType, entry: Int?, seq: UInt64, owner: UInt32) {
        let ref = entry.map { types.counter($0) } ?? TypeCounters.none
        if typeCounters.notePublished(ref, owner: owner, seq: seq, wallNanoseconds: now.wallNanoseconds) { return }
        countNewlyPublished(type, entry: entry, seq: seq, owner: owner)
    }

    /// `countPublished` for a type whose entry in `types` has no valid slot yet.
    func countNewlyPublished(_ type: EventType, entry: Int?, seq: UInt64, owner: UInt32) {
        let retained = retention.retained.events
        let ref = typeCounters.ref(for: type, owner: owner) { retained[$0] != nil }
        if let entry { types.setCounter(ref, entry) }
        _ = typeCounters.notePublished(ref, owner: owner, seq: seq, wallNanoseconds: now.wallNanoseconds)
    }

    /// (1.3) Counts a request of `type` that took the seq `seq` (`types`: `requests`).
    func countRequest(_ type: EventType, owner: UInt32) {
        let retained = retention.retained.events
        typeCounters.noteRequest(type, owner: owner, seq: seq, wallNanoseconds: now.wallNanoseconds) { retained[$0] != nil }
    }

    /// Counts the deliveries of the event being routed and ends its routing.
    @inline(__always)
    func countDelivered(_ delivered: UInt64) { typeCounters.finishRouting(delivered: delivered) }

    /// Counts the events a drop-old just dropped (`droppedTypesScratch`) for their types.
    /// (issue 37) Counted types one `types` answer looks at and leaves out
    /// (the caller may not receive them) at most, beyond its `limit`.
    static let maxTypesSkipped = 16_384

    func countDroppedTypes() {
        guard !droppedTypesScratch.isEmpty else { return }
        for ref in droppedTypesScratch { typeCounters.addDropped(1, ref) }
        droppedTypesScratch.removeAll(keepingCapacity: true)
    }

    /// `types`: `{"op":"ok","req":1,"types":[{"type":"order.created","published":12,
    /// "delivered":40,"dropped":0,"subscribers":2,"retained":false,"last_seq":42,
    /// "last_time":"2026-11-29T13:00:00.123Z"}]}`: at most `limit` types the
    /// caller may receive, most recently published first, then the retained
    /// types not published in this run (newest retained first; `last_seq` and
    /// `last_time` null). Costs O(types looked at) policy checks and route
    /// lists: (issue 37) at most `limit` listed and `limit` +
    /// `maxTypesSkipped` counted types looked at per call (those the caller
    /// may not receive are looked at and left out), whatever the table's size.
    func types(limit: Int, req: RawSpan?, to caller: Connection) {
        var listed: [(type: EventType, slot: Int?)] = []
        var lookedAt = 0
        let lookAtMost = limit > Int.max - Self.maxTypesSkipped ? Int.max : limit + Self.maxTypesSkipped
        typeCounters.forEachByRecency { i in
            guard listed.count < limit, lookedAt < lookAtMost else { return false }
            lookedAt += 1
            let type = typeCounters.slot(i).type
            if mayReceive(caller, type) { listed.append((type, i)) }
            return true
        }
        let retained = retention.retained.events
        if listed.count < limit {
            let unpublished = retained.values.filter { typeCounters.existing(named: $0.type) == nil }.sorted { $0.seq > $1.seq }
            for event in unpublished where listed.count < limit {
                if let type = EventType(event.type), mayReceive(caller, type) { listed.append((type, nil)) }
            }
        }
        var formatter = TimestampFormatter()
        var time: [UInt8] = []
        replyOKIfAsked(to: caller, req: req) { out in
            FrameEncoder.appendASCII(",\"types\":[", to: &out)
            for (n, item) in listed.enumerated() {
                if n > 0 { out.append(0x2C) }
                FrameEncoder.appendASCII("{\"type\":", to: &out)
                JSONString.appendQuoted(item.type.name, to: &out)
                let slot = item.slot.map { typeCounters.slot($0) }
                FrameEncoder.appendField("published", int: slot?.published ?? 0, to: &out)
                FrameEncoder.appendField("delivered", int: slot?.delivered ?? 0, to: &out)
                FrameEncoder.appendField("dropped", int: slot?.dropped ?? 0, to: &out)
                FrameEncoder.appendField("requests", int: slot?.requests ?? 0, to: &out)  // (1.3)
                FrameEncoder.appendField("subscribers", int: UInt64(index.matchCount(item.type)), to: &out)
                FrameEncoder.appendField("servers", int: UInt64(serveIndex.matchCount(item.type)), to: &out)  // (1.3)
                FrameEncoder.appendField("retained", bool: retained[item.type.name] != nil, to: &out)
                if let slot {
                    FrameEncoder.appendField("last_seq", int: slot.lastSeq, to: &out)
                    formatter.format(nanosecondsSinceEpoch: slot.lastWallNanoseconds, into: &time)
                    FrameEncoder.appendASCII(",\"last_time\":\"", to: &out)
                    out.append(contentsOf: time)
                    out.append(0x22)
                } else {
                    FrameEncoder.appendASCII(",\"last_seq\":null,\"last_time\":null", to: &out)
                }
                out.append(0x7D)
            }
            out.append(0x5D)
        }
    }
}
