// Fair read scheduling (PROTOCOL.md "Quotas (1.1)": "the broker serves
// connections in turn, each turn bounded, fairly per uid"): connections with
// input wait in one queue per uid; each loop turn gives every uid with input
// the same read budget (`readChunkBytes`, at least 4 KiB charged per read),
// spread round-robin over its connections, each read at most once per turn.
// A uid alone gets `soleUIDTurnBytes`, so one busy uid with many connections
// loses nothing when nobody else wants the loop.
//
// Before editing: connections are in epoll edge-triggered for input, so a
// connection is ready until a read would block or comes back short (an
// AF_UNIX stream read takes all that is queued, up to the buffer); readiness
// lives here, not in epoll (after EPOLLRDHUP it lasts until EOF is read). A paused connection leaves its queue when served
// and comes back on `.resumeReading` (with input the core kept, too).
import EventBusCore
import EventBusSystem

/// The connections of one uid that have input to read.
final class ReadyQueue {
    let uid: UInt32
    var records: [ServerConnection] = []
    var head = 0
    /// In `BrokerServer.activeQueues`, or being served this turn.
    var active = false

    init(uid: UInt32) { self.uid = uid }

    var count: Int { records.count - head }
    var isEmpty: Bool { head == records.count }

    func append(_ record: ServerConnection) { records.append(record) }

    func popFirst() -> ServerConnection? {
        guard head < records.count else { return nil }
        let record = records[head]
        head += 1
        if head == records.count {
            records.removeAll(keepingCapacity: records.capacity <= 256)
            head = 0
        } else if head >= 256 && head * 2 >= records.count {
            records.removeFirst(head)
            head = 0
        }
        return record
    }
}

extension BrokerServer {
    /// Read budget of a uid alone in a turn (up to 64 full reads).
    var soleUIDTurnBytes: Int { 64 * configuration.readChunkBytes }
    /// What one read costs at least in a uid's budget (a syscall's worth of work).
    static let minimumReadCharge = 4096

    /// Puts a connection in its uid's queue (once) if it may be read.
    func markReady(_ record: ServerConnection) {
        guard !record.ready, !record.released, record.wantsInput else { return }
        record.ready = true
        let uid = record.connection.credentials.uid
        let queue: ReadyQueue
        if let existing = readyQueues[uid] {
            queue = existing
        } else {
            queue = ReadyQueue(uid: uid)
            readyQueues[uid] = queue
        }
        queue.append(record)
        if !queue.active {
            queue.active = true
            activeQueues.append(queue)
        }
    }

    /// Whether some connection waits to be read.
    var hasReadyConnections: Bool { !activeQueues.isEmpty }

    /// One turn: every uid with input gets its budget of reads.
    func serveReadyConnections() {
        guard !activeQueues.isEmpty else { return }
        let round = activeQueues
        activeQueues.removeAll(keepingCapacity: true)
        let quantum = round.count == 1 ? soleUIDTurnBytes : configuration.readChunkBytes
        for queue in round {
            var budget = quantum
            var left = queue.count  // each connection at most once per turn
            while budget > 0 && left > 0, let record = queue.popFirst() {
                left -= 1
                record.ready = false
                guard !record.released && record.wantsInput else { continue }
                budget -= max(BrokerServer.minimumReadCharge, serve(record))
            }
            if queue.isEmpty {
                queue.active = false
                if readyQueues.count > 1024 { readyQueues[queue.uid] = nil }
            } else {
                activeQueues.append(queue)
            }
        }
    }

    /// Reads once from a ready connection (or hands the core the input it
    /// kept) and queues it again when more may be waiting.
    /// - Returns: the bytes handled.
    func serve(_ record: ServerConnection) -> Int {
        let connection = record.connection
        if connection.hasBufferedInput {
            apply(broker.receive(connection, UnsafeRawBufferPointer(start: nil, count: 0), at: currentTime()))
            markReady(record)  // the socket may hold more
            return BrokerServer.minimumReadCharge
        }
        let result: IOResult<Int>
        do {
            result = try record.fd.read(into: readBuffer)
        } catch {
            logger.debug("failed to read from connection \(connection.id): \(error); closing it")
            close(record)
            return 0
        }
        switch result {
        case .wouldBlock:
            return 0
        case .complete(0):
            record.inputClosed = true
            apply(broker.endOfInput(connection, at: currentTime()))
            updateInterest(record)
            return 0
        case .complete(let n):
            apply(broker.receive(connection, UnsafeRawBufferPointer(rebasing: readBuffer[0..<n]), at: currentTime()))
            // A full buffer may leave more; after EPOLLRDHUP the EOF is still to be read.
            if n == readBuffer.count || record.peerShutWriting { markReady(record) }
            return n
        }
    }
}
