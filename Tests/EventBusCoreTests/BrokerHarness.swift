// Drives a `Broker` the way the server does, without sockets: opens
// connections with fake credentials, feeds bytes, writes queues (all or part),
// and parses what a client would have read. Every step's `BrokerStep` is kept
// (`lastStep`, and the effects in `effectLog`) for tests to assert on.
// `checkInvariants` verifies after each scenario that both sides of the
// subscription index agree record for record (positions included), the trie
// is pruned and each node linked to its parent under its edge's first
// segment, and the statistics match the connections.
//
// Before editing: uses `@testable` internals (`connections`, `index`, `seq`)
// only to check invariants, never to drive the broker.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import EventBusTestSupport
import Foundation
import Testing

/// One frame a client read: EventBusTestSupport's `Frame` (`raw`, `fields`, typed accessors).
typealias Frame = EventBusTestSupport.Frame

/// Parses one frame a client read (without its LF); records an issue and
/// returns an empty object when it is not a JSON object.
func parseFrame(_ line: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> Frame {
    do {
        return try Frame(line: line)
    } catch {
        Issue.record("broker wrote a frame that is not a JSON object: \(error)", sourceLocation: sourceLocation)
        return try! Frame(line: Array("{}".utf8))
    }
}

final class BrokerHarness {
    let broker: Broker
    let startNanoseconds: Int64 = 1_700_000_000 * 1_000_000_000
    /// Advanced by tests to move time; wall and monotonic move together.
    var elapsedNanoseconds: Int64 = 0
    var nextPID: Int32 = 100
    /// Bytes each connection's client has read but not yet split into frames.
    var received: [ConnectionID: [UInt8]] = [:]
    /// What the broker returned from the last step driven through the harness.
    var lastStep = BrokerStep()
    /// The effects of every step so far, in order (`takeEffects` empties it).
    var effectLog: [BrokerEffect] = []

    static let instance = "00000000deadbeef"

    init(instance: String = BrokerHarness.instance, _ configure: (inout BrokerConfiguration) -> Void = { _ in }) {
        var configuration = BrokerConfiguration()
        configure(&configuration)
        broker = Broker(configuration: configuration, instance: instance,
                        startTime: BrokerTime(wallNanoseconds: startNanoseconds, monotonicNanoseconds: 5_000))
    }

    var now: BrokerTime {
        BrokerTime(wallNanoseconds: startNanoseconds + elapsedNanoseconds, monotonicNanoseconds: 5_000 + elapsedNanoseconds)
    }

    /// Opens a connection, or returns the refusal's error frame.
    func tryConnect(uid: UInt32 = 1000, gid: UInt32 = 1000, limits: UserLimitOverrides? = nil) -> Result<Connection, RefusedConnection> {
        let credentials = Credentials(pid: nextPID, uid: uid, gid: gid)
        nextPID += 1
        return broker.open(credentials: credentials, limitOverrides: limits, at: now)
    }

    /// The broker's timer step at the harness's current time.
    @discardableResult
    func tick() -> BrokerStep { record(broker.tick(at: now)) }

    /// Opens a connection with fake credentials (pid 100, 101, ... unless given).
    func connect(pid: Int32? = nil, uid: UInt32 = 1000, gid: UInt32 = 1000,
                 sourceLocation: SourceLocation = #_sourceLocation) -> Connection {
        let credentials = Credentials(pid: pid ?? nextPID, uid: uid, gid: gid)
        nextPID += 1
        switch broker.open(credentials: credentials, at: now) {
        case .success(let connection):
            return connection
        case .failure(let refused):
            Issue.record("connection refused: \(String(decoding: refused.frame, as: UTF8.self))", sourceLocation: sourceLocation)
            fatalError("cannot continue without a connection")
        }
    }

    /// Keeps a step's result for the test.
    @discardableResult
    func record(_ step: BrokerStep) -> BrokerStep {
        lastStep = step
        effectLog += step.effects
        return step
    }

    /// Feeds `lines`, each followed by LF, as one chunk.
    @discardableResult
    func send(_ connection: Connection, _ lines: String...) -> BrokerStep {
        sendRaw(connection, utf8(lines.map { $0 + "\n" }.joined()))
    }

    /// Feeds raw bytes as one chunk.
    @discardableResult
    func sendRaw(_ connection: Connection, _ bytes: [UInt8]) -> BrokerStep {
        record(broker.receive(connection, bytes.span.bytes, at: now))
    }

    /// The client shuts down its writing side.
    @discardableResult
    func endOfInput(_ connection: Connection) -> BrokerStep {
        record(broker.endOfInput(connection, at: now))
    }

    /// The server closes the connection.
    @discardableResult
    func close(_ connection: Connection) -> BrokerStep {
        record(broker.close(connection))
    }

    /// The effects logged since the last call.
    func takeEffects() -> [BrokerEffect] {
        defer { effectLog = [] }
        return effectLog
    }

    /// The notices logged since the last call to `takeEffects` or this.
    func takeNotices() -> [BrokerNotice] {
        takeEffects().compactMap { if case .notice(let notice) = $0 { return notice } else { return nil } }
    }

    /// Everything queued for `connection`, without consuming it.
    func queued(_ connection: Connection) -> [UInt8] {
        var bytes: [UInt8] = []
        _ = connection.outbound.forEachChunk(maxChunks: .max) { chunk in
            bytes.append(copying: chunk)
        }
        return bytes
    }

    /// The queued frames, without consuming them (the queue must hold whole frames).
    func peek(_ connection: Connection) -> [Frame] {
        splitLines(queued(connection))
    }

    /// Writes up to `maxBytes` of the queue as the server would, reports it with
    /// `didWrite` (its step in `lastStep`), and returns the frames the client
    /// now has complete.
    @discardableResult
    func read(_ connection: Connection, maxBytes: Int = .max) -> [Frame] {
        let all = queued(connection)
        let n = min(maxBytes, all.count)
        record(broker.didWrite(connection, bytes: n))
        var buffer = received[connection.id, default: []] + all[..<n]
        var frames: [Frame] = []
        while let lf = buffer.firstIndex(of: 0x0A) {
            frames.append(parseFrame(Array(buffer[..<lf])))
            buffer.removeSubrange(...lf)
        }
        received[connection.id] = buffer
        return frames
    }

    func splitLines(_ bytes: [UInt8]) -> [Frame] {
        #expect(bytes.isEmpty || bytes.last == 0x0A, "queue ends inside a frame")
        return bytes.split(separator: 0x0A).map { parseFrame(Array($0)) }
    }

    /// Closes every open connection and checks that nothing is left behind.
    func closeAll(sourceLocation: SourceLocation = #_sourceLocation) {
        for connection in Array(broker.connections.values) {
            #expect(broker.close(connection).effects == [.close(connection.id, .now)], sourceLocation: sourceLocation)
        }
        #expect(broker.indexIsEmpty, "subscription index not empty after every connection closed", sourceLocation: sourceLocation)
        #expect(broker.connectionCount == 0, sourceLocation: sourceLocation)
        #expect(broker.statistics.connections == 0, sourceLocation: sourceLocation)
        #expect(broker.statistics.subscriptions == 0, sourceLocation: sourceLocation)
        #expect(broker.statistics.queuedBytes == 0, sourceLocation: sourceLocation)
        checkInvariants(sourceLocation: sourceLocation)
    }

    /// Both sides of the subscription index agree record for record, every
    /// record is at its recorded position, the trie holds no empty nodes and
    /// each node links to its parent, and the statistics match the
    /// connections and queues.
    func checkInvariants(sourceLocation: SourceLocation = #_sourceLocation) {
        let index = broker.index
        var fromIndex: [String] = []
        var wildcardPairs = 0
        /// One list: not empty, one entry per connection, each at the position
        /// its connection's record says, and in the place the record names.
        func checkList(_ list: [Connection], _ text: String, node: TrieNode?, isTail: Bool) {
            #expect(!list.isEmpty, "empty subscriber list at \(text)", sourceLocation: sourceLocation)
            #expect(Set(list.map(\.id)).count == list.count, "a connection twice at \(text)", sourceLocation: sourceLocation)
            guard let pattern = Pattern(text) else {
                Issue.record("index holds an invalid pattern \(text)", sourceLocation: sourceLocation)
                return
            }
            for (i, connection) in list.enumerated() {
                #expect(broker.connections[connection.id] === connection, "closed connection \(connection.id) still in the index",
                        sourceLocation: sourceLocation)
                guard let record = connection.subscriptions[pattern] else {
                    Issue.record("\(text) @\(connection.id) in the index but not held by its connection", sourceLocation: sourceLocation)
                    continue
                }
                #expect(record.position == i && record.node === node && record.isTail == isTail,
                        "\(text) @\(connection.id) at \(i), its record says \(record.position)", sourceLocation: sourceLocation)
                fromIndex.append("\(text) @\(connection.id)")
            }
        }
        for (type, list) in index.exact {
            #expect(Pattern(type)?.hasWildcards == false, "wildcard \(type) in the exact map", sourceLocation: sourceLocation)
            checkList(list, type, node: nil, isTail: false)
        }
        func walk(_ node: TrieNode, _ path: [String]) {
            if !path.isEmpty { #expect(!node.isEmpty, "unpruned trie node at \(path)", sourceLocation: sourceLocation) }
            if path.isEmpty { #expect(node.subscribers.isEmpty, sourceLocation: sourceLocation) }
            if !node.subscribers.isEmpty {
                checkList(node.subscribers, path.joined(separator: "."), node: node, isTail: false)
                wildcardPairs += node.subscribers.count
            }
            if !node.tailSubscribers.isEmpty {
                checkList(node.tailSubscribers, (path + [">"]).joined(separator: "."), node: node, isTail: true)
                wildcardPairs += node.tailSubscribers.count
            }
            for (segment, child) in node.children {
                #expect(child.parent === node && child.edge.first == segment && segment != "*", "trie child \(segment) mislinked at \(path)",
                        sourceLocation: sourceLocation)
                #expect(!child.edge.contains(">"), sourceLocation: sourceLocation)
                walk(child, path + child.edge.map(String.init))
            }
            if let star = node.star {
                #expect(star.parent === node && star.edge.first == "*", "star child mislinked at \(path)", sourceLocation: sourceLocation)
                walk(star, path + star.edge.map(String.init))
            }
        }
        #expect(index.root.parent == nil && index.root.edge.isEmpty, sourceLocation: sourceLocation)
        walk(index.root, [])
        #expect(wildcardPairs == index.wildcardCount, "wildcardCount out of step", sourceLocation: sourceLocation)

        var fromConnections: [String] = []
        var subscriptions = 0
        var queuedBytes = 0
        for connection in broker.connections.values {
            #expect(!connection.isClosed, sourceLocation: sourceLocation)
            for (pattern, subscription) in connection.subscriptions {
                fromConnections.append("\(pattern.text) @\(connection.id)")
                #expect(subscription.pattern == pattern, sourceLocation: sourceLocation)
                let list = subscription.node.map { subscription.isTail ? $0.tailSubscribers : $0.subscribers }
                    ?? index.exact[pattern.text] ?? []
                #expect(subscription.position < list.count && list[subscription.position] === connection,
                        "\(pattern.text) @\(connection.id) is not where its record says", sourceLocation: sourceLocation)
            }
            subscriptions += connection.subscriptions.count + connection.servings.count
            queuedBytes += connection.outbound.chargedBytes
            #expect(queued(connection).count == connection.outbound.byteCount, "queue byteCount differs from its chunks",
                    sourceLocation: sourceLocation)
            // What syncInbound charges: the splitter's bytes, a frame flow control holds, and a large frame's scan (issue 37).
            let inboundHeld = connection.splitter.heldBytes + (connection.flow.heldFrame?.capacity ?? 0) + (connection.input.scan?.heldBytes ?? 0)
            #expect(connection.input.inboundCharged == inboundHeld || connection.closing != nil,
                    "inbound charge of \(connection.id) differs from what its splitter, held frame and scan hold", sourceLocation: sourceLocation)
            // Fair-share charges: what the queue's entries hold, by publisher uid.
            var shares: [UInt32: Int] = [:]
            let q = connection.outbound
            for entry in q.entries[q.head...] where entry.actor != OutboundQueue.noActor {
                shares[entry.actor, default: 0] += entry.length + OutboundQueue.entryOverheadBytes
            }
            #expect(shares == connection.accounting.actorShares, "fair shares of \(connection.id) out of step", sourceLocation: sourceLocation)
        }
        // (issue 20) Parked connections: in the lot exactly, routable, with drops pending.
        for connection in broker.connections.values {
            #expect(connection.isParked == (broker.parking.members[ObjectIdentifier(connection)] === connection),
                    "parked \(connection.id) and the lot disagree", sourceLocation: sourceLocation)
            if connection.isParked {
                #expect(connection.isRoutable && connection.output.pendingDropsCounted > 0, sourceLocation: sourceLocation)
            }
        }
        #expect(broker.parking.members.count == broker.connections.values.filter(\.isParked).count, sourceLocation: sourceLocation)
        // (parkfair) Parked against publisher uids: in that lot exactly, routable, drops pending.
        for connection in broker.connections.values {
            #expect((connection.fairPark != nil) == (broker.parking.againstUIDs[ObjectIdentifier(connection)] === connection),
                    "parked against uids \(connection.id) and the lot disagree", sourceLocation: sourceLocation)
            if connection.fairPark != nil {
                #expect(connection.isRoutable && connection.output.pendingDropsCounted > 0 && !connection.parkedAgainst.isEmpty,
                        sourceLocation: sourceLocation)
            }
        }
        #expect(broker.types.splitsFairParked == !broker.parking.againstUIDs.isEmpty, sourceLocation: sourceLocation)
        checkAccounts(sourceLocation: sourceLocation)
        checkRequests(sourceLocation: sourceLocation)
        #expect(fromIndex.sorted() == fromConnections.sorted(), "the two sides of the subscription index disagree",
                sourceLocation: sourceLocation)
        let stats = broker.statistics
        #expect(stats.connections == broker.connections.count, sourceLocation: sourceLocation)
        #expect(stats.subscriptions == subscriptions, sourceLocation: sourceLocation)
        #expect(stats.queuedBytes == queuedBytes, sourceLocation: sourceLocation)
        // (1.3) Requests take seqs too (and stay out of the history ring).
        #expect(stats.published + stats.requests + broker.retention.restoredThrough == broker.seq, sourceLocation: sourceLocation)
        // (1.1) The history ring holds consecutive seqs ending at the newest.
        let ring = broker.retention.history
        for i in 0..<ring.count {
            #expect(ring[i].seq == ring[0].seq + UInt64(i), "history ring not consecutive at \(i)", sourceLocation: sourceLocation)
        }
        if ring.count > 0 && stats.requests == 0 { #expect(ring[ring.count - 1].seq == broker.seq, sourceLocation: sourceLocation) }
        #expect(ring.count <= ring.maxEvents && ring.byteCount <= ring.maxBytes, sourceLocation: sourceLocation)
        #expect(ring.byteCount == (0..<ring.count).reduce(0) { $0 + ring[$1].frame.count }, sourceLocation: sourceLocation)
        // The quotas count every retained event, against its publisher's uid.
        let retained = broker.retention.retained
        #expect(broker.ledger.totals.retainedBytes == retained.byteCount && broker.ledger.totals.retainedEvents == retained.count,
                sourceLocation: sourceLocation)
        var byUID: [UInt32: Int] = [:]
        for event in retained.events.values { byUID[event.uid, default: 0] += event.frame.count }
        for (uid, bytes) in byUID { #expect(broker.ledger.accounts[uid]?.retainedBytes == bytes, sourceLocation: sourceLocation) }
    }

    /// (1.3) The books of request/reply: every token is held by the open
    /// connection it was given to and by its request; every pending request
    /// is its requester's, in the deadline heap at its place; the per-uid
    /// counts are the sums of their connections'.
    func checkRequests(sourceLocation: SourceLocation = #_sourceLocation) {
        let table = broker.requests
        var tokens = 0
        var pending = 0
        var byUID: [UInt32: (pending: Int, serving: Int)] = [:]
        var uidShares: [UInt32: [UInt32: Int]] = [:]
        for connection in broker.connections.values {
            tokens += connection.requests.serving.count
            pending += connection.requests.pending.count
            let uid = connection.credentials.uid
            byUID[uid, default: (0, 0)].pending += connection.requests.pending.count
            byUID[uid, default: (0, 0)].serving += connection.requests.serving.count
            var shares: [UInt32: Int] = [:]
            for token in connection.requests.serving {
                let slot = table.slots[token]
                #expect(slot?.server === connection && slot?.request.tokens.contains(token) == true,
                        "token of \(connection.id) out of step", sourceLocation: sourceLocation)
                if let actor = slot?.actor, actor != OutboundQueue.noActor { shares[actor, default: 0] += 1 }
            }
            // Ended tokens whose frames are still queued keep their share (RequestTable.swift).
            for entry in connection.requests.lingering { shares[entry.actor, default: 0] += 1 }
            #expect(connection.requests.lingering.isEmpty || !connection.outbound.isEmpty, "shares kept for \(connection.id) with nothing queued", sourceLocation: sourceLocation)
            #expect(connection.requests.shares == shares, "serving shares of \(connection.id) out of step", sourceLocation: sourceLocation)
            for (actor, count) in shares { uidShares[uid, default: [:]][actor, default: 0] += count }
            for request in connection.requests.pending.values {
                #expect(request.requester === connection && request.heapIndex >= 0 && table.deadlines[request.heapIndex] === request,
                        "pending request of \(connection.id) out of step", sourceLocation: sourceLocation)
            }
        }
        #expect(tokens == table.slots.count && pending == table.count, "request books out of step", sourceLocation: sourceLocation)
        for (uid, counts) in byUID {
            #expect(broker.ledger.accounts[uid]?.pendingRequests == counts.pending && broker.ledger.accounts[uid]?.servingRequests == counts.serving,
                    "request counts of uid \(uid) out of step", sourceLocation: sourceLocation)
            #expect(broker.ledger.accounts[uid]?.servingShares ?? [:] == uidShares[uid] ?? [:], "serving shares of uid \(uid) out of step", sourceLocation: sourceLocation)
        }
        for i in 1..<max(1, table.deadlines.count) {
            #expect(table.deadlines[(i - 1) / 2].deadline <= table.deadlines[i].deadline, "deadline heap out of order", sourceLocation: sourceLocation)
        }
    }

    /// Each uid's account counts exactly what its connections hold, and the
    /// totals are the sums.
    func checkAccounts(sourceLocation: SourceLocation = #_sourceLocation) {
        var inbound = 0
        for (uid, account) in broker.ledger.accounts {
            let members = broker.connections.values.filter { $0.credentials.uid == uid }
            #expect(account.uid == uid && Set(account.members.map(\.id)) == Set(members.map(\.id)), "members of uid \(uid)", sourceLocation: sourceLocation)
            for (i, member) in account.members.enumerated() { #expect(member.accounting.memberIndex == i && member.account === account, sourceLocation: sourceLocation) }
            #expect(account.subscriptions == members.reduce(0) { $0 + $1.subscriptions.count + $1.servings.count }, "subscriptions of uid \(uid)", sourceLocation: sourceLocation)
            #expect(account.queuedBytes == members.reduce(0) { $0 + $1.outbound.chargedBytes }, "queued bytes of uid \(uid)", sourceLocation: sourceLocation)
            #expect(account.inboundBytes == members.reduce(0) { $0 + $1.input.inboundCharged }, "inbound bytes of uid \(uid)", sourceLocation: sourceLocation)
            #expect(account.inboundHolders == members.filter { $0.input.inboundCharged > 0 }.count, sourceLocation: sourceLocation)
            var shares: [UInt32: Int] = [:]
            for member in members { for (actor, bytes) in member.accounting.actorShares { shares[actor, default: 0] += bytes } }
            #expect(shares == account.actorShares, "fair shares of uid \(uid)", sourceLocation: sourceLocation)
            #expect(!account.isIdle, "idle account of uid \(uid) kept", sourceLocation: sourceLocation)
            #expect(account.halfFullWaiters == members.filter { $0.flow.halfFull == .ownUID }.count, "half-full waiters of uid \(uid)", sourceLocation: sourceLocation)
            inbound += account.inboundBytes
        }
        #expect(broker.ledger.totals.inboundBytes == inbound, sourceLocation: sourceLocation)
        #expect(broker.ledger.halfFullTrustedHolders == broker.connections.values.filter { $0.flow.halfFull == .anyUID }.count, sourceLocation: sourceLocation)
        // Flow control: holds mirrored both ways, counted in `held`.
        for connection in broker.connections.values {
            for publisher in connection.flow.holding { #expect(publisher.flow.heldBy.contains { $0 === connection }, sourceLocation: sourceLocation) }
            for holder in connection.flow.heldBy { #expect(holder.flow.holding.contains { $0 === connection }, sourceLocation: sourceLocation) }
        }
        #expect(broker.statistics.held == broker.connections.values.filter { $0.flow.isHeld }.count, sourceLocation: sourceLocation)
        #expect(broker.ledger.totals.inboundUIDs == broker.ledger.accounts.values.filter { $0.inboundBytes > 0 }.count, sourceLocation: sourceLocation)
        for connection in broker.connections.values {
            #expect(broker.ledger.accounts[connection.credentials.uid] != nil, "connection \(connection.id) without an account", sourceLocation: sourceLocation)
        }
    }
}

/// The UTF-8 bytes of `text`.
func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The shared seeded generator (EventBusProtocol.SplitMix64, fixed per seed).
typealias SeededGenerator = EventBusProtocol.SplitMix64
