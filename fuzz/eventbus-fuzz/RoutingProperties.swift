// Properties of the broker core (`Broker`) driven by a fuzz input read as a
// script: each line is one frame sent by one of four connections (a leading
// digit 0-3 picks it; otherwise 0), `c`+digit closes and reopens that
// connection, `e`+digit ends its input (half-close). The driver plays the
// server from the `BrokerStep`s the broker returns (closing, then closed;
// writes after `.afterWrite` end with `close`). After every step the queues
// are drained as a perfect writer would, and:
// - every event goes exactly to the connections whose patterns match its
//   type (1.1: except the retained and replayed copies a `subscribe` with
//   `last` or `since` asks for, which go only to the subscriber, flagged) (reference: `Pattern.matches` over `connection.patterns`, so the
//   subscription trie is checked against the plain definition), at most once,
//   never back to the publisher without `echo` (PROTOCOL.md "Semantics");
// - `delivered` in the publish reply counts those connections;
// - a step's `output` lists each connection that got bytes, once, and no
//   other; `.afterFlush` comes only with bytes queued, and the write that
//   empties the queue answers `.close(id, .now)`; after a perfect drain no
//   connection is left paused;
// - stats counters agree with the connections; the index is empty at the end;
// - every frame the broker writes is read by the clients' `BrokerFrame.read`.
//
// Before editing: a violated property must trap (`fuzzFailure`).
import EventBusCore
@_spi(Package) import EventBusProtocol

enum RoutingProperties {
    static let slotCount = 4

    /// What the driver, as the server, knows of one slot's connection.
    struct Slot {
        var connection: Connection
        /// The broker is closing it (`.afterFlush` / `.afterWrite`).
        var closing: CloseTiming?
        var paused = false
        /// `.close(id, .now)` received.
        var closed = false

        /// Whether events may be routed to it, by what the server was told.
        var routable: Bool { closing == nil && !closed }
    }

    static func check(_ input: [UInt8]) {
        var configuration = BrokerConfiguration()
        configuration.maxConnections = 16
        configuration.maxSubscriptionsPerConnection = 8
        let time = BrokerTime(wallNanoseconds: 1_764_421_200_000_000_000, monotonicNanoseconds: 1)
        let broker = Broker(configuration: configuration, instance: "fuzz", startTime: time)
        var slots: [Slot] = (0..<slotCount).map { _ in Slot(connection: open(broker)) }

        for line in input.split(separator: 0x0A, omittingEmptySubsequences: true).prefix(64) {
            var bytes = Array(line)
            var slot = 0
            if let first = bytes.first, first >= 0x30 && first <= 0x33 {
                slot = Int(first - 0x30)
                bytes.removeFirst()
            } else if bytes.count == 2, bytes[1] >= 0x30 && bytes[1] <= 0x33, bytes[0] == 0x63 || bytes[0] == 0x65 {
                control(bytes[0], slot: Int(bytes[1] - 0x30), broker, &slots, time: time)
                _ = drain(broker, &slots)
                checkCounters(broker, slots)
                continue
            }
            step(broker, &slots, slot: slot, frame: bytes, time: time)
        }
        for slot in slots.indices where !slots[slot].closed {
            apply(broker.close(slots[slot].connection), &slots, queuedBefore: [])
        }
        if !broker.indexIsEmpty { fuzzFailure("subscription index not empty after every connection closed") }
        let stats = broker.statistics
        if stats.connections != 0 || stats.subscriptions != 0 || stats.queuedBytes != 0 {
            fuzzFailure("stats not back to zero after every connection closed: \(stats)")
        }
    }

    /// A control line: `cN` closes slot N's connection and opens a new one,
    /// `eN` ends its input (half-close).
    static func control(_ command: UInt8, slot: Int, _ broker: Broker, _ slots: inout [Slot], time: BrokerTime) {
        if command == 0x63 {  // c: close and reopen
            let step = broker.close(slots[slot].connection)
            apply(step, &slots, queuedBefore: [])
            if !slots[slot].closed { fuzzFailure("close did not answer .close(id, .now)") }
            slots[slot] = Slot(connection: open(broker))
        } else {  // e: end of input
            let connection = slots[slot].connection
            let step = broker.endOfInput(connection, at: time)
            apply(step, &slots, queuedBefore: [])
            if !slots[slot].closed && slots[slot].closing == nil && connection.subscriptionCount == 0 {
                fuzzFailure("end of input without subscriptions left the connection open")
            }
        }
    }

    static func open(_ broker: Broker) -> Connection {
        switch broker.open(credentials: Credentials(pid: 4242, uid: 1000, gid: 1000)) {
        case .success(let connection): return connection
        case .failure: fuzzFailure("connection refused below the connection limit")
        }
    }

    /// Applies a step as the server would, checking it against the queues.
    /// - Parameter queuedBefore: each slot's queued bytes before the step
    ///   (empty: do not check `output`).
    static func apply(_ step: BrokerStep, _ slots: inout [Slot], queuedBefore: [Int]) {
        if Set(step.output).count != step.output.count { fuzzFailure("a connection listed twice in one step's output: \(step.output)") }
        if !queuedBefore.isEmpty {
            for (i, slot) in slots.enumerated() where !slot.connection.isClosed {
                let grew = slot.connection.outbound.byteCount > queuedBefore[i]
                if grew != step.output.contains(slot.connection.id) {
                    fuzzFailure("slot \(i): queue grew \(grew), listed in output \(step.output.contains(slot.connection.id))")
                }
            }
        }
        for effect in step.effects {
            func slotIndex(_ id: ConnectionID) -> Int {
                guard let i = slots.firstIndex(where: { $0.connection.id == id && !$0.closed }) else {
                    fuzzFailure("effect \(effect) for a connection that is not open")
                }
                return i
            }
            switch effect {
            case .notice:
                break
            case .pauseReading(let id):
                slots[slotIndex(id)].paused = true
            case .resumeReading(let id):
                let i = slotIndex(id)
                if !slots[i].paused { fuzzFailure("resumeReading without pauseReading") }
                slots[i].paused = false
            case .close(let id, .now):
                let i = slotIndex(id)
                if !slots[i].connection.isClosed { fuzzFailure(".close(id, .now) for a connection the broker still holds") }
                slots[i].closed = true
            case .close(let id, let timing):
                let i = slotIndex(id)
                if slots[i].closing != nil { fuzzFailure("closing twice: \(effect)") }
                if timing == .afterFlush && slots[i].connection.outbound.isEmpty { fuzzFailure(".afterFlush with nothing queued") }
                slots[i].closing = timing
            }
        }
    }

    static func step(_ broker: Broker, _ slots: inout [Slot], slot: Int, frame: [UInt8], time: BrokerTime) {
        let publisher = slots[slot].connection
        // Who should get an event of each type, judged before the frame runs.
        let before = slots.map { (patterns: $0.connection.patterns, open: $0.routable) }
        let publishedBefore = broker.statistics.published
        let queuedBefore = slots.map { $0.connection.outbound.byteCount }
        let result = broker.receive(publisher, (frame + [0x0A]).span.bytes, at: time)
        apply(result, &slots, queuedBefore: queuedBefore)
        let outputs = drain(broker, &slots)
        let published = broker.statistics.published - publishedBefore
        if published > 1 { fuzzFailure("one frame published \(published) events") }

        let eventsSeen = checkOutputs(outputs, broker, before: before, slot: slot, publisher: publisher,
                                      published: published, asksForCopies: subscribeAsks(step: frame))
        // Exactly the matching connections got the event, once each.
        if published == 1, let typeToken = publishedType(frame) {
            checkRecipients(of: typeToken, seen: eventsSeen, outputs: outputs, before: before, slot: slot, echo: publisher.echo)
        }
        checkCounters(broker, slots)
    }

    /// Each frame a step gave is one the clients' reader reads; a live event
    /// went only where the patterns before the step matched (`before`).
    /// - Returns: how many live events went out.
    static func checkOutputs(_ outputs: [[[UInt8]]], _ broker: Broker, before: [(patterns: Set<Pattern>, open: Bool)], slot: Int,
                             publisher: Connection, published: UInt64, asksForCopies: Bool) -> Int {
        var eventsSeen = 0
        for (index, frames) in outputs.enumerated() {
            for frame in frames {
                guard let read = try? BrokerFrame.read(frame.span.bytes) else {
                    fuzzFailure("connection \(index) got a frame the client reader refuses: \(FuzzInput.preview(frame))")
                }
                switch read {
                case .event(let fields) where fields.retained || fields.replayed:
                    // (1.1) An answer to this step's subscribe with `last`/`since`, to its sender only.
                    if index != slot || !asksForCopies { fuzzFailure("a retained or replayed event not asked for: \(FuzzInput.preview(frame))") }
                case .event(let fields):
                    let type = JSONString.decode(frame.span.bytes, fields.type)
                    guard published == 1, let eventType = EventType(type) else {
                        fuzzFailure("connection \(index) got an event without a publish: \(FuzzInput.preview(frame))")
                    }
                    if fields.seq != broker.statistics.published { fuzzFailure("event seq \(fields.seq), expected \(broker.statistics.published)") }
                    let matching = before[index].open && (index != slot || publisher.echo) && before[index].patterns.contains { $0.matches(eventType) }
                    if !matching {
                        fuzzFailure("event \(type) went to connection \(index) (patterns \(before[index].patterns.map(\.text)), publisher \(slot), echo \(publisher.echo))")
                    }
                    eventsSeen += 1
                case .dropped:
                    fuzzFailure("drop notice although every queue is written at once: \(FuzzInput.preview(frame))")
                default:
                    break
                }
            }
        }
        return eventsSeen
    }

    /// The event of type `typeToken` reached exactly the connections that
    /// matched it before the step, and the publish reply's `delivered` says so.
    static func checkRecipients(of typeToken: EventType, seen eventsSeen: Int, outputs: [[[UInt8]]],
                                before: [(patterns: Set<Pattern>, open: Bool)], slot: Int, echo: Bool) {
        let recipients = (0..<slotCount).filter { j in
            before[j].open && (j != slot || echo) && before[j].patterns.contains { $0.matches(typeToken) }
        }
        if eventsSeen != recipients.count {
            fuzzFailure("event \(typeToken) reached \(eventsSeen) connections, expected \(recipients) (patterns \(before.map { $0.patterns.map(\.text) }))")
        }
        for frame in outputs[slot] {
            guard case .ok(let reply)? = try? BrokerFrame.read(frame.span.bytes) else { continue }
            if let delivered = reply.unsigned("delivered"), delivered != recipients.count {
                fuzzFailure("publish reply says delivered \(delivered), \(recipients.count) connections matched")
            }
        }
    }

    /// Whether the step's frame is a subscribe with `last` or `since`.
    static func subscribeAsks(step frame: [UInt8]) -> Bool {
        frame.withUnsafeBytes { bytes in
            if case .success(.subscribe(let subscribe)) = RequestDecoder.decode(bytes.bytes).request { return subscribe.last || subscribe.since != nil }
            return false
        }
    }

    /// The type of the publish in `frame`, when the decoder accepts it as one.
    static func publishedType(_ frame: [UInt8]) -> EventType? {
        frame.withUnsafeBytes { bytes in
            if case .success(.publish(let publish)) = RequestDecoder.decode(bytes.bytes).request { return publish.type }
            return nil
        }
    }

    /// Writes every queued byte (a perfect peer) and returns the frames per
    /// slot; closes what `.afterWrite` asked to close.
    static func drain(_ broker: Broker, _ slots: inout [Slot]) -> [[[UInt8]]] {
        var outputs: [[[UInt8]]] = []
        for i in slots.indices {
            let connection = slots[i].connection
            var bytes: [UInt8] = []
            while !connection.outbound.isEmpty && !connection.isClosed {
                var written = 0
                _ = connection.outbound.forEachChunk(maxChunks: 64) { chunk in
                    bytes.append(copying: chunk)
                    written += chunk.byteCount
                }
                apply(broker.didWrite(connection, bytes: written), &slots, queuedBefore: [])
            }
            if slots[i].closing == .afterFlush && !slots[i].closed { fuzzFailure("the write that emptied a closing queue did not close it") }
            if slots[i].closing == .afterWrite && !slots[i].closed {
                apply(broker.close(connection), &slots, queuedBefore: [])
                if !slots[i].closed { fuzzFailure("close after .afterWrite did not answer .close(id, .now)") }
            }
            if slots[i].paused && !slots[i].closed { fuzzFailure("still paused after its queue was written") }
            if bytes.last.map({ $0 != 0x0A }) ?? false { fuzzFailure("output does not end with LF") }
            outputs.append(bytes.isEmpty ? [] : bytes.split(separator: 0x0A).map(Array.init))
        }
        return outputs
    }

    static func checkCounters(_ broker: Broker, _ slots: [Slot]) {
        let stats = broker.statistics
        let open = slots.filter { !$0.closed }
        if open.contains(where: { $0.connection.isClosed }) { fuzzFailure("the broker closed a connection without saying so") }
        if stats.connections != open.count { fuzzFailure("stats.connections \(stats.connections), open \(open.count)") }
        let patterns = open.reduce(0) { $0 + $1.connection.subscriptionCount }
        if stats.subscriptions != patterns { fuzzFailure("stats.subscriptions \(stats.subscriptions), patterns held \(patterns)") }
        if stats.queuedBytes != 0 { fuzzFailure("queued_bytes \(stats.queuedBytes) after every queue was written") }
        if open.contains(where: { $0.connection.subscriptionCount > broker.configuration.maxSubscriptionsPerConnection }) {
            fuzzFailure("a connection holds more patterns than --max-subscriptions")
        }
    }

}
