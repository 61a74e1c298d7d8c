// The bridge's session with the local bus, with no I/O: what it says on each
// new connection (`hello` as client `eventbus-bridge`, overflow `wait`; one
// `subscribe` per export pattern, with `since` and `instance` from
// `BusPosition` after the first connection, so exports published meanwhile
// that the broker's history still holds are replayed), the imports it queues
// as `publish` with `origin`, and what each frame from the broker means:
// events for the export patterns (data bytes unchanged, `origin` presence),
// replies matched with their requests (`BusOutbox`), `dropped`, `gap`. The
// I/O (socket, framing, reconnect, the epoll loop) is BridgeLoop.swift's;
// frames come in whole, reports go out in order.
//
// Before editing: events are gathered into one `.events` batch per read (the
// loop calls `endOfRead`); any other report flushes the batch first, so the
// reports keep the order of the frames. Only this file knows the bus
// protocol's session rules, so that a shared session state machine
// (issue 26) can replace it without touching the loop.
import EventBusBridge
import EventBusProtocol

/// What the bus connection tells the bridge, in order, on the bus thread.
enum BusReport {
    /// `hello` was answered: `instance` is the broker's, `features` its list (raw JSON).
    case up(instance: String, features: String, isReconnect: Bool)
    /// The connection ended; `unconfirmedImports` publishes were sent without an answer.
    case down(reason: String, unconfirmedImports: Int)
    /// A connection attempt failed (`failures` in a row so far).
    case attemptFailed(reason: String, failures: Int)
    /// Events for the export patterns, in order (the consecutive events of one read).
    case events([LocalEvent])
    /// `{"op":"gap","type":"a.>","since_seq":10,"first_seq":50}` after a
    /// resubscribe with `since` (the first of the connection only): the
    /// history did not reach back, or the broker is a new run (`position`
    /// says which, and how far the bridge had read in the old one).
    case gap(pattern: String, sinceSeq: UInt64, firstSeq: UInt64, position: BusPosition)
    /// `{"op":"dropped","count":3,"since_seq":17}`: the broker dropped events for us.
    case dropped(count: UInt64, sinceSeq: UInt64)
    /// The broker confirmed `count` imports (a batch's `ping` answered).
    case imported(count: Int)
    /// The broker refused an import (`forbidden`: `.denied`; anything else: `.lost`).
    case importRefused(BridgeCore.ImportOutcome, message: String)
    /// The broker refused the `hello` or a `subscribe` (`request` names it).
    case refused(request: String, code: String, message: String)
    /// Anything else worth a log line (an error without `req`, an unreadable frame).
    case notice(String)
}

/// The bridge's bus session (see the file comment). One owner, the loop.
struct LocalBus {
    /// The export patterns (subscribed after every `hello`).
    let patterns: [Pattern]
    /// The socket path (for the status).
    let path: String
    /// Where the export side has got to (for `since` on the next connection).
    private(set) var position = BusPosition()
    private(set) var outbox = BusOutbox()
    /// A connection is open: imports may be queued.
    private(set) var connected = false
    /// Its `hello` was answered.
    private(set) var greeted = false
    private var everGreeted = false
    private(set) var reconnects = 0
    private(set) var replayed = 0
    private(set) var gaps = 0
    /// Errors received for the oldest unconfirmed import batch.
    private var errorsInOldestBatch = 0
    /// A `gap` was reported on this connection already.
    private var gapReported = false
    /// Events read and not yet reported.
    private var events: [LocalEvent] = []

    /// The `hello` this connection says.
    static let clientName = "eventbus-bridge"

    init(path: String, patterns: [Pattern]) {
        self.path = path
        self.patterns = BridgeCore.minimalPatterns(patterns)
    }

    /// The connection's state for `--status`.
    var status: BusStatus { BusStatus(up: greeted, path: path, reconnects: reconnects, replayed: replayed, gaps: gaps) }

    /// Bytes of imports and requests queued or being written.
    var pendingBytes: Int { outbox.pendingBytes }

    /// Whether anything waits to be taken by the writer.
    var hasBytesToTake: Bool { !outbox.bytes.isEmpty }

    // MARK: Connection lifecycle

    /// A new connection: queues the `hello` and the subscribes.
    mutating func connectionOpened() {
        connected = true
        greeted = false
        gapReported = false
        errorsInOldestBatch = 0
        outbox = BusOutbox()
        outbox.append(.hello(client: LocalBus.clientName, echo: false, overflow: .wait), awaiting: .hello)
        let resume = position.resume
        for pattern in patterns {
            outbox.append(.subscribe(pattern: pattern.text, since: resume?.since, instance: resume?.instance), awaiting: .subscribe(pattern))
        }
    }

    /// The connection ended.
    /// - Returns: how many imports were written or queued without their
    ///   batch's `ok` (lost, less those already answered with an error), and
    ///   whether the connection had been greeted (a healthy one).
    mutating func connectionClosed() -> (unconfirmedImports: Int, wasGreeted: Bool) {
        let wasGreeted = greeted
        let unconfirmed = max(0, outbox.reset() - errorsInOldestBatch)
        connected = false
        greeted = false
        errorsInOldestBatch = 0
        events.removeAll(keepingCapacity: true)
        return (unconfirmed, wasGreeted)
    }

    // MARK: Writing

    /// Queues an import: `{"op":"publish","type":"order.created","source":"billing","id":"x-1","origin":{"node":"host-b",...},"data":{...}}`
    /// (no `req`: a `ping` closes each batch, `takeBytes`).
    /// - Returns: false when there is no connection (the caller counts it lost).
    mutating func publish(_ event: LocalPublish) -> Bool {
        guard connected else { return false }
        outbox.appendImport(.publish(type: event.type.name, source: event.source, id: event.id, origin: event.origin.json, data: event.data))
        return true
    }

    /// Everything queued, for the writer, the current import batch closed by a `ping`.
    mutating func takeBytes() -> [UInt8] {
        outbox.writing = 0
        outbox.markImports()
        return outbox.take()
    }

    /// The writer still holds `bytes` of what it took (for `pendingBytes`).
    mutating func writerHolds(_ bytes: Int) {
        outbox.writing = bytes
    }

    // MARK: Reading

    /// The frames of one read were handled: reports the events gathered.
    mutating func endOfRead(_ reports: inout [BusReport]) {
        flushEvents(&reports)
    }

    private mutating func flushEvents(_ reports: inout [BusReport]) {
        guard !events.isEmpty else { return }
        reports.append(.events(events))
        events.removeAll(keepingCapacity: true)
    }

    private mutating func report(_ report: BusReport, _ reports: inout [BusReport]) {
        flushEvents(&reports)
        reports.append(report)
    }

    /// Handles one frame from the broker.
    mutating func handle(_ piece: SplitFrame, _ reports: inout [BusReport]) {
        guard case .frame(let bytes) = piece else {
            report(.notice("skipped an oversized frame from the broker"), &reports)
            return
        }
        let frame: BrokerFrame
        do {
            frame = try BrokerFrame.read(bytes)
        } catch {
            report(.notice("unreadable frame from the broker: \(error)"), &reports)
            return
        }
        switch frame {
        case .event(let fields):
            position.saw(fields.seq)
            if fields.replayed { replayed += 1 }
            if let event = LocalBus.localEvent(fields, in: bytes) { events.append(event) }
        case .dropped(let count, let since):
            report(.dropped(count: count, sinceSeq: since), &reports)
        case .ok(let reply), .error(let reply):
            answered(reply, &reports)
        case .gap(let pattern, let since, let first):
            guard !gapReported else { break }
            gapReported = true
            gaps += 1
            report(.gap(pattern: pattern, sinceSeq: since, firstSeq: first, position: position), &reports)
        case .unknown:
            break
        }
    }

    /// Matches a reply with its request and reports what it means.
    private mutating func answered(_ reply: Reply, _ reports: inout [BusReport]) {
        let code = reply.string("code") ?? "unknown"
        let message = reply.string("message") ?? "no message"
        guard let req = reply.req else {
            if let pattern = reply.revokedPattern {
                report(.refused(request: "subscribe \(pattern) (revoked by a policy reload)", code: code, message: message), &reports)
            } else {
                // The only requests without `req` are imports: this error is the oldest unconfirmed one's.
                errorsInOldestBatch += 1
                report(.importRefused(code == ErrorCode.forbidden.rawValue ? .denied : .lost, message: "\(message) (\(code))"), &reports)
            }
            return
        }
        guard let what = outbox.reply(to: req) else { return }
        var isReconnect = false
        if what == .hello && reply.isOK {
            greeted = true
            isReconnect = everGreeted
            if isReconnect { reconnects += 1 }
            everGreeted = true
        }
        switch what {
        case .hello:
            if reply.isOK {
                position.greeted(instance: reply.string("instance") ?? "")
                let features = reply.withValue("features") { raw, token in
                    String(decoding: UnsafeRawBufferPointer(rebasing: raw[token.start..<token.end]), as: UTF8.self)
                } ?? "[]"
                report(.up(instance: reply.string("instance") ?? "", features: features, isReconnect: isReconnect), &reports)
            } else {
                report(.refused(request: "hello", code: code, message: message), &reports)
            }
        case .subscribe(let pattern):
            if !reply.isOK { report(.refused(request: "subscribe \(pattern.text)", code: code, message: message), &reports) }
        case .importBatch(let count):
            let accepted = count - errorsInOldestBatch
            errorsInOldestBatch = 0
            if accepted > 0 { report(.imported(count: accepted), &reports) }
        }
    }

    /// An event frame as the bridge's `LocalEvent`; nil when its type is not a valid event type.
    static func localEvent(_ fields: EventFields, in frame: UnsafeRawBufferPointer) -> LocalEvent? {
        func string(_ token: JSONToken?) -> String { token.map { JSONString.decode(frame, $0) } ?? "" }
        guard let type = EventType(string(fields.type)) else { return nil }
        let data = fields.data.map { Array(UnsafeRawBufferPointer(rebasing: frame[$0.start..<$0.end])) } ?? Array("null".utf8)
        return LocalEvent(
            type: type, seq: fields.seq, time: string(fields.time), source: string(fields.source), id: string(fields.id),
            pid: Int32(clamping: fields.pid ?? 0), uid: UInt32(clamping: fields.uid ?? 0), gid: UInt32(clamping: fields.gid ?? 0),
            data: data, hasOrigin: fields.origin != nil
        )
    }
}
