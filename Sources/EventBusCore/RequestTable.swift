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
import EventBusProtocol

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
    init?(text: UnsafeRawBufferPointer) {
        guard text.count == ReplyToken.textLength else { return nil }
        var high: UInt64 = 0, low: UInt64 = 0
        for i in 0..<32 {
            let byte = text[i]
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

/// Random tokens drawn from the system CSPRNG (`SystemRandomNumberGenerator`:
/// getrandom(2) on Linux), never from a seeded generator.
struct TokenSource {
    private var generator = SystemRandomNumberGenerator()

    mutating func next() -> ReplyToken {
        ReplyToken(high: generator.next(), low: generator.next())
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

    /// The `no_reply` message: `2 servers went without replying: 1 closed its connection, 1 removed its serving subscription`.
    var noReplyMessage: String {
        var parts: [String] = []
        if closed > 0 { parts.append("\(closed) closed its connection") }
        if unsubscribed > 0 { parts.append("\(unsubscribed) removed its serving subscription") }
        if behind > 0 { parts.append("\(behind) fell behind (took nothing of its queue for the stall timeout)") }
        let count = closed + unsubscribed + behind
        return "\(count == 1 ? "the one server" : "all \(count) servers") of \(type.name) the request reached went without replying: " + parts.joined(separator: ", ")
    }
}

/// A token's place: the request it answers and the connection it was given to.
struct ReplySlot {
    let request: PendingRequest
    let server: Connection
}

/// A connection's side of the books (held by `Connection.requests`).
struct ConnectionRequests {
    /// As a requester: its requests not answered yet.
    var pending: [ObjectIdentifier: PendingRequest] = [:]
    /// As a server: the tokens it was given and has not used.
    var serving: Set<ReplyToken> = []
}

/// The pending requests of a broker (held by `Broker.requests`).
struct RequestTable {
    /// Every token handed out and still good.
    var slots: [ReplyToken: ReplySlot] = [:]
    /// Pending requests by deadline: a binary min-heap.
    private(set) var deadlines: [PendingRequest] = []
    var tokens = TokenSource()

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
        request.requester.account.pendingRequests += 1
    }

    /// Hands `server` a new token for `request`.
    mutating func issueToken(for request: PendingRequest, to server: Connection) -> ReplyToken {
        var token = tokens.next()
        while slots[token] != nil { token = tokens.next() }  // 2^-128: for form's sake
        slots[token] = ReplySlot(request: request, server: server)
        server.requests.serving.insert(token)
        server.account.servingRequests += 1
        request.tokens.append(token)
        return token
    }

    /// Takes back one token of a server that went (it can no longer reply
    /// with it), counting why.
    /// - Returns: its request (check `tokens.isEmpty`: no server left), nil
    ///   when the token was no longer good.
    mutating func withdraw(_ token: ReplyToken, from server: Connection, because loss: ServerLoss) -> PendingRequest? {
        guard let slot = slots.removeValue(forKey: token) else { return nil }
        server.requests.serving.remove(token)
        server.account.servingRequests -= 1
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
            if let slot = slots.removeValue(forKey: token) {
                slot.server.requests.serving.remove(token)
                slot.server.account.servingRequests -= 1
            }
        }
        request.tokens = []
        remove(at: request.heapIndex)
        request.requester.requests.pending[ObjectIdentifier(request)] = nil
        request.requester.account.pendingRequests -= 1
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
