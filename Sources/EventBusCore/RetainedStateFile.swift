// The format of the state file that keeps retained events across restarts
// (`<state-dir>/retained.jsonl`, PROTOCOL.md "Retained events and history
// (1.1)"): JSON Lines, a header line and then each retained event as the
// exact event frame the broker delivered, oldest seq first:
//
//     {"op":"eventbus-state","format":1}
//     {"op":"event","seq":7,"type":"currency.changed","time":"...","source":"settings","id":"...","pid":812,"uid":1000,"gid":1000,"data":{"code":"EUR"}}
//
// After a whole rewrite the server appends changes: an event frame retained
// later (for a type found twice the higher seq wins) or a clear line
// `{"op":"eventbus-clear","type":"currency.changed","seq":9}` (the events of
// the type up to that seq are gone). Seqs compare only within one run, so
// the first write of a run is a whole rewrite, and so is a write whose
// append would take the file past twice the retained bytes plus 1 MiB (a
// compaction; EventBusServer's StatePersistence.swift decides).
//
// Before editing: reading must survive any file (truncated by a crash,
// damaged, edited by hand): each line is checked on its own, a bad one is
// reported and skipped, the rest is kept. A line is accepted only as an
// event frame the broker itself could have written (the keys it writes, no
// other, starting `{"op":"event","seq":`), because its bytes are forwarded
// as they are (PROTOCOL.md "Framing": the broker never forwards a byte it
// has not validated). The file is written by the server: a whole rewrite
// through a temporary file, fsync and rename (docs/PROTOCOL-NOTES.md), the
// changes appended to this run's file; a line cut short by a crash is one
// bad line, skipped.
@_spi(Package) import EventBusProtocol

package enum RetainedStateFile {
    /// The file name inside the state directory.
    package static let fileName = "retained.jsonl"

    /// The first line: `{"op":"eventbus-state","format":1}` and its LF.
    package static let header: [UInt8] = Array("{\"op\":\"eventbus-state\",\"format\":1}\n".utf8)

    /// What reading a state file found.
    package struct Report {
        /// Events restored into the broker.
        package var restored = 0
        /// One line per problem (bad line, left out over a limit), for the log.
        package var problems: [String] = []
        /// Valid events in the old seq order (consumed by `Broker.restoreRetained`).
        var events: [(oldSeq: UInt64, type: String, frame: OutboundChunk, uid: UInt32)] = []
    }

    /// The line appended when the retained event of `type` is cleared:
    /// `{"op":"eventbus-clear","type":"a.b","seq":41}` and its LF, where
    /// `seq` is the broker's seq at the time (the events of `type` up to it
    /// are gone; one retained later has a higher seq).
    package static func clearLine(type: String, seq: UInt64) -> OutboundChunk {
        var line: [UInt8] = []
        FrameEncoder.appendASCII("{\"op\":\"eventbus-clear\"", to: &line)
        FrameEncoder.appendField("type", string: type, to: &line)
        FrameEncoder.appendField("seq", int: seq, to: &line)
        FrameEncoder.appendASCII("}\n", to: &line)
        return OutboundChunk.copying(line.span.bytes)
    }

    /// The frames of `snapshot` in seq order, each one line with its LF, to
    /// be written after `header`.
    package static func orderedFrames(_ snapshot: RetainedSnapshot) -> [OutboundChunk] {
        snapshot.events.sorted { $0.seq < $1.seq }.map(\.frame)
    }

    /// Reads a state file's bytes: the valid events (one per type: the one
    /// with the highest old seq) in the old seq order, and the problems.
    static func read(_ bytes: RawSpan) -> Report {
        var reader = Reader()
        reader.feed(bytes)
        return reader.finish()
    }

    /// Reads a state file in pieces, whole: every line of the file counts,
    /// however long it is (the broker keeps it below twice
    /// `--max-retained-bytes` plus 1 MiB by rewriting it, StatePersistence.swift),
    /// so a later value or clear line is never left unread, and what is
    /// held meanwhile is the events live at that point of the file (a clear
    /// line drops its type's event as it is read) plus one line.
    package struct Reader {
        var report = Report()
        /// The newest event of each type read so far (a clear line removes it).
        var byType: [String: (oldSeq: UInt64, type: String, frame: OutboundChunk, uid: UInt32)] = [:]
        var clearedThrough: [String: UInt64] = [:]
        var lineNumber = 0
        var badLines = 0
        var splitter: FrameSplitter? = FrameSplitter(maxFrameBytes: 64 << 20)

        package init() {}

        /// Reads the next bytes of the file.
        package mutating func feed(_ bytes: RawSpan) {
            var lines = splitter.take()!
            defer { splitter = lines }
            _ = lines.feed(bytes) { piece in
                handle(piece)
                return true
            }
        }

        /// After the last bytes: the report (its events in the old seq order).
        package mutating func finish() -> Report {
            var lines = splitter.take()!
            defer { splitter = lines }
            if lines.hasPartialFrame {
                // A last line without its LF: the write was cut short (a crash
                // between writes cannot cause it, a damaged disk can). Keep what parses.
                lines.finish { piece in
                    handle(piece)
                    return true
                }
            }
            if badLines > 10 { report.problems.append("\(badLines - 10) more bad lines skipped") }
            report.events = byType.values.sorted { $0.oldSeq < $1.oldSeq }
            byType = [:]
            return report
        }

        private mutating func handle(_ piece: SplitFrame) {
            lineNumber += 1
            switch piece {
            case .tooLarge(let size):
                badLines += 1
                report.problems.append("line \(lineNumber): \(size) bytes, too long for an event; skipped")
            case .frame(let line):
                handle(line: line)
            }
        }

        private mutating func handle(line: RawSpan) {
            if let (type, seq) = RetainedStateFile.clear(in: line) {
                clearedThrough[type] = max(clearedThrough[type] ?? 0, seq)
                // Dropped as it is read, so a long file of churn never
                // holds more than the events live at that point.
                if let held = byType[type], held.oldSeq <= seq { byType[type] = nil }
                return
            }
            switch RetainedStateFile.event(in: line) {
            case .success(let found?):
                if let through = clearedThrough[found.type], found.oldSeq <= through { return }
                if let held = byType[found.type], held.oldSeq >= found.oldSeq { return }
                byType[found.type] = found
            case .success(nil):
                break
            case .failure(let reason):
                badLines += 1
                if badLines <= 10 { report.problems.append("line \(lineNumber): \(reason); skipped") }
            }
        }
    }

    /// The keys the broker writes in an event frame (`origin` only for
    /// bridged events, (1.3) `key` only for keyed ones: before it was here,
    /// a keyed retained event was skipped as a bad line at every restart).
    static let eventKeys: Set<String> = ["op", "seq", "type", "time", "source", "id", "pid", "uid", "gid", "key", "data", "origin"]

    /// One line: an event, nil for the header (or another state line), or why it is bad.
    static func event(in line: RawSpan) -> Result<(oldSeq: UInt64, type: String, frame: OutboundChunk, uid: UInt32)?, LineProblem> {
        let members: [JSONMember]
        do {
            members = try JSONObject.members(line)
        } catch {
            return .failure(LineProblem("not a JSON object (\(error))"))
        }
        let keys = members.map(\.key)
        if keys.first == "op", let op = members.first, op.value.isString, JSONString.decode(line, op.value) == "eventbus-state" {
            return .success(nil)
        }
        guard Set(keys).count == keys.count else { return .failure(LineProblem("a key appears twice")) }
        // A file written before the broker refused them may hold raw line
        // separators, which a line reader splits (PROTOCOL-NOTES.md "Framing").
        if case .failure(let error) = Result(catching: { () throws(JSONSyntaxError) in try JSONScanner.validate(line, maxDepth: ProtocolConstants.maxDepth, lineSafe: true) }) {
            return .failure(LineProblem("\(error)"))
        }
        if let unknown = keys.first(where: { !eventKeys.contains($0) }) { return .failure(LineProblem("unexpected key \"\(unknown)\"")) }
        guard case .event(let fields)? = try? BrokerFrame.read(line) else { return .failure(LineProblem("not an event frame")) }
        let prefix = Array("{\"op\":\"event\",\"seq\":".utf8)
        let count = line.byteCount
        guard count > prefix.count + 2, line.extracting(first: prefix.count).sameBytes(as: prefix.span.bytes),
              line.unsafeLoad(fromByteOffset: count - 1, as: UInt8.self) == 0x7D else {
            return .failure(LineProblem("not an event frame as the broker writes it"))
        }
        let typeName = JSONString.decode(line, fields.type)
        guard let type = EventType(typeName), !type.isReserved else { return .failure(LineProblem("invalid event type \(JSONString.quoted(typeName))")) }
        guard let time = fields.time, time.count == 26, fields.source != nil, fields.id != nil, fields.data != nil,
              let pid = fields.pid, Int32(exactly: pid) != nil,
              let uid = fields.uid.flatMap({ UInt32(exactly: $0) }),
              let gid = fields.gid, UInt32(exactly: gid) != nil else {
            return .failure(LineProblem("event lacks time, source, id, data, pid, uid or gid"))
        }
        if let origin = members.first(where: { $0.key == "origin" }), origin.value.kind != .object {
            return .failure(LineProblem("origin is not an object"))
        }
        if let key = members.first(where: { $0.key == "key" }), !key.value.isString || !RequestDecoder.isValidKeyLength(line, key.value) {
            return .failure(LineProblem("key is not a string of 1-\(ProtocolConstants.maxKeyBytes) bytes"))
        }
        var withLF = Array(copying: line)
        withLF.append(0x0A)
        let frame = OutboundChunk.copying(withLF.span.bytes)
        return .success((fields.seq, type.name, frame, uid))
    }

    /// A clear line (`clearLine`): its type and seq; nil for any other line.
    static func clear(in line: RawSpan) -> (type: String, seq: UInt64)? {
        let prefix = Array("{\"op\":\"eventbus-clear\",".utf8)
        guard line.byteCount > prefix.count, line.extracting(first: prefix.count).sameBytes(as: prefix.span.bytes),
              let members = try? JSONObject.members(line),
              members.map(\.key) == ["op", "type", "seq"], members[1].value.isString,
              let seq = JSONInteger.unsigned(line, members[2].value) else { return nil }
        return (JSONString.decode(line, members[1].value), seq)
    }

    /// Why a line was skipped.
    struct LineProblem: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
