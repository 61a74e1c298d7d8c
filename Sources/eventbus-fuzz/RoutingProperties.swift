// Properties of the broker core (`Broker`) driven by a fuzz input read as a
// script: each line is one frame sent by one of four connections (a leading
// digit 0-3 picks it; otherwise 0), `c`+digit closes and reopens that
// connection, `e`+digit ends its input (half-close). After every step the
// queues are drained as a perfect writer would, and:
// - every event goes exactly to the connections whose patterns match its
//   type (reference: `Pattern.matches` over `connection.patterns`, so the
//   subscription trie is checked against the plain definition), at most once,
//   never back to the publisher without `echo` (PROTOCOL.md "Semantics");
// - `delivered` in the publish reply counts those connections;
// - stats counters agree with the connections; the index is empty at the end;
// - every frame the broker writes is read by the clients' `BrokerFrame.read`.
//
// Before editing: a violated property must trap (`fuzzFailure`).
import EventBusCore
import EventBusProtocol

enum RoutingProperties {
    static let slots = 4

    static func check(_ input: [UInt8]) {
        var configuration = BrokerConfiguration()
        configuration.maxConnections = 16
        configuration.maxSubscriptionsPerConnection = 8
        let time = BrokerTime(wallNanoseconds: 1_764_421_200_000_000_000, monotonicNanoseconds: 1)
        let broker = Broker(configuration: configuration, instance: "fuzz", startTime: time)
        var connections: [Connection] = (0..<slots).map { _ in open(broker) }

        for line in input.split(separator: 0x0A, omittingEmptySubsequences: true).prefix(64) {
            var bytes = Array(line)
            var slot = 0
            if let first = bytes.first, first >= 0x30 && first <= 0x33 {
                slot = Int(first - 0x30)
                bytes.removeFirst()
            } else if bytes.count == 2, bytes[1] >= 0x30 && bytes[1] <= 0x33, bytes[0] == 0x63 || bytes[0] == 0x65 {
                slot = Int(bytes[1] - 0x30)
                if bytes[0] == 0x63 {  // c: close and reopen
                    broker.close(connections[slot])
                    connections[slot] = open(broker)
                } else {  // e: end of input
                    broker.endOfInput(connections[slot], at: time)
                }
                _ = drain(broker, connections)
                checkCounters(broker, connections)
                continue
            }
            step(broker, &connections, slot: slot, frame: bytes, time: time)
        }
        for connection in connections { broker.close(connection) }
        if !broker.indexIsEmpty { fuzzFailure("subscription index not empty after every connection closed") }
        let stats = broker.statistics
        if stats.connections != 0 || stats.subscriptions != 0 || stats.queuedBytes != 0 {
            fuzzFailure("stats not back to zero after every connection closed: \(stats)")
        }
    }

    static func open(_ broker: Broker) -> Connection {
        switch broker.open(credentials: Credentials(pid: 4242, uid: 1000, gid: 1000)) {
        case .success(let connection): return connection
        case .failure: fuzzFailure("connection refused below the connection limit")
        }
    }

    static func step(_ broker: Broker, _ connections: inout [Connection], slot: Int, frame: [UInt8], time: BrokerTime) {
        let publisher = connections[slot]
        // Who should get an event of each type, judged before the frame runs.
        let before = connections.map { (patterns: $0.patterns, open: !$0.isClosed && !$0.closeWhenFlushed && !$0.closeAfterNextWrite) }
        let publishedBefore = broker.statistics.published
        (frame + [0x0A]).withUnsafeBytes { broker.receive(publisher, $0, at: time) }
        let outputs = drain(broker, connections)
        let published = broker.statistics.published - publishedBefore
        if published > 1 { fuzzFailure("one frame published \(published) events") }

        var eventsSeen = 0
        for (index, frames) in outputs.enumerated() {
            for frame in frames {
                guard let read = frame.withUnsafeBytes({ try? BrokerFrame.read($0) }) else {
                    fuzzFailure("connection \(index) got a frame the client reader refuses: \(FuzzInput.preview(frame))")
                }
                switch read {
                case .event(let fields):
                    let type = frame.withUnsafeBytes { JSONString.decode($0, fields.type) }
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
        // Exactly the matching connections got the event, once each.
        if published == 1, let typeToken = publishedType(frame) {
            let recipients = (0..<slots).filter { j in
                before[j].open && (j != slot || publisher.echo) && before[j].patterns.contains { $0.matches(typeToken) }
            }
            if eventsSeen != recipients.count {
                fuzzFailure("event \(typeToken) reached \(eventsSeen) connections, expected \(recipients) (patterns \(before.map { $0.patterns.map(\.text) }))")
            }
            for frame in outputs[slot] {
                guard case .ok(let reply)? = frame.withUnsafeBytes({ try? BrokerFrame.read($0) }) else { continue }
                if let delivered = reply.unsigned("delivered"), delivered != recipients.count {
                    fuzzFailure("publish reply says delivered \(delivered), \(recipients.count) connections matched")
                }
            }
        }
        checkCounters(broker, connections)
    }

    /// The type of the publish in `frame`, when the decoder accepts it as one.
    static func publishedType(_ frame: [UInt8]) -> EventType? {
        frame.withUnsafeBytes { bytes in
            if case .success(.publish(let type, _, _, _)) = RequestDecoder.decode(bytes).request { return type }
            return nil
        }
    }

    /// Writes every queued byte (a perfect peer) and returns the frames per slot.
    static func drain(_ broker: Broker, _ connections: [Connection]) -> [[[UInt8]]] {
        _ = broker.takeConnectionsToFlush()
        return connections.map { connection in
            var bytes: [UInt8] = []
            while !connection.outbound.isEmpty && !connection.isClosed {
                var written = 0
                _ = connection.outbound.forEachChunk(maxChunks: 64) { pointer, length in
                    bytes.append(contentsOf: UnsafeRawBufferPointer(start: pointer, count: length))
                    written += length
                }
                broker.didWrite(connection, bytes: written)
            }
            if bytes.isEmpty { return [] }
            if bytes.last != 0x0A { fuzzFailure("output does not end with LF") }
            return bytes.split(separator: 0x0A).map(Array.init)
        }
    }

    static func checkCounters(_ broker: Broker, _ connections: [Connection]) {
        let stats = broker.statistics
        let open = connections.filter { !$0.isClosed }
        if stats.connections != open.count { fuzzFailure("stats.connections \(stats.connections), open \(open.count)") }
        let patterns = open.reduce(0) { $0 + $1.patterns.count }
        if stats.subscriptions != patterns { fuzzFailure("stats.subscriptions \(stats.subscriptions), patterns held \(patterns)") }
        if stats.queuedBytes != 0 { fuzzFailure("queued_bytes \(stats.queuedBytes) after every queue was written") }
        if open.contains(where: { $0.patterns.count > broker.configuration.maxSubscriptionsPerConnection }) {
            fuzzFailure("a connection holds more patterns than --max-subscriptions")
        }
    }

}
