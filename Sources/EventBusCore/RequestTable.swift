// The books of request/reply (PROTOCOL.md "Request/reply (1.3)"): the
// requests asked and not yet answered (`PendingRequest`), the reply tokens
// handed to the connections that serve them, the deadlines in a min-heap,
// and the random source of the tokens. Broker+RequestReply.swift applies
// the rules; this file only keeps the books.
//
// Before editing: a request is in the table from the moment it is queued to
// its first server until it is answered, times out, has no server left, or
// its requester goes; `RequestTable.finish` is the one place that takes it
// out, with every token it still has (both directions: the table's `slots`
// and each server's `ConnectionRequests.serving`), its heap entry and its
// counts (per connection, per uid, total). A deadline costs nothing per
// event: the heap is looked at only when the server's timer says the
// earliest one is due (`nextDeadline`).
import CEventBusShims
@_spi(Package) import EventBusProtocol

/// A reply token (PROTOCOL.md "Request/reply": chosen by the broker,
/// unguessable): 128 bits from the system CSPRNG, written as 32 lowercase
/// hex digits. Not derived from the seq, the connection or anything else a
/// client can see.
struct ReplyToken: Hashable {
    let high: UInt64
    let low: UInt64

    /// Length of the token's text.
    static let textLength = 32

    /// Reads the 32 lowercase hex digits of a token; nil for any other text
    /// (then no token can match, and the reply is answered as for an unknown one).
    init?(text: RawSpan) {
        guard text.byteCount == ReplyToken.textLength else { return nil }
        var high: UInt64 = 0, low: UInt64 = 0
        for i in 0..<32 {
            let byte = text.unsafeLoad(fromByteOffset: i, as: UInt8.self)
            let digit: UInt64
            switch byte {
            case 0x30...0x39: digit = UInt64(byte - 0x30)
            case 0x61...0x66: digit = UInt64(byte - 0x61 + 10)
            default: return nil
            }
            if i < 16 { high = high << 4 | digit } else { low = low << 4 | digit }
        }
        self.high = high
        self.low = low
    }

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Appends the 32 hex digits.
    func append(to out: inout [UInt8]) {
        let digits: StaticString = "0123456789abcdef"
        let table = digits.utf8Start
        for word in [high, low] {
            var shift: UInt64 = 60
            for _ in 0..<16 {
                out.append(table[Int((word >> shift) & 0xF)])
                shift &-= 4
            }
        }
    }
}

/// Random tokens drawn from the system CSPRNG, never from a seeded
/// generator: getrandom(2)'s bytes as they are, fetched 4 KiB (256 tokens)
/// at a time (one system call where `SystemRandomNumberGenerator` made two
/// per token: 15 % of the broker's CPU with 64 requests in flight), each
/// word handed out once and wiped as it is.
struct TokenSource {
    private var pool = [UInt64](repeating: 0, count: 512)
    private var used = 512

    mutating func next() -> ReplyToken {
        if used + 2 > pool.count {
            // (issue 35) The system call fills the pool's own bytes: the array
            // is passed to C as its storage for the length of the call (Swift's
            // inout-to-pointer conversion; no pointer outlives the call).
            eventbus_random_bytes(&pool, pool.count * MemoryLayout<UInt64>.stride)
            used = 0
        }
        let token = ReplyToken(high: pool[used], low: pool[used + 1])
        pool[used] = 0
        pool[used + 1] = 0
        used += 2
        return token
    }
}

/// Why a server went without replying (PROTOCOL.md "Request/reply": the
/// message of `no_reply` says which).
enum ServerLoss {
    case closed, unsubscribed, behind
}

/// A request asked and not yet answered.
final class PendingRequest {
    /// Who asked; the table keeps it while the request is pending (its
    /// `ConnectionRequests.pending` holds the request the other way).
    let requester: Connection
    /// The raw `req` token, echoed in the answer.
    let req: [UInt8]
    let seq: UInt64
    let type: EventType
    /// When it times out, monotonic ns.
    let deadline: Int64
    /// The tokens handed out and still good (a server that went took its own away).
    var tokens: [ReplyToken] = []
    /// How many servers went without replying, by why.
    var closed = 0, unsubscribed = 0, behind = 0
    /// Its place in `RequestTable.deadlines` (-1 when not in it).
    var heapIndex = -1

    init(requester: Connection, req: [UInt8], seq: UInt64, type: EventType, deadline: Int64) {
        self.requester = requester
        self.req = req
        self.seq = seq
        self.type = type
        self.deadline = deadline
    }

    /// The `no_reply` message, in words: `the one server of svc.x the
    /// request reached went away without replying: it closed its connection`;
    /// `all 3 servers of svc.x ...: two closed their connections, one removed
    /// its serving subscription`.
    var noReplyMessage: String {
        let count = closed + unsubscribed + behind
        func said(_ n: Int, _ one: String, _ many: String) -> String? {
            guard n > 0 else { return nil }
            if count == 1 { return "it " + one }
            return n == 1 ? "one " + one : "\(PendingRequest.words[n] ?? String(n)) " + many
        }
        let parts = [said(closed, "closed its connection", "closed their connections"),
                     said(unsubscribed, "removed its serving subscription", "removed their serving subscriptions"),
                     said(behind, "fell behind (took nothing of its queue for the stall timeout)",
                          "fell behind (took nothing of their queues for the stall timeout)")].compactMap { $0 }
        return "\(count == 1 ? "the one server" : "all \(count) servers") of \(type.name) the request reached went away without replying: " + parts.joined(separator: ", ")
    }

    private static let words = [2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"]
}

/// A token's place: the request it answers, the connection it was given
/// to, and the requester uid it counts against in that server's fair share
/// (`OutboundQueue.noActor` when none: the server's own uid, uid 0, the broker's).
struct ReplySlot {
    let request: PendingRequest
    let server: Connection
    let actor: UInt32
    /// Where its request frame ends in the server's stream of written bytes
    /// (`FlowState.bytesTaken` once it is written); 0 when not known.
    var frameEnd: UInt64 = 0
}

/// A connection's side of the books (held by `Connection.requests`).
struct ConnectionRequests {
    /// As a requester: its requests not answered yet.
    fileprivate(set) var pending: [ObjectIdentifier: PendingRequest] = [:]
    /// As a server: the tokens it was given and has not used.
    fileprivate(set) var serving: Set<ReplyToken> = []
    /// As a server: how many of `serving` each other requester uid holds
    /// (its fair share, `Broker.mayServeMore`); no entry at 0.
    fileprivate(set) var shares: [UInt32: Int] = [:]
    /// (attacker round 4) Shares kept for tokens that ended (answered,
    /// timed out, requester gone) while their request frame was still
    /// queued to this server: counted in `shares` until the frame is written
    /// (`ReplySlot.frameEnd`), so a uid's requests queued to a server stay
    /// within its fair share of tokens even once they expire (before, a uid
    /// sending short deadlines queued 6,000 dead requests within a 2,048
    /// share). Given back by `Broker.releaseWrittenShares`.
    fileprivate(set) var lingering: [(frameEnd: UInt64, actor: UInt32)] = []
    /// The smallest `frameEnd` in `lingering` (UInt64.max when empty).
    fileprivate(set) var lingeringUntil = UInt64.max
}

/// The pending requests of a broker (held by `Broker.requests`).
struct RequestTable {
    /// Every token handed out and still good.
    fileprivate(set) var slots: [ReplyToken: ReplySlot] = [:]
    /// Pending requests by deadline: a binary min-heap.
    private(set) var deadlines: [PendingRequest] = []
    fileprivate(set) var tokens = TokenSource()

    /// Pending requests in all.
    var count: Int { deadlines.count }

    /// The earliest deadline, monotonic ns; nil while nothing is pending.
    var nextDeadline: Int64? { deadlines.first?.deadline }

    /// The pending request whose deadline is earliest, if it is due at `now`.
    func due(at now: Int64) -> PendingRequest? {
        guard let first = deadlines.first, first.deadline <= now else { return nil }
        return first
    }

    /// Takes in a request that was queued to at least one server.
    mutating func add(_ request: PendingRequest) {
        request.heapIndex = deadlines.count
        deadlines.append(request)
        siftUp(request.heapIndex)
        request.requester.requests.pending[ObjectIdentifier(request)] = request
        request.requester.account.countPendingRequest(1)
    }

    /// Hands `server` a new token for `request`, counted in the fair share
    /// of `actor` (the requester's uid, or `OutboundQueue.noActor`).
    mutating func issueToken(for request: PendingRequest, to server: Connection, actor: UInt32) -> ReplyToken {
        var token = tokens.next()
        while slots[token] != nil { token = tokens.next() }  // 2^-128: for form's sake
        slots[token] = ReplySlot(request: request, server: server, actor: actor)
        server.requests.serving.insert(token)
        server.account.countServing(for: actor != OutboundQueue.noActor ? actor : nil)
        if actor != OutboundQueue.noActor { server.requests.shares[actor, default: 0] += 1 }
        request.tokens.append(token)
        return token
    }

    /// Takes a token out of its server's counts (the slot is out of `slots`
    /// already); its fair-share charge stays while its frame is unwritten
    /// (`ConnectionRequests.lingering`).
    private func release(_ token: ReplyToken, _ slot: ReplySlot) {
        let server = slot.server
        server.requests.serving.remove(token)
        server.account.uncountServing()
        guard slot.actor != OutboundQueue.noActor else { return }
        if slot.frameEnd > server.flow.bytesTaken && !server.isClosed && !server.outbound.isEmpty {
            server.requests.lingering.append((slot.frameEnd, slot.actor))
            server.requests.lingeringUntil = min(server.requests.lingeringUntil, slot.frameEnd)
            return
        }
        Self.releaseShare(of: slot.actor, on: server)
    }

    /// Where `token`'s request frame ends in its server's written bytes (once queued).
    mutating func noteFrameEnd(_ token: ReplyToken, _ end: UInt64) {
        slots[token]?.frameEnd = end
    }

    /// Gives back the kept charges (`ConnectionRequests.lingering`) of the
    /// frames `connection`'s socket has taken (all of them when `all`, or
    /// once its queue is empty). Only while some are kept: O(kept) then.
    static func releaseWrittenShares(of connection: Connection, all: Bool) {
        let taken = connection.flow.bytesTaken
        let everything = all || connection.outbound.isEmpty
        guard everything || taken >= connection.requests.lingeringUntil else { return }
        var kept: [(frameEnd: UInt64, actor: UInt32)] = []
        var until = UInt64.max
        for entry in connection.requests.lingering {
            if everything || entry.frameEnd <= taken {
                releaseShare(of: entry.actor, on: connection)
            } else {
                kept.append(entry)
                until = min(until, entry.frameEnd)
            }
        }
        connection.requests.lingering = kept
        connection.requests.lingeringUntil = until
    }

    /// Takes one token's fair-share charge of `actor` off `server` and its uid.
    static func releaseShare(of actor: UInt32, on server: Connection) {
        decrement(&server.requests.shares, actor)
        server.account.releaseServingShare(of: actor)
    }

    private static func decrement(_ shares: inout [UInt32: Int], _ actor: UInt32) {
        guard let held = shares[actor] else { preconditionFailure("serving share of uid \(actor) not held") }
        shares[actor] = held > 1 ? held - 1 : nil
    }

    /// Takes back one token of a server that went (it can no longer reply
    /// with it), counting why.
    /// - Returns: its request (check `tokens.isEmpty`: no server left), nil
    ///   when the token was no longer good.
    mutating func withdraw(_ token: ReplyToken, from server: Connection, because loss: ServerLoss) -> PendingRequest? {
        guard let slot = slots.removeValue(forKey: token) else { return nil }
        release(token, slot)
        let request = slot.request
        if let i = request.tokens.firstIndex(of: token) { request.tokens.swapAt(i, request.tokens.count - 1); request.tokens.removeLast() }
        switch loss {
        case .closed: request.closed += 1
        case .unsubscribed: request.unsubscribed += 1
        case .behind: request.behind += 1
        }
        return request
    }

    /// Takes a request out of the books for good (answered, timed out, no
    /// server left, requester gone): its tokens, its deadline, its counts.
    mutating func finish(_ request: PendingRequest) {
        guard request.heapIndex >= 0 else { return }
        for token in request.tokens {
            if let slot = slots.removeValue(forKey: token) { release(token, slot) }
        }
        request.tokens = []
        remove(at: request.heapIndex)
        request.requester.requests.pending[ObjectIdentifier(request)] = nil
        request.requester.account.countPendingRequest(-1)
    }

    // MARK: The heap

    private mutating func remove(at i: Int) {
        let request = deadlines[i]
        let last = deadlines.count - 1
        if i != last {
            deadlines[i] = deadlines[last]
            deadlines[i].heapIndex = i
        }
        deadlines.removeLast()
        request.heapIndex = -1
        if i < deadlines.count {
            siftDown(i)
            siftUp(i)
        }
    }

    private mutating func siftUp(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard deadlines[i].deadline < deadlines[parent].deadline else { return }
            swapEntries(i, parent)
            i = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            let left = 2 * i + 1, right = left + 1
            var smallest = i
            if left < deadlines.count && deadlines[left].deadline < deadlines[smallest].deadline { smallest = left }
            if right < deadlines.count && deadlines[right].deadline < deadlines[smallest].deadline { smallest = right }
            guard smallest != i else { return }
            swapEntries(i, smallest)
            i = smallest
        }
    }

    private mutating func swapEntries(_ a: Int, _ b: Int) {
        deadlines.swapAt(a, b)
        deadlines[a].heapIndex = a
        deadlines[b].heapIndex = b
    }
}
