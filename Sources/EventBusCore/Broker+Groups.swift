// Queue groups in the broker (PROTOCOL.md "Queue groups (1.3)"): joining and
// leaving, the choice of one member per event and group (in turn among the
// members that can take it now, or by rendezvous hashing of its `key`),
// holding a publisher while a whole group is full, and the redelivery of
// group events a closing member never got. The records are QueueGroups.swift.
//
// Before editing: the cost. An event that matches no group pays one
// comparison while no group exists (`groupsInUse != 0`, after `fanOut` and
// in `holdIfBlocked`); the rest is out of line: `fanOut` keeps its frame
// for `routeToGroups` (a call inside it made the compiler stop inlining
// `offer` there: callgrind case 1 2,431 Ir, not 2,390), and a keyed publish
// is `publishKeyed`'s: the common publish carries no key (only
// `buildEvent` looks at `publishKey`, set while a keyed one routes). An
// unkeyed event goes to the member in turn at once when it can take it
// without a look at any limit (`giveInTurn`, no closure and no retain on
// that path: callgrind case 10 3,005 -> 2,706 Ir per delivery with the
// record below); the rest (a search, keys, bridges) is out of line. A
// worker's one membership records none of its deliveries
// (`ConnectionGroups.unrecorded`). A member
// is chosen in O(1) amortised (a member passed over has its bit cleared until
// it writes: `block`/`unblockGroups`);
// a keyed choice is O(members). A group's hold is released (its publishers
// handle their frame again, and may be held again) whenever its members
// change, one of them gets room (below half its limit), or one goes behind:
// `releaseGroup` is the one place a group lets go.
import EventBusPolicy
@_spi(Package) import EventBusProtocol

extension Broker {
    // MARK: Joining and leaving

    /// `subscribe` with `group`: joins the group (idempotent), with the
    /// policy's permission and the subscription quotas as without a group
    /// (`serve` and `subscribe` for a serving group). `ok` carries `type`,
    /// `group`, `members`, `serve: true` for a serving group and
    /// `filtered: true` when some of the pattern's types are denied.
    func subscribeGroup(_ request: SubscribeRequest, name: String, req: RawSpan?, from connection: Connection) {
        if request.fallback { return subscribeFallbackGroup(request, name: name, req: req, from: connection) }  // (issue 36)
        let key = GroupKey(uid: connection.credentials.uid, pattern: request.pattern, serve: request.serve, name: name)
        guard !connection.groups.peerClosed else { return }  // nobody reads it: no reply, no membership
        let member: GroupMember
        if let existing = connection.groups.memberships[key] {
            member = existing
        } else {
            let permission = request.serve ? mayServe(connection, request.pattern, req: req) : maySubscribe(connection, request.pattern, req: req)
            guard let decision = permission else { return }
            if let error = subscriptionLimitError(connection) ?? groupLimitError(connection) ?? groupMembersLimitError(connection, key) {
                refuseForLimit(connection, req: req, error)
                return
            }
            member = joinGroup(key, connection, filtered: decision.filtered)
        }
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: request.pattern.text, to: &out)
            if request.serve { FrameEncoder.appendField("serve", bool: true, to: &out) }
            FrameEncoder.appendField("group", string: name, to: &out)
            if member.isFiltered { FrameEncoder.appendField("filtered", bool: true, to: &out) }
            FrameEncoder.appendField("members", int: UInt64(member.group.count), to: &out)
        }
    }

    /// `unsubscribe` with `group`: leaves it. `ok` carries `type`, `group`,
    /// `removed`; it is queued behind every event already queued to the
    /// member, so a worker that reads to it has finished its share.
    func unsubscribeGroup(_ request: UnsubscribeRequest, name: String, req: RawSpan?, from connection: Connection) {
        let key = GroupKey(uid: connection.credentials.uid, pattern: request.pattern, serve: request.serve, name: name)
        let member = connection.groups.memberships[key]
        if let member { leaveGroup(member) }
        replyOKIfAsked(to: connection, req: req) { out in
            FrameEncoder.appendField("type", string: request.pattern.text, to: &out)
            if request.serve { FrameEncoder.appendField("serve", bool: true, to: &out) }
            FrameEncoder.appendField("group", string: name, to: &out)
            FrameEncoder.appendField("removed", bool: member != nil, to: &out)
        }
    }

    /// Makes a membership (the only place that adds one): the group is made
    /// on its first member; counted as one subscription of its connection.
    func joinGroup(_ key: GroupKey, _ connection: Connection, filtered: Bool) -> GroupMember {
        let group: QueueGroup
        let index = groupIndex(for: key)
        if let existing = index.group(key) {
            group = existing
            releaseGroup(group)  // a new member may take the held events
        } else {
            group = QueueGroup(key: key)
            index.add(group)
            if !key.serve { groupsInUse += 1 }
        }
        let member = group.append(connection, salt: Broker.mix64(connection.id ^ groupSeed))
        group.setFiltered(member, filtered)
        connection.groups.join(member)
        noteEventSources(of: connection, joined: member)
        connection.account.countGroupMembership(1)
        if key.serve { countServing(key.pattern, 1) } else if !key.fallback { countMembers(key, 1) }  // (issue 36) Broker+ServerWatch.swift
        chargeSubscription(key.pattern, of: connection, sign: 1, extraBytes: groupMemberCost(key))
        return member
    }

    /// Ends a membership (the only place that removes one: unsubscribe,
    /// close, a policy reload's revocation); the group goes with its last member.
    func leaveGroup(_ member: GroupMember) {
        let group = member.group, connection = member.connection
        releaseGroup(group)  // its publishers look again at who is left
        group.remove(member)
        connection.groups.leave(group.key)
        connection.account.countGroupMembership(-1)
        if group.isEmpty {
            let index = groupIndex(for: group.key)
            index.remove(group)
            if !group.key.serve { groupsInUse -= 1 }
            if index.count == 0 && !group.key.fallback { types.dropGroupLists(serving: group.key.serve) }
        }
        if group.key.serve { countServing(group.key.pattern, -1) } else if !group.key.fallback { countMembers(group.key, -1) }
        chargeSubscription(group.key.pattern, of: connection, sign: -1, extraBytes: groupMemberCost(group.key))
    }

    /// (issue 38, case 10) Whether the group events queued to `connection`
    /// must be recorded one by one for its hand-on (`ConnectionGroups.unrecorded`):
    /// not while all its events come from one membership. Called when it
    /// joins a group (`joined`) or takes a plain subscription (nil).
    func noteEventSources(of connection: Connection, joined member: GroupMember? = nil) {
        if connection.groups.unrecorded != 0 {
            connection.groups.recordFromNow {
                var seqs: [UInt64] = []
                connection.outbound.forEachEvent(unwrittenOnly: false) { seq, _, _ in seqs.append(seq) }
                return seqs
            }
            return
        }
        // Its first membership, of plain events, and nothing else queued
        // to it or subscribed (once per connection: the look at its queue
        // is bounded by its limits).
        guard let member, member.serial == 1, !member.group.key.serve, !member.group.key.fallback,
              connection.subscriptions.isEmpty, connection.groups.memberships.count == 1 else { return }
        var holdsEvents = false
        connection.outbound.forEachEvent(unwrittenOnly: false) { _, _, _ in holdsEvents = true }
        if !holdsEvents { connection.groups.recordNone(member) }
    }

    /// The groups of plain subscriptions, or of serving ones.
    @inline(__always)
    func groupIndex(serving: Bool) -> GroupIndex { serving ? serveGroups : groups }

    /// The index of a group: (issue 36) a bridge's fallback memberships have their own.
    @inline(__always)
    func groupIndex(for key: GroupKey) -> GroupIndex { key.fallback ? fallbackGroups : groupIndex(serving: key.serve) }

    /// A policy reload (from `reloadPolicy`): each membership is judged
    /// again as its subscription would be; a forbidden one is ended and its
    /// connection told `{"op":"error","code":"forbidden","type":P,"group":G,...}`.
    /// - Returns: how many were ended.
    func judgeGroupsAgain(of connection: Connection, _ view: PolicyView) -> Int {
        guard !connection.groups.memberships.isEmpty else { return 0 }
        var revoked = 0
        let members = connection.groups.memberships.values.sorted { ($0.group.key.name, $0.group.key.pattern.text) < ($1.group.key.name, $1.group.key.pattern.text) }
        for member in members {
            let key = member.group.key
            var decision = key.serve ? view.serve(key.pattern) : view.subscribe(key.pattern)
            // (issue 36) A bridge's fallback membership also needs the bridge right still.
            let bridgeRevoked = key.fallback && !view.bridge.isAllowed
            if bridgeRevoked { decision = .forbidden(view.bridge) }
            switch decision {
            case .allowed:
                member.group.setFiltered(member, false)
            case .filtered:
                if member.isFiltered { member.group.refiltered(member) } else { member.group.setFiltered(member, true) }
            case .forbidden(let verdict):
                leaveGroup(member)
                revoked += 1
                guard connection.isRoutable else { continue }
                let action: PolicyAction = bridgeRevoked ? .bridge : key.serve && !view.subscribe(key.pattern).isForbidden ? .serve : .subscribe
                let message = view.denialMessage(action, key.pattern.text, verdict)
                    + "; group subscription removed by the policy reload (generation \(policyState.generation))"
                writer.writeReply { out in FrameEncoder.appendRevocation(pattern: key.pattern.text, serve: key.serve, group: key.name, message: message, to: &out) }
                enqueue(bytes: writer.scratch, to: connection)
            }
        }
        return revoked
    }

    /// What a membership costs beyond a subscription's estimate: its name,
    /// its record, its slot and bit, its share of the group's record, and
    /// the most its group takes in the type table's kept group lists (one
    /// reference per entry: `EventTypeTable.groups`), charged in full to
    /// every member so a uid's groups are paid for by its own subscriptions.
    func groupMemberCost(_ key: GroupKey) -> Int { key.name.utf8.count + 192 + 8 * types.capacity }

    /// `clients` (PROTOCOL.md "Queue groups": each subscription's group):
    /// `,"groups":[{"type":"job.>","group":"workers","serve":false,"members":3}]`,
    /// at most `maxPatternsListed`, by name then pattern; a fallback
    /// membership (issue 36) adds `"fallback":true` after `members`.
    func appendGroups(of connection: Connection, to out: inout [UInt8]) {
        FrameEncoder.appendASCII(",\"groups\":[", to: &out)
        let keys = connection.groups.memberships.keys.sorted { ($0.name, $0.pattern.text, $0.serve ? 1 : 0) < ($1.name, $1.pattern.text, $1.serve ? 1 : 0) }
        for (i, key) in keys.prefix(Broker.maxPatternsListed).enumerated() {
            if i > 0 { out.append(0x2C) }
            FrameEncoder.appendASCII("{\"type\":", to: &out)
            JSONString.appendQuoted(key.pattern.text, to: &out)
            FrameEncoder.appendField("group", string: key.name, to: &out)
            FrameEncoder.appendField("serve", bool: key.serve, to: &out)
            FrameEncoder.appendField("members", int: UInt64(connection.groups.memberships[key]?.group.count ?? 0), to: &out)
            // (newuser2) A bridge's fallback membership is not a worker of
            // the local group: said, so that `members` is not read as one.
            if key.fallback { FrameEncoder.appendField("fallback", bool: true, to: &out) }
            out.append(0x7D)
        }
        out.append(0x5D)
    }

    // MARK: Routing

    /// The groups whose pattern matches `type` (through its entry in `types` when it has one).
    @inline(__always)
    func groupsMatching(_ type: EventType, entry: Int?) -> [QueueGroup] {
        if let entry { return types.groups(entry, in: groups) }
        return groups.matches(type)
    }

    /// Gives the event `seq` that `fanOut` just routed (its frame in
    /// `groupEvent`, built there while groups exist) to one member of each
    /// group it matches, then lets the frame go. Called right after `fanOut`
    /// by its callers while groups exist; out of line.
    /// (issue 36) `onlyGroup`: a bridge's import of another machine's group
    /// event (`publishToGroup`): only the groups of that name (and uid) get it. An event a
    /// bridge with fallback memberships publishes otherwise is not given to the
    /// groups those name, and no event it publishes goes to a fallback
    /// member (Broker+GroupExport.swift).
    /// - Returns: how many connections it was queued to.
    @inline(never)
    /// - Parameter keyHash: a keyed publish's `hashOfKey`.
    func routeToGroups(seq: UInt64, type: EventType, entry: Int?, publisher: Connection?, keyHash: UInt64?,
                       onlyGroup: GroupTarget? = nil) -> UInt64 {
        defer {
            groupEvent = nil
            writer.releaseBuiltChunk()
        }
        guard let event = groupEvent else { return 0 }
        let list = groupsMatching(type, entry: entry)
        guard !list.isEmpty || fallbackGroups.count != 0 else { return 0 }
        let uid = publisher?.credentials.uid ?? configuration.ownCredentials.uid
        var delivered: UInt64 = 0
        if _fastPath(keyHash == nil && onlyGroup == nil && fallbackGroups.count == 0 && publisher?.groups.fallbackNames.isEmpty != false) {
            // (`list` keeps every group alive through the loop: an element
            // passed on from it costs no retain, and no closure is called.)
            for i in list.indices where giveInTurn(event, seq: seq, type: type, publisher: publisher, uid: uid, in: list[i]) { delivered &+= 1 }
        } else {
            delivered = routeToGroupsAtLarge(event, list, seq: seq, type: type, publisher: publisher, uid: uid, keyHash: keyHash, onlyGroup: onlyGroup)
        }
        statistics.delivered &+= delivered
        if let entry { typeCounters.addDelivered(delivered, types.counter(entry)) }
        return delivered
    }

    /// `routeToGroups` for a keyed event, a bridge's, or while another
    /// machine's groups are known (issue 36): out of line.
    @inline(never)
    private func routeToGroupsAtLarge(_ event: EventFrame, _ list: [QueueGroup], seq: UInt64, type: EventType, publisher: Connection?, uid: UInt32,
                                      keyHash: UInt64?, onlyGroup: GroupTarget?) -> UInt64 {
        let fromBridge = publisher.map { !$0.groups.fallbackNames.isEmpty } ?? false
        let acrossMachines = fallbackGroups.count != 0 && !fromBridge && onlyGroup == nil
        var delivered: UInt64 = 0
        for group in list {
            if fromBridge || onlyGroup != nil, !bridgeMayGive(group, onlyGroup: onlyGroup, publisher: publisher) { continue }
            if give(event, seq: seq, type: type, publisher: publisher, uid: uid, keyHash: keyHash, in: group) { delivered &+= 1 }
        }
        if acrossMachines {
            delivered &+= routeToFallbackGroups(event, seq: seq, type: type, publisher: publisher, uid: uid, local: list)
        }
        return delivered
    }

    /// `give` for an unkeyed event (issue 38, case 10): the member in turn
    /// takes it at once when it can without a look at any limit (ready, no
    /// member filtered, not behind, and every queue below the smallest
    /// limit, as in `firstAble`); anything else is `give`'s, out of line.
    /// The same choice as `give`'s, in fewer instructions.
    @inline(__always)
    func giveInTurn(_ event: EventFrame, seq: UInt64, type: EventType, publisher: Connection?, uid: UInt32, in group: QueueGroup) -> Bool {
        let slot = group.cursor
        if group.isReady(slot) && group.filteredCount == 0 && (uid == group.key.uid || isPrivileged(uid))
            && statistics.queuedBytes &+ event.count &+ OutboundQueue.entryOverheadBytes <= ledger.outboundFastPathBytes && pacedReplays == 0 {
            // (Uncounted: the group's slots keep the member, and queueing an
            // event changes no group's members: an overflow rule that closes
            // the connection leaves its groups later, in `forget`.)
            let given: Bool? = group.memberRef(at: slot).with { member in
                let connection = member.connection
                guard connection.isRoutable, connection !== publisher || connection.echo, !connection.flow.behind else { return nil }
                group.passTurn(after: slot)
                return queue(event, seq: seq, uid: uid, to: member)
            }
            if let given { return given }
        }
        return give(event, seq: seq, type: type, publisher: publisher, uid: uid, keyHash: nil, in: group)
    }

    /// Gives an event to one member of `group`: the member its key hashes to
    /// (under that member's own rule), else the first in turn that can take
    /// it now, else (the group is full) the next in turn under its own rule.
    /// A member chosen that has the event already (another of its
    /// subscriptions matched) serves the group with that copy.
    /// - Returns: whether it was queued.
    @inline(never)
    func give(_ event: EventFrame, seq: UInt64, type: EventType, publisher: Connection?, uid: UInt32, keyHash: UInt64?,
              in group: QueueGroup) -> Bool {
        if group.deniesEveryMember(type) { return false }
        if let keyHash {
            guard let member = keyedMember(of: group, keyHash: keyHash, type: type, publisher: publisher) else { return false }
            return queue(event, seq: seq, uid: uid, to: member)
        }
        let size = event.count &+ OutboundQueue.entryOverheadBytes
        let actor = uid == group.key.uid || isPrivileged(uid) ? OutboundQueue.noActor : uid
        // Full: the next member in turn, under its own overflow rule.
        guard let slot = firstAble(in: group, size: size, actor: actor, type: type, publisher: publisher)
            ?? nextInTurn(of: group, type: type, publisher: publisher) else { return false }
        group.passTurn(after: slot)
        // (Uncounted: the group's slots keep the member, and queueing an
        // event changes no group's members: an overflow rule that closes
        // the connection leaves its groups later, in `forget`.)
        return group.memberRef(at: slot).with { queue(event, seq: seq, uid: uid, to: $0) }
    }

    /// Queues an event to a chosen member under its rule (`offer`), unless it
    /// has it already, and records it for the member's hand-on (unless all
    /// its events are that membership's: `ConnectionGroups.unrecorded`).
    @inline(__always)
    private func queue(_ event: EventFrame, seq: UInt64, uid: UInt32, to member: GroupMember) -> Bool {
        let connection = member.connection
        guard connection.output.route(seq) else { return false }  // served by the copy it has
        guard offer(event, seq: seq, publisher: uid, to: connection) else { return false }
        if member.serial != connection.groups.unrecorded { noteDelivery(seq, to: member) }
        return true
    }

    /// The slot of the first member in turn that can take an event of
    /// `size` charged bytes now (queue within its limits, not behind, not
    /// held back by a paced replay), nil when none can. Members found
    /// unable, with something queued (so a write will come), are passed
    /// over until they write (`block`).
    func firstAble(in group: QueueGroup, size: Int, actor: UInt32, type: EventType, publisher: Connection?) -> Int? {
        var start = group.cursor
        var skipped = 0
        // While all queues hold less than the smallest limit and no replay
        // is paced, a member not behind can take any event outside every
        // fair share (as `offer`'s `mayFit`): no limit is looked at.
        let mayFit = actor == OutboundQueue.noActor && statistics.queuedBytes &+ size <= ledger.outboundFastPathBytes && pacedReplays == 0
        while let slot = group.nextReady(from: start) {
            start = group.after(slot)
            // (Uncounted: the group's slots keep its members, and nothing
            // here changes them.)
            let verdict: FirstAbleVerdict = group.memberRef(at: slot).with { member in
                guard mayTake(member, type: type, publisher: publisher) else { return .skip }
                let connection = member.connection
                if mayFit && !connection.flow.behind { return .take }
                return limitVerdict(member, size: size, actor: actor)
            }
            switch verdict {
            case .take: return slot
            case .stop: return nil
            case .skip:
                skipped += 1
                if skipped >= group.count { return nil }
            case .blocked: break
            }
        }
        return nil
    }

    /// What `firstAble` makes of a member that may take the event when
    /// limits are looked at (out of line: the common case looks at none).
    @inline(never)
    private func limitVerdict(_ member: GroupMember, size: Int, actor: UInt32) -> FirstAbleVerdict {
        let connection = member.connection
        guard let refusal = refusalNow(connection, size: size, actor: actor) else { return .take }
        if refusal == .user { return .stop }  // one uid: every member is over its limit
        if connection.outbound.isEmpty { return .skip }
        block(member)
        return .blocked
    }

    /// What `firstAble` makes of one member.
    private enum FirstAbleVerdict {
        case take, skip, blocked, stop
    }

    /// The slot of the next member in turn that may receive the event at all, ready or not.
    func nextInTurn(of group: QueueGroup, type: EventType, publisher: Connection?) -> Int? {
        let n = group.slotCount
        guard n > 0 else { return nil }
        var slot = group.cursor < n ? group.cursor : 0
        for _ in 0..<n {
            if let member = group.member(at: slot), mayTake(member, type: type, publisher: publisher) { return slot }
            slot = group.after(slot)
        }
        return nil
    }

    /// Whether a member may be given an event (or request) of `type` at
    /// all: open, not its own publication unless it asked for echo, not a
    /// type the policy hides from it (or does not let it serve).
    @inline(__always)
    func mayTake(_ member: GroupMember, type: EventType, publisher: Connection?) -> Bool {
        let connection = member.connection
        guard connection.isRoutable else { return false }
        if connection === publisher && !connection.echo { return false }
        // A serving member at its reply-token bounds is passed over, as a
        // plain server is (`mayServeMore`).
        if member.group.key.serve && !mayServeMore(connection) { return false }
        guard member.isFiltered else { return true }
        return member.group.key.serve ? connection.policy.serve(type).isAllowed : connection.policy.receive(type).isAllowed
    }

    /// Why a connection cannot take an event of `size` now, nil when it can:
    /// behind, held back by a paced replay, or a limit (`refusal`).
    @inline(__always)
    func refusalNow(_ connection: Connection, size: Int, actor: UInt32) -> Refusal? {
        if connection.flow.behind { return .connection }
        if !connection.flow.replays.isEmpty && !connection.flow.pumping { return .connection }
        return refusal(size: size, actor: actor, connection: connection)
    }

    /// Passes a member over until its connection writes.
    private func block(_ member: GroupMember) {
        member.connection.groups.block(member)
    }

    /// A connection wrote: each of its memberships passed over is in turn again (from `didWrite`).
    func unblockGroups(_ connection: Connection) {
        connection.groups.unblockAll()
    }

    // MARK: Serving groups

    /// Picks one member of each serving group that matches a request of
    /// `type` (PROTOCOL.md "Queue groups": requests too): the key's member,
    /// or the first in turn that can take it now; a group none of whose
    /// members can take it holds the requester when one of them may hold it
    /// (`blockingGroups`), else it is passed over (not reached). A member
    /// that has the request already by a plain serving subscription serves
    /// its group with it. From `serviceRequest`.
    func routeRequestToGroups(_ type: EventType, keyHash: UInt64?, size: Int, requester: Connection,
                              servers: inout [Connection], blockers: inout [Connection], blockingGroups: inout [QueueGroup]) {
        let uid = requester.credentials.uid
        for group in servingGroupsMatching(type) {
            if group.deniesEveryMember(type) { continue }
            if let keyHash {
                guard let member = keyedMember(of: group, keyHash: keyHash, type: type, publisher: requester) else { continue }
                let server = member.connection
                switch requestFit(size: size, requester: requester, server: server) {
                case .fits: if !server.groups.chosen(requestMark) { servers.append(server) }
                case .holds: if !blockers.contains(where: { $0 === server }) { blockers.append(server) }
                case .passedOver: break
                }
                continue
            }
            let actor = uid == group.key.uid || isPrivileged(uid) ? OutboundQueue.noActor : uid
            if let slot = firstAble(in: group, size: size, actor: actor, type: type, publisher: requester), let member = group.member(at: slot) {
                group.passTurn(after: slot)
                if !member.connection.groups.chosen(requestMark) { servers.append(member.connection) }
                continue
            }
            if uid != group.key.uid && ledger.halfFullTrustedHolders == 0 { continue }
            for member in group.members where mayTake(member, type: type, publisher: requester) {
                if wouldHold(member.connection, bound: size, actor: actor, publisherUID: uid) {
                    blockingGroups.append(group)
                    break
                }
            }
        }
    }

    /// The serving groups whose pattern matches `type`: kept per type in
    /// `types` as the plain groups are (a request's type is found there by
    /// its bytes, and put in as a publish's is), so a request does not walk
    /// the trie or make a list.
    func servingGroupsMatching(_ type: EventType) -> [QueueGroup] {
        guard let entry = types.entry(for: type.name.utf8Span.span.bytes) else { return serveGroups.matches(type) }
        return types.groups(entry, in: serveGroups, serving: true)
    }

    // MARK: Keys

    /// A publish with `key` (from `perform`): its event carries the key
    /// after the publisher's identity (`,"key":"k"`), and each group picks
    /// the key's member. Out of line: the common publish has no code for it.
    @inline(never)
    func publishKeyed(_ request: PublishRequest, key: JSONToken, frame: RawSpan, req: RawSpan?, from publisher: Connection) {
        let token = frame.extracting(key.range)
        publishKey = PublishKey(keyHash: hashOfKey(token: token), identity: Broker.identity(publisher, key: token))
        defer { publishKey = nil }
        publish(request, frame: frame, req: req, from: publisher)
    }

    /// A connection's `EventStamp.identity` (`,"pid":P,"uid":U,"gid":G`),
    /// with `,"key":` and the raw key token after it when there is one.
    static func identity(_ connection: Connection, key: RawSpan?) -> [UInt8] {
        var identity = connection.identity.eventIdentity.array
        if let key {
            identity.append(contentsOf: ",\"key\":".utf8)
            identity.append(copying: key)
        }
        return identity
    }

    /// The member a key hashes to among those that may receive the event
    /// (rendezvous hashing: the highest `mix64(keyHash ^ salt)`). O(members).
    func keyedMember(of group: QueueGroup, keyHash: UInt64, type: EventType, publisher: Connection?) -> GroupMember? {
        var best: GroupMember? = nil
        var bestScore: UInt64 = 0
        for slot in 0..<group.slotCount {
            guard let member = group.member(at: slot), mayTake(member, type: type, publisher: publisher) else { continue }
            let score = Broker.mix64(keyHash ^ member.salt)
            if best == nil || score > bestScore {
                best = member
                bestScore = score
            }
        }
        return best
    }

    /// The hash of a key given as its raw JSON string token (quotes
    /// included): its decoded bytes under this run's `groupSeed`
    /// (`SeededHash`), so `"a"` and `"\u0061"` are one key.
    func hashOfKey(token: RawSpan) -> UInt64 {
        let count = token.byteCount
        let inner = token.extracting(1..<(count - 1))
        if inner.firstOffset(of: 0x5C) == nil { return SeededHash.hash(inner, seed: groupSeed) }  // no backslash: as written
        let decoded = JSONString.decodeBytes(token, JSONToken(start: 0, end: count, kind: .string(escaped: true)))
        return SeededHash.hash(decoded.span.bytes, seed: groupSeed)
    }

    /// MurmurHash3's 64-bit finaliser (fmix64): a bijection whose every
    /// output bit depends on every input bit, so `mix64(k ^ salt)` ranks the
    /// members of a group independently for each key.
    @inline(__always)
    static func mix64(_ value: UInt64) -> UInt64 {
        var h = value
        h ^= h >> 33
        h &*= 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        h &*= 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        return h
    }
}

/// (1.3) The key of a keyed publish while it is routed: its hash (by which
/// each group picks a member, `hashOfKey`) and the publisher's identity with
/// `,"key":` and the raw token after it (what its event frame carries, read
/// by the event writer as a connection's own identity is).
final class PublishKey {
    let keyHash: UInt64
    let identity: StampBytes

    init(keyHash: UInt64, identity: [UInt8]) {
        self.keyHash = keyHash
        self.identity = StampBytes(identity)
    }
}
