// What the bridge's bus connection has to send and what it waits for: the
// encoded request frames not yet written (one byte buffer, written from its
// head) and, in order, the requests whose `ok`/`error` has not come back.
//
// Before editing: the broker answers the requests of one connection in order
// (PROTOCOL.md "Semantics"), so replies are matched by popping the front of
// `awaiting`, never by searching it; both queues drop what they consumed
// from their front in O(1) and compact only once half of them is dead.
import EventBusProtocol

/// A request whose reply has not arrived yet.
enum AwaitedReply: Equatable {
    /// The connection's `hello`.
    case hello
    /// A `subscribe` to an export pattern.
    case subscribe(Pattern)
    /// An imported event's `publish`.
    case importPublish
}

/// The connection's outgoing bytes and awaited replies. One owner (under the connection's lock).
struct BusOutbox {
    /// Encoded frames; bytes before `head` are written.
    private(set) var bytes: [UInt8] = []
    private(set) var head = 0
    private var awaiting: [(req: Int64, what: AwaitedReply)] = []
    private var awaitingHead = 0
    private var nextReq: Int64 = 1

    /// Bytes not written yet.
    var unwrittenBytes: Int { bytes.count - head }

    /// Requests sent (or queued) whose reply has not arrived.
    var awaitingCount: Int { awaiting.count - awaitingHead }

    /// Appends `request` with the next `req` and remembers what it was.
    mutating func append(_ request: ClientRequest, awaiting what: AwaitedReply) {
        let req = nextReq
        nextReq += 1
        request.encode(req: req, to: &bytes)
        awaiting.append((req, what))
    }

    /// Calls `body` with the unwritten bytes; `body` returns how many it wrote.
    mutating func write(_ body: (UnsafeRawBufferPointer) -> Int) {
        guard head < bytes.count else { return }
        let written = bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[head...])) }
        head += written
        if head == bytes.count {
            bytes.removeAll(keepingCapacity: bytes.capacity <= 1 << 20)
            head = 0
        } else if head >= 64 << 10 && head * 2 >= bytes.count {
            bytes.removeSubrange(..<head)
            head = 0
        }
    }

    /// The request the reply with `req` answers, removed from the queue; nil
    /// when `req` is not awaited (then nothing is removed). Requests before it
    /// that got no reply (impossible from a broker that follows PROTOCOL.md)
    /// are returned in `skipped`, so their outcome can still be counted.
    mutating func reply(to req: Int64) -> (what: AwaitedReply, skipped: [AwaitedReply])? {
        guard awaitingHead < awaiting.count, awaiting[awaitingHead].req <= req, awaiting[awaiting.count - 1].req >= req else { return nil }
        var skipped: [AwaitedReply] = []
        while awaitingHead < awaiting.count {
            let entry = awaiting[awaitingHead]
            awaitingHead += 1
            if entry.req == req {
                compactAwaiting()
                return (entry.what, skipped)
            }
            skipped.append(entry.what)
        }
        compactAwaiting()
        return nil
    }

    private mutating func compactAwaiting() {
        if awaitingHead == awaiting.count {
            awaiting.removeAll(keepingCapacity: awaiting.capacity <= 1 << 16)
            awaitingHead = 0
        } else if awaitingHead >= 4096 && awaitingHead * 2 >= awaiting.count {
            awaiting.removeSubrange(..<awaitingHead)
            awaitingHead = 0
        }
    }

    /// Empties both queues (the connection ended).
    /// - Returns: how many awaited replies were import publishes (their fate is unknown).
    mutating func reset() -> Int {
        let unconfirmed = awaiting[awaitingHead...].reduce(0) { $0 + ($1.what == .importPublish ? 1 : 0) }
        bytes.removeAll()
        head = 0
        awaiting.removeAll()
        awaitingHead = 0
        return unconfirmed
    }
}
