// The bridge's connection to the local bus: an ordinary eventbus client
// built on the shared codec (ClientRequest to encode, FrameSplitter and
// BrokerFrame to read), on a thread of its own. It says `hello` (client
// `eventbus-bridge`, overflow `drop-new`), subscribes to the export patterns,
// hands every event to the bridge raw (data bytes unchanged, `origin`
// presence), publishes imports with `origin`, and reconnects forever (a
// broker restarted under socket activation), subscribing again each time
// with `since` from where it had got to (`BusPosition`), so the exports
// published meanwhile that the broker's history still holds are replayed.
//
// Before editing, the rules that keep the bridge reading NATS at all times
// (DESIGN-NOTES-1.1 A.2):
// - `publish` never blocks: it appends to a bounded outbox under the lock; a
//   full outbox, or no connection, refuses the import (the caller counts it
//   as `local_bus`); `wake()` then gets the bus thread to write, once per
//   batch of imports rather than once per event;
// - only the bus thread touches the socket (non-blocking); it takes the
//   queued bytes under the lock and writes them after releasing it;
// - the report handler runs on the bus thread with no lock held (it may call
//   into the NATS client, whose own handler calls `publish` here). Events
//   come in batches (one per read), so the bridge takes its locks once per
//   batch; the reports keep the order of the frames.
import EventBusBridge
import EventBusNATS
import EventBusProtocol
import EventBusSystem
import Dispatch
import Synchronization

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

/// One connection to the local broker, reconnecting forever.
final class LocalBus: Sendable {
    /// The socket path.
    let path: String
    /// The export patterns (subscribed after every `hello`).
    let patterns: [Pattern]
    /// Bound on the bytes of imports waiting for the socket (8 MiB, as the
    /// broker's own outbound limit per connection); beyond it imports are refused.
    let outboxLimitBytes: Int
    private let backoff: Backoff
    private let state = Mutex(State())
    private let wakeup: Wakeup
    private let finished = DispatchSemaphore(value: 0)

    private struct State {
        var closed = false
        /// The socket is connected: frames may be queued (after the handshake's).
        var connected = false
        var greeted = false
        var everGreeted = false
        var reconnects = 0
        var replayed = 0
        var gaps = 0
        var outbox = BusOutbox()
    }

    /// The `hello` this connection says.
    static let clientName = "eventbus-bridge"

    /// - Parameters:
    ///   - backoff: delay between failed attempts (forever, jittered).
    /// - Throws: `SystemError("eventfd", …)`.
    init(path: String, patterns: [Pattern], outboxLimitBytes: Int = 8 << 20,
         backoff: Backoff = Backoff(initial: .milliseconds(50), maximum: .seconds(5))) throws(SystemError) {
        self.path = path
        self.patterns = BridgeCore.minimalPatterns(patterns)
        self.outboxLimitBytes = outboxLimitBytes
        self.backoff = backoff
        wakeup = try Wakeup()
    }

    /// Starts the bus thread; `handler` gets every report on it, with no lock held.
    func start(_ handler: @escaping @Sendable (BusReport) -> Void) {
        SystemThread.detach { [self] in
            self.run(handler)
            self.finished.signal()
        }
    }

    /// Stops the thread and closes the connection; waits for the thread (call once, after `start`).
    func close() {
        state.withLock { $0.closed = true }
        wakeup.signal()
        finished.wait()
    }

    /// The connection's state for `--status`.
    var status: BusStatus {
        state.withLock { BusStatus(up: $0.greeted, path: path, reconnects: $0.reconnects, replayed: $0.replayed, gaps: $0.gaps) }
    }

    /// Queues an import: `{"op":"publish","type":"order.created","source":"billing","id":"x-1","origin":{"node":"host-b",...},"data":{...}}`
    /// (no `req`: a `ping` closes each batch). Never blocks; call `wake()` after a batch.
    /// - Returns: false when it was not queued: no connection, or the outbox is full.
    func publish(_ event: LocalPublish) -> Bool {
        let request = ClientRequest.publish(type: event.type.name, source: event.source, id: event.id, origin: event.origin.json, data: event.data)
        return state.withLock { state -> Bool in
            guard state.connected, !state.closed, state.outbox.pendingBytes < outboxLimitBytes else { return false }
            state.outbox.appendImport(request)
            return true
        }
    }

    /// Gets the bus thread to write what `publish` queued.
    func wake() {
        if state.withLock({ $0.outbox.bytes.count > 0 }) { wakeup.signal() }
    }

    // MARK: The bus thread

    private var isClosed: Bool { state.withLock { $0.closed } }

    private func run(_ handler: @escaping @Sendable (BusReport) -> Void) {
        var failures = 0
        var position = BusPosition()
        while !isClosed {
            let fd: FileDescriptor
            do {
                fd = try FileDescriptor.connectedUnixSocket(toPath: path, nonBlocking: true)
            } catch {
                failures += 1
                handler(.attemptFailed(reason: error.description, failures: failures))
                if !pause(afterFailures: failures) { break }
                continue
            }
            let began = state.withLock { state -> Bool in
                guard !state.closed else { return false }
                state.connected = true
                state.outbox = BusOutbox()
                state.outbox.append(.hello(client: LocalBus.clientName, echo: false, overflow: .wait), awaiting: .hello)
                let resume = position.resume
                for pattern in patterns {
                    state.outbox.append(.subscribe(pattern: pattern.text, since: resume?.since, instance: resume?.instance), awaiting: .subscribe(pattern))
                }
                return true
            }
            guard began else {
                fd.close()
                break
            }
            let reason = serve(fd, handler, &position)
            fd.close()
            let errors = errorsUnconfirmed
            let (unconfirmed, wasGreeted) = state.withLock { state -> (Int, Bool) in
                let greeted = state.greeted
                state.connected = false
                state.greeted = false
                return (max(0, state.outbox.reset() - errors), greeted)
            }
            if isClosed { break }
            handler(.down(reason: reason, unconfirmedImports: unconfirmed))
            // A connection that got its hello answered was healthy: try again at once.
            failures = wasGreeted ? 0 : failures + 1
            if failures > 0 && !pause(afterFailures: failures) { break }
        }
    }

    /// Waits the backoff delay (or until closed). - Returns: false when closed.
    private func pause(afterFailures failures: Int) -> Bool {
        let delay = backoff.delayNanoseconds(afterFailedPasses: failures, random: Double.random(in: 0..<1))
        let until = Clock.monotonicNanoseconds() + delay
        while !isClosed {
            let left = until - Clock.monotonicNanoseconds()
            if left <= 0 { return true }
            var entries = [PollEntry(wakeup.descriptor, events: .readable)]
            _ = try? FileDescriptor.poll(&entries, timeoutMilliseconds: Int32(clamping: (left + 999_999) / 1_000_000))
            wakeup.drain()
        }
        return false
    }

    /// Reads and writes `fd` until the connection ends or the bus is closed.
    /// - Returns: why it ended.
    private func serve(_ fd: FileDescriptor, _ handler: @escaping @Sendable (BusReport) -> Void, _ position: inout BusPosition) -> String {
        var splitter = FrameSplitter(maxFrameBytes: 256 << 20)
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var reader = Reader(handler: handler, position: position)
        defer {
            errorsUnconfirmed = reader.errorsInOldestBatch
            position = reader.position
            let replayed = reader.replayed
            if replayed > 0 { state.withLock { $0.replayed += replayed } }
        }
        var writer = Writer()
        while true {
            let (closed, queued) = state.withLock { ($0.closed, $0.outbox.bytes.count > 0) }
            if closed { return "closed" }
            let wantsWrite = queued || writer.hasBytes
            var entries = [PollEntry(wakeup.descriptor, events: .readable), PollEntry(fd, events: wantsWrite ? [.readable, .writable] : .readable)]
            do {
                _ = try FileDescriptor.poll(&entries, timeoutMilliseconds: -1)
            } catch {
                return error.description
            }
            if !entries[0].returned.isEmpty { wakeup.drain() }
            let ready = entries[1].returned
            if !ready.intersection([.readable, .hangup, .error]).isEmpty {
                // A bounded number of reads per turn, so writes are not starved.
                reading: for _ in 0..<16 {
                    let attempt = buffer.withUnsafeMutableBytes { raw in
                        Result { () throws(SystemError) -> IOResult<Int> in try fd.read(into: raw) }
                    }
                    switch attempt {
                    case .failure(let error):
                        return error.errno == .connectionReset ? "the broker reset the connection" : error.description
                    case .success(.wouldBlock):
                        break reading
                    case .success(.complete(0)):
                        splitter.finish { self.dispatch($0, &reader) }
                        reader.flushEvents()
                        return "the broker closed the connection"
                    case .success(.complete(let count)):
                        buffer.withUnsafeBytes { raw in
                            _ = splitter.feed(UnsafeRawBufferPointer(rebasing: raw[0..<count])) { self.dispatch($0, &reader) }
                        }
                        reader.flushEvents()
                        if reader.replayed > 0 {
                            let replayed = reader.replayed
                            reader.replayed = 0
                            state.withLock { $0.replayed += replayed }
                        }
                        if count < buffer.count { break reading }
                    }
                }
            }
            // Imports may have been queued while we read: write whatever waits.
            if let failure = writer.flush(fd, from: state) { return failure }
        }
    }

    /// Errors received for the oldest unconfirmed batch when the last connection ended.
    private let errorsUnconfirmedStorage = Mutex(0)
    private var errorsUnconfirmed: Int {
        get { errorsUnconfirmedStorage.withLock { $0 } }
        set { errorsUnconfirmedStorage.withLock { $0 = newValue } }
    }

    /// The bus thread's bytes in flight: taken from the outbox under the lock, written without it.
    private struct Writer {
        var pending: [UInt8] = []
        var offset = 0

        var hasBytes: Bool { offset < pending.count }

        /// Writes what the socket takes now, taking newly queued frames first
        /// (closing the imports' batch with a `ping`). - Returns: a reason when the write failed.
        mutating func flush(_ fd: FileDescriptor, from state: borrowing Mutex<State>) -> String? {
            while true {
                if !hasBytes {
                    let taken = state.withLock { state -> [UInt8] in
                        state.outbox.writing = 0
                        state.outbox.markImports()
                        return state.outbox.take()
                    }
                    pending = taken
                    offset = 0
                    if pending.isEmpty { return nil }
                }
                let attempt = pending.withUnsafeBytes { raw in
                    Result { () throws(SystemError) -> IOResult<Int> in try fd.write(UnsafeRawBufferPointer(rebasing: raw[offset...])) }
                }
                switch attempt {
                case .failure(let error):
                    return error.description
                case .success(.wouldBlock), .success(.complete(0)):
                    let left = pending.count - offset
                    state.withLock { $0.outbox.writing = left }
                    return nil
                case .success(.complete(let n)):
                    offset += n
                }
            }
        }
    }

    /// The bus thread's reading state: events gathered into batches, and the
    /// errors of the oldest import batch not yet confirmed.
    private struct Reader {
        let handler: @Sendable (BusReport) -> Void
        var position: BusPosition
        var events: [LocalEvent] = []
        var errorsInOldestBatch = 0
        /// Replayed events read and not yet added to the status.
        var replayed = 0
        /// A `gap` was reported on this connection already.
        var gapReported = false

        /// Reports what is gathered (before any other report, and after each read).
        mutating func flushEvents() {
            guard !events.isEmpty else { return }
            handler(.events(events))
            events.removeAll(keepingCapacity: true)
        }

        mutating func report(_ report: BusReport) {
            flushEvents()
            handler(report)
        }
    }

    /// Handles one frame from the broker.
    private func dispatch(_ piece: SplitFrame, _ reader: inout Reader) -> Bool {
        guard case .frame(let bytes) = piece else {
            reader.report(.notice("skipped an oversized frame from the broker"))
            return true
        }
        let frame: BrokerFrame
        do {
            frame = try BrokerFrame.read(bytes)
        } catch {
            reader.report(.notice("unreadable frame from the broker: \(error)"))
            return true
        }
        switch frame {
        case .event(let fields):
            reader.position.saw(fields.seq)
            if fields.replayed { reader.replayed += 1 }
            if let event = LocalBus.localEvent(fields, in: bytes) { reader.events.append(event) }
        case .dropped(let count, let since):
            reader.report(.dropped(count: count, sinceSeq: since))
        case .ok(let reply), .error(let reply):
            answered(reply, &reader)
        case .gap(let pattern, let since, let first):
            guard !reader.gapReported else { break }
            reader.gapReported = true
            state.withLock { $0.gaps += 1 }
            reader.report(.gap(pattern: pattern, sinceSeq: since, firstSeq: first, position: reader.position))
        case .unknown:
            break
        }
        return true
    }

    /// Matches a reply with its request and reports what it means.
    private func answered(_ reply: Reply, _ reader: inout Reader) {
        let code = reply.string("code") ?? "unknown"
        let message = reply.string("message") ?? "no message"
        guard let req = reply.req else {
            if let pattern = reply.revokedPattern {
                reader.report(.refused(request: "subscribe \(pattern) (revoked by a policy reload)", code: code, message: message))
            } else {
                // The only requests without `req` are imports: this error is the oldest unconfirmed one's.
                reader.errorsInOldestBatch += 1
                reader.report(.importRefused(code == ErrorCode.forbidden.rawValue ? .denied : .lost, message: "\(message) (\(code))"))
            }
            return
        }
        let match = state.withLock { state -> (what: AwaitedReply, isReconnect: Bool)? in
            guard let what = state.outbox.reply(to: req) else { return nil }
            var isReconnect = false
            if what == .hello && reply.isOK {
                state.greeted = true
                isReconnect = state.everGreeted
                if isReconnect { state.reconnects += 1 }
                state.everGreeted = true
            }
            return (what, isReconnect)
        }
        guard let match else { return }
        switch match.what {
        case .hello:
            if reply.isOK {
                reader.position.greeted(instance: reply.string("instance") ?? "")
                let features = reply.withValue("features") { raw, token in
                    String(decoding: UnsafeRawBufferPointer(rebasing: raw[token.start..<token.end]), as: UTF8.self)
                } ?? "[]"
                reader.report(.up(instance: reply.string("instance") ?? "", features: features, isReconnect: match.isReconnect))
            } else {
                reader.report(.refused(request: "hello", code: code, message: message))
            }
        case .subscribe(let pattern):
            if !reply.isOK { reader.report(.refused(request: "subscribe \(pattern.text)", code: code, message: message)) }
        case .importBatch(let count):
            let accepted = count - reader.errorsInOldestBatch
            reader.errorsInOldestBatch = 0
            if accepted > 0 { reader.report(.imported(count: accepted)) }
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
