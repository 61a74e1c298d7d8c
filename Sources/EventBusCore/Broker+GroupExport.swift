// (issue 36) Queue groups across machines, the broker's side (docs/BRIDGE.md
// "Queue groups across machines", PROTOCOL-NOTES.md "Queue groups across
// machines (issue 36)"). Two additions only a bridge uses:
//
// - A *fallback membership*: `subscribe` with `group: G`, `fallback: true`
//   (not `serve`; the `bridge` right needed). It is a group of its own kind
//   (`GroupKey.fallback`, in `fallbackGroups`), never one of the local
//   groups: an event of a type it matches goes to it only when no local
//   group named G has a member that may receive the type (none left, all
//   filtered, or only the publisher without echo), so local members always
//   go first, as NATS leaf nodes prefer local queue subscribers. Its copy
//   carries `"group":"G"` as its last member, so the bridge tells it from
//   the events of its plain subscriptions.
// - A *group publish*: `publish` with `group: G` (the `bridge` right
//   needed, never `retain`): another machine's group event, given to one
//   member of each local group named G whose pattern matches, not to plain
//   subscribers, not to other groups, never to a fallback member, and not
//   kept in the history.
//
// And one rule: an event a connection with fallback memberships publishes
// without `group` (a bridge's ordinary import) is not given to the local
// groups those memberships name: that event's group was served on the
// machine it came from (or its group copy travels on its own), so nothing
// is handled twice.
//
// (attacker6) With `"uid":N` (a bridge's `NAME:PATTERN@USER`), a fallback
// membership and a group publish concern the groups named G **of uid N
// only**: another uid's group of that name is its own, and neither holds
// back the events that cross nor receives the ones that come in
// (`GroupTarget`). Without it, every uid's group of the name takes part, as
// before (the bridge warns).
//
// Before editing: the cost. None of this is on the path of an event that
// matches no group (`routeToGroups` runs only while `groupsInUse != 0`,
// which counts fallback groups too); inside it, one `isEmpty` test when no
// bridge exports a group, and one more per matched group for an event a
// bridge publishes.
import EventBusPolicy
@_spi(Package) import EventBusProtocol

/// (attacker6) The local groups named `name` that form one group across
/// machines: `uid`'s only, or (nil) every uid's.
struct GroupTarget: Hashable {
    var name: String
    var uid: UInt32?

    init(name: String, uid: UInt32?) {
        self.name = name
        self.uid = uid
    }

    /// A fallback membership's.
    init(_ key: GroupKey) { self.init(name: key.name, uid: key.owner) }

    /// Whether the local group `key` is one of them.
    @inline(__always)
    func includes(_ key: GroupKey) -> Bool { key.name == name && (uid == nil || uid == key.uid) }
}

extension Broker {
    /// `subscribe` with `group` and `fallback: true`: a bridge's fallback
    /// membership (`subscribe` of the pattern and the `bridge` right
    /// needed; the subscription quotas as for any membership). Its `ok`
    /// carries `type`, `group`, `fallback: true` and `members` (fallback
    /// members of that name and pattern).
    func subscribeFallbackGroup(_ request: SubscribeRequest, name: String, req: RawSpan?, from connection: Connection) {
        let key = GroupKey(uid: connection.credentials.uid, pattern: request.pattern, serve: false, name: name, fallback: true, owner: request.groupUID)
        guard !connection.groups.peerClosed else { return }
        let member: GroupMember
        if let existing = connection.groups.memberships[key] {
            member = existing
        } else {
            guard let decision = maySubscribe(connection, request.pattern, req: req) else { return }
            let verdict = connection.policy.bridge
            guard verdict.isAllowed else {
                deny(connection, .bridge, nil, verdict, req: req, note: " (a fallback group membership needs the bridge right)")
                return
            }
            if let error = subscriptionLimitError(connection) ?? groupLimitError(connection) {
                refuseForLimit(connection, req: req, error)
                return
            }
            member = joinGroup(key, connection, filtered: decision.filtered)
        }
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: request.pattern.text, to: &out)
            FrameEncoder.appendField("group", string: name, to: &out)
            FrameEncoder.appendField("fallback", bool: true, to: &out)
            if let owner = key.owner { FrameEncoder.appendField("uid", int: UInt64(owner), to: &out) }
            if member.isFiltered { FrameEncoder.appendField("filtered", bool: true, to: &out) }
            FrameEncoder.appendField("members", int: UInt64(member.group.count), to: &out)
        }
    }

    /// Whether a local group gets an event a bridge publishes: only groups
    /// `onlyGroup` includes for a group publish; else none that one of the
    /// bridge's fallback memberships names (of any uid, or of the group's).
    func bridgeMayGive(_ group: QueueGroup, onlyGroup: GroupTarget?, publisher: Connection?) -> Bool {
        if let onlyGroup { return onlyGroup.includes(group.key) }
        guard let publisher else { return true }
        let names = publisher.groups.fallbackNames
        return names[GroupTarget(name: group.key.name, uid: nil)] == nil && names[GroupTarget(name: group.key.name, uid: group.key.uid)] == nil
    }

    /// The fallback members of an event no local group of their name can
    /// take: one per fallback group (in turn among its members: one bridge
    /// per bus as a rule), given a copy with `"group":"G"` last. Keyed
    /// events cross the same way (the key is in the frame). Flow control:
    /// the member's own rule (a bridge says `wait`; without the `hold` right
    /// another uid's event is dropped for it when its queue is full, told
    /// with `dropped`). - Returns: how many it was queued to.
    @inline(never)
    func routeToFallbackGroups(_ event: EventFrame, seq: UInt64, type: EventType, publisher: Connection?, uid: UInt32,
                               local: [QueueGroup]) -> UInt64 {
        if type.isReserved { return 0 }  // the broker's own events never leave the machine
        var delivered: UInt64 = 0
        for fallback in fallbackGroups.matches(type) {
            let target = GroupTarget(fallback.key)
            if local.contains(where: { target.includes($0.key) && hasMember($0, for: type, publisher: publisher) }) { continue }
            if event.withSpan({ offerAcross($0, seq: seq, type: type, uid: uid, publisher: publisher, in: fallback) }) { delivered &+= 1 }
        }
        return delivered  // counted by the caller
    }

    /// Whether some member of `group` may be given an event of `type` at all
    /// (open, not the publisher without echo, not filtered from it).
    func hasMember(_ group: QueueGroup, for type: EventType, publisher: Connection?) -> Bool {
        if group.deniesEveryMember(type) { return false }
        for slot in 0..<group.slotCount {
            if let member = group.member(at: slot), mayTake(member, type: type, publisher: publisher) { return true }
        }
        return false
    }

    /// Queues the marked copy of an event to one member of a fallback group:
    /// the first in turn that can take it now, else the next under its rule.
    private func offerAcross(_ bytes: RawSpan, seq: UInt64, type: EventType, uid: UInt32, publisher: Connection?,
                             in fallback: QueueGroup) -> Bool {
        let copy = Broker.groupMarkedCopy(bytes, name: fallback.key.name)
        let size = copy.count &+ OutboundQueue.entryOverheadBytes
        let actor = uid == fallback.key.uid || isPrivileged(uid) ? OutboundQueue.noActor : uid
        guard let slot = firstAble(in: fallback, size: size, actor: actor, type: type, publisher: publisher)
            ?? nextInTurn(of: fallback, type: type, publisher: publisher), let chosen = fallback.member(at: slot) else { return false }
        fallback.passTurn(after: slot)
        return EventFrame.lending(copy) { offer($0, seq: seq, publisher: uid, to: chosen.connection) }
    }

    /// An event frame with `"group":"NAME"` as its last member.
    static func groupMarkedCopy(_ frame: RawSpan, name: String) -> [UInt8] {
        var copy = Array(copying: frame.extracting(droppingLast: 2))  // without `}` and LF
        copy.reserveCapacity(frame.byteCount + name.utf8.count + 12)
        FrameEncoder.appendField("group", string: name, to: &copy)
        copy.append(contentsOf: [0x7D, 0x0A])
        return copy
    }

    /// A group event queued to the last member of a local group, which
    /// closed before a byte of it was written: with its group gone, it
    /// crosses to another machine like a new one (from `handOver`), through
    /// a fallback membership that includes that group.
    func redeliverAcross(_ frame: RawSpan, seq: UInt64, actor: UInt32, of group: GroupKey) {
        let object = frame.extracting(droppingLast: 1)
        var typeToken: JSONToken? = nil
        try? JSONObject.scan(object) { member, value in
            if JSONString.equals(object, member, "type") { typeToken = value }
        }
        guard let typeToken, let type = EventType(JSONString.decode(object, typeToken)) else { return }
        for fallback in fallbackGroups.matches(type) where GroupTarget(fallback.key).includes(group) {
            let uid = actor == OutboundQueue.noActor ? fallback.key.uid : actor
            if offerAcross(frame, seq: seq, type: type, uid: uid, publisher: nil, in: fallback) { statistics.delivered &+= 1 }
            return
        }
    }

    // MARK: A group publish

    /// `publish` with `group`: another machine's group event, for one member
    /// of each local group of that name (see the file comment). `ok`:
    /// `seq`, `delivered` (0: no member of the group here now).
    func publishToGroup(_ request: PublishRequest, group name: GroupTarget, frame: RawSpan, req: RawSpan?,
                        from publisher: Connection) {
        let verdict = publisher.policy.bridge
        guard verdict.isAllowed else {
            deny(publisher, .bridge, nil, verdict, req: req, note: " (a publish with \"group\" is a bridge's, and needs the bridge right)")
            return
        }
        guard let key = request.key else { return routeGroupPublish(request, group: name, frame: frame, req: req, from: publisher) }
        let token = frame.extracting(key.range)
        publishKey = PublishKey(keyHash: hashOfKey(token: token), identity: Broker.identity(publisher, key: token))
        defer { publishKey = nil }
        routeGroupPublish(request, group: name, frame: frame, req: req, from: publisher)
    }

    private func routeGroupPublish(_ request: PublishRequest, group name: GroupTarget, frame: RawSpan, req: RawSpan?,
                                   from publisher: Connection) {
        guard mayPublish(publisher, request.type, entry: nil, req: req), request.origin == nil || mayBridge(publisher, req: req) else { return }
        let content = EventContent(request, frame: frame, typeRange: nil)
        seq += 1
        let seq = self.seq
        statistics.published += 1
        publisher.accounting.countPublished()
        countPublished(request.type, entry: nil, seq: seq, owner: publisher.credentials.uid)
        var delivered: UInt64 = 0
        if groupsInUse != 0 {
            groupEvent = buildEvent(seq: seq, content, of: request.type, publisher: publisher)
            delivered = routeToGroups(seq: seq, type: request.type, entry: nil, publisher: publisher, keyHash: publishKey?.keyHash, onlyGroup: name)
        }
        countDelivered(delivered)
        replyOKIfAsked(to: publisher, req: req) { out in
            FrameEncoder.appendField("seq", int: seq, to: &out)
            FrameEncoder.appendField("delivered", int: delivered, to: &out)
        }
    }
}
