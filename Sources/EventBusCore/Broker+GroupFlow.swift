// Queue groups and flow control (PROTOCOL.md "Queue groups (1.3)", "Flow
// control (1.2)"): a full group holds a publisher that its members may hold
// until any member can take the event (or every member is behind or gone),
// and a member that closes hands the group events it never got (not a byte
// of them written) to the other members, in order, marked
// `"redelivered":true`.
//
// Before editing: a group's hold lives in `QueueGroup.holding` (changed by
// its `hold`, `endHold`, `letGo`) and each held publisher's
// `flow.heldInGroups` (mirrored: this file changes both), and while a group holds, each
// of its members counts it in `flow.groupHolds` (so the stall watch watches
// it); `holdOnGroups` makes a group hold and `releaseGroup` is the one place
// that ends it, before any change of the group's members. The deliveries
// kept for redelivery (`ConnectionGroups.deliveries`) are a superset of the
// group events in the member's queue, pruned once they are twice its queued
// frames: to those not older than its oldest queued event, and only when that
// is not enough to those still queued (O(1) amortised per delivery; a
// record is a seq and the membership's serial, nothing counted). Members
// hanging up together leave all their groups before any hands on
// (`peersClosed`): a member that leaves must not be given events again.
// A closing member's hand-on is bounded by the room of the members left
// (`handOver`): what none of them can take is counted as dropped in one
// step, not handed on one by one (issue 38, `group-members` teardown); and
// it is done in slices across loop turns (Broker+GroupHandOn.swift).
@_spi(Package) import EventBusProtocol

extension Broker {
    // MARK: Holding

    /// Whether `group` must hold `publisher` (from `holdIfBlocked`, before
    /// the event takes a seq): no member can take an event of `bound` charged
    /// bytes now, and a member that may hold the publisher would have room
    /// once it drains (under `wait`, not behind, its queue at least half
    /// full or a paced replay under way). For a keyed event only the key's
    /// member counts, as a plain subscriber does: it is returned in `holder`.
    func groupBlocks(_ group: QueueGroup, bound: Int, type: EventType, publisher: Connection, keyHash: UInt64?) -> (blocks: Bool, holder: Connection?) {
        if group.deniesEveryMember(type) { return (false, nil) }
        let uid = publisher.credentials.uid
        let actor = uid == group.key.uid || isPrivileged(uid) ? OutboundQueue.noActor : uid
        if let keyHash {
            guard let member = keyedMember(of: group, keyHash: keyHash, type: type, publisher: publisher),
                  wouldHold(member.connection, bound: bound, actor: actor, publisherUID: uid) else { return (false, nil) }
            return (false, member.connection)
        }
        if firstAble(in: group, size: bound, actor: actor, type: type, publisher: publisher) != nil { return (false, nil) }
        // Full. Only a member of the publisher's uid, or one with `allow hold`, may hold it.
        if uid != group.key.uid && ledger.halfFullTrustedHolders == 0 { return (false, nil) }
        for member in group.members where mayTake(member, type: type, publisher: publisher) {
            if wouldHold(member.connection, bound: bound, actor: actor, publisherUID: uid) { return (true, nil) }
        }
        return (false, nil)
    }

    /// Whether `connection` holds a publisher of `publisherUID` whose event
    /// (at most `bound` charged bytes) it has no room for: the rule
    /// `holdIfBlocked` applies to a plain subscriber.
    func wouldHold(_ connection: Connection, bound: Int, actor: UInt32, publisherUID: UInt32) -> Bool {
        guard connection.overflow == .wait, !connection.flow.behind, connection.isRoutable else { return false }
        switch connection.policy.hold {
        case .ownUID: guard connection.credentials.uid == publisherUID else { return false }
        case .anyUID: break
        case .none: return false
        }
        if !connection.flow.replays.isEmpty { return true }
        guard connection.outbound.chargedBytes >= configuration.maxOutboundBytes / 2,
              let refusal = refusal(size: bound, actor: actor, connection: connection), refusal != .total else { return false }
        return true
    }

    /// Makes each of `blocking` hold `publisher` (already held by `hold`):
    /// a group that starts holding has its members watched for stalls.
    func holdOnGroups(_ publisher: Connection, _ blocking: [QueueGroup]) {
        for group in blocking {
            if group.hold(publisher) {
                for member in group.members {
                    member.connection.flow.addGroupHold(1)
                    watch(member.connection)
                }
            }
            publisher.flow.heldIn(group)
        }
    }

    /// Ends `group`'s hold: each publisher it held that nothing else holds
    /// is read again (its held frame first, which may be held again).
    func releaseGroup(_ group: QueueGroup) {
        let held = group.endHold()
        guard !held.isEmpty else { return }
        for member in group.members { member.connection.flow.addGroupHold(-1) }
        for publisher in held {
            publisher.flow.releasedFrom(group)
            if !publisher.flow.isHeld {
                statistics.held -= 1
                unpause(publisher, .held)
            }
        }
    }

    /// A publisher is going: the groups holding it let go of it (from `forgetFlow`).
    func forgetGroupHolds(of publisher: Connection) {
        for group in publisher.flow.takeHeldInGroups() {
            if group.letGo(publisher) {
                for member in group.members { member.connection.flow.addGroupHold(-1) }
            }
        }
    }

    /// A member of holding groups got room, or went behind: those groups let go.
    func releaseGroups(of connection: Connection) {
        guard connection.flow.groupHolds > 0 else { return }
        for member in Array(connection.groups.memberships.values) where !member.group.holding.isEmpty {
            releaseGroup(member.group)
        }
    }

    // MARK: Redelivery

    /// The peer closed its socket (the server saw EPOLLHUP; its input is
    /// still to be handled, its queue is discarded from now on): it leaves
    /// its groups at once, and what was queued to it of theirs and never
    /// written goes to the other members (`leaveGroups(closing:)`). It joins
    /// none again.
    package func peerClosed(_ connection: Connection, at time: BrokerTime) -> BrokerStep {
        peersClosed([connection], at: time)
    }

    /// Several peers closed their sockets (the hang-ups of one epoll
    /// batch): `peerClosed` for each, except that all of them leave their
    /// groups before any hands its events on, so none is given what
    /// another of them hands on (issue 38: 4,096 members hanging up at once
    /// handed each event on from one closing member to the next).
    package func peersClosed(_ connections: [Connection], at time: BrokerTime) -> BrokerStep {
        now = time
        var handovers: [(Connection, GroupHandover)] = []
        for connection in connections where !connection.isClosed && connection.groups.notePeerClosed() {
            if let handover = leaveGroupsForHandover(connection) { handovers.append((connection, handover)) }
        }
        for (connection, handover) in handovers { handOver(handover, from: connection) }
        runHandOnSlice()  // the rest in later turns (`continueHandOns`)
        return finishStep()
    }

    /// Remembers that a group event `seq` was queued to `member` (pruned to
    /// what is still queued once twice its queued frames).
    func noteDelivery(_ seq: UInt64, to member: GroupMember) {
        let connection = member.connection
        connection.groups.noteDelivery(seq, to: member, queuedFrames: connection.outbound.frameCount, oldestQueuedSeq: {
            var oldest = UInt64.max
            connection.outbound.forEachEvent(unwrittenOnly: false) { seq, _, _ in oldest = min(oldest, seq) }
            return oldest
        }, queuedSeqs: {
            var queued = Set<UInt64>()
            connection.outbound.forEachEvent(unwrittenOnly: false) { seq, _, _ in queued.insert(seq) }
            return queued
        })
    }

    /// A connection is going (from `forget`): it leaves every group, and the
    /// group events queued to it of which no byte was written go to the
    /// other members of their group, in order, marked `"redelivered":true`.
    func leaveGroups(closing connection: Connection) {
        guard let handover = leaveGroupsForHandover(connection) else { return }
        handOver(handover, from: connection)
        runHandOnSlice()
    }

    /// What a closing member hands on: the group of each group event queued
    /// to it (by seq), and the requests of its serving groups of which not
    /// a byte was written.
    struct GroupHandover {
        /// The memberships it left, and its record of group events queued
        /// to it (`groups.deliveries`, kept as it was: which of them go on is
        /// decided in `handOver`, once the batch's members have all left).
        var left: [GroupMember] = []
        var deliveries: [GroupDelivery] = []
        /// The membership all its queued events are of, when they were not
        /// recorded one by one (`ConnectionGroups.unrecorded`; 0: none).
        var unrecorded: UInt64 = 0
        var requests: [(token: ReplyToken, frame: [UInt8])] = []
        var servingGroups: [QueueGroup] = []
    }

    /// The first half of `leaveGroups(closing:)`: notes what `connection`
    /// will hand on, then leaves every group (nil: it was in none). Its
    /// queue is left as it is, for `handOver`.
    func leaveGroupsForHandover(_ connection: Connection) -> GroupHandover? {
        guard !connection.groups.memberships.isEmpty else { return nil }
        var handover = GroupHandover()
        handover.left = Array(connection.groups.memberships.values)
        handover.deliveries = connection.groups.deliveries
        handover.unrecorded = connection.groups.unrecorded
        // Requests of its serving groups it was given and never got a byte of.
        handover.servingGroups = connection.groups.memberships.values.filter { $0.group.key.serve }.map(\.group)
        if !handover.servingGroups.isEmpty && !connection.requests.serving.isEmpty {
            connection.outbound.forEachReply(unwrittenOnly: true) { bytes in
                guard let token = Broker.requestToken(in: bytes), requests.slots[token]?.server === connection else { return }
                handover.requests.append((token, Array(copying: bytes)))
            }
        }
        for member in handover.left { leaveGroup(member) }
        connection.groups.forgetQueued()
        return handover
    }

    /// Whether some member of `group` could take an event of `size` charged
    /// bytes now, by its rule: open, and under `drop-old` or `disconnect`
    /// (which make room, or close it) or with room for it, in `actor`'s
    /// fair share (as `give` charges a redelivered event: the entry's actor).
    func mayTakeAny(_ group: QueueGroup, size: Int, actor: UInt32) -> Bool {
        for member in group.members {
            let connection = member.connection
            guard connection.isRoutable else { continue }
            if connection.overflow == .dropOld || connection.overflow == .disconnect { return true }
            if refusalNow(connection, size: size, actor: actor) == nil { return true }
        }
        return false
    }

    /// The length of `redeliveredCopy(frame)`, without making it.
    static func redeliveredCount(_ frame: RawSpan) -> Int {
        let count = frame.byteCount
        return endsRedelivered(frame) ? count : count - 2 + redeliveredMarker.count
    }

    /// Whether the frame ends with `,"redelivered":true}` and its LF (8 bytes
    /// at a time: the generic `elementsEqual` of a suffix was 8 % of the
    /// broker's CPU in issue 38's teardown).
    static func endsRedelivered(_ frame: RawSpan) -> Bool {
        frame.byteCount >= redeliveredMarker.count && frame.extracting(last: redeliveredMarker.count).sameBytes(as: redeliveredMarker.span.bytes)
    }

    /// Gives a request queued to a closing serving member (not a byte of it
    /// written) to another member of each of its serving groups that match
    /// its type and have no server of it yet, chosen as for a new request
    /// (keyed: the key's member among those left; else the first in turn
    /// that can take it now: there is no requester to hold), with a new
    /// token, the time left and `"redelivered":true`; then takes the closing
    /// member's token back (`no_reply` when nobody took it, as before).
    func redeliverRequest(_ token: ReplyToken, frame: [UInt8], from closing: Connection, groups: [QueueGroup]) {
        guard let slot = requests.slots[token], slot.server === closing else { return }
        let request = slot.request
        // (`requestToken` found its reply member: the frame can be made again.)
        var keyHash: UInt64? = nil
        let object = frame.span.bytes.extracting(droppingLast: 1)
        try? JSONObject.scan(object) { name, value in
            if JSONString.equals(object, name, "key") { keyHash = hashOfKey(token: object.extracting(value.range)) }
        }
        let left = request.deadline &- now.monotonicNanoseconds
        let timeout = UInt64(max(1, (left &+ 999_999) / 1_000_000))
        let requester = request.requester
        let uid = requester.credentials.uid
        requestingUID = uid  // `mayServeMore` (the requester's fair share of a server's tokens)
        let size = frame.count + Broker.requestRedeliveredExtraBytes + OutboundQueue.entryOverheadBytes
        for group in groups where !group.isEmpty && group.key.pattern.matches(request.type) && !served(request, by: group) {
            let chosen: GroupMember?
            if let keyHash {
                chosen = keyedMember(of: group, keyHash: keyHash, type: request.type, publisher: requester)
                    .flatMap { requestFit(size: size, requester: requester, server: $0.connection) == .fits ? $0 : nil }
            } else {
                let actor = uid == group.key.uid || isPrivileged(uid) ? OutboundQueue.noActor : uid
                chosen = firstAble(in: group, size: size, actor: actor, type: request.type, publisher: requester).flatMap { slot in
                    group.passTurn(after: slot)
                    return group.member(at: slot)
                }
            }
            guard let server = chosen?.connection, !request.tokens.contains(where: { requests.slots[$0]?.server === server }) else { continue }
            let newToken = requests.issueToken(for: request, to: server, actor: servingActor(uid, server))
            let out = Broker.redeliveredRequest(frame, token: newToken, timeoutMilliseconds: timeout)
            enqueue(bytes: out, to: server)
            server.accounting.countDelivered()
        }
        withdraw(token, from: closing, because: .closed)
    }

    /// Whether a member of `group` holds a token of `request` already.
    private func served(_ request: PendingRequest, by group: QueueGroup) -> Bool {
        request.tokens.contains { requests.slots[$0].map { $0.server.groups.memberships[group.key] != nil } ?? false }
    }

    /// What a redelivered request frame may add to the one queued before:
    /// `,"redelivered":true` (its timeout has no more digits than before).
    static let requestRedeliveredExtraBytes = 19

    /// The reply token of a request frame as the broker queues it
    /// (`FrameEncoder.appendRequest`: `...,"reply":"<32 hex>","timeout":N}`
    /// last), nil for any other frame.
    static func requestToken(in frame: RawSpan) -> ReplyToken? {
        guard let at = replyMember(in: frame) else { return nil }
        let start = at + replyMarker.count
        guard start + ReplyToken.textLength <= frame.byteCount else { return nil }
        return ReplyToken(text: frame.extracting(start..<(start + ReplyToken.textLength)))
    }

    /// A request frame again for another server: its event part, then
    /// `token`, `timeoutMilliseconds` and `"redelivered":true`. `frame` is
    /// one `requestToken` read a token from.
    static func redeliveredRequest(_ frame: [UInt8], token: ReplyToken, timeoutMilliseconds: UInt64) -> [UInt8] {
        let bytes = frame.span.bytes
        guard let at = replyMember(in: bytes) else { preconditionFailure("a request frame the broker queued has its reply member") }
        // The event frame it was made from: `{"op":"event"` + the middle + `}\n`.
        let head = requestHead.count
        var event = Array(eventHead.utf8)
        event.append(copying: bytes.extracting(head..<at))
        event.append(contentsOf: [0x7D, 0x0A])
        var out: [UInt8] = []
        FrameEncoder.appendRequest(event: event.span.bytes, token: { token.append(to: &$0) }, timeoutMilliseconds: timeoutMilliseconds, to: &out)
        return redeliveredCopy(out.span.bytes)
    }

    private static let requestHead = Array("{\"op\":\"request\"".utf8)
    private static let eventHead = "{\"op\":\"event\""
    private static let replyMarker = Array(",\"reply\":\"".utf8)

    /// Where the last `,"reply":"` of a frame that opens as a request begins.
    private static func replyMember(in frame: RawSpan) -> Int? {
        let count = frame.byteCount
        guard count > requestHead.count, frame.extracting(first: requestHead.count).sameBytes(as: requestHead.span.bytes) else { return nil }
        var i = count - replyMarker.count
        while i >= requestHead.count {
            if frame.unsafeLoad(fromByteOffset: i, as: UInt8.self) == 0x2C
                && frame.extracting(i..<(i + replyMarker.count)).sameBytes(as: replyMarker.span.bytes) { return i }
            i -= 1
        }
        return nil
    }

    /// Gives a redelivered event to a member of `group`, chosen as for a
    /// live one (no publisher to hold: a full group's next member takes it
    /// under its own rule).
    func redeliver(_ event: EventFrame, seq: UInt64, actor: UInt32, in group: QueueGroup) {
        // The frame as written (valid JSON), without its LF.
        let read = event.withSpan { frame -> (type: EventType, keyHash: UInt64?)? in
            let object = frame.extracting(droppingLast: 1)
            var typeToken: JSONToken? = nil, keyToken: JSONToken? = nil
            try? JSONObject.scan(object) { name, value in
                if JSONString.equals(object, name, "type") { typeToken = value }
                if JSONString.equals(object, name, "key") { keyToken = value }
            }
            guard let typeToken, let type = EventType(JSONString.decode(object, typeToken)) else { return nil }
            return (type, keyToken.map { hashOfKey(token: object.extracting($0.range)) })
        }
        guard let read else { return }
        let (type, keyHash) = read
        let uid = actor == OutboundQueue.noActor ? group.key.uid : actor
        if give(event, seq: seq, type: type, publisher: nil, uid: uid, keyHash: keyHash, in: group) {
            statistics.delivered += 1
        }
    }

    /// An event frame with `"redelivered":true` as its last member (as it is, if it has it already).
    static func redeliveredCopy(_ frame: RawSpan) -> [UInt8] {
        if endsRedelivered(frame) { return Array(copying: frame) }
        var copy = Array(copying: frame.extracting(droppingLast: 2))  // without `}` and LF
        copy.append(contentsOf: redeliveredMarker)
        return copy
    }

    private static let redeliveredMarker = Array(",\"redelivered\":true}\n".utf8)
}

/// Seq -> small number, for `handOver`'s look-up of a closing member's
/// queued events (a million of them in issue 38's teardown, where a
/// `Dictionary`'s SipHash was most of the hand-on's cost): open addressing
/// with linear probing, `Broker.mix64` of the seq (event seqs are not 0,
/// and not chosen by clients), the last insert of a seq wins.
struct SeqTable {
    private var keys: [UInt64]
    private var values: [Int32]
    private let mask: Int
    private(set) var isEmpty = true

    init(capacity: Int) {
        var size = 16
        while size < 2 * capacity { size <<= 1 }
        keys = Array(repeating: 0, count: size)
        values = Array(repeating: -1, count: size)
        mask = size - 1
    }

    mutating func insert(_ seq: UInt64, _ value: Int32) {
        var i = Int(truncatingIfNeeded: Broker.mix64(seq)) & mask
        while keys[i] != 0 && keys[i] != seq { i = (i + 1) & mask }
        keys[i] = seq
        values[i] = value
        isEmpty = false
    }

    /// The value of `seq`, -1 when it has none.
    subscript(seq: UInt64) -> Int32 {
        var i = Int(truncatingIfNeeded: Broker.mix64(seq)) & mask
        while keys[i] != 0 {
            if keys[i] == seq { return values[i] }
            i = (i + 1) & mask
        }
        return -1
    }
}
