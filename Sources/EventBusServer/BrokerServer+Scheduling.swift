// Fair read scheduling (PROTOCOL.md "Quotas (1.1)": "the broker serves
// connections in turn, each turn bounded, fairly per uid"): connections with
// input wait in one queue per uid; each loop turn gives every uid with input
// the same slice of the loop's time, its reads and the writes they cause
// (its replies, and the events it publishes to anyone's subscribers: a flood
// of a type root subscribes to is paid by the flooder, issue 37)
// (deficit round robin on measured time:
// `sharedSliceNanoseconds`, or `soleSliceNanoseconds` for a uid alone),
// spread round-robin over its connections, a read (at most `readChunkBytes`,
// or `soleReadChunkBytes` while one uid alone has input) at a time. A read that takes longer than the slice (a large frame, a
// costly request) is paid back from later turns, so a uid's share of the
// loop does not depend on how many connections it has nor on what its
// requests cost. The writes each read caused are made before the next read
// (so queued frames are written while still in the cache), except while
// several uids share a turn and the connection read still has input: then
// every `readsPerSharedFlush` reads and at the end of its uid's service (a
// pipelining client's replies in fewer, larger writes, so the switching
// between two busy uids does not cost the one that pipelines its own half;
// a client waiting for its reply has no input left, and gets it at once). While
// more than one uid has been seen (issue 20), the unit between two decisions
// is small: a read is handled at most `BrokerConfiguration.turnBytes` (8 KiB)
// of frames and about `peekNanoseconds` at a time (the rest waits in the
// connection's splitter; the core stops every 8 frames and `receive` here
// lets it go on while the read has time: the clock is the server's,
// ServerClock.swift), epoll is looked at between reads, and a uid that
// had nothing to do and now has input ends the current uid's service and
// goes first.
//
// Before editing: connections are in epoll edge-triggered for input, so a
// connection is ready until a read would block or comes back short (an
// AF_UNIX stream read takes all that is queued, up to the buffer); readiness
// lives here, not in epoll (after EPOLLRDHUP it lasts until EOF is read). A
// paused connection leaves its queue when served and comes back on
// `.resumeReading` (with input the core kept, too).
import EventBusCore
import EventBusSystem

/// The connections of one uid that have input to read.
final class ReadyQueue {
    let uid: UInt32
    var records: [ServerConnection] = []
    var head = 0
    /// In `BrokerServer.activeQueues`, or being served this turn.
    var active = false
    /// Time it may still use, ns: a slice is added each turn (at most one
    /// slice banked), what its reads take is taken off (it may go negative).
    var deficit: Int64 = 0
    /// (bridgerr) Time of the loop's attachments its service caused (the
    /// link carrying its requests), taken off at its next service, even when
    /// it has no input in between (a requester waits for the answers the
    /// link brings); at most one sole slice.
    var owed: Int64 = 0

    init(uid: UInt32) { self.uid = uid }

    var count: Int { records.count - head }
    var isEmpty: Bool { head == records.count }

    func append(_ record: ServerConnection) { records.append(record) }

    /// Takes `nanoseconds` of work off its slice (at most one sole slice into debt).
    func charge(_ nanoseconds: Int64) {
        deficit = max(deficit - nanoseconds, -BrokerServer.soleSliceNanoseconds)
    }

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
    /// A uid's slice of a turn when several uids have input.
    static let sharedSliceNanoseconds: Int64 = 2_000_000
    /// A uid's slice when it is alone: turns stay short (a new uid's first
    /// request waits for at most one), yet one busy uid gets many reads per
    /// write-out.
    static let soleSliceNanoseconds: Int64 = 10_000_000
    /// How often a turn looks at epoll between reads while several uids are about.
    static let peekNanoseconds: Int64 = 50_000
    /// While several uids share a turn, the reads of a connection that still
    /// has input after which the writes they caused are made (each read is at
    /// most `BrokerConfiguration.turnBytes` of frames and `peekNanoseconds`):
    /// at most 256 KiB of a pipelining client's frames, and about 1.6 ms
    /// (less than a shared slice), wait for their replies and events to be
    /// written. Measured on the churn row of scripts/attack (medians of the
    /// raw rate against idle): with a write after every read the victim's
    /// half of the broker was worth 33-48 % of its idle rate, with this
    /// 46-57 % (61 % per second of broker CPU; docs/RELIABILITY.md "Churn,
    /// third round").
    static let readsPerSharedFlush = 32
    /// The read size of a connection whose large frame is validated as it
    /// arrives (`Connection.isScanningLargeFrame`).
    static let scanningReadBytes = 16 * 1024

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
            // A uid that had nothing to do is served first in the next turn
            // (fair queueing: a light user's request waits for one turn at most).
            queue.active = true
            activeQueues.insert(queue, at: 0)
        }
    }

    /// Takes the time spent writing a connection of `uid` off its uid's
    /// slice (only while that uid has input waiting: an idle reader of events
    /// is not in the turns at all).
    func chargeWrite(_ uid: UInt32, nanoseconds: Int64) {
        guard let queue = readyQueues[uid], queue.active else { return }
        queue.charge(nanoseconds)
    }

    /// Whether some connection waits to be read.
    var hasReadyConnections: Bool { !activeQueues.isEmpty }

    /// One turn: every uid with input gets its slice. While several uids
    /// have been seen, epoll is looked at every `peekNanoseconds` between
    /// reads (issue 20): a uid that had nothing to do and now has input ends
    /// the current uid's service (it keeps what is left of its slice) and is
    /// served first; the writes a read caused are made before the next read,
    /// so a request/response client waits for at most one
    /// bounded read of another uid's (`BrokerConfiguration.turnBytes`), not
    /// for that uid's whole slice.
    func serveReadyConnections() {
        guard !activeQueues.isEmpty else { return }
        let round = activeQueues
        activeQueues.removeAll(keepingCapacity: true)
        let slice = round.count == 1 ? BrokerServer.soleSliceNanoseconds : BrokerServer.sharedSliceNanoseconds
        let peeking = readyQueues.count > 1
        broker.turnBytes = peeking ? configuration.broker.turnBytes : .max
        let shared = round.count > 1
        var servedAgain: [ReadyQueue] = []
        var next = 0
        var preempted = false
        while next < round.count {
            let queue = round[next]
            next += 1
            queue.deficit = min(queue.deficit + slice, slice)
            if queue.owed > 0 {
                queue.charge(queue.owed)
                queue.owed = 0
            }
            var start = clock.monotonic()
            var unflushedReads = 0
            while queue.deficit > 0, let record = queue.popFirst() {
                record.ready = false
                guard !record.released && record.wantsInput else { continue }
                turnEnds = start + BrokerServer.peekNanoseconds
                serve(record)  // queues it again when more may be waiting
                let end = clock.monotonic()
                queue.deficit -= max(end - start, 1_000)
                start = end
                // Write what this read queued before reading more (as Redis
                // and NATS do after each read): the frames are still in the
                // cache, no queue grows by a whole slice's worth of reads, and
                // a request/response client's reply goes out at once. While
                // uids share the turn, a connection that is ready again (it
                // pipelines: its input is not all read) has its writes made
                // every `readsPerSharedFlush` reads and at the end of the
                // service. The writes are charged to `queue`: its reads caused them.
                unflushedReads += 1
                if !pendingFlush.isEmpty && (!shared || !record.ready || unflushedReads >= BrokerServer.readsPerSharedFlush) {
                    flushPending(chargingTo: queue)
                    unflushedReads = 0
                    start = clock.monotonic()
                }
                if peeking && start - lastPeek >= BrokerServer.peekNanoseconds {
                    lastPeek = start
                    let waiting = activeQueues.count
                    peekForInput()
                    start = clock.monotonic()
                    if activeQueues.count > waiting { preempted = true; break }
                }
            }
            if !pendingFlush.isEmpty { flushPending(chargingTo: queue) }
            if queue.isEmpty {
                queue.active = false
                queue.deficit = 0
                if readyQueues.count > 1024 { readyQueues[queue.uid] = nil }
            } else {
                servedAgain.append(queue)
            }
            if preempted { break }
        }
        // Newcomers first (markReady put them in), then who had no turn yet, then the rest.
        activeQueues.append(contentsOf: round[next...])
        activeQueues.append(contentsOf: servedAgain)
    }

    /// Takes what epoll has now (timeout 0) without waiting: new input marks
    /// connections ready, as in the main loop.
    func peekForInput() {
        do {
            try epoll.wait(timeoutMilliseconds: 0) { token, events in
                dispatch(token: token, events: events, exitReason: &peekedExitReason)
            }
            peersHungUp()
        } catch {
            logger.debug("epoll_wait between reads failed: \(error)")
        }
    }

    /// Reads once from a ready connection (or hands the core the input it
    /// kept) and queues it again when more may be waiting.
    func serve(_ record: ServerConnection) {
        let connection = record.connection
        if connection.hasBufferedInput {
            receive(connection, RawSpan())
            if record.inputClosed && !connection.hasBufferedInput && record.peerGone && !record.released {
                close(record)  // a held publisher's last input, after its EOF
                return
            }
            markReady(record)  // the socket may hold more
            return
        }
        let result: IOResult<Int>
        // (issue 37) A large frame being validated as it comes is read 16 KiB
        // at a time: its validation is the read's work (deep nesting, many
        // keys: 1-2 ms for 64 KiB, which another uid's request waited for).
        // (issue 38) A uid alone (`turnBytes` unbounded) reads more at a time.
        let chunk = broker.turnBytes == .max ? configuration.soleReadChunkBytes : configuration.readChunkBytes
        let limit = min(readBuffer.capacity, connection.isScanningLargeFrame ? BrokerServer.scanningReadBytes : chunk)
        do {
            result = try record.fd.read(into: readBuffer, limit: limit)
        } catch {
            logger.debug("failed to read from connection \(connection.id): \(error); closing it")
            close(record)
            return
        }
        switch result {
        case .wouldBlock:
            return
        case .complete(0):
            record.inputClosed = true
            apply(broker.endOfInput(connection, at: currentTime()))
            if record.peerGone && !connection.hasBufferedInput {
                close(record)  // its subscriptions could keep it open, with nobody to read
                return
            }
            updateInterest(record)
        case .complete(let n):
            readBuffer.withBytes(count: n) { receive(connection, $0) }
            // A full buffer may leave more; after EPOLLRDHUP the EOF is still to be read;
            // the core may have stopped after `turnBytes` with the rest kept.
            if n == limit || record.peerShutWriting || connection.hasBufferedInput { markReady(record) }
        }
    }

    /// Hands the core what was read (or nothing: the input it kept), and
    /// while the core stops for a time check (every few frames of a bounded
    /// piece of work, `Broker.stoppedForTimeCheck`) and the read has time
    /// left (`turnEnds`), lets it go on: the core reads no clock (issue 35).
    func receive(_ connection: Connection, _ bytes: RawSpan) {
        apply(broker.receive(connection, bytes, at: currentTime()))
        while broker.stoppedForTimeCheck {
            let time = currentTime()
            guard time.monotonicNanoseconds < turnEnds else { return }
            apply(broker.receive(connection, RawSpan(), at: time, continuing: true))
        }
    }
}
