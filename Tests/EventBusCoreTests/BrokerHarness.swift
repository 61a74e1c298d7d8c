// Drives a `Broker` the way the server does, without sockets: opens
// connections with fake credentials, feeds bytes, writes queues (all or part),
// and parses what a client would have read. `checkInvariants` verifies after
// each scenario that both sides of the subscription index agree, the trie is
// pruned, and the statistics match the connections.
//
// Before editing: uses `@testable` internals (`connections`, `index`, `seq`)
// only to check invariants, never to drive the broker.
@testable import EventBusCore
import EventBusProtocol
import Foundation
import Testing

/// One frame a client read: its text and its parsed object.
struct Frame: CustomStringConvertible {
    let text: String
    let object: [String: Any]

    init(_ line: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        text = String(decoding: line, as: UTF8.self)
        let parsed = try? JSONSerialization.jsonObject(with: Data(line))
        if let object = parsed as? [String: Any] {
            self.object = object
        } else {
            Issue.record("broker wrote a frame that is not a JSON object: \(text)", sourceLocation: sourceLocation)
            self.object = [:]
        }
    }

    var op: String? { object["op"] as? String }
    var code: String? { object["code"] as? String }
    var type: String? { object["type"] as? String }
    func int(_ key: String) -> Int? { object[key] as? Int }
    func string(_ key: String) -> String? { object[key] as? String }
    var seq: Int? { int("seq") }
    var req: Any? { object["req"] }
    var hasReq: Bool { object["req"] != nil }
    var description: String { text }
}

final class BrokerHarness {
    let broker: Broker
    let startNanoseconds: Int64 = 1_700_000_000 * 1_000_000_000
    /// Advanced by tests to move time; wall and monotonic move together.
    var elapsedNanoseconds: Int64 = 0
    var nextPID: Int32 = 100
    /// Bytes each connection's client has read but not yet split into frames.
    var received: [ConnectionID: [UInt8]] = [:]

    static let instance = "00000000deadbeef"

    init(_ configure: (inout BrokerConfiguration) -> Void = { _ in }) {
        var configuration = BrokerConfiguration()
        configure(&configuration)
        broker = Broker(configuration: configuration, instance: Self.instance,
                        startTime: BrokerTime(wallNanoseconds: startNanoseconds, monotonicNanoseconds: 5_000))
    }

    var now: BrokerTime {
        BrokerTime(wallNanoseconds: startNanoseconds + elapsedNanoseconds, monotonicNanoseconds: 5_000 + elapsedNanoseconds)
    }

    /// Opens a connection with fake credentials (pid 100, 101, ... unless given).
    func connect(pid: Int32? = nil, uid: UInt32 = 1000, gid: UInt32 = 1000,
                 sourceLocation: SourceLocation = #_sourceLocation) -> Connection {
        let credentials = Credentials(pid: pid ?? nextPID, uid: uid, gid: gid)
        nextPID += 1
        switch broker.open(credentials: credentials) {
        case .success(let connection):
            return connection
        case .failure(let refused):
            Issue.record("connection refused: \(String(decoding: refused.frame, as: UTF8.self))", sourceLocation: sourceLocation)
            fatalError("cannot continue without a connection")
        }
    }

    /// Feeds `lines`, each followed by LF, as one chunk.
    func send(_ connection: Connection, _ lines: String...) {
        sendRaw(connection, utf8(lines.map { $0 + "\n" }.joined()))
    }

    /// Feeds raw bytes as one chunk.
    func sendRaw(_ connection: Connection, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { broker.receive(connection, $0, at: now) }
    }

    /// Everything queued for `connection`, without consuming it.
    func queued(_ connection: Connection) -> [UInt8] {
        var bytes: [UInt8] = []
        _ = connection.outbound.forEachChunk(maxChunks: .max) { pointer, length in
            bytes.append(contentsOf: UnsafeRawBufferPointer(start: pointer, count: length))
        }
        return bytes
    }

    /// The queued frames, without consuming them (the queue must hold whole frames).
    func peek(_ connection: Connection) -> [Frame] {
        splitLines(queued(connection))
    }

    /// Writes up to `maxBytes` of the queue as the server would, reports it with
    /// `didWrite`, and returns the frames the client now has complete.
    @discardableResult
    func read(_ connection: Connection, maxBytes: Int = .max) -> [Frame] {
        let all = queued(connection)
        let n = min(maxBytes, all.count)
        broker.didWrite(connection, bytes: n)
        var buffer = received[connection.id, default: []] + all[..<n]
        var frames: [Frame] = []
        while let lf = buffer.firstIndex(of: 0x0A) {
            frames.append(Frame(Array(buffer[..<lf])))
            buffer.removeSubrange(...lf)
        }
        received[connection.id] = buffer
        return frames
    }

    func splitLines(_ bytes: [UInt8]) -> [Frame] {
        #expect(bytes.isEmpty || bytes.last == 0x0A, "queue ends inside a frame")
        return bytes.split(separator: 0x0A).map { Frame(Array($0)) }
    }

    /// Closes every open connection and checks that nothing is left behind.
    func closeAll(sourceLocation: SourceLocation = #_sourceLocation) {
        for connection in Array(broker.connections.values) { broker.close(connection) }
        #expect(broker.indexIsEmpty, "subscription index not empty after every connection closed", sourceLocation: sourceLocation)
        #expect(broker.connectionCount == 0, sourceLocation: sourceLocation)
        #expect(broker.statistics.connections == 0, sourceLocation: sourceLocation)
        #expect(broker.statistics.subscriptions == 0, sourceLocation: sourceLocation)
        #expect(broker.statistics.queuedBytes == 0, sourceLocation: sourceLocation)
        checkInvariants(sourceLocation: sourceLocation)
    }

    /// Both sides of the subscription index agree, the trie holds no empty
    /// nodes, and the statistics match the connections and queues.
    func checkInvariants(sourceLocation: SourceLocation = #_sourceLocation) {
        let index = broker.index
        var fromIndex: [String] = []
        var wildcardPairs = 0
        for (type, list) in index.exact {
            #expect(!list.isEmpty, "empty exact list for \(type)", sourceLocation: sourceLocation)
            #expect(Pattern(type)?.hasWildcards == false, "wildcard \(type) in the exact map", sourceLocation: sourceLocation)
            for connection in list { fromIndex.append("\(type) @\(connection.id)") }
            for connection in list {
                #expect(broker.connections[connection.id] === connection, "closed connection \(connection.id) still in the index",
                        sourceLocation: sourceLocation)
            }
        }
        func walk(_ node: TrieNode, _ path: [String]) {
            if !path.isEmpty { #expect(!node.isEmpty, "unpruned trie node at \(path)", sourceLocation: sourceLocation) }
            if path.isEmpty { #expect(node.subscribers.isEmpty, sourceLocation: sourceLocation) }
            for connection in node.subscribers {
                fromIndex.append("\(path.joined(separator: ".")) @\(connection.id)")
                wildcardPairs += 1
                #expect(broker.connections[connection.id] === connection, sourceLocation: sourceLocation)
            }
            for connection in node.tailSubscribers {
                fromIndex.append("\((path + [">"]).joined(separator: ".")) @\(connection.id)")
                wildcardPairs += 1
                #expect(broker.connections[connection.id] === connection, sourceLocation: sourceLocation)
            }
            for (segment, child) in node.children { walk(child, path + [String(segment)]) }
            if let star = node.star { walk(star, path + ["*"]) }
        }
        walk(index.root, [])
        #expect(wildcardPairs == index.wildcardCount, "wildcardCount out of step", sourceLocation: sourceLocation)

        var fromConnections: [String] = []
        var subscriptions = 0
        var queuedBytes = 0
        for connection in broker.connections.values {
            #expect(!connection.isClosed, sourceLocation: sourceLocation)
            for pattern in connection.patterns { fromConnections.append("\(pattern.text) @\(connection.id)") }
            subscriptions += connection.patterns.count
            queuedBytes += connection.outbound.byteCount
            #expect(queued(connection).count == connection.outbound.byteCount, "queue byteCount differs from its chunks",
                    sourceLocation: sourceLocation)
        }
        #expect(fromIndex.sorted() == fromConnections.sorted(), "the two sides of the subscription index disagree",
                sourceLocation: sourceLocation)
        let stats = broker.statistics
        #expect(stats.connections == broker.connections.count, sourceLocation: sourceLocation)
        #expect(stats.subscriptions == subscriptions, sourceLocation: sourceLocation)
        #expect(stats.queuedBytes == queuedBytes, sourceLocation: sourceLocation)
        #expect(stats.published == broker.seq, sourceLocation: sourceLocation)
    }
}

/// The UTF-8 bytes of `text`.
func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// SplitMix64: seeded, so a failing random scenario reproduces.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
