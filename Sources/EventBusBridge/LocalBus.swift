// The bridge's side of its session with the local bus, with no I/O: the
// session itself is EventBusSession's `BusSession` (`hello` as client
// `eventbus-bridge`, overflow `wait`; one `subscribe` per export pattern,
// with `since` and `instance` once the position covers it, so exports
// published meanwhile that the broker's history still holds are replayed;
// `req` matching, `gap`, `dropped`, the position). This file adds what only
// the bridge has: imports queued as `publish` with `origin` and without
// `req`, each batch closed by one `ping` whose `ok` confirms it (relayed
// `reply`s go without `req` too: success is silent), and the
// reports each frame means for the bridge. The I/O (socket, framing,
// reconnect, the epoll loop) is BridgeLoop.swift's; frames come in whole,
// reports go out in order.
//
// Before editing: events are gathered into one `.events` batch per read (the
// loop calls `endOfRead`); any other report flushes the batch first, so the
// reports keep the order of the frames. The session reports every `error`
// without `req` that is not a revocation as `.error` (`UnnumberedErrors.report`):
// the only requests without `req` are imports (and relayed `reply`s, which
// cannot fail: `relay`), so it is the oldest unconfirmed batch's.
@_spi(Package) import EventBusProtocol
import EventBusSession

/// What the bus connection tells the bridge, in order, on the bus thread.
enum BusReport {
    /// `hello` was answered: `instance` is the broker's, `features` its list.
    case up(instance: String, features: [String], isReconnect: Bool)
    /// The connection ended; `unconfirmedImports` publishes were sent without an answer.
    case down(reason: String, unconfirmedImports: Int)
    /// A connection attempt failed (`failures` in a row so far).
    case attemptFailed(reason: String, failures: Int)
    /// Events for the export patterns, in order (the consecutive events of one read).
    case events([RawEvent])
    /// `{"op":"gap","type":"a.>","since_seq":10,"first_seq":50}` after a
    /// resubscribe with `since` (the first of the connection only): the
    /// history did not reach back, or the broker is a new run
    /// (`gap.previousRun` says how far the bridge had read in the old one).
    case gap(SessionGap, instance: String)
    /// `{"op":"dropped","count":3,"since_seq":17}`: the broker dropped events for us.
    case dropped(count: UInt64, sinceSeq: UInt64)
    /// The broker confirmed `count` imports (a batch's `ping` answered).
    case imported(count: Int)
    /// The broker refused an import (`forbidden`: `.denied`; anything else: `.lost`).
    case importRefused(BridgeCore.ImportOutcome, message: String)
    /// The broker refused the `hello` or a `subscribe` (`request` names it).
    case refused(request: String, code: String, message: String)
    /// Anything else worth a log line (an unreadable frame).
    case notice(String)
    /// (issue 36) A request the broker gave the bridge's fallback serving
    /// subscription: no local server took it (RemoteRequests.swift).
    case request(OutgoingRequest)
    /// (issue 36) The answer to a request the bridge asked for another machine.
    case answer(tag: UInt64, Reply)
    /// (issue 36) The serving patterns the bus has of a request import
    /// pattern (a watch's list; `[pattern]` from a broker without the
    /// `servers` feature, `[]` when the watch was refused).
    case serving(Pattern, [Pattern])
    /// (issue 36) The patterns of the local members of an imported group
    /// that overlap its pattern (a watch's list; `[spec.pattern]` from a
    /// broker without the `group-servers` feature, `[]` when the watch was refused).
    case members(GroupSpec, [Pattern])
    /// (issue 36) An event no local member of the exported group `group`
    /// took (the broker's copy for the bridge's fallback membership, RemoteGroups.swift).
    case groupEvent(RawEvent, group: String)
}

/// (issue 36) What the bridge's own numbered requests on the bus are.
enum BusTag {
    /// A batch of imports closed by a `ping`: how many.
    case batch(Int)
    /// The fallback serving subscription of a pattern.
    case fallback(String)
    /// A request asked for another machine (RemoteRequests' tag).
    case ask(UInt64)
    /// The watch of the serving patterns of a request import pattern.
    case watch(String)
    /// (issue 36) The watch of the members of an imported group.
    case groupWatch(GroupSpec)
    /// (issue 36) The fallback membership of an exported group.
    case fallbackGroup(GroupSpec)
}

/// The bridge's bus session (see the file comment). One owner, the loop.
struct LocalBus {
    /// The export patterns (subscribed after every `hello`).
    let patterns: [Pattern]
    /// The socket path (for the status).
    let path: String
    /// The session; its `Tag` is the import count of a batch's `ping`.
    private(set) var session = BusSession<BusTag>(SessionOptions(
        hello: Hello(client: LocalBus.clientName, echo: false, overflow: .wait), unnumberedErrors: .report))
    private(set) var replayed = 0
    private(set) var gaps = 0
    /// Imports queued since the last batch `ping`.
    private var unmarkedImports = 0
    /// Bytes the writer took and has not written yet (for `pendingBytes`).
    private var writing = 0
    /// Errors received for the oldest unconfirmed import batch.
    private var errorsInOldestBatch = 0
    /// Events read and not yet reported.
    private var events: [RawEvent] = []

    /// The `hello` this connection says.
    static let clientName = "eventbus-bridge"

    /// (issue 36) The request types served as a fallback (`--export-requests`).
    let servePatterns: [Pattern]

    /// (issue 36) The request types taken from other machines
    /// (`--import-requests`): their serving patterns are watched.
    let watchPatterns: [Pattern]

    /// (issue 36) The exported groups (`--export-group`), and the frame ends
    /// that mark their events (`,"group":"NAME"}`).
    let groups: [GroupSpec]
    /// (issue 36) The imported groups (`--import-group`): their members are watched.
    let groupImports: [GroupSpec]
    private let groupMarks: [(name: String, mark: [UInt8])]

    init(path: String, patterns: [Pattern], servePatterns: [Pattern] = [], watchPatterns: [Pattern] = [], groups: [GroupSpec] = [],
         groupImports: [GroupSpec] = []) {
        self.path = path
        self.patterns = BridgeCore.minimalPatterns(patterns)
        self.servePatterns = BridgeCore.minimalPatterns(servePatterns)
        self.watchPatterns = BridgeCore.minimalPatterns(watchPatterns)
        self.groups = groups
        self.groupImports = Array(Set(groupImports)).sorted { ($0.name, $0.pattern.text) < ($1.name, $1.pattern.text) }
        groupMarks = Array(Set(groups.map(\.name))).sorted().map { name in
            var mark: [UInt8] = []
            FrameEncoder.appendField("group", string: name, to: &mark)
            return (name, mark + [0x7D])
        }
    }

    /// (attacker6) Watches told of a change while their re-asking is paced
    /// (`rewatchAt`): asked again by `rewatchIfDue`. Each list the broker
    /// answers with costs the loop time in proportion to its length (the
    /// broker's listing, then reading it, intersecting and minimising here),
    /// and any local user who may serve or join under an import pattern can
    /// make it change as fast as it can send (uid 4321's 16,004 serving
    /// patterns and one churned: 70 % of eventbusd's loop in the link's
    /// request part, root's ping p50 0.3 ms -> 1.4 s, debug build). So after
    /// a read that took a list in T of the loop's time, the watches are not
    /// asked again before `rewatchPacing` x T has passed (`paceRewatch`, from
    /// the loop, which times the read): a long list is read at most every so
    /// often, a short one at once. (watchlist) 99, not 9: once a list of
    /// 16,004 cost tens of ms rather than half a second, 9x re-asked it
    /// every ~0.4 s, and another uid's pings (one every 5 ms) met one list
    /// in ten (p99 22 ms); at 99x a list costs the loop 1 % and is asked
    /// again about as often as the half-second list was at 9x.
    private var staleWatches: [String] = []
    private var staleGroupWatches: [GroupSpec] = []
    private(set) var rewatchAt: Int64 = 0
    /// A watch's list was read since `paceRewatch` last ran.
    private var listedSincePaced = false
    static let rewatchPacing: Int64 = 99
    /// The longest a changed watch waits to be asked again, in ns: the round
    /// trip is wall time, and on a loaded machine 99x of it ran past 30 s
    /// (a server of a new pattern unknown to other machines all that while;
    /// BridgeAttackTests' 4,000 patterns missed their 30 s). At 5 s a list
    /// that costs the loop tens of ms still takes it under 1 %.
    static let rewatchWaitLimit: Int64 = 5_000_000_000
    /// (watchlist) When `rewatchIfDue` last asked: the answer's whole round
    /// trip (the broker's listing, which no read of ours times, and every
    /// read of a list longer than one) paces the next re-ask, not only the
    /// read that ended it.
    private var askedAt: Int64?
    /// (watchlist) Each watch's last `servers` array as it came: a list the
    /// same byte for byte (another uid's server that came and went before
    /// the watch was asked again) is not reported, so its 16,004 patterns
    /// are neither decoded nor minimised again. Forgotten with the
    /// connection and on a refusal (whose report is an empty list).
    private var lastServing: [String: [UInt8]] = [:]
    private var lastMembers: [GroupSpec: [UInt8]] = [:]

    /// When a paced re-ask is due (nil: none waits).
    var rewatchDeadline: Int64? { staleWatches.isEmpty && staleGroupWatches.isEmpty ? nil : rewatchAt }

    /// Asks the watches told of a change again, once their pacing allows.
    mutating func rewatchIfDue(now: Int64) {
        guard rewatchDeadline != nil, now >= rewatchAt, connected else { return }
        askedAt = now
        let (requests, groups) = (staleWatches, staleGroupWatches)
        staleWatches.removeAll()
        staleGroupWatches.removeAll()
        for pattern in requests { watch(pattern) }
        for spec in groups { watch(spec) }
    }

    /// A watch's list was read (its cost is timed by the loop: `paceRewatch`).
    private mutating func listed() { listedSincePaced = true }

    /// Whether `reply`'s `servers` array is byte for byte `last` (then
    /// nothing changed); otherwise it becomes `last`.
    private static func sameList(_ reply: Reply, as last: inout [UInt8]?) -> Bool {
        let raw = reply.raw("servers")
        if raw != nil && raw == last { return true }
        last = raw
        return false
    }

    /// The loop's read that ended at `now` took `spent` ns: if it read a
    /// watch's list, the next re-ask waits `rewatchPacing` times as long as
    /// that read, or as the re-ask's whole round trip when longer, at most
    /// `rewatchWaitLimit`.
    mutating func paceRewatch(spent: Int64, now: Int64) {
        guard listedSincePaced else { return }
        listedSincePaced = false
        let took = max(spent, askedAt.map { now - $0 } ?? 0)
        askedAt = nil
        rewatchAt = now + min(LocalBus.rewatchPacing * took, LocalBus.rewatchWaitLimit)
    }

    /// (issue 36) Asks for (again) the serving patterns of a request import pattern.
    private mutating func watch(_ pattern: String) {
        session.send(.subscribe(pattern: pattern, servers: true), tag: .watch(pattern))
    }

    /// (issue 36) Asks for (again) the patterns of an imported group's members.
    private mutating func watch(_ spec: GroupSpec) {
        session.send(.subscribe(pattern: spec.pattern.text, group: spec.name, servers: true, uid: spec.uid), tag: .groupWatch(spec))
    }

    /// (issue 36) The exported group whose mark ends `frame` (its LF, if it
    /// has one, aside), if any.
    private func groupMark(of span: RawSpan) -> String? {
        let frame = Span<UInt8>(_bytes: span)
        let end = !frame.isEmpty && frame[frame.count - 1] == 0x0A ? frame.count - 1 : frame.count
        for (name, mark) in groupMarks where end > mark.count && span.extracting((end - mark.count)..<end).sameBytes(as: mark.span.bytes) { return name }
        return nil
    }

    /// A connection is open: imports may be queued.
    var connected: Bool { session.isConnected }

    /// The connection's state for `--status`.
    var status: BusStatus { BusStatus(up: session.greeting != nil, path: path, reconnects: session.reconnects, replayed: replayed, gaps: gaps) }

    /// Bytes of imports and requests queued or being written.
    var pendingBytes: Int { session.outputBytes + writing }

    /// Whether anything waits to be taken by the writer.
    var hasBytesToTake: Bool { session.hasOutput }

    /// (1.2) Exports pause reading the bus (`BridgeLoop`); whether that holds
    /// the local publishers rather than losing exports is `session.flow.brokerHolds`.
    mutating func pauseReading(_ on: Bool) { session.pauseReading(on) }

    // MARK: Connection lifecycle

    /// A new connection: queues the `hello` and the subscribes.
    mutating func connectionOpened() {
        session.connectionStarted()
        for pattern in patterns { session.subscribe(pattern.text) }
        for pattern in servePatterns {
            session.send(.subscribe(pattern: pattern.text, serve: true, fallback: true), tag: .fallback(pattern.text))
        }
        for group in groups {
            session.send(.subscribe(pattern: group.pattern.text, group: group.name, fallback: true, uid: group.uid), tag: .fallbackGroup(group))
        }
        errorsInOldestBatch = 0
        unmarkedImports = 0
        writing = 0
    }

    /// The connection ended.
    /// - Returns: how many imports were written or queued without their
    ///   batch's `ok` (lost, less those already answered with an error), and
    ///   whether the connection had been greeted (a healthy one).
    mutating func connectionClosed() -> (unconfirmedImports: Int, wasGreeted: Bool) {
        let wasGreeted = session.greeting != nil
        let sent = session.connectionLost().reduce(unmarkedImports) { sum, tag in
            if case .batch(let count) = tag { return sum + count }
            return sum
        }
        let unconfirmed = max(0, sent - errorsInOldestBatch)
        errorsInOldestBatch = 0
        unmarkedImports = 0
        writing = 0
        events.removeAll(keepingCapacity: true)
        staleWatches.removeAll()  // asked again after the next hello
        staleGroupWatches.removeAll()
        askedAt = nil
        lastServing.removeAll()  // the next connection's first lists are reported whole
        lastMembers.removeAll()
        return (unconfirmed, wasGreeted)
    }

    // MARK: Writing

    /// Queues an import: `{"op":"publish","type":"order.created","source":"billing","id":"x-1","origin":{"node":"host-b",...},"data":{...}}`
    /// (no `req`, so success is silent: a `ping` closes each batch, `takeBytes`).
    /// - Returns: false when there is no connection (the caller counts it lost).
    mutating func publish(_ event: LocalPublish) -> Bool {
        guard connected else { return false }
        session.appendUnnumbered { event.appendFrame(to: &$0) }
        unmarkedImports += 1
        return true
    }

    /// (issue 36, third pass) Lets `write` append an import's `publish`
    /// frame straight into the output (no `req`, like `publish(_:)`); it
    /// returns whether it wrote one (counted for its batch's `ping`).
    /// - Returns: false when there is no connection (`write` is not called).
    mutating func publish(writing write: (inout [UInt8]) -> Bool) -> Bool {
        guard connected else { return false }
        var wrote = false
        session.appendUnnumbered { wrote = write(&$0) }
        if wrote { unmarkedImports += 1 }
        return true
    }

    /// (issue 36) Queues another machine's group event for the local members
    /// of its group (an import: confirmed by its batch's `ping`).
    /// - Returns: false when there is no connection (the caller counts it lost).
    mutating func publish(_ event: GroupPublish) -> Bool {
        guard connected else { return false }
        session.appendUnnumbered { event.appendFrame(to: &$0) }
        unmarkedImports += 1
        return true
    }

    /// (issue 36) Asks the bus a request for another machine (its answer
    /// comes as `.answer(tag:)`). - Returns: false when there is no connection.
    mutating func ask(_ request: ClientRequest, tag: UInt64) -> Bool {
        guard connected else { return false }
        session.send(request, tag: .ask(tag))
        return true
    }

    /// (issue 36) Sends a `reply` relayed from another machine, without
    /// `req`: the broker's `ok` (`accepted`) would only wake the bridge once
    /// more per request (a request's round trip is a latency: issue 36's
    /// wake-up count). A `reply` from the fallback holder the token was given
    /// to, built here from validated JSON, has no error to come back; were
    /// one to, it would be read as an import's (`.error` without `req`).
    mutating func relay(_ reply: ClientRequest) {
        guard connected else { return }
        session.sendUnnumbered(reply)
    }

    /// Everything queued, for the writer, the current import batch closed by a
    /// `ping`, in `buffer` (whose old, written bytes are dropped; its storage is reused).
    mutating func takeBytes(into buffer: inout [UInt8]) {
        if unmarkedImports > 0 {
            session.send(.ping, tag: .batch(unmarkedImports))
            unmarkedImports = 0
        }
        session.takeOutput(swappingWith: &buffer)
        writing = buffer.count
    }

    /// The writer still holds `bytes` of what it took (for `pendingBytes`).
    mutating func writerHolds(_ bytes: Int) {
        writing = bytes
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

    /// (issue 36) An event the bridge exports straight from the read: a
    /// frame of the broker's plain shape (`ExportFrame`), its position taken
    /// as `handle` would take it. Nil when the frame must go to `handle`: any
    /// other frame (a group's event, a replayed one...), or while the session
    /// holds events back.
    mutating func plainEvent(_ frame: ByteView) -> ExportFrame? {
        guard let event = ExportFrame(frame), session.tookEvent(seq: event.seq) else { return nil }
        return event
    }

    /// Events read and not yet reported (`endOfRead` reports them).
    var hasEvents: Bool { !events.isEmpty }

    /// Handles one frame from the broker.
    mutating func handle(_ piece: SplitFrame, _ reports: inout [BusReport]) {
        guard case .frame(let bytes) = piece else {
            report(.notice("skipped an oversized frame from the broker"), &reports)
            return
        }
        switch session.handle(bytes) {
        case .event(let fields):
            if fields.replayed { replayed += 1 }
            if !groupMarks.isEmpty, let group = groupMark(of: bytes) {
                report(.groupEvent(RawEvent(fields, in: bytes), group: group), &reports)
                return
            }
            events.append(RawEvent(fields, in: bytes))
        case .dropped(let count, let since):
            report(.dropped(count: count, sinceSeq: since), &reports)
        case .gap(let gap):
            guard gap.firstOnConnection else { break }
            gaps += 1
            report(.gap(gap, instance: session.greeting?.instance ?? "?"), &reports)
        case .greeted(let info, let isReconnect):
            report(.up(instance: info.instance, features: info.features, isReconnect: isReconnect), &reports)
            // (issue 36) Which request types this bus serves, for the request imports.
            for pattern in watchPatterns {
                if info.features.contains("servers") { watch(pattern.text) } else { report(.serving(pattern, [pattern]), &reports) }
            }
            // (issue 36) Whether members of the imported groups are here.
            for spec in groupImports {
                if info.features.contains("group-servers") { watch(spec) } else { report(.members(spec, [spec.pattern]), &reports) }
            }
        case .servers(let pattern, nil):  // asked again by `rewatchIfDue`, paced
            if watchPatterns.contains(where: { $0.text == pattern }), !staleWatches.contains(pattern) { staleWatches.append(pattern) }
        case .servers(let pattern, let group?):
            if let spec = groupImports.first(where: { $0.name == group && $0.pattern.text == pattern }), !staleGroupWatches.contains(spec) { staleGroupWatches.append(spec) }
        case .answered(.groupWatch(let spec), let reply):
            if reply.isOK {
                listed()
                if Self.sameList(reply, as: &lastMembers[spec]) { break }
                if spec.uid != nil && reply.unsigned("uid") == nil { report(.notice(Self.withoutGroupUID(spec)), &reports) }
                let list = reply.strings("servers") ?? []
                report(.members(spec, list.compactMap(Pattern.init)), &reports)
            } else {
                lastMembers[spec] = nil
                report(refused("subscribe \(spec.pattern.text) group \(spec.name) servers", reply), &reports)
                report(.members(spec, []), &reports)
            }
        case .answered(.watch(let text), let reply):
            guard let pattern = Pattern(text) else { break }
            if reply.isOK {
                listed()
                if Self.sameList(reply, as: &lastServing[text]) { break }
                let list = reply.strings("servers") ?? []
                report(.serving(pattern, list.compactMap(Pattern.init)), &reports)
            } else {
                lastServing[text] = nil
                report(refused("subscribe \(text) servers", reply), &reports)
                report(.serving(pattern, []), &reports)
            }
        case .helloRefused(let reply):
            report(refused("hello", reply), &reports)
        case .subscribeRefused(let pattern, let reply, _):
            report(refused("subscribe \(pattern)", reply), &reports)
        case .revoked(let pattern, let reply):
            report(refused("subscribe \(pattern) (revoked by a policy reload)", reply), &reports)
        case .error(let reply) where reply.req != nil:
            report(.notice("an error for no request of ours: \(reply.string("message") ?? "no message") (\(reply.string("code") ?? "unknown"))"), &reports)
        case .error(let reply):
            // The only requests without `req` are imports: this error is the oldest unconfirmed one's.
            errorsInOldestBatch += 1
            let code = reply.string("code") ?? "unknown"
            report(.importRefused(code == ErrorCode.forbidden.rawValue ? .denied : .lost, message: "\(reply.string("message") ?? "no message") (\(code))"), &reports)
        case .answered(.fallback(let pattern), let reply):
            if !reply.isOK { report(refused("subscribe \(pattern) serve fallback", reply), &reports) }
        case .answered(.fallbackGroup(let group), let reply):
            if !reply.isOK { report(refused("subscribe \(group.pattern.text) group \(group.name) fallback", reply), &reports) }
            else if group.uid != nil && reply.unsigned("uid") == nil { report(.notice(Self.withoutGroupUID(group)), &reports) }
        case .answered(.ask(let tag), let reply):
            report(.answer(tag: tag, reply), &reports)
        case .request(let fields):
            let token = JSONString.decode(bytes, fields.token)
            let event = RawEvent(fields.event, in: bytes)
            report(.request(OutgoingRequest(event: event, token: token, timeoutMilliseconds: fields.timeout ?? 25_000)), &reports)
        case .answered(.batch(let count), _):
            let accepted = count - errorsInOldestBatch
            errorsInOldestBatch = 0
            if accepted > 0 { report(.imported(count: accepted), &reports) }
        case .unreadable(let error):
            report(.notice("unreadable frame from the broker: \(error)"), &reports)
        case .held, .subscribed, .unsubscribed, .settled, .other, .ignored:
            break
        }
    }

    /// (attacker6) A broker older than `"uid"` on group frames ignored it.
    static func withoutGroupUID(_ spec: GroupSpec) -> String {
        "the bus does not know \"uid\" on group frames (no group-uid feature): group \(spec.name) takes part as every local user's group of that name, not only \(spec.user ?? "?")'s (upgrade eventbusd)"
    }

    private func refused(_ request: String, _ reply: Reply) -> BusReport {
        .refused(request: request, code: reply.string("code") ?? "unknown", message: reply.string("message") ?? "no message")
    }
}
