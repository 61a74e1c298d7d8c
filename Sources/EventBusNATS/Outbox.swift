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
@_spi(Package) import EventBusProtocol

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
        headerBlock.flatMap { block in try? Headers.parse(block.span.bytes) }
    }

    /// Encodes it: the PUB/HPUB bytes and the size the server compares with
    /// `max_payload` (header block plus payload, as nats.go counts it).
    func encoded() -> (bytes: [UInt8], size: Int) {
        guard let headerBlock else { return (Encoder.pub(subject, replyTo: replyTo, payload: payload), payload.count) }
        return (Encoder.hpub(subject, replyTo: replyTo, headerBlock: headerBlock, payload: payload), headerBlock.count + payload.count)
    }

    /// What the server compares with `max_payload`: header block plus payload.
    var size: Int { (headerBlock?.count ?? 0) + payload.count }

    /// The length of `encoded().bytes`, without encoding (for the outbox's bound).
    var encodedCount: Int {
        func digits(_ n: Int) -> Int {
            var count = 1
            var rest = n
            while rest >= 10 { rest /= 10; count += 1 }
            return count
        }
        let subjects = subject.text.utf8.count + (replyTo.map { $0.text.utf8.count + 1 } ?? 0)
        guard let headerBlock else { return 4 + subjects + 1 + digits(payload.count) + 2 + payload.count + 2 }
        let total = headerBlock.count + payload.count
        return 5 + subjects + 1 + digits(headerBlock.count) + 1 + digits(total) + 2 + total + 2
    }

    /// The PUB/HPUB bytes, appended to `out`; - Returns: how many.
    func append(to out: inout [UInt8]) -> Int {
        let before = out.count
        if let headerBlock {
            Encoder.appendHpub(subject, replyTo: replyTo, headerBlock: headerBlock, payload: payload, to: &out)
        } else {
            Encoder.appendPub(subject, replyTo: replyTo, payload: payload, to: &out)
        }
        return out.count - before
    }
}

/// (issue 36) A message its sender writes straight into the outbox, header
/// block and payload (the bridge's export: `ClientState.publish(_:writing:)`),
/// with no `OutgoingMessage`, block array or payload array in between. The
/// sizes come first, for the HPUB line and the bounds; the writer must then
/// write exactly `headerCount + payloadCount` bytes (checked: a wrong count
/// would garble the connection, so it stops the process).
package struct PlacedMessage: Sendable {
    package var subject: Subject
    /// The header block's bytes, `NATS/1.0\r\n` to its empty line.
    package var headerCount: Int
    package var payloadCount: Int
    /// The caller's sequence number for it (for drop reports).
    package var tag: UInt64?

    package init(subject: Subject, headerCount: Int, payloadCount: Int, tag: UInt64?) {
        self.subject = subject
        self.headerCount = headerCount
        self.payloadCount = payloadCount
        self.tag = tag
    }

    /// What the server compares with `max_payload`: header block plus payload.
    var size: Int { headerCount + payloadCount }

    /// The length of the HPUB it appends (`OutgoingMessage.encodedCount`'s rule).
    var encodedCount: Int {
        5 + subject.text.utf8.count + 1 + Self.digits(headerCount) + 1 + Self.digits(size) + 2 + size + 2
    }

    private static func digits(_ n: Int) -> Int {
        var count = 1
        var rest = n
        while rest >= 10 { rest /= 10; count += 1 }
        return count
    }

    /// `HPUB <subject> <#header bytes> <#total bytes>\r\n`, what `write`
    /// writes, `\r\n`, appended to `out` (the bytes `Encoder.appendHpub`
    /// writes for the same block and payload). - Returns: how many.
    func append(to out: inout [UInt8], _ write: (inout RawWriter) -> Void) -> Int {
        let count = encodedCount
        let before = out.count
        out.appendWritten(bound: count + RawWriter.slack) { w in
            w.put("HPUB ")
            subject.text.withByteView { w.put($0) }
            w.put(0x20)
            w.put(int: UInt64(headerCount))
            w.put(0x20)
            w.put(int: UInt64(size))
            w.put("\r\n")
            let body = w.count
            write(&w)
            precondition(w.count - body == size, "a placed message wrote other than its sizes")
            w.put("\r\n")
        }
        assert(out.count - before == count, "PlacedMessage.encodedCount is not the encoded length")
        return count
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
///
/// The wire queue is one contiguous buffer (`wire`, unwritten bytes from
/// `wireStart`) with a record per control line or message in it
/// (`entries`, from `entryHead`): a message published on a ready connection
/// is encoded straight into it, and the driver writes from it without a
/// copy (`withWritable`). Before, each message was its own array, and each
/// write gathered up to 256 KiB of them into a new one (issue 36: an
/// allocation and two copies per export). Held messages keep their own bytes.
struct Outbox {
    /// What one stretch of the wire buffer is.
    struct Entry {
        /// Its bytes in `wire`.
        var count: Int
        /// nil for a protocol line.
        var message: MessageRecord?
    }

    /// A message on the wire, without its bytes (they are in `wire`).
    struct MessageRecord {
        var size: Int
        var tag: UInt64?
        var subject: Subject
        var exempt: Bool
    }

    let limitBytes: Int
    let limitMessages: Int

    private var wire: [UInt8] = []
    private var wireStart = 0
    private var entries: [Entry] = []
    private var entryHead = 0
    private var writtenOfHead = 0
    private(set) var wireBytes = 0
    private(set) var controlBytes = 0
    private var held: [QueuedMessage] = []

    /// Bounded: messages (not control lines) in both queues.
    private(set) var messageCount = 0
    private(set) var messageBytes = 0

    /// The wire buffer's capacity kept once it is empty (more is given back).
    static let keptWireCapacity = 1 << 20

    init(limitBytes: Int, limitMessages: Int) {
        self.limitBytes = limitBytes
        self.limitMessages = limitMessages
    }

    var heldCount: Int { held.count }
    var hasWritableBytes: Bool { wireBytes > 0 }

    /// Whether a message of `bytes` fits the bounds.
    func fits(_ bytes: Int) -> Bool {
        messageCount + 1 <= limitMessages && messageBytes + bytes <= limitBytes
    }

    mutating func appendControl(_ bytes: [UInt8]) {
        wire.append(contentsOf: bytes)
        entries.append(Entry(count: bytes.count, message: nil))
        wireBytes += bytes.count
        controlBytes += bytes.count
    }

    /// Queues an encoded message: on the wire, or held.
    mutating func append(_ message: QueuedMessage, toWire: Bool) {
        if !message.exempt {
            messageCount += 1
            messageBytes += message.bytes.count
        }
        if toWire {
            wire.append(contentsOf: message.bytes)
            entries.append(Entry(count: message.bytes.count, message: MessageRecord(size: message.size, tag: message.tag, subject: message.subject, exempt: message.exempt)))
            wireBytes += message.bytes.count
        } else {
            held.append(message)
        }
    }

    /// Encodes `message` straight onto the wire (a ready connection; not exempt).
    /// - Returns: its encoded length.
    mutating func appendToWire(_ message: OutgoingMessage, size: Int) -> Int {
        let count = message.append(to: &wire)
        assert(count == message.encodedCount, "OutgoingMessage.encodedCount is not the encoded length")
        entries.append(Entry(count: count, message: MessageRecord(size: size, tag: message.tag, subject: message.subject, exempt: false)))
        wireBytes += count
        messageCount += 1
        messageBytes += count
        return count
    }

    /// (issue 36) `appendToWire(_:size:)` for a message its sender writes in place.
    mutating func appendToWire(_ message: PlacedMessage, _ write: (inout RawWriter) -> Void) {
        let count = message.append(to: &wire, write)
        entries.append(Entry(count: count, message: MessageRecord(size: message.size, tag: message.tag, subject: message.subject, exempt: false)))
        wireBytes += count
        messageCount += 1
        messageBytes += count
    }

    mutating func takeHeld() -> [QueuedMessage] {
        let taken = held
        held = []
        for message in taken where !message.exempt {
            messageCount -= 1
            messageBytes -= message.bytes.count
        }
        return taken
    }

    /// At most `limit` bytes of the wire queue, from where writing stopped
    /// (a copy: for tests; the driver uses `withWritable`).
    func writable(limit: Int) -> [UInt8] {
        withWritable(limit: limit) { Array(copying: $0) }
    }

    /// Calls `body` with at most `limit` bytes of the wire queue, from where
    /// writing stopped (empty when nothing is to be written); no copy.
    func withWritable<R>(limit: Int, _ body: (RawSpan) -> R) -> R {
        let end = wireStart + min(limit, wireBytes)
        return body(wire.span.bytes.extracting(wireStart..<end))
    }

    /// `count` bytes from the head of the wire queue reached the socket.
    mutating func didWrite(_ count: Int) {
        var left = count
        wireBytes -= count
        wireStart += count
        while left > 0 {
            precondition(entryHead < entries.count, "wrote more than the outbox held")
            let entry = entries[entryHead]
            let rest = entry.count - writtenOfHead
            if left < rest {
                writtenOfHead += left
                return
            }
            left -= rest
            if let message = entry.message {
                if !message.exempt {
                    messageCount -= 1
                    messageBytes -= entry.count
                }
            } else {
                controlBytes -= entry.count
            }
            entryHead += 1
            writtenOfHead = 0
        }
        compactWire()
    }

    /// The connection ended: unfinished messages go back to the front of
    /// `held`, control lines are dropped.
    mutating func connectionEnded() {
        var back: [QueuedMessage] = []
        var offset = wireStart - writtenOfHead
        for entry in entries[entryHead...] {
            if let message = entry.message {
                back.append(QueuedMessage(bytes: Array(wire[offset..<(offset + entry.count)]), size: message.size, tag: message.tag,
                                          subject: message.subject, exempt: message.exempt))
            }
            offset += entry.count
        }
        wire = []
        wireStart = 0
        entries = []
        entryHead = 0
        writtenOfHead = 0
        wireBytes = 0
        controlBytes = 0
        held = back + held
    }

    /// Forgets everything (a closed client).
    mutating func removeAll() {
        self = Outbox(limitBytes: limitBytes, limitMessages: limitMessages)
    }

    /// Drops written bytes and entries: all of them once everything is
    /// written, else once they are most of the buffer (a copy of less than half).
    private mutating func compactWire() {
        if wireStart == wire.count {
            wire.removeAll(keepingCapacity: wire.capacity <= Outbox.keptWireCapacity)
            wireStart = 0
        } else if wireStart > 64 << 10 && wireStart * 2 > wire.count {
            wire.removeSubrange(0..<wireStart)
            wireStart = 0
        }
        if entryHead == entries.count {
            entries.removeAll(keepingCapacity: true)
            entryHead = 0
        } else if entryHead > 1024 && entryHead * 2 > entries.count {
            entries.removeSubrange(0..<entryHead)
            entryHead = 0
        }
    }
}
