// What the bridge's bus connection has to send and what it waits for: the
// encoded request frames not yet taken by the writer, and, in order, the
// requests whose `ok`/`error` has not come back.
//
// Before editing: imports are published without `req` (success is silent,
// PROTOCOL.md "Requests"), so the broker writes no reply per event; each
// batch of them is closed by one `ping` with `req` (`markImports`), whose
// `ok` confirms every import before it, less those answered with an `error`
// meanwhile. The broker answers one connection's requests in order, so
// replies are matched by popping the front of `awaiting`, never by search.

import EventBusBridge
import EventBusProtocol

/// A request whose reply has not arrived yet.
enum AwaitedReply: Equatable {
    /// The connection's `hello`.
    case hello
    /// A `subscribe` to an export pattern.
    case subscribe(Pattern)
    /// The `ping` after `count` imports.
    case importBatch(count: Int)
}

/// The connection's outgoing frames and awaited replies. One owner (under the connection's lock).
struct BusOutbox {
    /// Encoded frames the writer has not taken yet.
    private(set) var bytes: [UInt8] = []
    /// Bytes the writer took and has not written yet (for the bound).
    var writing = 0
    private var awaiting: [(req: Int64, what: AwaitedReply)] = []
    private var awaitingHead = 0
    private var nextReq: Int64 = 1
    /// Imports queued since the last `markImports`.
    private(set) var unmarkedImports = 0

    /// Bytes queued or being written.
    var pendingBytes: Int { bytes.count + writing }

    /// Appends `request` with the next `req` and remembers what it was.
    mutating func append(_ request: ClientRequest, awaiting what: AwaitedReply) {
        let req = nextReq
        nextReq += 1
        request.encode(req: req, to: &bytes)
        awaiting.append((req, what))
    }

    /// Appends an import's `publish`, without `req`.
    mutating func appendImport(_ event: LocalPublish) {
        event.appendFrame(to: &bytes)
        unmarkedImports += 1
    }

    /// Closes the current batch of imports with a `ping` (nothing when there is none).
    mutating func markImports() {
        guard unmarkedImports > 0 else { return }
        append(.ping, awaiting: .importBatch(count: unmarkedImports))
        unmarkedImports = 0
    }

    /// Takes every queued byte for the writer (which reports progress in
    /// `writing`), swapped with the writer's emptied buffer `spare`, so the
    /// outbox keeps an allocated buffer instead of growing a new one per batch.
    mutating func take(swappingWith spare: inout [UInt8]) {
        spare.removeAll(keepingCapacity: spare.capacity <= 1 << 20)
        swap(&spare, &bytes)
        writing += spare.count
    }

    /// The request the reply with `req` answers, removed from the queue; nil
    /// when `req` is not the oldest awaited one's (then nothing is removed:
    /// a broker that follows PROTOCOL.md answers in order).
    mutating func reply(to req: Int64) -> AwaitedReply? {
        guard awaitingHead < awaiting.count, awaiting[awaitingHead].req == req else { return nil }
        let what = awaiting[awaitingHead].what
        awaitingHead += 1
        if awaitingHead == awaiting.count {
            awaiting.removeAll(keepingCapacity: awaiting.capacity <= 1 << 12)
            awaitingHead = 0
        } else if awaitingHead >= 1024 && awaitingHead * 2 >= awaiting.count {
            awaiting.removeSubrange(..<awaitingHead)
            awaitingHead = 0
        }
        return what
    }

    /// Empties everything (the connection ended).
    /// - Returns: how many imports were sent or queued without their batch's `ok`.
    mutating func reset() -> Int {
        var unconfirmed = unmarkedImports
        for entry in awaiting[awaitingHead...] {
            if case .importBatch(let count) = entry.what { unconfirmed += count }
        }
        self = BusOutbox()
        return unconfirmed
    }
}
