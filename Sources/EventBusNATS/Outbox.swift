// Everything this client has to send, in order: the `wire` queue (bytes the
// driver may write now: protocol lines and released messages) and the `held`
// queue (messages waiting for a connection to be ready). Both together are
// bounded by message count and bytes (nats.go's ReconnectBufSize is 8 MiB;
// DESIGN-NOTES-1.1 A.7 adds 10,000 messages); a message over the bound is
// dropped and counted (drop-new).
//
// Before editing: when a connection ends, messages not completely written go
// back to the front of `held` in their order (a partly written one is sent
// again whole: the server discards a message it did not receive to its end),
// and protocol lines are discarded (the next connection sends its own).

/// A message to publish. Its headers are kept encoded (`headerBlock`), so
/// a hot path can write the block itself (`HeaderBlockWriter`) and nothing
/// encodes it twice.
package struct OutgoingMessage: Equatable, Sendable {
    package var subject: Subject
    /// The header block, `NATS/1.0\r\n...\r\n\r\n`: sent as HPUB when present, PUB when nil.
    package var headerBlock: [UInt8]?
    package var payload: [UInt8]
    /// The caller's sequence number for it (for drop reports), if any.
    package var tag: UInt64?
    /// (issue 36) The reply subject: a NATS request (`PUB subject reply ...`).
    package var replyTo: Subject?

    package init(subject: Subject, headers: Headers? = nil, payload: [UInt8], tag: UInt64? = nil) {
        self.init(subject: subject, headerBlock: headers?.encoded(), payload: payload, tag: tag)
    }

    /// - Parameter headerBlock: `Headers.encoded()` or `HeaderBlockWriter.finish()`.
    package init(subject: Subject, headerBlock: [UInt8]?, payload: [UInt8], tag: UInt64? = nil) {
        self.subject = subject
        self.headerBlock = headerBlock
        self.payload = payload
        self.tag = tag
    }

    /// The headers, parsed back from the block (for tests and logs; nil for a PUB).
    package var headers: Headers? {
        headerBlock.flatMap { block in block.withUnsafeBytes { try? Headers.parse($0) } }
    }

    /// Encodes it: the PUB/HPUB bytes and the size the server compares with
    /// `max_payload` (header block plus payload, as nats.go counts it).
    func encoded() -> (bytes: [UInt8], size: Int) {
        guard let headerBlock else { return (Encoder.pub(subject, replyTo: replyTo, payload: payload), payload.count) }
        return (Encoder.hpub(subject, replyTo: replyTo, headerBlock: headerBlock, payload: payload), headerBlock.count + payload.count)
    }
}

/// An encoded message in the outbox.
struct QueuedMessage {
    var bytes: [UInt8]
    /// Header block plus payload (bytes), for the `max_payload` check.
    var size: Int
    var tag: UInt64?
    var subject: Subject
    /// Reports and announcements: outside the bounds (never dropped for room).
    var exempt: Bool
}

/// The two queues and their accounting.
struct Outbox {
    enum Chunk {
        case control([UInt8])
        case message(QueuedMessage)

        var bytes: [UInt8] {
            switch self {
            case .control(let bytes): bytes
            case .message(let message): message.bytes
            }
        }
    }

    let limitBytes: Int
    let limitMessages: Int

    /// Writable now, oldest first; `wire[wireHead...]` are live.
    private var wire: [Chunk] = []
    private var wireHead = 0
    /// Bytes of `wire[wireHead]` already written.
    private var writtenOfHead = 0
    /// Bytes in `wire` not written yet, and how many of them are protocol lines.
    private(set) var wireBytes = 0
    private(set) var controlBytes = 0
    /// Waiting for a ready connection, oldest first.
    private var held: [QueuedMessage] = []

    /// Non-exempt messages in both queues, and their encoded bytes.
    private(set) var messageCount = 0
    private(set) var messageBytes = 0

    init(limitBytes: Int, limitMessages: Int) {
        self.limitBytes = limitBytes
        self.limitMessages = limitMessages
    }

    var heldCount: Int { held.count }
    var hasWritableBytes: Bool { wireBytes > 0 }

    /// Whether a non-exempt message of `bytes` encoded bytes fits the bounds.
    func fits(_ bytes: Int) -> Bool {
        messageCount + 1 <= limitMessages && messageBytes + bytes <= limitBytes
    }

    mutating func appendControl(_ bytes: [UInt8]) {
        wire.append(.control(bytes))
        wireBytes += bytes.count
        controlBytes += bytes.count
    }

    /// Appends to `wire` (connected) or `held` (not ready). The caller checked `fits`.
    mutating func append(_ message: QueuedMessage, toWire: Bool) {
        if !message.exempt {
            messageCount += 1
            messageBytes += message.bytes.count
        }
        if toWire {
            wire.append(.message(message))
            wireBytes += message.bytes.count
        } else {
            held.append(message)
        }
    }

    /// Takes every held message, oldest first (to release them to `wire`,
    /// after a check against the new server's `max_payload`).
    mutating func takeHeld() -> [QueuedMessage] {
        let taken = held
        held = []
        for message in taken where !message.exempt {
            messageCount -= 1
            messageBytes -= message.bytes.count
        }
        return taken
    }

    /// Up to `limit` bytes to write next (copied), empty when nothing is writable.
    func writable(limit: Int) -> [UInt8] {
        var out: [UInt8] = []
        var index = wireHead
        var skip = writtenOfHead
        while index < wire.count && out.count < limit {
            let bytes = wire[index].bytes
            let take = min(bytes.count - skip, limit - out.count)
            out.append(contentsOf: bytes[skip..<(skip + take)])
            skip = 0
            index += 1
        }
        return out
    }

    /// The driver wrote `count` bytes of what `writable` gave.
    mutating func didWrite(_ count: Int) {
        var left = count
        wireBytes -= count
        while left > 0 {
            precondition(wireHead < wire.count, "wrote more than the outbox held")
            let size = wire[wireHead].bytes.count
            let rest = size - writtenOfHead
            if left < rest {
                writtenOfHead += left
                return
            }
            left -= rest
            switch wire[wireHead] {
            case .message(let message) where !message.exempt:
                messageCount -= 1
                messageBytes -= message.bytes.count
            case .control(let bytes):
                controlBytes -= bytes.count
            case .message:
                break
            }
            wire[wireHead] = .control([])  // release the bytes now
            wireHead += 1
            writtenOfHead = 0
        }
        compactWire()
    }

    /// The connection ended: unwritten messages (a partly written one
    /// included) go back to the front of `held`; protocol lines are dropped.
    mutating func connectionEnded() {
        var back: [QueuedMessage] = []
        for chunk in wire[wireHead...] {
            if case .message(let message) = chunk { back.append(message) }
        }
        wire = []
        wireHead = 0
        writtenOfHead = 0
        wireBytes = 0
        controlBytes = 0
        held = back + held
    }

    /// Removes everything (the client closed).
    mutating func removeAll() {
        self = Outbox(limitBytes: limitBytes, limitMessages: limitMessages)
    }

    private mutating func compactWire() {
        if wireHead == wire.count {
            wire.removeAll(keepingCapacity: true)
            wireHead = 0
        } else if wireHead > 1024 && wireHead * 2 > wire.count {
            wire.removeSubrange(0..<wireHead)
            wireHead = 0
        }
    }
}
