// The incremental parser of what a NATS server sends: INFO, MSG, HMSG, PING,
// PONG, +OK, -ERR (nats-io/nats.docs reference/nats-protocol; nats-server
// parser.go). Bytes arrive in any chunking, down to one at a time.
//
// Before editing: everything this parser buffers is bounded. A control line
// may be at most `maxControlLineBytes` (an INFO line `maxInfoLineBytes`)
// before its LF, or the stream is a `ProtocolViolation`; a message payload
// over `maxPayloadBytes` is skipped byte by byte without being buffered and
// reported as `.oversized`, so the connection stays in step and usable.

@_spi(Package) import EventBusProtocol

/// One message delivered by MSG or HMSG.
///
/// The header block is kept as it came (`headerBlock`) and read only when
/// asked: `headers` parses it into Strings, while a hot path walks its
/// fields as bytes (`Headers.forEachField`) without making any.
package struct Message: Equatable, Sendable {
    /// The subject it was published to, e.g. `eventbus.evt.host-b.order.created`.
    package var subject: String
    /// The subscription it was delivered for.
    package var sid: SubscriptionID
    /// The reply subject, if the publisher gave one.
    package var replyTo: String?
    /// The raw header block of an HMSG, `NATS/1.0\r\n...\r\n\r\n` (nil for MSG).
    package var headerBlock: [UInt8]?
    /// The payload bytes, exactly as published.
    package var payload: [UInt8]

    /// The header block parsed (nil for MSG, or when it is malformed: see `headerError`).
    package var headers: Headers? {
        guard let headerBlock else { return nil }
        return try? Headers.parse(headerBlock.span.bytes)
    }

    /// Why an HMSG's header block cannot be read (the message is still delivered).
    package var headerError: HeaderError? {
        guard let headerBlock else { return nil }
        do throws(HeaderError) {
            _ = try Headers.parse(headerBlock.span.bytes)
            return nil
        } catch {
            return error
        }
    }

    /// - Parameters:
    ///   - headers: encoded into `headerBlock` (ignored when `headerBlock` is given).
    package init(subject: String, sid: SubscriptionID, replyTo: String? = nil, headers: Headers? = nil, headerBlock: [UInt8]? = nil, payload: [UInt8]) {
        self.subject = subject
        self.sid = sid
        self.replyTo = replyTo
        self.headerBlock = headerBlock ?? headers?.encoded(withStatus: true)
        self.payload = payload
    }

    /// Equal when subject, sid, reply, payload and the parsed headers agree
    /// (two blocks that differ only in spacing hold the same headers).
    package static func == (a: Message, b: Message) -> Bool {
        a.subject == b.subject && a.sid == b.sid && a.replyTo == b.replyTo && a.payload == b.payload
            && (a.headerBlock == b.headerBlock || (a.headers == b.headers && a.headerError == b.headerError))
    }
}

/// One operation from the server.
package enum ServerOperation: Equatable, Sendable {
    case info(ServerInfo)
    case message(Message)
    /// A MSG/HMSG whose size (`#bytes`, or HMSG's `#total bytes`) is over
    /// `maxPayloadBytes`; its bytes were skipped.
    case oversized(subject: String, sid: SubscriptionID, bytes: Int)
    case ping
    case pong
    /// `+OK` (only with `verbose:true`, which this client never asks for).
    case ok
    /// `-ERR 'text'`: `text` without the quotes, as the server wrote it.
    case error(String)
}

/// The parser's state between chunks.
package struct Parser {
    /// Longest control line accepted before its LF (bytes). nats-server's own
    /// limit for what clients send is 4096 (`MAX_CONTROL_LINE_SIZE`, const.go).
    package let maxControlLineBytes: Int
    /// Longest INFO line accepted (bytes): INFO grows with `connect_urls`.
    package let maxInfoLineBytes: Int
    /// Largest MSG/HMSG payload buffered (bytes, header block included);
    /// `ClientState` sets it from INFO's `max_payload`.
    package var maxPayloadBytes: Int

    private enum State {
        case line
        /// A MSG/HMSG line was read; `total` payload bytes then CRLF follow.
        case payload(subject: String, sid: SubscriptionID, replyTo: String?, headerBytes: Int?, total: Int)
        /// Skipping an oversized payload: `remaining` bytes (its CRLF included).
        case skip(remaining: Int)
    }

    private var state = State.line
    private var buffer: [UInt8] = []
    /// Where unparsed bytes start in `buffer`.
    private var start = 0
    /// How far past `start` the current line was already searched for LF.
    private var searched = 0
    /// The fields of the line being parsed (`splitFields`).
    private var lineFields: [Range<Int>] = []
    /// The last subject read: a message on the same subject shares its
    /// String instead of making (allocating, validating) another one.
    private var lastSubject = ""

    /// - Parameters:
    ///   - maxControlLineBytes: default 4096.
    ///   - maxInfoLineBytes: default 64 KiB.
    ///   - maxPayloadBytes: default 1 MiB (nats-server's default `max_payload`).
    package init(maxControlLineBytes: Int = 4096, maxInfoLineBytes: Int = 64 << 10, maxPayloadBytes: Int = 1 << 20) {
        self.maxControlLineBytes = maxControlLineBytes
        self.maxInfoLineBytes = maxInfoLineBytes
        self.maxPayloadBytes = maxPayloadBytes
    }

    /// Bytes held for an operation not complete yet.
    package var bufferedBytes: Int { buffer.count - start }

    /// Forgets everything buffered (a new connection starts clean).
    package mutating func reset() {
        state = .line
        buffer = []
        start = 0
        searched = 0
    }

    /// Parses `bytes`, appending each complete operation to `operations` in order.
    /// - Throws: `ProtocolViolation` for a line that is too long, an unknown
    ///   operation, a malformed MSG/HMSG line or a payload without its CRLF.
    ///   Operations before the fault are in `operations`; the parser is then
    ///   unusable until `reset()`.
    package mutating func feed(_ bytes: RawSpan, into operations: inout [ServerOperation]) throws(ProtocolViolation) {
        buffer.append(copying: bytes)
        defer { compact() }
        while true {
            switch state {
            case .line:
                guard let lf = findLineFeed() else {
                    try checkPartialLine()
                    return
                }
                var end = lf
                if end > start && buffer[end - 1] == 0x0D { end -= 1 }
                let lineStart = start
                start = lf + 1
                searched = 0
                try parseLine(lineStart..<end, into: &operations)
            case .payload(let subject, let sid, let replyTo, let headerBytes, let total):
                guard buffer.count - start >= total + 2 else { return }
                let payloadStart = start
                guard buffer[start + total] == 0x0D, buffer[start + total + 1] == 0x0A else {
                    throw ProtocolViolation("payload of \(total) bytes on \(subject) is not followed by CRLF")
                }
                start += total + 2
                state = .line
                var message = Message(subject: subject, sid: sid, replyTo: replyTo, payload: [])
                if let headerBytes {
                    message.headerBlock = Array(buffer[payloadStart..<(payloadStart + headerBytes)])
                    message.payload = Array(buffer[(payloadStart + headerBytes)..<(payloadStart + total)])
                } else {
                    message.payload = Array(buffer[payloadStart..<(payloadStart + total)])
                }
                operations.append(.message(message))
            case .skip(let remaining):
                let available = buffer.count - start
                if available < remaining {
                    start = buffer.count
                    state = .skip(remaining: remaining - available)
                    return
                }
                start += remaining
                state = .line
            }
        }
    }

    private mutating func findLineFeed() -> Int? {
        let from = start + searched
        if from < buffer.count, let found = buffer.span.bytes.firstOffset(of: 0x0A, from: from) { return found }
        searched = buffer.count - start
        return nil
    }

    /// Throws when the line being read is already over its limit.
    private func checkPartialLine() throws(ProtocolViolation) {
        let length = buffer.count - start - 1  // the last byte may be the line's CR
        guard length > maxControlLineBytes else { return }
        if length <= maxInfoLineBytes && startsWithInfo(start) { return }
        throw ProtocolViolation("control line longer than \(startsWithInfo(start) ? maxInfoLineBytes : maxControlLineBytes) bytes")
    }

    private func startsWithInfo(_ at: Int) -> Bool {
        guard buffer.count - at >= 5 else { return false }
        return Headers.lower(buffer[at]) == 0x69 && Headers.lower(buffer[at + 1]) == 0x6E
            && Headers.lower(buffer[at + 2]) == 0x66 && Headers.lower(buffer[at + 3]) == 0x6F
            && (buffer[at + 4] == 0x20 || buffer[at + 4] == 0x09)
    }

    private mutating func compact() {
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 64 << 10)
            start = 0
        } else if start > 0 && start >= buffer.count / 2 {
            buffer.removeSubrange(0..<start)
            start = 0
        }
    }

    // MARK: Lines

    private mutating func parseLine(_ range: Range<Int>, into operations: inout [ServerOperation]) throws(ProtocolViolation) {
        let limit = startsWithInfo(range.lowerBound) ? maxInfoLineBytes : maxControlLineBytes
        guard range.count <= limit else { throw ProtocolViolation("control line longer than \(limit) bytes") }
        splitFields(range)
        let fields = lineFields
        guard let first = fields.first else { return }  // an empty line: nothing to do
        switch opName(first) {
        case Parser.opINFO:
            var jsonStart = first.upperBound
            while jsonStart < range.upperBound && isBlank(buffer[jsonStart]) { jsonStart += 1 }
            operations.append(.info(try ServerInfo(json: buffer.span.bytes.extracting(jsonStart..<range.upperBound))))
        case Parser.opMSG:
            guard fields.count == 4 || fields.count == 5 else { throw ProtocolViolation("MSG line has \(fields.count - 1) argument(s), not 3 or 4") }
            let total = try size(fields[fields.count - 1], "MSG #bytes")
            try beginPayload(fields, replyIndex: fields.count == 5 ? 3 : nil, headerBytes: nil, total: total, into: &operations)
        case Parser.opHMSG:
            guard fields.count == 5 || fields.count == 6 else { throw ProtocolViolation("HMSG line has \(fields.count - 1) argument(s), not 4 or 5") }
            let headerBytes = try size(fields[fields.count - 2], "HMSG #header bytes")
            let total = try size(fields[fields.count - 1], "HMSG #total bytes")
            guard headerBytes <= total else { throw ProtocolViolation("HMSG header size \(headerBytes) over total size \(total)") }
            try beginPayload(fields, replyIndex: fields.count == 6 ? 3 : nil, headerBytes: headerBytes, total: total, into: &operations)
        case Parser.opPING: operations.append(.ping)
        case Parser.opPONG: operations.append(.pong)
        case Parser.opOK: operations.append(.ok)
        case Parser.opERR:
            var text = text(first.upperBound..<range.upperBound).trimmingSpaces()
            if text.count >= 2 && text.hasPrefix("'") && text.hasSuffix("'") { text = String(text.dropFirst().dropLast()) }
            operations.append(.error(text))
        default:
            throw ProtocolViolation("unknown operation \(text(first).prefix(20).debugDescription)")
        }
    }

    private mutating func beginPayload(_ fields: [Range<Int>], replyIndex: Int?, headerBytes: Int?, total: Int, into operations: inout [ServerOperation]) throws(ProtocolViolation) {
        let subject = subjectText(fields[1])
        guard let sidValue = decimal(fields[2]) else { throw ProtocolViolation("sid \(text(fields[2]).prefix(20).debugDescription) is not one this client issued") }
        let sid = SubscriptionID(sidValue)
        if total > maxPayloadBytes {
            operations.append(.oversized(subject: subject, sid: sid, bytes: total))
            state = .skip(remaining: total + 2)
            return
        }
        state = .payload(subject: subject, sid: sid, replyTo: replyIndex.map { text(fields[$0]) }, headerBytes: headerBytes, total: total)
    }

    /// A decimal size of at most 10 digits.
    private func size(_ range: Range<Int>, _ what: String) throws(ProtocolViolation) -> Int {
        guard range.count <= 10, let value = decimal(range) else {
            throw ProtocolViolation("\(what) \(text(range).prefix(20).debugDescription) is not a size")
        }
        return Int(value)
    }

    /// Splits the line at `range` into `lineFields` (whose storage is kept
    /// between lines: an array per line was a tenth of an import's parse).
    /// (issue 36, linkimp2) Inside a field, eight bytes at a time up to the
    /// first blank (`blanks`): the subject is most of an HMSG line, and byte
    /// by byte the split was about 845 instructions per import.
    private mutating func splitFields(_ range: Range<Int>) {
        var fields = lineFields
        lineFields = []
        fields.removeAll(keepingCapacity: true)
        defer { lineFields = fields }
        var fieldStart = -1  // none
        let bytes = buffer.span
        let raw = bytes.bytes
        // One check for the line, then unchecked reads: checked per byte, the
        // split cost 1,002 instructions per import against 845 (callgrind,
        // the bridge's import path; 841 with the pointer loop before).
        precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "line outside the buffer")
        let end = range.upperBound
        var i = range.lowerBound
        while i < end {
            if fieldStart < 0 {
                if !isBlank(bytes[unchecked: i]) { fieldStart = i }
                i &+= 1
                continue
            }
            // Inside a field: to its end, eight bytes at a time up to the
            // word that holds a blank, then straight to that blank.
            var stop = end
            var j = i
            while j < end {
                if end &- j >= 8 {
                    let blanks = Parser.blanks(raw.unsafeLoadUnaligned(fromByteOffset: j, as: UInt64.self))
                    if blanks != 0 {
                        stop = j &+ (blanks.trailingZeroBitCount &>> 3)
                        break
                    }
                    j &+= 8
                } else {
                    if isBlank(bytes[unchecked: j]) {
                        stop = j
                        break
                    }
                    j &+= 1
                }
            }
            fields.append(fieldStart..<stop)
            fieldStart = -1
            // HMSG has at most 6 fields; a 7th is enough to refuse the
            // line. -ERR and INFO read their rest from `first` instead.
            if fields.count == 7 { return }
            i = stop &+ 1  // past the blank (or the line)
        }
        if fieldStart >= 0 { fields.append(fieldStart..<end) }  // a field of one byte ending the line
    }

    /// The high bit of each of the word's eight bytes (little-endian) that
    /// is a space or a tab, exactly: no borrow runs between bytes, so the
    /// lowest set bit is the first blank.
    @inline(__always) static func blanks(_ word: UInt64) -> UInt64 {
        @inline(__always) func zeroBytes(_ x: UInt64) -> UInt64 {
            let low: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
            return ~(((x & low) &+ low) | x | low)
        }
        return zeroBytes(word ^ 0x2020_2020_2020_2020) | zeroBytes(word ^ 0x0909_0909_0909_0909)
    }

    /// Whether any of the word's eight bytes is a space or a tab (exact: no
    /// borrow runs between bytes, so no byte is reported that is not one).
    @inline(__always) static func hasBlank(_ word: UInt64) -> Bool {
        @inline(__always) func zeroBytes(_ x: UInt64) -> UInt64 {
            let low: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
            return ~(((x & low) &+ low) | x | low)
        }
        return zeroBytes(word ^ 0x2020_2020_2020_2020) | zeroBytes(word ^ 0x0909_0909_0909_0909) != 0
    }

    @inline(__always) private func isBlank(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 }

    /// An operation name of at most 4 bytes, upper-cased, packed into a word
    /// (first byte lowest); 0 for a longer one. No String per line.
    private func opName(_ range: Range<Int>) -> UInt32 {
        guard range.count <= 4 else { return 0 }
        var word: UInt32 = 0
        var shift: UInt32 = 0
        for i in range {
            let b = buffer[i]
            word |= UInt32(b >= 0x61 && b <= 0x7A ? b - 0x20 : b) << shift
            shift += 8
        }
        return word
    }

    private static func op(_ name: StaticString) -> UInt32 {
        var word: UInt32 = 0
        for i in 0..<name.utf8CodeUnitCount { word |= UInt32(name.utf8Start[i]) << (8 * UInt32(i)) }
        return word
    }

    private static let opINFO = op("INFO"), opMSG = op("MSG"), opHMSG = op("HMSG"), opPING = op("PING"),
                       opPONG = op("PONG"), opOK = op("+OK"), opERR = op("-ERR")

    /// The decimal digits of `range` (at most 19), nil if any byte is not a digit or there is none.
    private func decimal(_ range: Range<Int>) -> UInt64? {
        guard !range.isEmpty, range.count <= 19 else { return nil }
        var value: UInt64 = 0
        for i in range {
            let d = buffer[i] &- 0x30
            guard d <= 9 else { return nil }
            value = value * 10 + UInt64(d)
        }
        return value
    }

    private func text(_ range: Range<Int>) -> String { String(decoding: buffer[range], as: UTF8.self) }

    /// The subject at `range`: `lastSubject` when the bytes are the same
    /// (the usual case: a subscriber gets a few subjects over and over).
    private mutating func subjectText(_ range: Range<Int>) -> String {
        let same = lastSubject.withUTF8Bytes { buffer.span.bytes.extracting(range).sameBytes(as: $0) }
        if same { return lastSubject }
        lastSubject = text(range)
        return lastSubject
    }
}
