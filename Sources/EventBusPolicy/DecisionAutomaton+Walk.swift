// The per-event path of a decision: one pass over the type's bytes, hashing
// each segment as it is scanned, and one probe per segment into a flat
// open-addressing table of every edge of the automaton, until a state decides
// every continuation (under the shipped policy, at the first segment for any
// type outside `system.>`, `user.>` and `eventbus.>`). No allocation, no
// String hashing, no reference counting.
//
// Before editing: the table is built from the automaton's edge dictionaries,
// which stay the truth (the subscribe search and the tests use them); keep
// `EdgeTable.lookup` and `segmentHash` in step with `EdgeTable.init`. Measure
// with Benchmarks/eventbus-policy-bench. (issue 35) The bytes, the table and
// the states are read as spans; `[unchecked:]` only where the index was
// just compared with the span's count or is masked below the table's size.
@_spi(Package) import EventBusProtocol

/// Every `(state, literal) → state` edge in one table.
struct EdgeTable: Sendable {
    struct Slot: Sendable {
        /// -1: empty.
        var state: Int32 = -1
        var target: Int32 = 0
        var hash: UInt32 = 0
        var offset: Int32 = 0
        var length: Int32 = 0
    }

    private let slots: [Slot]
    private let mask: Int
    /// The literals' bytes, back to back.
    private let arena: [UInt8]

    init(edges: [[Substring: Int32]]) {
        let total = edges.reduce(0) { $0 + $1.count }
        var capacity = 8
        while capacity < total * 2 { capacity *= 2 }
        var slots = [Slot](repeating: Slot(), count: capacity)
        var arena: [UInt8] = []
        let mask = capacity - 1
        for (state, out) in edges.enumerated() {
            for (literal, target) in out {
                let bytes = Array(literal.utf8)
                let hash = EdgeTable.segmentHash(bytes.span)
                var i = EdgeTable.slot(state: Int32(state), hash: hash, mask: mask)
                while slots[i].state != -1 { i = (i + 1) & mask }
                slots[i] = Slot(state: Int32(state), target: target, hash: hash, offset: Int32(arena.count), length: Int32(bytes.count))
                arena += bytes
            }
        }
        self.slots = slots
        self.mask = mask
        self.arena = arena
    }

    /// FNV-1a (32 bits) of `bytes`; the walk computes the same while it
    /// scans for the dot.
    @inline(__always)
    static func segmentHash(_ bytes: Span<UInt8>) -> UInt32 {
        var h: UInt32 = 2_166_136_261
        for i in bytes.indices { h = (h ^ UInt32(bytes[unchecked: i])) &* 16_777_619 }
        return h
    }

    @inline(__always)
    static func slot(state: Int32, hash: UInt32, mask: Int) -> Int {
        Int(truncatingIfNeeded: (UInt64(hash) ^ (UInt64(UInt32(bitPattern: state)) &* 0x9E37_79B9_7F4A_7C15)) >> 7) & mask
    }

    /// The edge from `state` for the segment `bytes[start..<end]` of hash `hash`.
    @inline(__always)
    func lookup(_ state: Int32, _ bytes: Span<UInt8>, _ start: Int, _ end: Int, hash: UInt32) -> Int32? {
        let slots = self.slots.span
        var i = EdgeTable.slot(state: state, hash: hash, mask: mask)
        while true {
            let slot = slots[unchecked: i]  // masked: below the table's power-of-two size
            if slot.state == -1 { return nil }
            if slot.state == state && slot.hash == hash && Int(slot.length) == end - start && equal(slot, bytes, start) {
                return slot.target
            }
            i = (i + 1) & mask
        }
    }

    /// Whether the literal of `slot` is `bytes[start..<start + slot.length]`
    /// (the caller checked that the segment has that length).
    @inline(__always)
    private func equal(_ slot: Slot, _ bytes: Span<UInt8>, _ start: Int) -> Bool {
        let arena = self.arena.span
        var a = Int(slot.offset), b = start
        let end = a + Int(slot.length)
        while a < end {
            if arena[a] != bytes[b] { return false }
            a += 1
            b += 1
        }
        return true
    }
}

/// What the walk needs of a state, in one place.
struct StateSummary: Sendable {
    var other: Int32
    var end: PolicyVerdict
    /// Valid when `isUniform`.
    var uniform: PolicyVerdict
    var isUniform: Bool
}

extension DecisionAutomaton {
    /// The verdict for `type`: one probe per segment until a state decides
    /// every continuation.
    @inline(__always)
    func verdict(_ type: EventType) -> PolicyVerdict {
        // Not `utf8Span`: its getter is a call, where this is inlined.
        if let verdict = type.name.utf8.withContiguousStorageIfAvailable({ walk($0.span) }) { return verdict }
        let copy = Array(type.name.utf8)  // a bridged string; never in the broker
        return walk(copy.span)
    }

    @inline(__always)
    private func walk(_ bytes: Span<UInt8>) -> PolicyVerdict {
        let states = summaries.span
        var s: Int32 = 0
        var i = 0
        let count = bytes.count
        while true {
            let state = states[Int(s)]
            if state.isUniform { return state.uniform }
            let start = i
            var h: UInt32 = 2_166_136_261
            while i < count {
                let b = bytes[unchecked: i]  // below `count`, the span's
                if b == 0x2E { break }
                h = (h ^ UInt32(b)) &* 16_777_619
                i += 1
            }
            s = table.lookup(s, bytes, start, i, hash: h) ?? state.other
            if i >= count { return states[Int(s)].end }
            i += 1  // the dot
        }
    }
}
