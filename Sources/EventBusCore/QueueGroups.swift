// Queue groups (PROTOCOL.md "Queue groups (1.3)"): the group records and
// their index. A group is identified by (uid, pattern, serve, name); its
// members are connections, each by one `GroupMember` record (its group
// subscription), in join order in `slots`. Which members may take an event
// now is a bit per slot (`ReadySet`): a member found unable to take one
// (its queue full, behind, held back by a paced replay) has its bit cleared
// and comes back at its next write, so choosing a member in turn costs
// O(1) amortised: every member passed over was found full since its last
// write, at most once per write. The groups are found by the types they
// match as subscriptions are (`GroupIndex`: exact types in a map, wildcard
// patterns in the same segment trie, SubscriptionTrie.swift).
//
// Before editing: groups and members are made and ended only by
// Broker+Groups.swift (`joinGroup`, `leaveGroup`), which keeps the
// connection's side (`ConnectionGroups`, through its methods), the group's
// slots and bits, the index and the subscription counts in step; a group
// with no member is gone from the index at once. A member's `isBlocked` is
// true exactly when its bit is clear and it is in its connection's
// `groups.blocked` list: both change only in `ConnectionGroups.block` and
// `unblockAll`, in this file (a member's `slot`, `isActive` and
// `isBlocked` are `fileprivate(set)`). A group's turn (`cursor`) and the
// publishers it holds (`holding`) are `private(set)`, moved by its
// `passTurn`, `hold`, `endHold` and `letGo` (when to hold:
// Broker+GroupFlow.swift, which also keeps each publisher's side).
// Whatever changes what `GroupIndex.matches` returns moves `version` (the
// type table keeps those lists while it stands).
import EventBusPolicy
@_spi(Package) import EventBusProtocol

/// Which group (PROTOCOL.md "Queue groups": the connection's uid, the
/// pattern, `serve`, and the name).
struct GroupKey: Hashable {
    var uid: UInt32
    var pattern: Pattern
    var serve: Bool
    var name: String
    /// (issue 36) A bridge's fallback membership of the groups named `name`
    /// (Broker+GroupExport.swift): its own index, never a local group.
    var fallback = false
    /// (attacker6) A fallback membership's `uid`: only that uid's groups named
    /// `name` are the ones that cross (nil: every uid's).
    var owner: UInt32? = nil
}

/// One connection's membership of one group: its group subscription.
final class GroupMember {
    let connection: Connection
    let group: QueueGroup
    /// Its place in the group's join order (`QueueGroup.slots`).
    fileprivate(set) var slot: Int
    /// Its weight seed in rendezvous hashing (from its connection id: a
    /// connection that leaves and joins again takes back the same keys).
    let salt: UInt64
    /// The policy denies the connection some of the pattern's types
    /// (`filtered: true`): those are never given to it. Set only through
    /// `QueueGroup.setFiltered` (the group counts them).
    fileprivate(set) var isFiltered = false
    /// Its bit is clear (it was found unable to take an event) and it is in
    /// its connection's `groups.blocked` list until the connection writes
    /// (`ConnectionGroups.block`/`unblockAll`).
    fileprivate(set) var isBlocked = false
    /// Still in its group (false once it left: records of it are stale).
    fileprivate(set) var isActive = true
    /// Its number among its connection's memberships, made and ended
    /// (`ConnectionGroups.join`; never reused): what `GroupDelivery` records,
    /// so a delivery's record holds no reference to count.
    fileprivate(set) var serial: UInt64 = 0

    init(connection: Connection, group: QueueGroup, slot: Int, salt: UInt64) {
        self.connection = connection
        self.group = group
        self.slot = slot
        self.salt = salt
    }
}

/// One queue group: its members in join order, which of them may take an
/// event now, the turn, and the publishers it holds back.
final class QueueGroup {
    let key: GroupKey
    /// Members in join order; nil where one left (squeezed out once the
    /// holes are as many as the members).
    private(set) var slots: [GroupMember?] = []
    /// Members now.
    private(set) var count = 0
    /// The slots whose member may take an event now (as far as known).
    private(set) var ready = ReadySet()
    /// The slot to look at first: the one after the member chosen last
    /// (moved by `passTurn`).
    private(set) var cursor = 0
    /// (PROTOCOL.md "Flow control") Publishers held back until a member can
    /// take their event, each once; each has this group in its
    /// `flow.heldInGroups` (Broker+GroupFlow.swift keeps that side).
    /// Changed by `hold`, `endHold` and `letGo`.
    private(set) var holding: [Connection] = []
    /// Where it is in its `GroupIndex` list (an exact type's, or a trie
    /// node's), and that node for a wildcard pattern.
    fileprivate(set) var position = 0
    fileprivate(set) var node: PatternTrieNode<QueueGroup>? = nil
    fileprivate(set) var isTail = false
    /// Members whose pattern is filtered (0: the policy hides no type of the
    /// pattern from any member), and the one policy view they all have
    /// while they share one (`deniesEveryMember`).
    private(set) var filteredCount = 0
    private var filterView: PolicyView? = nil
    private var filterViewsDiffer = false

    init(key: GroupKey) { self.key = key }

    /// Marks a member filtered or not (at its join, and at a policy reload:
    /// `refiltered` registers its new view; views that differ are noted
    /// until no member is filtered).
    func setFiltered(_ member: GroupMember, _ filtered: Bool) {
        guard member.isFiltered != filtered else { return }
        member.isFiltered = filtered
        if filtered {
            filteredCount += 1
            if filterView == nil { filterView = member.connection.policy } else if filterView !== member.connection.policy { filterViewsDiffer = true }
        } else {
            filteredCount -= 1
            if filteredCount == 0 { forgetFilterViews() }
        }
    }

    /// A reload gave a filtered member a new policy view.
    func refiltered(_ member: GroupMember) {
        setFiltered(member, false)
        setFiltered(member, true)
    }

    private func forgetFilterViews() {
        filterView = nil
        filterViewsDiffer = false
    }

    /// Whether no member may be given `type` at all because the policy
    /// hides it from every one of them: every member filtered, through one
    /// policy view (one check, instead of one per member: members of
    /// another uid's group that may not see a publisher's type cost it
    /// nothing per member). False when it cannot tell so cheaply.
    @inline(__always)
    func deniesEveryMember(_ type: EventType) -> Bool {
        guard filteredCount != 0, filteredCount == count, !filterViewsDiffer, let view = filterView else { return false }
        return !(key.serve ? view.serve(type).isAllowed : view.receive(type).isAllowed)  // as `Broker.mayTake`
    }

    var isEmpty: Bool { count == 0 }
    var slotCount: Int { slots.count }

    @inline(__always)
    func member(at slot: Int) -> GroupMember? { slots[slot] }

    /// The member in `slot` (there is one), uncounted: `slots` keeps it,
    /// so whoever uses it must not change the group's members meanwhile
    /// (Uncounted.swift's rule; `Broker.firstAble`, `Broker.give`). Read
    /// so, the element costs no retain/release (a closure over the slots'
    /// buffer pointer, as before, retained the buffer around every look).
    @inline(__always)
    func memberRef(at slot: Int) -> Uncounted<GroupMember> { Uncounted(slots[slot]!) }

    /// Adds a member last in join order, ready.
    func append(_ connection: Connection, salt: UInt64) -> GroupMember {
        let member = GroupMember(connection: connection, group: self, slot: slots.count, salt: salt)
        slots.append(member)
        count += 1
        ready.grow(to: slots.count)
        ready.insert(member.slot)
        return member
    }

    /// Takes a member out (its slot becomes a hole; holes are squeezed out
    /// once they are as many as the members: O(1) amortised).
    func remove(_ member: GroupMember) {
        ready.remove(member.slot)
        slots[member.slot] = nil
        member.isActive = false
        if member.isFiltered {
            filteredCount -= 1
            if filteredCount == 0 { forgetFilterViews() }
        }
        count -= 1
        if count == 0 {
            slots.removeAll()
            ready = ReadySet()
            cursor = 0
        } else if slots.count >= 16 && slots.count >= 2 * count {
            squeeze()
        }
    }

    /// Renumbers the members 0..<count in join order; the turn stays with
    /// the member it was at (or the next).
    private func squeeze() {
        var kept: [GroupMember?] = []
        kept.reserveCapacity(count)
        var newCursor = -1
        var fresh = ReadySet()
        fresh.grow(to: count)
        for (i, slot) in slots.enumerated() {
            if i >= cursor && newCursor < 0 && slot != nil { newCursor = kept.count }
            guard let member = slot else { continue }
            let wasReady = ready.contains(i)
            member.slot = kept.count
            kept.append(member)
            if wasReady { fresh.insert(member.slot) }
        }
        slots = kept
        ready = fresh
        cursor = newCursor < 0 ? 0 : newCursor
    }

    /// Marks a member able (true) or unable (false) to take an event now.
    @inline(__always)
    func setReady(_ member: GroupMember, _ isReady: Bool) {
        if isReady { ready.insert(member.slot) } else { ready.remove(member.slot) }
    }

    /// Whether the member in `slot` may take an event now as far as known
    /// (false for any slot without one).
    @inline(__always)
    func isReady(_ slot: Int) -> Bool { ready.contains(slot, below: slots.count) }

    /// The first ready slot in turn from `start` (wrapping once), nil when none is ready.
    @inline(__always)
    func nextReady(from start: Int) -> Int? {
        if isReady(start) { return start }  // the member in turn (the common case: no call)
        if let slot = ready.first(atOrAfter: start) { return slot }
        guard start > 0, let slot = ready.first(atOrAfter: 0), slot < start else { return nil }
        return slot
    }

    /// The slot after `slot` in turn (wrapping).
    @inline(__always)
    func after(_ slot: Int) -> Int { slot + 1 >= slots.count ? 0 : slot + 1 }

    /// The member at `slot` took (or was given) its turn: the next turn
    /// starts at the slot after it.
    @inline(__always)
    func passTurn(after slot: Int) { cursor = after(slot) }

    // MARK: Holding (Broker+GroupFlow.swift decides when)

    /// Holds `publisher` back (the caller lists the group in its `flow`).
    /// - Returns: whether the group started holding (it held nobody):
    ///   the caller counts the hold at each member.
    func hold(_ publisher: Connection) -> Bool {
        let started = holding.isEmpty
        holding.append(publisher)
        return started
    }

    /// Ends the group's hold.
    /// - Returns: the publishers it held (empty: none), in the order held.
    func endHold() -> [Connection] {
        let held = holding
        holding = []
        return held
    }

    /// Lets go of `publisher` (going: its `flow` no longer lists the group).
    /// - Returns: whether that ended the group's hold (it held it and holds
    ///   nobody now).
    func letGo(_ publisher: Connection) -> Bool {
        guard !holding.isEmpty else { return false }
        holding.removeAll { $0 === publisher }
        return holding.isEmpty
    }

    /// The members in join order.
    var members: [GroupMember] { slots.compactMap { $0 } }
}

/// A set of slot numbers as a bitmap with a summary word per 64 words, so
/// the first member at or after a slot is found in O(1 + slots / 4096)
/// word reads (a group's members are bounded by the subscription quotas:
/// 262,144 at most, 64 summary words).
struct ReadySet {
    private var words: [UInt64] = []
    /// Bit `w % 64` of `summary[w / 64]`: `words[w]` is not 0.
    private var summary: [UInt64] = []

    var isEmpty: Bool { summary.allSatisfy { $0 == 0 } }

    /// Makes room for slots 0..<n.
    mutating func grow(to n: Int) {
        let needed = (n + 63) >> 6
        if words.count < needed { words.append(contentsOf: repeatElement(0, count: needed - words.count)) }
        let summaries = (words.count + 63) >> 6
        if summary.count < summaries { summary.append(contentsOf: repeatElement(0, count: summaries - summary.count)) }
    }

    @inline(__always)
    func contains(_ i: Int) -> Bool { words[i >> 6] & (1 << UInt64(i & 63)) != 0 }

    /// Whether `i` is in, for any `i` (false when not below `count`, the slots there are).
    @inline(__always)
    func contains(_ i: Int, below count: Int) -> Bool { i < count && contains(i) }

    @inline(__always)
    mutating func insert(_ i: Int) {
        let w = i >> 6
        words[w] |= 1 << UInt64(i & 63)
        summary[w >> 6] |= 1 << UInt64(w & 63)
    }

    @inline(__always)
    mutating func remove(_ i: Int) {
        let w = i >> 6
        words[w] &= ~(1 << UInt64(i & 63))
        if words[w] == 0 { summary[w >> 6] &= ~(1 << UInt64(w & 63)) }
    }

    /// The smallest member at or after `i`, nil when none.
    func first(atOrAfter i: Int) -> Int? {
        var w = i >> 6
        guard w < words.count else { return nil }
        let inWord = words[w] & (~0 << UInt64(i & 63))
        if inWord != 0 { return w << 6 | inWord.trailingZeroBitCount }
        w += 1
        var s = w >> 6
        guard s < summary.count else { return nil }
        var bits = w & 63 == 0 ? summary[s] : summary[s] & (~0 << UInt64(w & 63))
        while true {
            if bits != 0 {
                let word = s << 6 | bits.trailingZeroBitCount
                return word << 6 | words[word].trailingZeroBitCount
            }
            s += 1
            guard s < summary.count else { return nil }
            bits = summary[s]
        }
    }
}

/// The queue groups by pattern, found by the types they match: exact
/// patterns in a map, wildcard ones in a segment trie (as
/// `SubscriptionIndex`); and by their key, for joining.
final class GroupIndex {
    private(set) var byKey: [GroupKey: QueueGroup] = [:]
    private var exact: [String: [QueueGroup]] = [:]
    private let root = PatternTrieNode<QueueGroup>(parent: nil, edge: .empty)
    /// Goes up with every group made or ended (lists taken from `matches` are stale then).
    private(set) var version: UInt64 = 1

    /// Groups now (each has at least one member).
    var count: Int { byKey.count }

    func group(_ key: GroupKey) -> QueueGroup? { byKey[key] }

    /// Puts a new group in (its key is not there yet).
    func add(_ group: QueueGroup) {
        version &+= 1
        byKey[group.key] = group
        let pattern = group.key.pattern
        guard pattern.hasWildcards else {
            group.position = exact[pattern.text]?.count ?? 0
            exact[pattern.text, default: []].append(group)
            return
        }
        var segments = Segments(Substring(pattern.text))
        group.isTail = pattern.text.utf8.last == 0x3E  // ">"
        if group.isTail { segments = segments.prefix(segments.count - 1) }
        let node = PatternTrieNode<QueueGroup>.node(for: segments, from: root)
        group.node = node
        if group.isTail {
            group.position = node.tailSubscribers.count
            node.tailSubscribers.append(group)
        } else {
            group.position = node.subscribers.count
            node.subscribers.append(group)
        }
    }

    /// Takes an empty group out: O(1) in the groups of its pattern.
    func remove(_ group: QueueGroup) {
        version &+= 1
        byKey[group.key] = nil
        let pattern = group.key.pattern
        guard let node = group.node else {
            Self.remove(group, from: &exact[pattern.text]!)
            if exact[pattern.text]!.isEmpty { exact[pattern.text] = nil }
            return
        }
        if group.isTail { Self.remove(group, from: &node.tailSubscribers) } else { Self.remove(group, from: &node.subscribers) }
        group.node = nil
        PatternTrieNode<QueueGroup>.prune(from: node)
    }

    private static func remove(_ group: QueueGroup, from list: inout [QueueGroup]) {
        let i = group.position, last = list.count - 1
        if i != last {
            list[i] = list[last]
            list[i].position = i
        }
        list.removeLast()
    }

    /// The groups whose pattern matches `type`, each once.
    func matches(_ type: EventType) -> [QueueGroup] {
        var list = exact[type.name] ?? []
        guard !root.isEmpty else { return list }
        root.match(Segments.array(of: type.name), at: 0) { list.append($0) }
        return list
    }

    /// Whether no group is left and the trie is pruned to its root.
    var isEmpty: Bool { byKey.isEmpty && exact.isEmpty && root.isEmpty }
}

/// A connection's side of its groups: its memberships, those passed over
/// until it writes, and the group events queued to it (for redelivery when
/// it closes, PROTOCOL.md "Queue groups": leaving). Every field is
/// `private(set)`, changed only by the methods below, which keep its rules:
/// `memberships` holds each active membership of the connection once, by
/// its group's key, and `fallbackNames` counts the fallback ones by name
/// (`join`/`leave`); a member is in `blocked` exactly while its
/// `isBlocked` is set and its bit clear (`block`/`unblockAll`), the list
/// bounded by its memberships; `deliveries` is a superset of the group
/// events in the connection's queue, bounded by twice its queued frames
/// (`noteDelivery`), except while `unrecorded` names a membership: then
/// every event in the queue is that membership's and none is recorded
/// (`recordNone`, ended by `recordFromNow` or its leaving, never set again);
/// once `peerClosed` is set it stays set.
struct ConnectionGroups {
    private(set) var memberships: [GroupKey: GroupMember] = [:]
    /// Memberships whose bit is clear: set again at its next write.
    private(set) var blocked: [GroupMember] = []
    /// Group events queued to it, oldest first (with stale ones: written,
    /// dropped, or of a group it left), pruned once they are twice its
    /// queued frames.
    private(set) var deliveries: [GroupDelivery] = []
    /// (issue 36) The names of its fallback memberships (a bridge's exported
    /// groups, Broker+GroupExport.swift), with their uid (attacker6), with how many patterns each.
    private(set) var fallbackNames: [GroupTarget: Int] = [:]
    /// Its peer closed the socket (`Broker.peerClosed`): it joins no group again.
    private(set) var peerClosed = false
    /// The last request (`Broker.requestMark`) it was chosen to serve.
    private var chosenMark: UInt64 = 0
    /// The last `GroupMember.serial` given.
    private var lastSerial: UInt64 = 0
    /// (issue 38, case 10) The membership (its `serial`) that every event
    /// queued to the connection comes from, so that none is recorded in
    /// `deliveries`; 0: none, each group event is recorded. A worker's usual
    /// case: its first membership, of a plain group, made while it had no
    /// plain subscription and no event queued (`Broker.joinGroup`). Ended
    /// for good by whatever could queue it another event (a plain
    /// subscription, another membership: `recordFromNow`), or by its
    /// leaving (its events are its own then, as a left member's are).
    private(set) var unrecorded: UInt64 = 0

    /// Whether it was chosen already for the request marked `mark`; marks it chosen.
    mutating func chosen(_ mark: UInt64) -> Bool {
        if chosenMark == mark { return true }
        chosenMark = mark
        return false
    }

    /// A membership was made (`Broker.joinGroup`).
    mutating func join(_ member: GroupMember) {
        let key = member.group.key
        lastSerial &+= 1
        member.serial = lastSerial
        memberships[key] = member
        if key.fallback { fallbackNames[GroupTarget(key), default: 0] += 1 }
    }

    /// A membership ended (`Broker.leaveGroup`).
    mutating func leave(_ key: GroupKey) {
        if let member = memberships[key], member.serial == unrecorded { unrecorded = 0 }
        memberships[key] = nil
        guard key.fallback, let count = fallbackNames[GroupTarget(key)] else { return }
        fallbackNames[GroupTarget(key)] = count > 1 ? count - 1 : nil
    }

    /// Passes `member` (one of its memberships) over until the connection writes.
    mutating func block(_ member: GroupMember) {
        member.isBlocked = true
        member.group.setReady(member, false)
        blocked.append(member)
        // Bounded by its memberships: left ones are dropped now and then.
        if blocked.count > 2 * memberships.count + 16 {
            blocked.removeAll { !$0.isActive }
        }
    }

    /// The connection wrote: each of its memberships passed over is in turn again.
    mutating func unblockAll() {
        let members = blocked
        blocked.removeAll(keepingCapacity: true)
        for member in members where member.isActive && member.isBlocked {
            member.isBlocked = false
            member.group.setReady(member, true)
        }
    }

    /// Records none of `member`'s deliveries: every event queued to the
    /// connection is its (the caller checked that none is queued now, and
    /// that it has no other membership and no plain subscription).
    mutating func recordNone(_ member: GroupMember) {
        precondition(unrecorded == 0 && deliveries.isEmpty && memberships.count == 1, "only a first membership goes unrecorded")
        unrecorded = member.serial
    }

    /// Something other than the unrecorded membership may queue events to
    /// the connection from now: the events queued so far (`queuedSeqs`,
    /// each the unrecorded membership's) are recorded as its, and every
    /// group event after them is recorded. No-op while none is unrecorded.
    mutating func recordFromNow(queuedSeqs: () -> [UInt64]) {
        guard unrecorded != 0 else { return }
        let serial = unrecorded
        unrecorded = 0
        deliveries.append(contentsOf: queuedSeqs().lazy.map { GroupDelivery(seq: $0, member: serial) })
    }

    /// Remembers that the group event `seq` was queued by `member`'s group;
    /// once the record is more than twice `queuedFrames` (+ 64), prunes it:
    /// first to the events not older than the oldest queued
    /// (`oldestQueuedSeq`: no hashing, and all it takes while the queue is
    /// written as fast as it fills, issue 38's case 10), and when that
    /// leaves more than `queuedFrames` + 32 (events written out of seq
    /// order, or dropped behind a head that is not written), to the events
    /// `queuedSeqs` still holds. Records of a membership since ended stay
    /// until then: `Broker.handOver` looks only at the memberships it left.
    @inline(__always)
    mutating func noteDelivery(_ seq: UInt64, to member: GroupMember, queuedFrames: Int, oldestQueuedSeq: () -> UInt64,
                               queuedSeqs: () -> Set<UInt64>) {
        deliveries.append(GroupDelivery(seq: seq, member: member.serial))
        if deliveries.count > 2 * queuedFrames + 64 { prune(queuedFrames: queuedFrames, oldestQueuedSeq: oldestQueuedSeq, queuedSeqs: queuedSeqs) }
    }

    /// `noteDelivery`'s pruning, out of line (once per `queuedFrames` + 64 deliveries at most).
    @inline(never)
    private mutating func prune(queuedFrames: Int, oldestQueuedSeq: () -> UInt64, queuedSeqs: () -> Set<UInt64>) {
        let oldest = oldestQueuedSeq()
        deliveries.removeAll { $0.seq < oldest }
        guard deliveries.count > queuedFrames + 32 else { return }
        let queued = queuedSeqs()
        deliveries.removeAll { !queued.contains($0.seq) }
    }

    /// It left every group for good (closing): nothing is passed over or
    /// kept for redelivery any more.
    mutating func forgetQueued() {
        blocked = []
        deliveries = []
        unrecorded = 0
    }

    /// Its peer closed the socket.
    /// - Returns: whether this is the first time (it was not noted before).
    mutating func notePeerClosed() -> Bool {
        guard !peerClosed else { return false }
        peerClosed = true
        return true
    }
}

/// An event a group gave a member: its seq and the membership (its
/// `GroupMember.serial`: a plain number, so keeping and pruning the records
/// counts no references).
struct GroupDelivery {
    var seq: UInt64
    var member: UInt64
}
