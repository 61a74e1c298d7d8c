// OutboundQueue against a plain model under seeded random appends (replies
// packed into shared entries, small events copied, large events shared),
// partial writes and drop-oldest calls: the bytes handed to the writer, the
// byte count and charge, and which events are dropped must match, across
// compactions; fair-share charges come back exactly once.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Outbound queue")
struct OutboundQueueTests {
    /// A frame whose every byte names it, so misplaced bytes are caught.
    static func bytes(_ id: Int, size: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: id), count: size)
        bytes[size - 1] = 0x0A
        return bytes
    }

    /// Queues `bytes` as an event, shared when large.
    @discardableResult
    static func appendEvent(_ queue: inout OutboundQueue, _ bytes: [UInt8], seq: UInt64, actor: UInt32 = OutboundQueue.noActor) -> Int {
        if bytes.count > OutboundQueue.copyLimitBytes {
            let chunk = OutboundChunk.make(capacity: bytes.count)
            bytes.withUnsafeBytes { chunk.append($0) }
            return queue.appendEvent(EventFrame(bytes: UnsafeRawBufferPointer(start: chunk.baseAddress, count: bytes.count), shared: chunk), seq: seq, actor: actor)
        }
        return bytes.withUnsafeBytes { queue.appendEvent(EventFrame(bytes: $0, shared: nil), seq: seq, actor: actor) }
    }

    /// An entry of the model: frames sharing one queue entry (replies may), and its seq.
    struct Group {
        var bytes: [UInt8]
        var seq: UInt64
        var actor: UInt32 = OutboundQueue.noActor
    }

    /// The reference: groups and how much of the first is written.
    struct Model {
        var groups: [Group] = []
        var headOffset = 0
        var byteCount: Int { groups.reduce(0) { $0 + $1.bytes.count } - headOffset }
        /// A partly written head group is charged whole (its chunk is held until it is written).
        var charged: Int { byteCount + headOffset + groups.count * OutboundQueue.entryOverheadBytes }
        var unwritten: [UInt8] { Array(groups.flatMap(\.bytes).dropFirst(headOffset)) }

        mutating func consume(_ n: Int) {
            var left = n
            while left > 0 {
                let rest = groups[0].bytes.count - headOffset
                if left >= rest { left -= rest; groups.removeFirst(); headOffset = 0 } else { headOffset += left; left = 0 }
            }
        }

        mutating func dropOldest(untilAtMost target: Int, actor: UInt32? = nil) -> (UInt64, UInt64) {
            var count: UInt64 = 0, first: UInt64 = 0
            var i = headOffset > 0 ? 1 : 0
            while charged > target && i < groups.count {
                if groups[i].seq != 0 && (actor == nil || groups[i].actor == actor) {
                    if count == 0 { first = groups[i].seq }
                    count += 1
                    groups.remove(at: i)
                } else {
                    i += 1
                }
            }
            return (count, first)
        }
    }

    static func contents(_ queue: OutboundQueue) -> [UInt8] {
        var bytes: [UInt8] = []
        _ = queue.forEachChunk(maxChunks: .max) { chunk in
            bytes.append(copying: chunk)
        }
        return bytes
    }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func matchesAPlainModelUnderRandomOperations(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var queue = OutboundQueue()
        var model = Model()
        var released: [ActorCharge] = []
        var actorHeld = 0
        var nextID = 1
        var seq: UInt64 = 0
        for step in 0..<6000 {
            var delta = 0
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:  // append an event or a reply
                let size = Int.random(in: 0..<20, using: &rng) == 0 ? Int.random(in: 2000...5000, using: &rng) : Int.random(in: 1...40, using: &rng)
                let frame = Self.bytes(nextID, size: size)
                nextID += 1
                if Bool.random(using: &rng) {
                    seq += 1
                    delta = Self.appendEvent(&queue, frame, seq: seq, actor: seq % 3 == 0 ? 7 : OutboundQueue.noActor)
                    if seq % 3 == 0 { actorHeld += delta }
                    model.groups.append(Group(bytes: frame, seq: seq, actor: seq % 3 == 0 ? 7 : OutboundQueue.noActor))
                } else {
                    delta = frame.withUnsafeBytes { queue.appendReply($0.bytes) }
                    if delta == size, let last = model.groups.indices.last, model.groups[last].seq == 0 {
                        model.groups[last].bytes += frame  // packed into the last reply entry
                    } else {
                        #expect(delta == size + OutboundQueue.entryOverheadBytes, "step \(step)")
                        model.groups.append(Group(bytes: frame, seq: 0))
                    }
                }
            case 5..<8:  // write part of it
                let n = Int.random(in: 0...min(model.byteCount, 120), using: &rng)
                if n > 0 { delta = queue.consume(n, released: &released); model.consume(n) }
            default:  // drop oldest events down to a target
                let target = Int.random(in: 0...max(0, model.charged), using: &rng)
                let actor: UInt32? = Int.random(in: 0..<4, using: &rng) == 0 ? 7 : nil
                let got = queue.dropOldestEvents(untilAtMost: target, actor: actor, released: &released)
                let want = model.dropOldest(untilAtMost: target, actor: actor)
                delta = got.delta
                #expect(got.count == want.0 && got.firstSeq == want.1, "step \(step)")
            }
            actorHeld -= released.reduce(0) { $0 + $1.bytes }
            #expect(released.allSatisfy { $0.actor == 7 })
            released.removeAll()
            #expect(queue.byteCount == model.byteCount, "step \(step)")
            #expect(queue.chargedBytes == model.charged, "step \(step)")
            #expect(queue.isEmpty == (model.byteCount == 0), "step \(step)")
            let chunks = Self.contents(queue)
            #expect(chunks == model.unwritten, "step \(step)")
            _ = delta
            if chunks != model.unwritten || queue.byteCount != model.byteCount { return }
        }
        #expect(queue.removeAll(released: &released) == -model.charged)
        actorHeld -= released.reduce(0) { $0 + $1.bytes }
        #expect(actorHeld == 0, "every fair-share charge is handed back once")
    }

    @Test func adjacentFramesOfOneChunkAreOneRunStartingWithThePartlyWrittenHead() {
        var queue = OutboundQueue()
        var released: [ActorCharge] = []
        for id in 1...5 { Self.appendEvent(&queue, Self.bytes(id, size: 10), seq: UInt64(id)) }
        _ = queue.consume(4, released: &released)
        var lengths: [Int] = []
        let n = queue.forEachChunk(maxChunks: 3) { lengths.append($0.byteCount) }
        #expect(n == 1 && lengths == [46])
        #expect(queue.frameCount == 5 && queue.chargedBytes == 50 + 5 * OutboundQueue.entryOverheadBytes, "the partly written head counts whole")
    }

    @Test func consecutiveRepliesShareAnEntryAndTheChargeFollowsWhatIsHeld() {
        var queue = OutboundQueue()
        var released: [ActorCharge] = []
        let reply = Self.bytes(1, size: 21)
        for _ in 0..<1000 { _ = reply.withUnsafeBytes { queue.appendReply($0.bytes) } }
        // 4096-byte chunks hold 195 replies each: 6 entries, not 1000.
        #expect(queue.frameCount == 6)
        #expect(queue.chargedBytes == 21_000 + 6 * OutboundQueue.entryOverheadBytes)
        _ = queue.consume(21_000, released: &released)
        #expect(queue.isEmpty && queue.chargedBytes == 0 && queue.replyTail == nil, "an empty queue holds no chunk")
    }

    @Test func compactionAfterManyWrittenFramesKeepsTheRest() {
        var queue = OutboundQueue()
        var released: [ActorCharge] = []
        for id in 0..<3000 { Self.appendEvent(&queue, Self.bytes(id, size: 3), seq: UInt64(id + 1)) }
        _ = queue.consume(3 * 2500 + 1, released: &released)
        #expect(queue.byteCount == 3 * 500 - 1)
        #expect(Self.contents(queue).count == 3 * 500 - 1)
        #expect(queue.head < 2500, "compacted")
    }

    @Test func dropOldestOfOneActorLeavesTheOthers() {
        var queue = OutboundQueue()
        var released: [ActorCharge] = []
        for seq in 1...6 { Self.appendEvent(&queue, Self.bytes(Int(seq), size: 10), seq: UInt64(seq), actor: seq % 2 == 0 ? 5 : OutboundQueue.noActor) }
        let charged = queue.chargedBytes
        let got = queue.dropOldestEvents(untilAtMost: charged - 1, actor: 5, released: &released)
        #expect(got.count == 1 && got.firstSeq == 2 && got.delta == -(10 + OutboundQueue.entryOverheadBytes))
        #expect(released.map(\.actor) == [5])
        #expect(Self.contents(queue).count == 50)
    }

    /// Issue 20: a drop-old connection that never reads, its queue full of
    /// (event, reply) pairs; every new event drops the oldest. Each drop
    /// looks at O(1) entries (the replies it passes are not scanned or
    /// copied again), replies keep their order, the newest events stay.
    @Test(arguments: [0, 1])
    func dropOldIsConstantWorkPerEventBetweenManyReplies(partlyWritten: Int) {
        var queue = OutboundQueue()
        var released: [ActorCharge] = []
        var seq: UInt64 = 0
        let reply = Self.bytes(0xEE, size: 20)
        let pairs = 20_000
        var limit = 0
        var dropped: UInt64 = 0
        var replies = 0
        for k in 0..<pairs {
            seq += 1
            let event = Self.bytes(Int(seq % 200), size: 60)
            if k == 1000 {
                limit = queue.chargedBytes
                if partlyWritten == 1 { _ = queue.consume(7, released: &released) }
            }
            if limit > 0 {
                let got = queue.dropOldestEvents(untilAtMost: limit - 60 - OutboundQueue.entryOverheadBytes, released: &released)
                dropped += got.count
            }
            Self.appendEvent(&queue, event, seq: seq)
            _ = reply.withUnsafeBytes { queue.appendReply($0.bytes) }
            replies += 1
        }
        #expect(dropped > UInt64(pairs) * 3 / 4)
        #expect(queue.dropWork <= Int(dropped) * 4 + 4096, "drop-old looked at \(queue.dropWork) entries for \(dropped) drops")
        let wire = Self.contents(queue)
        // Every reply is still there, after whatever the partly written head left.
        let replyCount = wire.split(separator: 0x0A).filter { $0.first == 0xEE }.count
        #expect(replyCount == replies)
        #expect(wire.count == queue.byteCount)
        #expect(queue.frameCount == replies + (queue.byteCount - replies * 20) / 60 + partlyWritten, "the partly written head stays")
    }

    @Test func removeAllEmptiesTheQueue() {
        var queue = OutboundQueue()
        var released: [ActorCharge] = []
        Self.appendEvent(&queue, Self.bytes(1, size: 5), seq: 1)
        _ = queue.consume(2, released: &released)
        _ = queue.removeAll(released: &released)
        #expect(queue.isEmpty && queue.byteCount == 0 && queue.chargedBytes == 0 && Self.contents(queue).isEmpty)
    }
}
