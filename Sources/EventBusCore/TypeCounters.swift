// Per-type counters (PROTOCOL.md "Per-type counters (1.2)", issue 21): for
// each event type published in this broker run, how many events were
// published, queued to subscribers and dropped, and the last seq and time;
// at most `capacity` types (65,536), the least recently published forgotten
// first. The `types` op reads them (Broker+Types.swift).
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
import EventBusProtocol

final class TypeCounters {
    /// A slot and its generation: `index | generation << 16`; 0 is no slot
    /// (generations start at 1 and skip 0).
    typealias Ref = UInt32
    static let none: Ref = 0
    /// Types tracked at most (PROTOCOL.md: 65,536; a `Ref` has 16 bits of index).
    static let defaultCapacity = 65_536

    /// One type's counters, and its place in the list by last publish.
    struct Slot {
        var type: EventType
        var published: UInt64 = 0
        /// Event frames of the type queued to subscribers (live routing).
        var delivered: UInt64 = 0
        /// Deliveries of the type dropped for any connection.
        var dropped: UInt64 = 0
        /// (1.3) Requests of the type that took a seq (PROTOCOL.md "Request/reply").
        var requests: UInt64 = 0
        var lastSeq: UInt64 = 0
        /// Wall clock of the last publish, ns since the epoch.
        var lastWallNanoseconds: Int64 = 0
        var generation: UInt16
        /// Neighbours in the recency list (-1: none).
        var newer: Int32 = -1
        var older: Int32 = -1
    }

    /// The mutable scalars, in memory of their own like the slots, so the
    /// publish path reads and writes plain memory (no exclusivity or
    /// copy-on-write checks of class or array storage).
    struct State {
        var count = 0
        /// Ends of the recency list: the last published, the least recently published.
        var newest: Int32 = -1
        var oldest: Int32 = -1
        /// The type being routed (`Broker.fanOut`), and its slot.
        var routed: Ref = TypeCounters.none
        var routedSlot = 0
    }

    /// `capacity` slots, the first `state.count` initialised. Reserved once:
    /// pages never written are never resident.
    private let slots: UnsafeMutablePointer<Slot>
    private let state: UnsafeMutablePointer<State>
    private var byName: [String: Int32] = [:]
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

    /// The slot of `type`, found by name or made for it (taking the least
    /// recently published type's slot when all are used).
    func ref(for type: EventType) -> Ref {
        if let i = byName[type.name] { return ref(Int(i)) }
        let i: Int
        if state.pointee.count < capacity {
            i = state.pointee.count
            (slots + i).initialize(to: Slot(type: type, generation: 1))
            state.pointee.count += 1
            linkAsNewest(i)
        } else {
            i = Int(state.pointee.oldest)
            byName[slots[i].type.name] = nil
            var generation = slots[i].generation &+ 1
            if generation == 0 { generation = 1 }
            unlink(i)
            slots[i] = Slot(type: type, generation: generation)
            linkAsNewest(i)
        }
        byName[type.name] = Int32(i)
        return ref(i)
    }

    /// The slot of the type `name` if it has one (no slot is made).
    func existing(named name: String) -> Int? { byName[name].map(Int.init) }

    /// Counts a publish of the type `ref` names, makes it the newest and
    /// the type being routed (until `finishRouting`).
    /// - Returns: false when `ref` names no slot (nothing counted).
    @inline(__always)
    func notePublished(_ ref: Ref, seq: UInt64, wallNanoseconds: Int64) -> Bool {
        guard let i = index(ref) else { return false }
        let slot = slots + i
        slot.pointee.published &+= 1
        slot.pointee.lastSeq = seq
        slot.pointee.lastWallNanoseconds = wallNanoseconds
        if Int32(i) != state.pointee.newest {
            unlink(i)
            linkAsNewest(i)
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
    func noteRequest(_ type: EventType, seq: UInt64, wallNanoseconds: Int64) {
        guard let i = index(ref(for: type)) else { return }
        slots[i].requests &+= 1
        slots[i].lastSeq = seq
        slots[i].lastWallNanoseconds = wallNanoseconds
        if Int32(i) != state.pointee.newest {
            unlink(i)
            linkAsNewest(i)
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
