// Per-type counters (PROTOCOL.md "Per-type counters (1.2)", issue 21): for
// each event type published in this broker run, how many events were
// published, queued to subscribers and dropped, and the last seq and time;
// at most `capacity` types (65,536). The `types` op reads them
// (Broker+Types.swift).
//
// (issue 37) Bounded per uid, as the quotas are: each type belongs to the uid
// that last published it and sits in that uid's list by last publish (as
// well as in the one list of all types by last publish, which `types`
// walks). When the table is full, a new type of a uid holding at least its
// fair share (`capacity` ÷ the uids holding types, itself counted) takes the
// slot of that uid's own least recently published type; a uid below its
// share takes the oldest type of the uid holding the most. So one uid's
// publishing never forgets another uid's types while that uid is within its
// share. A retained type is never forgotten while retained: met as a
// candidate, it is *pinned* (moved to list 0, out of every uid's share), and
// each later eviction looks at the oldest pinned type once: no longer
// retained, it goes back to its uid's list as its oldest.
//
// Raw memory (issue 35): the slots and the state are allocated here, once,
// and freed in `deinit`; no pointer to them leaves this file. Arrays
// instead (the slots a `[Slot]` reserved once, the state plain properties,
// a publish's counts written in one access to its slot) measured case 1
// 2,536 Ir per delivery against 2,404 (+5.5 %) and case 2 585 against 570:
// the copy-on-write and bounds checks (`Array._makeMutableAndUnique`,
// `_checkSubscript_mutating`, `swift_isUniquelyReferenced`) are calls, on
// every publish and every counted drop.
//
// Before editing: this is on the publish path, so everything a publish does
// here is O(1), allocates nothing for a type seen before, and touches only
// memory of its own (two pointers: no array or class-property checks): a slot is found
// through the type's `EventTypeTable` entry (`Broker.countPublished`), which
// keeps a `Ref` to it; a `Ref` is a slot index and the slot's generation in
// one `UInt32` (a queued event keeps one too, in the padding of its
// `OutboundQueue.Entry`, so a drop-old drop is counted for the type it drops),
// and a slot given to another type gets a new generation, so an old `Ref`
// finds nothing. The dictionary by name is used only when a type is new to
// `EventTypeTable` (which then validated it and built its `String` anyway).
// (issue 37) The per-uid lists (`lists`, an array) are touched out of line
// (`moveToNewestInList`), only when the type published is not the newest of
// all or changed uid: a type published again and again costs one compare
// more. Every slot is in exactly one list (a uid's or the pinned one) and
// `owners` counts the uid lists that are not empty.
@_spi(Package) import EventBusProtocol

final class TypeCounters {
    /// A slot and its generation: `index | generation << 16`; 0 is no slot
    /// (generations start at 1 and skip 0).
    typealias Ref = UInt32
    static let none: Ref = 0
    /// Types tracked at most (PROTOCOL.md: 65,536; a `Ref` has 16 bits of index).
    static let defaultCapacity = 65_536

    /// One type's counters, and its place in the list by last publish.
    struct Slot {
        fileprivate(set) var type: EventType
        fileprivate(set) var published: UInt64 = 0
        /// Event frames of the type queued to subscribers (live routing).
        fileprivate(set) var delivered: UInt64 = 0
        /// Deliveries of the type dropped for any connection.
        fileprivate(set) var dropped: UInt64 = 0
        /// (1.3) Requests of the type that took a seq (PROTOCOL.md "Request/reply").
        fileprivate(set) var requests: UInt64 = 0
        fileprivate(set) var lastSeq: UInt64 = 0
        /// Wall clock of the last publish, ns since the epoch.
        fileprivate(set) var lastWallNanoseconds: Int64 = 0
        fileprivate(set) var generation: UInt16
        /// Neighbours in the recency list (-1: none).
        fileprivate(set) var newer: Int32 = -1
        fileprivate(set) var older: Int32 = -1
        /// (issue 37) The uid that last published it, the list it is in
        /// (that uid's, or 0: pinned while retained), its neighbours there.
        fileprivate(set) var owner: UInt32 = 0
        fileprivate(set) var list: Int32 = 0
        fileprivate(set) var listNewer: Int32 = -1
        fileprivate(set) var listOlder: Int32 = -1
    }

    /// (issue 37) One uid's types by last publish (list 0: the pinned ones).
    struct OwnerList {
        fileprivate(set) var uid: UInt32
        fileprivate(set) var count = 0
        fileprivate(set) var newest: Int32 = -1
        fileprivate(set) var oldest: Int32 = -1
    }

    /// The mutable scalars, in memory of their own like the slots, so the
    /// publish path reads and writes plain memory (no exclusivity or
    /// copy-on-write checks of class or array storage).
    struct State {
        fileprivate(set) var count = 0
        /// Ends of the recency list: the last published, the least recently published.
        fileprivate(set) var newest: Int32 = -1
        fileprivate(set) var oldest: Int32 = -1
        /// The type being routed (`Broker.fanOut`), and its slot.
        fileprivate(set) var routed: Ref = TypeCounters.none
        fileprivate(set) var routedSlot = 0
    }

    /// `capacity` slots, the first `state.count` initialised. Reserved once:
    /// pages never written are never resident.
    private let slots: UnsafeMutablePointer<Slot>
    private let state: UnsafeMutablePointer<State>
    private var byName: [String: Int32] = [:]
    /// (issue 37) The per-uid lists (0: pinned), found by uid.
    private var lists: [OwnerList] = [OwnerList(uid: .max)]
    private var listOfUID: [UInt32: Int32] = [:]
    /// Lists other than 0 holding at least one type.
    private var owners = 0
    let capacity: Int

    init(capacity: Int = TypeCounters.defaultCapacity) {
        precondition(capacity > 0 && capacity <= 1 << 16, "a Ref holds a 16-bit slot index")
        self.capacity = capacity
        slots = .allocate(capacity: capacity)
        state = .allocate(capacity: 1)
        state.initialize(to: State())
    }

    deinit {
        slots.deinitialize(count: state.pointee.count)
        slots.deallocate()
        state.deallocate()
    }

    /// Types tracked now.
    var count: Int { state.pointee.count }

    /// Slot `i` (below `count`).
    func slot(_ i: Int) -> Slot { slots[i] }

    /// The type being routed, `none` outside `Broker.fanOut` (queued events carry it).
    @inline(__always)
    var routed: Ref { state.pointee.routed }

    /// The slot `ref` names, nil when it was given to another type since.
    @inline(__always)
    func index(_ ref: Ref) -> Int? {
        let i = Int(ref & 0xFFFF)
        guard ref != Self.none, i < state.pointee.count, slots[i].generation == UInt16(truncatingIfNeeded: ref >> 16) else { return nil }
        return i
    }

    @inline(__always)
    private func ref(_ i: Int) -> Ref { UInt32(i) | UInt32(slots[i].generation) << 16 }

    /// The slot of `type`, found by name or made for it for `owner` (when
    /// all are used, the slot of the type the fair share picks: see the
    /// file's header; `isRetained` says whether a type must be kept).
    func ref(for type: EventType, owner: UInt32, isRetained: (String) -> Bool) -> Ref {
        if let i = byName[type.name] { return ref(Int(i)) }
        let list = self.list(of: owner)
        let i: Int
        if state.pointee.count < capacity {
            i = state.pointee.count
            (slots + i).initialize(to: Slot(type: type, generation: 1))
            state.pointee.count += 1
        } else {
            i = victim(for: list, isRetained: isRetained)
            byName[slots[i].type.name] = nil
            var generation = slots[i].generation &+ 1
            if generation == 0 { generation = 1 }
            unlink(i)
            unlinkFromList(i)
            slots[i] = Slot(type: type, generation: generation)
        }
        linkAsNewest(i)
        slots[i].owner = owner
        linkInList(i, list, newest: true)
        byName[type.name] = Int32(i)
        return ref(i)
    }

    /// The slot a new type of list `list` takes in a full table.
    private func victim(for list: Int32, isRetained: (String) -> Bool) -> Int {
        sweepPinned(isRetained)
        while true {
            // At least 1: with more uids than slots each may keep one.
            let share = max(1, capacity / max(1, owners + (lists[Int(list)].count == 0 ? 1 : 0)))
            var from = list
            if lists[Int(list)].count < share {
                var most = 0
                for l in 1..<lists.count where Int32(l) != list && lists[l].count > most {
                    most = lists[l].count
                    from = Int32(l)
                }
            }
            if lists[Int(from)].count == 0 { from = list }
            if lists[Int(from)].count == 0 { from = 0 }  // every other type is pinned
            let candidate = Int(lists[Int(from)].oldest)
            if from != 0 && isRetained(slots[candidate].type.name) {
                unlinkFromList(candidate)
                linkInList(candidate, 0, newest: true)  // pinned: each slot once per retained spell
                continue
            }
            return candidate
        }
    }

    /// Looks at the oldest pinned type: still retained, it becomes the
    /// newest pinned; otherwise it goes back to its uid's list as its oldest.
    private func sweepPinned(_ isRetained: (String) -> Bool) {
        let i = Int(lists[0].oldest)
        guard i >= 0 else { return }
        unlinkFromList(i)
        if isRetained(slots[i].type.name) {
            linkInList(i, 0, newest: true)
        } else {
            linkInList(i, list(of: slots[i].owner), newest: false)
        }
    }

    /// The list of `uid`, made when it has none.
    private func list(of uid: UInt32) -> Int32 {
        if let l = listOfUID[uid] { return l }
        lists.append(OwnerList(uid: uid))
        let l = Int32(lists.count - 1)
        listOfUID[uid] = l
        return l
    }

    /// (issue 37) Types in the list of `uid` (for tests).
    func count(ownedBy uid: UInt32) -> Int { listOfUID[uid].map { lists[Int($0)].count } ?? 0 }

    /// (issue 37) Types pinned as retained (for tests).
    var pinnedCount: Int { lists[0].count }

    /// The slot of the type `name` if it has one (no slot is made).
    func existing(named name: String) -> Int? { byName[name].map(Int.init) }

    /// Counts a publish of the type `ref` names, makes it the newest and
    /// the type being routed (until `finishRouting`).
    /// - Returns: false when `ref` names no slot (nothing counted).
    /// - Parameter owner: the publisher's uid: the type moves to its list.
    @inline(__always)
    func notePublished(_ ref: Ref, owner: UInt32, seq: UInt64, wallNanoseconds: Int64) -> Bool {
        guard let i = index(ref) else { return false }
        let slot = slots + i
        slot.pointee.published &+= 1
        slot.pointee.lastSeq = seq
        slot.pointee.lastWallNanoseconds = wallNanoseconds
        if Int32(i) != state.pointee.newest {
            unlink(i)
            linkAsNewest(i)
            // Not the newest of all: maybe not of its uid's list either.
            moveToNewestInList(i, owner: owner)
        } else if slot.pointee.owner != owner || slot.pointee.list == 0 {
            moveToNewestInList(i, owner: owner)
        }
        state.pointee.routed = ref
        state.pointee.routedSlot = i
        return true
    }

    /// Adds the deliveries of the type being routed and ends its routing.
    @inline(__always)
    func finishRouting(delivered: UInt64) {
        guard state.pointee.routed != Self.none else { return }
        slots[state.pointee.routedSlot].delivered &+= delivered
        state.pointee.routed = Self.none
    }

    /// (1.3) Counts a request of `type` that took `seq` and makes its type the newest.
    func noteRequest(_ type: EventType, owner: UInt32, seq: UInt64, wallNanoseconds: Int64, isRetained: (String) -> Bool) {
        guard let i = index(ref(for: type, owner: owner, isRetained: isRetained)) else { return }
        slots[i].requests &+= 1
        slots[i].lastSeq = seq
        slots[i].lastWallNanoseconds = wallNanoseconds
        if Int32(i) != state.pointee.newest {
            unlink(i)
            linkAsNewest(i)
            moveToNewestInList(i, owner: owner)
        } else if slots[i].owner != owner || slots[i].list == 0 {
            moveToNewestInList(i, owner: owner)
        }
    }

    func addDelivered(_ count: UInt64, _ ref: Ref) {
        if let i = index(ref) { slots[i].delivered &+= count }
    }

    func addDropped(_ count: UInt64, _ ref: Ref) {
        if let i = index(ref) { slots[i].dropped &+= count }
    }

    /// Slot indexes from the newest to the oldest publish, while `body` returns true.
    func forEachByRecency(_ body: (Int) -> Bool) {
        var i = state.pointee.newest
        while i >= 0 {
            guard body(Int(i)) else { return }
            i = slots[Int(i)].older
        }
    }

    /// Makes slot `i` the newest of `owner`'s list (moving it there from
    /// another uid's list or the pinned one).
    @inline(never)
    private func moveToNewestInList(_ i: Int, owner: UInt32) {
        if slots[i].owner == owner && slots[i].list != 0 && lists[Int(slots[i].list)].newest == Int32(i) { return }
        unlinkFromList(i)
        slots[i].owner = owner
        linkInList(i, list(of: owner), newest: true)
    }

    private func unlinkFromList(_ i: Int) {
        let l = Int(slots[i].list)
        let newer = slots[i].listNewer, older = slots[i].listOlder
        if newer >= 0 { slots[Int(newer)].listOlder = older } else { lists[l].newest = older }
        if older >= 0 { slots[Int(older)].listNewer = newer } else { lists[l].oldest = newer }
        slots[i].listNewer = -1
        slots[i].listOlder = -1
        lists[l].count -= 1
        if l != 0 && lists[l].count == 0 { owners -= 1 }
    }

    private func linkInList(_ i: Int, _ list: Int32, newest: Bool) {
        let l = Int(list)
        slots[i].list = list
        if newest {
            slots[i].listOlder = lists[l].newest
            slots[i].listNewer = -1
            if lists[l].newest >= 0 { slots[Int(lists[l].newest)].listNewer = Int32(i) } else { lists[l].oldest = Int32(i) }
            lists[l].newest = Int32(i)
        } else {
            slots[i].listNewer = lists[l].oldest
            slots[i].listOlder = -1
            if lists[l].oldest >= 0 { slots[Int(lists[l].oldest)].listOlder = Int32(i) } else { lists[l].newest = Int32(i) }
            lists[l].oldest = Int32(i)
        }
        if l != 0 && lists[l].count == 0 { owners += 1 }
        lists[l].count += 1
    }

    private func unlink(_ i: Int) {
        let newer = slots[i].newer, older = slots[i].older
        if newer >= 0 { slots[Int(newer)].older = older } else if state.pointee.newest == Int32(i) { state.pointee.newest = older }
        if older >= 0 { slots[Int(older)].newer = newer } else if state.pointee.oldest == Int32(i) { state.pointee.oldest = newer }
        slots[i].newer = -1
        slots[i].older = -1
    }

    private func linkAsNewest(_ i: Int) {
        slots[i].older = state.pointee.newest
        slots[i].newer = -1
        if state.pointee.newest >= 0 { slots[Int(state.pointee.newest)].newer = Int32(i) }
        state.pointee.newest = Int32(i)
        if state.pointee.oldest < 0 { state.pointee.oldest = Int32(i) }
    }
}
