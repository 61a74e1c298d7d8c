// One client session with the broker, the same for the library
// (`EventBus`), the CLI (`listen`, `wait`, `get`) and the bridge: the
// `hello`, subscribe and resubscribe with `since`/`instance`, `req`
// matching, `gap` and `dropped`, the one stream position, and (1.2) flow
// control as far as a client holds any (PROTOCOL.md "Requests", "Retained
// events and history", "Flow control"; 1.3 requests answered out of order,
// serving subscriptions and queue groups, "Request/reply", "Queue
// groups"). Pure: no Foundation, no fds, no
// clock. Requests are encoded into `output`, which the driver writes
// (`takeOutput`); each frame the driver reads goes to `handle`, which
// returns the one thing it means for the driver (`Incoming`).
//
// Before editing, the order on every connection is the contract: `hello`
// first (`connectionStarted`), then the subscribes (each with `since` where
// the position covers its pattern), then whatever the driver sends. The
// broker answers requests in order, so `req`s are matched exactly and an
// `error` that could not carry its `req` answers the oldest request still
// waiting (`UnnumberedErrors.answerOldest`), except (1.3) a `request`'s:
// its answer comes when its reply is known, after later requests' answers,
// and always with its `req` (a `request` without a readable `req` is
// answered without one, but then it asked nothing). Subscriptions are kept
// by `SubscriptionKey` (pattern, `serve`, `group`); only plain ones replay. `Tag` is the driver's own
// record of a request of its own (a completion, a batch of imports).
@_spi(Package) import EventBusProtocol

/// The `hello` a session says (PROTOCOL.md "Requests": `hello`).
package struct Hello: Sendable, Equatable {
    /// `client`: 1-64 bytes of `A-Z a-z 0-9 _ . - :`; nil: none (the broker names it `pid/<pid>`).
    package var client: String?
    /// `echo`; nil: not sent (the broker's default, false).
    package var echo: Bool?
    /// (1.2) `overflow`; nil: not sent (the broker's default, `wait`).
    package var overflow: OverflowPolicy?

    package init(client: String? = nil, echo: Bool? = nil, overflow: OverflowPolicy? = nil) {
        self.client = client
        self.echo = echo
        self.overflow = overflow
    }

    /// `{"op":"hello","client":"eventbus-listen","overflow":"drop-new"}`
    package var request: ClientRequest { .hello(client: client, echo: echo, overflow: overflow) }
}

/// What an `error` frame without `req` answers, when it is not a
/// revocation (PROTOCOL.md "Requests": a frame too large or too broken for
/// its `req` to be read is answered without `req`).
package enum UnnumberedErrors: Sendable {
    /// `frame_too_large`, `bad_frame`, `bad_request`: the oldest request
    /// waiting (the library, the CLI: every request carries a `req`).
    case answerOldest
    /// None of ours: reported as `.error` (the bridge: its imports carry no `req`).
    case report
}

/// How a session behaves; fixed for its life.
package struct SessionOptions: Sendable {
    package var hello: Hello
    package var unnumberedErrors: UnnumberedErrors
    /// Holds events back after each (re)connect until every replay is over,
    /// then releases them in seq order without duplicates (`takeReleased`),
    /// so the position never passes an event not yet handed on (`eventbus
    /// listen --resume`): each connection's subscribes end with a `stats`
    /// (`settle()`), whose answer marks the end of the replays.
    package var ordered: Bool
    /// The first `req` (the CLI's `hello` is 0, so replies to commands' own 1, 2... stay theirs).
    package var firstReq: Int64

    package init(hello: Hello, unnumberedErrors: UnnumberedErrors = .answerOldest, ordered: Bool = false, firstReq: Int64 = 1) {
        self.hello = hello
        self.unnumberedErrors = unnumberedErrors
        self.ordered = ordered
        self.firstReq = firstReq
    }
}

/// One session; one owner (the driver, under its lock if it has threads).
package struct BusSession<Tag> {
    package let options: SessionOptions
    /// The `hello` reply of the current connection, once it arrived.
    package private(set) var greeting: ConnectionInfo?
    /// Whether a connection is started (the `hello` was queued) and not lost.
    package private(set) var isConnected = false
    /// Patterns of the plain subscriptions on the current connection (asked
    /// for, not withdrawn or refused).
    package private(set) var subscribed: Set<String> = []
    /// (1.3) Serving and group subscriptions on the current connection
    /// (asked for, not withdrawn or refused).
    package private(set) var otherSubscriptions: Set<SubscriptionKey> = []
    /// Connections started so far.
    package private(set) var connections = 0
    /// Times a `hello` was answered on a connection after the first answered one.
    package private(set) var reconnects = 0
    /// (1.2) Flow control as this client sees it.
    package private(set) var flow = FlowState()

    var tracker = PositionTracker()
    var output: [UInt8] = []
    private var pending: [Int64: Pending] = [:]
    private var nextReq: Int64
    private var gapReported = false
    private var everGreeted = false
    private var replay = ReplayOrder()

    enum Pending {
        case hello
        /// `first`: the subscription was not there before this request.
        case subscribe(SubscriptionKey, Tag?, first: Bool)
        case unsubscribe(SubscriptionKey)
        case request(Tag)
        /// (1.3) A `request` op: answered when its reply is known, out of order.
        case question(Tag)
        /// The `stats` that ends an ordered session's replays.
        case sentinel
    }

    package init(_ options: SessionOptions) {
        self.options = options
        nextReq = options.firstReq
    }

    // MARK: Position

    /// Where the session has got to (what `listen --resume` saves).
    package var position: StreamPosition { tracker.position }

    /// The run and position before the latest `hello` reply, when it named a
    /// new run (the broker restarted while this client was away); else nil.
    package var previousRun: StreamPosition? { tracker.previous }

    /// Starts from `position` for `patterns` (`listen --since`, `--resume`):
    /// their first subscribes carry it.
    package mutating func start(at position: StreamPosition, covering patterns: [String]) {
        tracker.start(at: position, covering: patterns)
    }

    /// The position, when it moved since the last call and is settled (no
    /// replay under way): what to save now.
    package mutating func takeMovedPosition() -> StreamPosition? {
        guard tracker.moved, replay.settled, greeting != nil else { return nil }
        tracker.moved = false
        return tracker.position
    }

    /// A publish `ok` of `seq` (the library's own events move the position too).
    package mutating func published(seq: UInt64) { tracker.saw(seq) }

    /// (issue 36) An event frame the driver read itself (by position, not
    /// through `handle`; not retained): the position moves as `handle` would
    /// move it. - Returns: false while events are held for the replays (an
    /// ordered session): then the frame must go to `handle`.
    package mutating func tookEvent(seq: UInt64) -> Bool {
        guard replay.settled else { return false }
        tracker.saw(seq)
        return true
    }

    // MARK: Output

    /// Whether requests wait in `output`.
    package var hasOutput: Bool { !output.isEmpty }

    /// Bytes of requests waiting in `output`.
    package var outputBytes: Int { output.count }

    /// The encoded requests to write, in order; the session forgets them.
    package mutating func takeOutput() -> [UInt8] {
        var taken: [UInt8] = []
        swap(&taken, &output)
        return taken
    }

    /// The encoded requests, in `spare`, the driver's written buffer: its
    /// bytes are dropped and its storage becomes the session's next output,
    /// so neither side grows a new array per batch (the bridge's writes).
    package mutating func takeOutput(swappingWith spare: inout [UInt8]) {
        spare.removeAll(keepingCapacity: spare.capacity <= 1 << 20)
        swap(&spare, &output)
    }

    /// Appends the encoded requests to `bytes` (no copy when `bytes` is empty).
    package mutating func takeOutput(appendingTo bytes: inout [UInt8]) {
        if bytes.isEmpty { swap(&bytes, &output) } else { bytes += output; output.removeAll(keepingCapacity: true) }
    }

    // MARK: Connection

    /// A socket is connected: queues the `hello`.
    package mutating func connectionStarted() {
        isConnected = true
        greeting = nil
        subscribed = []
        otherSubscriptions = []
        pending = [:]
        gapReported = false
        flow = FlowState()
        connections += 1
        replay = ReplayOrder(holding: options.ordered, asked: tracker.known ? tracker.position : nil)
        send(options.hello.request, .hello)
    }

    /// The connection ended. - Returns: the driver's requests that got no
    /// answer (they may or may not have been handled), oldest first.
    package mutating func connectionLost() -> [Tag] {
        var unanswered: [Tag] = []
        for req in pending.keys.sorted() {
            switch pending[req]! {
            case .request(let tag), .question(let tag): unanswered.append(tag)
            default: break
            }
        }
        isConnected = false
        greeting = nil
        subscribed = []
        otherSubscriptions = []
        pending = [:]
        output = []
        // (ordered) Lost before the sentinel: every event was held, so the
        // position is still the one this connection asked for (a `hello`
        // naming a run moved it on paper only).
        if options.ordered && !replay.settled { tracker.restore(replay.asked) }
        replay.connectionLost()
        return unanswered
    }

    // MARK: Requests

    /// Subscribes `pattern` (PROTOCOL.md "Requests": `subscribe`): with
    /// `since`/`instance` where the position covers it and it is not
    /// subscribed on this connection yet (a replay into a live stream would
    /// repeat events), `last` when asked. Nothing is sent when not connected
    /// (the next connection's driver subscribes).
    /// - Parameter tag: the driver's record, handed back with the answer.
    package mutating func subscribe(_ pattern: String, last: Bool = false, tag: Tag? = nil) {
        subscribe(SubscriptionKey(pattern), last: last, tag: tag)
    }

    /// Subscribes `key`: a plain one as `subscribe(_:last:tag:)` says; (1.3)
    /// a serving or group one with `serve`/`group`, never with `since` or
    /// `last` (requests are never replayed, a group shares live events only).
    package mutating func subscribe(_ key: SubscriptionKey, last: Bool = false, tag: Tag? = nil) {
        guard isConnected else { return }
        guard key.isPlain else {
            let first = otherSubscriptions.insert(key).inserted
            send(key.subscribeRequest(last: nil, since: nil), .subscribe(key, tag, first: first))
            return
        }
        let first = subscribed.insert(key.pattern).inserted
        let since = first ? tracker.since(for: key.pattern) : nil
        send(key.subscribeRequest(last: last ? true : nil, since: since), .subscribe(key, tag, first: first))
    }

    /// Withdraws `pattern` when it is subscribed; its next subscribe is plain
    /// (also when not connected: it has no receiver any more).
    package mutating func unsubscribe(_ pattern: String) {
        unsubscribe(SubscriptionKey(pattern))
    }

    /// Withdraws `key` when it is subscribed (see `unsubscribe(_:)`); (1.3)
    /// the `unsubscribe` names its `serve` and `group`. For a group member,
    /// the `ok` (`.unsubscribed`) comes after every event queued to it: the
    /// member's share is finished once it arrives.
    package mutating func unsubscribe(_ key: SubscriptionKey) {
        guard key.isPlain else {
            guard isConnected, otherSubscriptions.remove(key) != nil else { return }
            send(key.unsubscribeRequest, .unsubscribe(key))
            return
        }
        tracker.covered.remove(key.pattern)
        guard isConnected, subscribed.remove(key.pattern) != nil else { return }
        send(key.unsubscribeRequest, .unsubscribe(key))
    }

    /// (1.3) Whether `key` is subscribed on the current connection.
    package func isSubscribed(_ key: SubscriptionKey) -> Bool {
        key.isPlain ? subscribed.contains(key.pattern) : otherSubscriptions.contains(key)
    }

    /// (1.3) Requests of the driver's own (`request` ops) waiting for their answer.
    package var questionsWaiting: Int {
        pending.values.reduce(0) { count, what in
            if case .question = what { return count + 1 }
            return count
        }
    }

    /// Sends one of the driver's own requests; its answer comes back as
    /// `.answered(tag, reply)`; (1.3) a `request` op's whenever its reply is
    /// known (read it with `RequestAnswer`). - Returns: its `req`.
    @discardableResult
    package mutating func send(_ request: ClientRequest, tag: Tag) -> Int64 {
        if case .request = request { return send(request, .question(tag)) }
        return send(request, .request(tag))
    }

    /// Sends a request without `req` (success is silent; the bridge's imports).
    package mutating func sendUnnumbered(_ request: ClientRequest) {
        request.encode(req: nil, to: &output)
    }

    /// Sends a request without `req` that `write` appends itself, as one
    /// frame with its LF (the bridge's imports, `LocalPublish.appendFrame`:
    /// the same bytes as `ClientRequest`'s, without a String per member).
    @inline(__always)
    package mutating func appendUnnumbered(_ write: (inout [UInt8]) -> Void) {
        write(&output)
    }

    /// (ordered) Ends this connection's subscribes with the sentinel `stats`.
    package mutating func settle() {
        guard options.ordered, isConnected else { return }
        send(.stats, .sentinel)
    }

    @discardableResult
    private mutating func send(_ request: ClientRequest, _ what: Pending) -> Int64 {
        let req = nextReq
        nextReq += 1
        pending[req] = what
        request.encode(req: req, to: &output)
        return req
    }

    /// `req`s of requests still waiting for their answer, oldest first.
    package var waitingReqs: [Int64] { pending.keys.sorted() }


    // MARK: Incoming frames

    /// Handles one frame read from the broker (the bytes before its LF).
    /// Event fields point into `frame`: use them before it goes.
    package mutating func handle(_ frame: RawSpan) -> Incoming<Tag> {
        let read: BrokerFrame
        do {
            read = try BrokerFrame.read(frame)
        } catch {
            return .unreadable(error)
        }
        switch read {
        case .event(let fields):
            if fields.retained { return .event(fields) }
            if replay.hold(frame, fields) { return .held }
            tracker.saw(fields.seq)
            return .event(fields)
        case .dropped(let count, let since):
            return .dropped(count: count, sinceSeq: since)
        case .gap(let pattern, let since, let first):
            let gap = SessionGap(pattern: pattern, sinceSeq: since, firstSeq: first, previousRun: tracker.previous,
                                 firstOnConnection: !gapReported, asked: replay.asked)
            gapReported = true
            return .gap(gap)
        case .ok(let reply):
            guard let req = reply.req, let what = pending.removeValue(forKey: req) else { return .other(reply) }
            return answered(what, reply)
        case .error(let reply):
            if let req = reply.req {
                guard let what = pending.removeValue(forKey: req) else { return .error(reply) }
                return answered(what, reply)
            }
            if let pattern = reply.revokedPattern { return .revoked(pattern: pattern, reply) }
            if options.unnumberedErrors == .answerOldest, let code = reply.errorCode,
               code == .frameTooLarge || code == .badFrame || code == .badRequest, let oldest = oldestInOrder {
                return answered(pending.removeValue(forKey: oldest)!, reply)
            }
            return .error(reply)
        case .request(let fields):
            return .request(fields)
        case .servers(let pattern, let group):
            return .servers(pattern: pattern, group: group)
        case .unknown:
            return .ignored  // PROTOCOL.md "Framing": unknown ops are for newer peers.
        }
    }

    /// The oldest waiting request that the broker answers in order (not a
    /// `request` op, whose answer may come later).
    private var oldestInOrder: Int64? {
        var oldest: Int64? = nil
        for (req, what) in pending {
            if case .question = what { continue }
            if oldest.map({ req < $0 }) ?? true { oldest = req }
        }
        return oldest
    }

    private mutating func answered(_ what: Pending, _ reply: Reply) -> Incoming<Tag> {
        switch what {
        case .hello:
            guard reply.isOK else { return .helloRefused(reply) }
            let info = ConnectionInfo(helloReply: reply)
            greeting = info
            tracker.greeted(instance: info.instance)
            flow = FlowState(overflow: options.hello.overflow, features: info.features)
            let isReconnect = everGreeted
            if isReconnect { reconnects += 1 }
            everGreeted = true
            return .greeted(info, isReconnect: isReconnect)
        case .subscribe(let key, let tag, let first):
            if reply.isOK {
                if key.isPlain { tracker.covered.insert(key.pattern) }
                return .subscribed(key, reply, tag)
            }
            if first {
                if key.isPlain {
                    subscribed.remove(key.pattern)
                    tracker.covered.remove(key.pattern)
                } else {
                    otherSubscriptions.remove(key)
                }
            }
            return .subscribeRefused(key, reply, tag)
        case .unsubscribe(let key):
            return .unsubscribed(key, reply)
        case .request(let tag), .question(let tag):
            return .answered(tag, reply)
        case .sentinel:
            return settled(reply)
        }
    }

    /// The sentinel's answer: the replays are over. Its history
    /// (`history_first_seq + history_events - 1`) is the broker's newest seq
    /// now, up to which everything matching has been received.
    private mutating func settled(_ reply: Reply) -> Incoming<Tag> {
        var seq = tracker.seq
        var sinceAhead: (asked: UInt64, newest: UInt64)? = nil
        if reply.isOK, let first = reply.unsigned("history_first_seq"), let count = reply.unsigned("history_events"), first + count > 0 {
            seq = first + count - 1
            if connections == 1, let asked = replay.asked, asked.instance == nil, asked.seq > seq { sinceAhead = (asked.seq, seq) }
        }
        replay.release(reaching: seq)
        return .settled(sinceAhead: sinceAhead)
    }

    /// (ordered) The next event released by the sentinel, in seq order; the
    /// position moves to it. Once none is left, the position is the sentinel's.
    package mutating func takeReleased() -> (frame: [UInt8], fields: EventFields)? {
        if let event = replay.next() {
            tracker.saw(event.fields.seq)
            return event
        }
        if let reached = replay.takeReached() { tracker.saw(reached) }
        return nil
    }
}

/// What one frame from the broker means for the driver.
package enum Incoming<Tag> {
    /// An event to hand on (its fields point into the frame); retained ones
    /// (`fields.retained`) do not move the position.
    case event(EventFields)
    /// (ordered) An event kept until the replays are over.
    case held
    /// `{"op":"dropped","count":3,"since_seq":17}`: events the broker dropped for us.
    case dropped(count: UInt64, sinceSeq: UInt64)
    /// (1.1) A `gap` frame.
    case gap(SessionGap)
    /// The `hello` was answered.
    case greeted(ConnectionInfo, isReconnect: Bool)
    /// The `hello` was refused.
    case helloRefused(Reply)
    /// (1.3) A request for a serving subscription: answer it with
    /// `ClientRequest.reply(to:)` and its token (fields point into the frame).
    case request(RequestFields)
    /// A subscribe was acknowledged; (1.3) a group's `ok` carries `members`.
    case subscribed(SubscriptionKey, Reply, Tag?)
    /// A subscribe was refused (the subscription is no longer there unless it was before).
    case subscribeRefused(SubscriptionKey, Reply, Tag?)
    /// An unsubscribe was answered (`ok` or `error`).
    case unsubscribed(SubscriptionKey, Reply)
    /// One of the driver's own requests was answered (`ok` or `error`).
    case answered(Tag, Reply)
    /// (ordered) The replays are over: take the held events with `takeReleased`.
    /// `sinceAhead`: a bare `--since` beyond the broker's newest seq (first connection only).
    case settled(sinceAhead: (asked: UInt64, newest: UInt64)?)
    /// (1.1) A policy reload removed the subscription of `pattern`.
    case revoked(pattern: String, Reply)
    /// An `error` that answers no request of ours (e.g. `slow_consumer` before a close, or an import's).
    case error(Reply)
    /// An `ok` that answers no request of ours.
    case other(Reply)
    /// A frame the reader could not read.
    case unreadable(BrokerFrameError)
    /// (issue 36) `{"op":"servers","type":"svc.>"}`: the serving patterns
    /// overlapping a watch (`subscribe` with `servers`) changed; with
    /// `group`, the patterns of that group's members did.
    case servers(pattern: String, group: String?)
    /// An op this client does not know.
    case ignored
}

/// (1.1) A `gap` frame with what the session knew when it came.
package struct SessionGap: Sendable, Equatable {
    package var pattern: String
    package var sinceSeq: UInt64
    package var firstSeq: UInt64
    /// The broker run before this connection's, and how far the client had
    /// got in it, when the broker restarted; nil when it is the same run.
    package var previousRun: StreamPosition?
    /// The first `gap` of this connection.
    package var firstOnConnection: Bool
    /// The position this connection's subscribes asked for (nil: none).
    package var asked: StreamPosition?

    /// The library's value of it.
    package var busGap: BusGap { BusGap(sinceSeq: sinceSeq, firstSeq: firstSeq, brokerRestarted: previousRun != nil) }
}

/// (1.2) Flow control as a client sees it (PROTOCOL.md "Flow control"):
/// whether the broker holds publishers back for this connection, so that
/// not reading while the consumer is full loses nothing.
package struct FlowState: Sendable, Equatable {
    /// The `hello` reply listed `flow` and the connection's `overflow` is `wait`.
    package private(set) var brokerHolds = false
    /// The driver stopped reading (its consumer is full).
    package private(set) var paused = false

    init() {}

    init(overflow: OverflowPolicy?, features: [String]) {
        brokerHolds = features.contains("flow") && (overflow ?? .wait) == .wait
    }

    /// The consumer is full (`true`) or has room again.
    package mutating func pause(_ on: Bool) { paused = on }
}

extension BusSession {
    /// (1.2) The driver's consumer is full: stop reading (`true`), or read again.
    package mutating func pauseReading(_ on: Bool) { flow.pause(on) }
}
