// OutboundQueue against a plain model under seeded random appends, partial
// writes and drop-oldest calls: the bytes handed to the writer, the byte
// count, and which events are dropped must match, across compactions.
@testable import EventBusCore
import Testing

@Suite("Outbound queue")
struct OutboundQueueTests {
    /// A frame whose every byte names it, so misplaced bytes are caught.
    static func frame(_ id: Int, size: Int) -> OutboundFrame {
        var bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: id), count: size)
        bytes[size - 1] = 0x0A
        return bytes.withUnsafeBytes { OutboundFrame.copying($0) }
    }

    struct ModelEntry {
        var bytes: [UInt8]
        var seq: UInt64
    }

    /// The reference: an array of entries and how much of the first is written.
    struct Model {
        var entries: [ModelEntry] = []
        var headOffset = 0
        var byteCount: Int { entries.reduce(0) { $0 + $1.bytes.count } - headOffset }
        var unwritten: [UInt8] { Array(entries.flatMap(\.bytes).dropFirst(headOffset)) }

        mutating func consume(_ n: Int) {
            var left = n
            while left > 0 {
                let rest = entries[0].bytes.count - headOffset
                if left >= rest { left -= rest; entries.removeFirst(); headOffset = 0 } else { headOffset += left; left = 0 }
            }
        }

        mutating func dropOldest(untilAtMost target: Int) -> (UInt64, UInt64, Int) {
            var count: UInt64 = 0, first: UInt64 = 0, freed = 0
            var i = headOffset > 0 ? 1 : 0
            while byteCount > target && i < entries.count {
                if entries[i].seq != 0 {
                    if count == 0 { first = entries[i].seq }
                    count += 1
                    freed += entries[i].bytes.count
                    entries.remove(at: i)
                } else {
                    i += 1
                }
            }
            return (count, first, freed)
        }
    }

    static func contents(_ queue: OutboundQueue) -> [UInt8] {
        var bytes: [UInt8] = []
        _ = queue.forEachChunk(maxChunks: .max) { pointer, length in
            bytes.append(contentsOf: UnsafeRawBufferPointer(start: pointer, count: length))
        }
        return bytes
    }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func matchesAPlainModelUnderRandomOperations(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var queue = OutboundQueue()
        var model = Model()
        var nextID = 1
        var seq: UInt64 = 0
        for step in 0..<6000 {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:  // append an event or a reply
                let size = Int.random(in: 1...40, using: &rng)
                let isEvent = Bool.random(using: &rng)
                let tag: UInt64 = isEvent ? { seq += 1; return seq }() : 0
                let f = Self.frame(nextID, size: size)
                queue.append(f, seq: tag)
                model.entries.append(ModelEntry(bytes: Array(UnsafeRawBufferPointer(start: f.baseAddress, count: f.count)), seq: tag))
                nextID += 1
            case 5..<8:  // write part of it
                let n = Int.random(in: 0...min(model.byteCount, 120), using: &rng)
                if n > 0 { queue.consume(n); model.consume(n) }
            default:  // drop oldest events down to a target
                let target = Int.random(in: 0...max(0, model.byteCount), using: &rng)
                let got = queue.dropOldestEvents(untilAtMost: target)
                let want = model.dropOldest(untilAtMost: target)
                #expect(got.count == want.0 && got.firstSeq == want.1 && got.bytes == want.2, "step \(step)")
            }
            #expect(queue.byteCount == model.byteCount, "step \(step)")
            #expect(queue.isEmpty == (model.byteCount == 0), "step \(step)")
            let chunks = Self.contents(queue)
            #expect(chunks == model.unwritten, "step \(step)")
            if chunks != model.unwritten || queue.byteCount != model.byteCount { return }
        }
    }

    @Test func forEachChunkStopsAtMaxChunksStartingWithThePartlyWrittenHead() {
        var queue = OutboundQueue()
        for id in 1...5 { queue.append(Self.frame(id, size: 10), seq: UInt64(id)) }
        queue.consume(4)
        var lengths: [Int] = []
        let n = queue.forEachChunk(maxChunks: 3) { _, length in lengths.append(length) }
        #expect(n == 3 && lengths == [6, 10, 10])
    }

    @Test func compactionAfterManyWrittenFramesKeepsTheRest() {
        var queue = OutboundQueue()
        for id in 0..<3000 { queue.append(Self.frame(id, size: 3), seq: 0) }
        queue.consume(3 * 2500 + 1)
        #expect(queue.byteCount == 3 * 500 - 1)
        #expect(Self.contents(queue).count == 3 * 500 - 1)
        #expect(queue.head < 2500, "compacted")
    }

    @Test func removeAllEmptiesTheQueue() {
        var queue = OutboundQueue()
        queue.append(Self.frame(1, size: 5), seq: 1)
        queue.consume(2)
        queue.removeAll()
        #expect(queue.isEmpty && queue.byteCount == 0 && Self.contents(queue).isEmpty)
    }
}
