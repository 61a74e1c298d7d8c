// (issue 36) Requests across machines, with no I/O: what the bridge sends to
// NATS for a request no local server took, what it asks the local broker
// for a request from another machine, and how each answer goes back
// (docs/BRIDGE.md "Requests across machines", PROTOCOL-NOTES.md
// "Requests across machines (issue 36)").
//
// - Out (`--export-requests P`): the bridge holds a *fallback* serving
//   subscription of P on its bus, so the broker hands it a request of a
//   type P matches only when no local server (or serving group) took it.
//   The request goes out as a NATS request: HPUB `PREFIX.req.NODE.TYPE`
//   with reply subject `PREFIX.rpl.NODE.BRIDGE.N`, the CloudEvents headers
//   of an export and `eb-timeout` (the milliseconds left). The answer is
//   the reply's `eb-status` (`ok`, or an error code with `eb-message`), or
//   NATS's status 503 (nobody subscribes: `no_responders`), relayed to the
//   broker as the `reply` of the request's token (with `code` for the codes
//   the broker lets a bridge relay).
// - In (`--import-requests P`): the bridge watches the serving patterns of
//   its bus that overlap P (`subscribe` with `servers`, Broker+ServerWatch.swift)
//   and, for each S it is told of, holds `SUB PREFIX.req.*.M` (M: the types
//   both P and S match) in the queue group `eventbus-requests`: so NATS hands
//   each request to one node that has a server for it, and answers 503 (no
//   responders) at once when none has. The bridge asks its broker (`request`
//   with `timeout` = `eb-timeout`), as an ordinary requester: a local
//   serving subscription answers, and the answer goes back on the NATS
//   reply subject. A broker without the `servers` feature: `SUB
//   PREFIX.req.*.P` for the whole pattern, as before.
//
// Before editing: every table here is bounded by the broker's own bounds
// (the tokens it gives one server, the requests one connection may have
// pending); entries leave when answered, when the deadline passed
// (`expire`), or with the connection they belong to. (attacker7) The asked
// ones are divided among their origins (RequestShares.swift): one
// requester elsewhere holds at most its fair share of the bus connection's.
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession

/// A request the broker gave the bridge (its fallback serving subscription).
package struct OutgoingRequest: Sendable, Equatable {
    /// The request as an event (type, seq, source, id, credentials, `data`).
    package var event: RawEvent
    /// The reply token the bridge answers with.
    package var token: String
    /// Milliseconds left before its deadline (the broker's default when absent).
    package var timeoutMilliseconds: UInt64

    package init(event: RawEvent, token: String, timeoutMilliseconds: UInt64) {
        self.event = event
        self.token = token
        self.timeoutMilliseconds = timeoutMilliseconds
    }
}

/// The header names of requests across machines (besides the `ce-` ones).
package enum RequestHeaderName {
    /// On a request: the milliseconds left before its deadline.
    package static let timeout = "eb-timeout"
    /// On an answer: `ok`, or the error code the answering bus gave.
    package static let status = "eb-status"
    /// On an answer with an error: its message.
    package static let message = "eb-message"
}

package struct RemoteRequests {
    package let mapping: SubjectMapping
    /// Request types that may leave (the fallback serving subscriptions).
    package let exports: [Pattern]
    /// Request types other machines may ask here.
    package let imports: [Pattern]
    /// `PREFIX.rpl.NODE.BRIDGE.*`: where answers come (one subscription).
    package let replySubscription: Subject
    private let replyHead: String
    private let requestHead: String
    /// The NATS queue group of request imports.
    package static let queueGroup = Subject("eventbus-requests")!

    /// Requests sent to NATS and not yet answered: reply number -> token, deadline.
    private var outstanding: [UInt64: (token: String, deadline: Int64)] = [:]
    private var nextReply: UInt64 = 1
    /// Requests asked on the bus for another machine: bus tag -> NATS reply subject.
    private var asked: [UInt64: Subject] = [:]
    private var nextAsk: UInt64 = 1
    /// (attacker7) Each origin's fair share of the asked requests (RequestShares.swift).
    private var shares = RequestShares()
    private var replySID: SubscriptionID?
    /// The sids made before the first request import subscription (the
    /// bridge's fixed ones): a larger sid is a request import's, current or
    /// ended (a request in flight when it ended is still asked on the bus).
    private var lastFixedSID: SubscriptionID?
    /// The serving patterns the bus has, per import pattern (what the last
    /// watch `ok` listed); the subscriptions they make, by subject.
    private var served: [Pattern: [Pattern]] = [:]
    private var importSubscriptions: [String: SubscriptionID] = [:]

    package private(set) var counters = Counters()

    package struct Counters: Equatable, Sendable {
        /// Requests sent to NATS; answers relayed back to the bus from NATS.
        package var sent = 0
        package var answered = 0
        /// Sent requests NATS said nobody subscribes to (status 503).
        package var noResponders = 0
        /// Requests from other machines asked on the bus; answers sent back.
        package var received = 0
        package var replied = 0
        /// Incoming requests dropped (a bad subject, header or payload, our own node).
        package var dropped = 0
        /// (attacker7) Incoming requests refused `limit`: their origin held its fair share.
        package var limited = 0
    }

    /// The longest `eb-timeout` taken from another machine (the broker's
    /// default maximum); a longer one is cut to it.
    package static let maxTimeoutMilliseconds: UInt64 = 300_000

    package init(mapping: SubjectMapping, bridgeInstance: String, exports: [Pattern], imports: [Pattern]) {
        self.mapping = mapping
        self.exports = BridgeCore.minimalPatterns(exports)
        self.imports = BridgeCore.minimalPatterns(imports)
        let prefix = mapping.prefix.text
        replyHead = "\(prefix).rpl.\(mapping.node.text).\(bridgeInstance)."
        replySubscription = Subject(pattern: replyHead + "*")!
        requestHead = "\(prefix).req."
    }

    package var isEmpty: Bool { exports.isEmpty && imports.isEmpty }

    /// The fixed NATS subscription to make (once, after the bridge's event
    /// ones; the client renews them at every reconnect).
    package mutating func subscribe(_ subscribe: (Subject, Subject?) -> SubscriptionID) {
        if !exports.isEmpty { replySID = subscribe(replySubscription, nil) }
    }

    /// Whether a NATS message is for this table (its subscription's sid).
    package func owns(_ sid: SubscriptionID) -> Bool {
        if sid == replySID { return true }
        guard let last = lastFixedSID else { return false }
        return sid > last
    }

    /// The request import subscriptions now, by subject (for tests and the log).
    package var importSubjects: [String] { importSubscriptions.keys.sorted() }

    /// What the bus serves of import pattern `pattern` changed (a watch's
    /// list; `[pattern]` for a broker without the watch; `[]` when the bus
    /// is lost): the NATS subscriptions follow. `subscribe` makes one and
    /// gives its sid (the first call records the fixed sids' end),
    /// `unsubscribe` ends one. - Returns: the subjects added and removed.
    @discardableResult
    package mutating func serving(_ pattern: Pattern, _ servers: [Pattern], subscribe: (Subject, Subject?) -> SubscriptionID,
                                 unsubscribe: (SubscriptionID) -> Void) -> (added: [String], removed: [String]) {
        guard imports.contains(pattern) else { return ([], []) }
        served[pattern] = servers.isEmpty ? nil : servers
        var wanted: [Pattern] = []
        for (imported, list) in served {
            for server in list {
                if let both = RemoteRequests.intersection(imported, server) { wanted.append(both) }
            }
        }
        let subjects = Set(BridgeCore.minimalPatterns(wanted).map { requestHead + "*." + $0.text })
        var removed: [String] = []
        for (subject, sid) in importSubscriptions where !subjects.contains(subject) {
            unsubscribe(sid)
            importSubscriptions[subject] = nil
            removed.append(subject)
        }
        // Subscribed in order (the sids, the log); only the new ones sorted.
        var added: [String] = []
        for subject in subjects.filter({ importSubscriptions[$0] == nil }).sorted() {
            guard let natsSubject = Subject(pattern: subject) else { continue }
            let sid = subscribe(natsSubject, RemoteRequests.queueGroup)
            if lastFixedSID == nil { lastFixedSID = SubscriptionID(sid.rawValue - 1) }
            importSubscriptions[subject] = sid
            added.append(subject)
        }
        return (added, removed.sorted())
    }

    /// The types both patterns match, as one pattern (nil: none). Segment by
    /// segment: a name and `*` give the name, `*` and `*` give `*`, and a `>`
    /// takes the rest of the other (one segment at least). Examples: `svc.>`
    /// and `*.echo` give `svc.echo`; `a.>` and `a.*.c` give `a.*.c`.
    package static func intersection(_ p: Pattern, _ q: Pattern) -> Pattern? {
        // (watchlist) One inside the other (every server under `svc.>`) is
        // the intersection itself: no pattern built and validated again.
        if BridgeCore.covers(p, q) { return q }
        if BridgeCore.covers(q, p) { return p }
        let a = p.segments, b = q.segments
        var out: [Substring] = []
        var i = 0
        while i < a.count || i < b.count {
            if i < a.count && a[i] == ">" {
                guard i < b.count else { return nil }
                out.append(contentsOf: b[i...])
                break
            }
            if i < b.count && b[i] == ">" {
                guard i < a.count else { return nil }
                out.append(contentsOf: a[i...])
                break
            }
            guard i < a.count && i < b.count else { return nil }
            if a[i] == "*" { out.append(b[i]) } else if b[i] == "*" || a[i] == b[i] { out.append(a[i]) } else { return nil }
            i += 1
        }
        return Pattern(out.joined(separator: "."))
    }

    // MARK: Out: a request no local server took

    /// `PREFIX.req.NODE.TYPE`.
    package func requestSubject(for type: String) -> Subject? { Subject(requestHead + mapping.node.text + "." + type) }

    /// The NATS request for `request` (recorded until answered or `now`
    /// passes its deadline). - Parameter instance: the local broker's.
    package mutating func send(_ request: OutgoingRequest, instance: String, now: Int64) -> OutgoingMessage? {
        guard let subject = requestSubject(for: request.event.type) else { return nil }
        let number = nextReply
        nextReply += 1
        let event = request.event.metadata
        var block = HeaderBlockWriter(capacity: 448 + event.id.utf8.count + event.source.utf8.count + event.type.utf8.count)
        block.append(HeaderName.specVersion, "1.0")
        block.append(HeaderName.id, event.id)
        block.append(HeaderName.source, event.source)
        block.append(HeaderName.type, event.type)
        block.append(HeaderName.time, event.time)
        block.append(HeaderName.dataContentType, "application/json")
        block.append(HeaderName.node, mapping.node.text)
        block.append(HeaderName.instance, instance)
        block.append(HeaderName.seq, event.seq)
        if event.pid >= 0 { block.append(HeaderName.pid, UInt64(event.pid)) }
        block.append(HeaderName.uid, UInt64(event.uid))
        block.append(HeaderName.gid, UInt64(event.gid))
        block.append(RequestHeaderName.timeout, request.timeoutMilliseconds)
        var message = OutgoingMessage(subject: subject, headerBlock: block.finish(), payload: request.event.data)
        message.replyTo = Subject(replyHead + String(number))
        outstanding[number] = (request.token, now &+ Int64(clamping: request.timeoutMilliseconds) &* 1_000_000)
        counters.sent += 1
        return message
    }

    /// The `reply` that answers a NATS answer on the reply subscription
    /// (nil: not one we wait for any more, or unreadable).
    package mutating func answer(_ message: Message) -> ClientRequest? {
        guard message.subject.hasPrefix(replyHead), let number = UInt64(message.subject.dropFirst(replyHead.count)),
              let entry = outstanding.removeValue(forKey: number) else { return nil }
        counters.answered += 1
        let headers = message.headers
        if headers?.status == 503 {
            counters.noResponders += 1
            return .reply(to: entry.token, error: "no machine on NATS takes requests of this type (none both imports and serves it: NATS no responders)",
                          code: ErrorCode.noResponders.rawValue)
        }
        let status = headers?.first(RequestHeaderName.status) ?? "ok"
        let text = headers?.first(RequestHeaderName.message) ?? ""
        let node = headers?.first(HeaderName.node) ?? "?"
        if status == "ok" {
            guard case .value(let data) = BridgeCore.localData(message.payload) else {
                return .reply(to: entry.token, error: "node \(node) answered with data that is not one JSON value")
            }
            return .reply(to: entry.token, data: data)
        }
        if status == ErrorCode.serviceError.rawValue { return .reply(to: entry.token, error: text) }
        if let code = ErrorCode(rawValue: status), ServiceReply.relayedCodes.contains(code) {
            return .reply(to: entry.token, error: "on node \(node): \(text)", code: code.rawValue)
        }
        return .reply(to: entry.token, error: "node \(node) could not ask its bus: \(text) (\(status))")
    }

    /// The reply to a request when NATS is not reachable now.
    package static func unreachable(_ request: OutgoingRequest) -> ClientRequest {
        .reply(to: request.token, error: "the bridge's NATS link is down: no other machine can be asked", code: ErrorCode.noResponders.rawValue)
    }

    /// Forgets the requests whose deadline passed before `now` (the broker
    /// answered `timeout` to their requesters); a late answer is then ignored.
    package mutating func expire(now: Int64) {
        guard !outstanding.isEmpty else { return }
        outstanding = outstanding.filter { $0.value.deadline > now }
    }

    /// The bus connection ended: its tokens are void, its own requests unanswered.
    package mutating func busLost() {
        outstanding.removeAll()
        asked.removeAll()
        shares.removeAll()
    }

    /// The import patterns whose servers are known (to forget when the bus is lost).
    public var watchedImports: [Pattern] { Array(served.keys) }

    /// Requests sent to NATS and not yet answered.
    package var outstandingCount: Int { outstanding.count }

    // MARK: In: a request from another machine

    /// What to do with a message on a request import subscription.
    package enum Incoming: Equatable {
        /// Ask the local bus `request` (tagged `tag`: `replied(tag:...)` with its answer).
        case ask(ClientRequest, tag: UInt64)
        /// Not a request we can take (`reason` for the log).
        case drop(String)
        /// (attacker7) Its origin holds its fair share: answer it with `refusal` (status `limit`).
        case refuse(OutgoingMessage)
    }

    /// Reads a request from another machine. `timeoutMilliseconds` comes
    /// from `eb-timeout` (at most `maxTimeoutMilliseconds`; absent: the
    /// broker's default).
    package mutating func receive(_ message: Message) -> Incoming {
        guard let reply = message.replyTo, let replySubject = Subject(reply) else {
            counters.dropped += 1
            return .drop("a request on \(message.subject) without a reply subject")
        }
        let type: EventType, imported: CloudEventsHeaders.Imported
        switch RemoteSubject.read(message, head: requestHead, ownNode: mapping.node, what: "request") {
        case .success(let read): (type, imported) = (read.type, read.imported)
        case .failure(let refusal): counters.dropped += 1; return .drop(refusal.text)
        }
        var timeout: UInt64? = nil
        if let text = message.headers?.first(RequestHeaderName.timeout) {
            guard let value = UInt64(text), value > 0 else { counters.dropped += 1; return .drop("bad \(RequestHeaderName.timeout) \(text)") }
            timeout = min(value, RemoteRequests.maxTimeoutMilliseconds)
        }
        let data: JSONText?
        switch BridgeCore.localData(message.payload) {
        case .absent: data = nil
        case .value(let value): data = value
        case .invalid: counters.dropped += 1; return .drop("the data of a request on \(message.subject) is not one JSON value")
        }
        let tag = nextAsk
        let origin = RequestShares.Origin(node: imported.origin.node, uid: imported.origin.uid)
        guard shares.take(origin, tag: tag) else {
            counters.limited += 1
            return .refuse(limitRefusal(to: replySubject, origin))
        }
        nextAsk += 1
        asked[tag] = replySubject
        counters.received += 1
        return .ask(.request(type: type.name, source: imported.source, id: imported.id, timeout: timeout, data: data), tag: tag)
    }

    /// The NATS answer to the bus's `reply` for the request asked with `tag`
    /// (nil: no longer known, e.g. the bus connection was lost meanwhile).
    package mutating func replied(tag: UInt64, _ reply: Reply) -> OutgoingMessage? {
        guard let subject = asked.removeValue(forKey: tag) else { return nil }
        shares.release(tag: tag)
        counters.replied += 1
        var block = HeaderBlockWriter(capacity: 256)
        let payload: [UInt8]
        let answer = RequestAnswer(reply)
        let server: ServerReply?
        switch answer {
        case .answered(let reply):
            block.append(RequestHeaderName.status, "ok")
            server = reply
            payload = reply.data
        case .serviceError(let message, let reply):
            block.append(RequestHeaderName.status, ErrorCode.serviceError.rawValue)
            block.append(RequestHeaderName.message, message)
            server = reply
            payload = []
        case .noResponders(let message), .noReply(let message), .timedOut(let message):
            block.append(RequestHeaderName.status, reply.string("code") ?? "")
            block.append(RequestHeaderName.message, message)
            server = nil
            payload = []
        case .refused(let code, let message):
            block.append(RequestHeaderName.status, code)
            block.append(RequestHeaderName.message, message)
            server = nil
            payload = []
        }
        block.append(HeaderName.node, mapping.node.text)
        if let server {
            if let pid = server.pid, pid >= 0 { block.append(HeaderName.pid, UInt64(pid)) }
            if let uid = server.uid, uid >= 0 { block.append(HeaderName.uid, UInt64(uid)) }
            if let gid = server.gid, gid >= 0 { block.append(HeaderName.gid, UInt64(gid)) }
        }
        return OutgoingMessage(subject: subject, headerBlock: block.finish(), payload: payload)
    }

    /// A request asked on the bus got no answer (the connection ended):
    /// forgotten; the other machine's requester times out.
    package mutating func forget(tag: UInt64) {
        asked.removeValue(forKey: tag)
        shares.release(tag: tag)
    }

    /// (attacker7) The answer to a request whose origin holds its fair share of the asked ones.
    private func limitRefusal(to subject: Subject, _ origin: RequestShares.Origin) -> OutgoingMessage {
        var block = HeaderBlockWriter(capacity: 256)
        block.append(RequestHeaderName.status, ErrorCode.limit.rawValue)
        block.append(RequestHeaderName.message, "node \(mapping.node.text) is asking its bus \(shares.count) requests from other machines, "
                     + "uid \(origin.uid.map { String($0) } ?? "?") of node \(origin.node) its fair share of them (at most \(RequestShares.places) at once)")
        block.append(HeaderName.node, mapping.node.text)
        return OutgoingMessage(subject: subject, headerBlock: block.finish(), payload: [])
    }
}
