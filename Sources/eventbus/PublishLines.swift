// `eventbus publish --lines TYPE`: every line of standard input becomes one
// event over one connection (`tail -F app.log | eventbus publish --lines
// app.log.line`). Requests are pipelined: lines are sent as they are read,
// replies are read as they come, and the two never wait for each other.
//
// Before editing: the broker answers requests of one connection in order
// (PROTOCOL.md "Requests"), so replies are matched to lines first-in
// first-out; an `error` without `req` (a line too large for the broker to
// read its `req`) belongs to the oldest unanswered line. Each `req` is the
// line's number in the input, so messages can name the line. A line is
// never buffered beyond the broker's frame limit (`maxLineBytes`): a longer
// one is reported and skipped up to its LF, like a line that is not UTF-8.
@_spi(Package) import EventBusCLI
@_spi(Package) import EventBusProtocol
@_spi(Package) import EventBusSystem

/// Bytes of unsent frames above which standard input is not read until the
/// broker has taken some (the broker back-pressures a busy connection).
private let maxUnsentBytes = 1 << 20

func publishLines(_ envelope: PublishEnvelope, json: Bool, printSeq: Bool, socket: String) throws(CLIError) {
    let connection = try BrokerConnection.connect(to: socket, client: "eventbus-publish")
    var state = LinePublisher(envelope: envelope, json: json, printSeq: printSeq)
    var inputOpen = true
    var chunk: [UInt8] = []

    while inputOpen || state.hasUnsent || !state.awaitingIsEmpty {
        var entries = [PollEntry(connection.descriptor, events: state.hasUnsent ? [.readable, .writable] : .readable)]
        let readInput = inputOpen && state.unsentBytes < maxUnsentBytes
        if readInput { entries.append(PollEntry(.standardInput, events: .readable)) }
        do {
            _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: -1)
        } catch {
            throw CLIError(.software, "\(error)")
        }

        if readInput && !entries[1].returned.isEmpty {
            inputOpen = try readInputChunk(&chunk, into: &state)
        }
        if entries[0].returned.contains(.writable) || (state.hasUnsent && !entries[0].returned.isEmpty) {
            try state.sendSome(connection)
        }
        if entries[0].returned.contains(.readable) || entries[0].returned.contains(.hangup) || entries[0].returned.contains(.error) {
            let outcome = try connection.receive(deadline: 0) { frame in
                state.handleReply(frame)
                return true
            }
            try state.output.flush()
            if outcome == .closed {
                if state.hasUnsent || !state.awaitingIsEmpty || inputOpen { throw connection.closedError }
                break
            }
        }
    }
    try state.output.flush()
    if let failure = state.firstFailure {
        if state.failedLines > 1 { printError("\(state.failedLines) lines were not published") }
        throw CLIError(status: failure.status, message: nil)
    }
}

/// Reads what standard input has (at most 64 KiB, through `chunk`) into `state`.
/// - Returns: false at the end of the input.
private func readInputChunk(_ chunk: inout [UInt8], into state: inout LinePublisher) throws(CLIError) -> Bool {
    chunk.removeAll(keepingCapacity: true)
    switch try readStandardInput(appendingTo: &chunk) {
    case .complete(0):
        state.finishInput()
        return false
    case .complete:
        state.feed(chunk.span.bytes)
    case .wouldBlock:
        break
    }
    return true
}

/// The bookkeeping of `publish --lines`: line splitting, frames not yet sent,
/// lines awaiting their reply, failures.
struct LinePublisher {
    let envelope: PublishEnvelope
    let json: Bool
    let printSeq: Bool
    /// Bytes of an input line whose LF has not arrived yet.
    var partialLine: [UInt8] = []
    /// The current line passed `maxLineBytes`: its bytes are dropped up to its LF.
    var skippingLine = false
    /// Longest line published: the broker's default frame limit
    /// (PROTOCOL.md "Framing", 1 MiB); the envelope makes the frame a little
    /// longer, and the broker answers `frame_too_large` for that rest.
    static let maxLineBytes = ProtocolConstants.defaultMaxFrameBytes
    /// Number of the last input line seen (1-based).
    var lineNumber: Int64 = 0
    /// Encoded frames; bytes before `sentOffset` are already written.
    var unsent: [UInt8] = []
    var sentOffset = 0
    /// Line numbers (= `req`) sent or queued and not yet answered, oldest first.
    var awaiting: [Int64] = []
    var awaitingHead = 0
    var output = StandardOutput()
    var firstFailure: CLIError?
    var failedLines = 0

    init(envelope: PublishEnvelope, json: Bool, printSeq: Bool) {
        self.envelope = envelope
        self.json = json
        self.printSeq = printSeq
    }

    var unsentBytes: Int { unsent.count - sentOffset }
    var hasUnsent: Bool { unsentBytes > 0 }

    /// Splits `chunk` into lines and encodes each complete one.
    mutating func feed(_ chunk: RawSpan) {
        let bytes = Span<UInt8>(_bytes: chunk)
        var start = 0
        for i in 0..<bytes.count where bytes[i] == 0x0A {
            if skippingLine {
                skippingLine = false
                lineTooLong()
            } else if partialLine.isEmpty {
                encodeLine(chunk.extracting(start..<i))
            } else if partialLine.count + (i - start) > LinePublisher.maxLineBytes + 1 {
                partialLine.removeAll()
                lineTooLong()
            } else {
                partialLine.append(copying: chunk.extracting(start..<i))
                let line = partialLine
                partialLine.removeAll(keepingCapacity: true)
                encodeLine(line.span.bytes)
            }
            start = i + 1
        }
        guard start < bytes.count, !skippingLine else { return }
        if partialLine.count + (bytes.count - start) > LinePublisher.maxLineBytes + 1 {
            partialLine = []
            skippingLine = true
        } else {
            partialLine.append(copying: chunk.extracting(start...))
        }
    }

    /// End of input: a last line without LF is published too.
    mutating func finishInput() {
        if skippingLine {
            skippingLine = false
            lineTooLong()
            return
        }
        guard !partialLine.isEmpty else { return }
        let line = partialLine
        partialLine = []
        encodeLine(line.span.bytes)
    }

    /// Counts and reports a line over `maxLineBytes` (not published).
    private mutating func lineTooLong() {
        lineNumber += 1
        recordFailure(CLIError(.dataError, "line \(lineNumber) is longer than \(LinePublisher.maxLineBytes) bytes (the broker's frame limit); not published"))
    }

    /// One line (without its LF; a CR before the LF is dropped) to one frame:
    /// a JSON string in text mode, the line's JSON value compacted with
    /// `--json-lines` (blank lines skipped). A line that is not UTF-8 is bad
    /// input: reported with its number, not published (exit 65 at the end).
    private mutating func encodeLine(_ raw: RawSpan) {
        lineNumber += 1
        var bytes = Array(copying: raw)
        if bytes.last == 0x0D { bytes.removeLast() }
        let data: JSONText
        if json {
            if isBlank(bytes) { return }
            do {
                data = try validatedJSON(bytes, origin: "line \(lineNumber)", textHint: "; without --json-lines each line is published as a string")
            } catch {
                recordFailure(error)
                return
            }
        } else {
            guard let text = String(validating: bytes, as: UTF8.self) else {
                recordFailure(CLIError(.dataError, "line \(lineNumber) is not valid UTF-8; not published"))
                return
            }
            data = JSONText(quoting: text)
        }
        envelope.request(data: data).encode(req: lineNumber, to: &unsent)
        awaiting.append(lineNumber)
    }

    /// Writes what the socket takes now.
    mutating func sendSome(_ connection: BrokerConnection) throws(CLIError) {
        let written = try connection.sendSome(unsent.span.bytes.extracting(sentOffset...))
        sentOffset += written
        if sentOffset == unsent.count {
            unsent.removeAll(keepingCapacity: true)
            sentOffset = 0
        } else if sentOffset > 1 << 20 {
            unsent.removeSubrange(..<sentOffset)
            sentOffset = 0
        }
    }

    /// Matches one broker frame to the oldest line awaiting a reply.
    mutating func handleReply(_ frame: RawSpan) {
        guard let reply = (try? BrokerFrame.read(frame))?.reply, awaitingHead < awaiting.count else { return }
        if let req = reply.req, req != awaiting[awaitingHead] { return }  // not ours
        let line = awaiting[awaitingHead]
        awaitingHead += 1
        if awaitingHead > 4096 && awaitingHead * 2 > awaiting.count {
            awaiting.removeSubrange(..<awaitingHead)
            awaitingHead = 0
        }
        if reply.isOK {
            if printSeq, let seq = reply.unsigned("seq") { output.append("\(seq)\n") }
        } else {
            recordFailure(reply.failure("publishing line \(line)"))
        }
    }

    private mutating func recordFailure(_ error: CLIError) {
        failedLines += 1
        if let message = error.message { printError(message) }
        if firstFailure == nil { firstFailure = error }
    }

    var awaitingIsEmpty: Bool { awaitingHead == awaiting.count }
}
