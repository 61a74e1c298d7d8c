// The per-type counters (TypeCounters.swift, PROTOCOL.md "Per-type counters
// (1.2)"): at most `capacity` types, the least recently published forgotten
// first, a forgotten type published again starting from 0, and a kept `Ref`
// (an `EventTypeTable` entry's, a queued event's) finding nothing once its
// slot went to another type. Through the broker: a full table of counters
// in a small broker, and counts that agree with `stats`.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Foundation
import Testing

@Suite("Per-type counters")
struct TypeCountersTests {
    static func type(_ name: String) -> EventType { EventType(name)! }

    @Test func theLeastRecentlyPublishedTypeIsForgottenFirst() {
        let counters = TypeCounters(capacity: 3)
        func publish(_ name: String, seq: UInt64) -> TypeCounters.Ref {
            let ref = counters.ref(for: Self.type(name), owner: 0) { _ in false }
            #expect(counters.notePublished(ref, owner: 0, seq: seq, wallNanoseconds: Int64(seq)))
            counters.finishRouting(delivered: 0)
            return ref
        }
        let a = publish("a", seq: 1)
        _ = publish("b", seq: 2)
        _ = publish("c", seq: 3)
        _ = publish("a", seq: 4)  // a is the newest now: b is the oldest
        counters.addDelivered(5, a)
        _ = publish("d", seq: 5)
        var order: [String] = []
        counters.forEachByRecency { order.append(counters.slot($0).type.name); return true }
        #expect(order == ["d", "a", "c"])
        #expect(counters.existing(named: "b") == nil && counters.count == 3)
        let slotA = counters.slot(counters.index(a)!)
        #expect(slotA.published == 2 && slotA.delivered == 5 && slotA.lastSeq == 4)
        // c goes next; a Ref kept for it finds nothing, and c starts from 0 again.
        let c = counters.ref(for: Self.type("c"), owner: 0) { _ in false }
        _ = publish("e", seq: 6)
        #expect(counters.index(c) == nil)
        counters.addDropped(1, c)  // counted for no one
        let again = publish("c", seq: 7)
        #expect(counters.slot(counters.index(again)!).published == 1 && counters.slot(counters.index(again)!).dropped == 0)
        #expect(counters.index(TypeCounters.none) == nil)
    }

    /// (issue 37) Publishes `name` as `owner` into `counters`.
    @discardableResult
    static func publish(_ counters: TypeCounters, _ name: String, owner: UInt32, seq: UInt64, retained: Set<String> = []) -> TypeCounters.Ref {
        let ref = counters.ref(for: type(name), owner: owner) { retained.contains($0) }
        #expect(counters.notePublished(ref, owner: owner, seq: seq, wallNanoseconds: Int64(seq)))
        counters.finishRouting(delivered: 0)
        return ref
    }

    static func names(_ counters: TypeCounters) -> Set<String> {
        var names: Set<String> = []
        counters.forEachByRecency { names.insert(counters.slot($0).type.name); return true }
        return names
    }

    @Test("a uid publishing many types forgets only its own while the others are within their share")
    func aUIDForgetsOnlyItsOwnTypes() {
        let counters = TypeCounters(capacity: 8)
        var seq: UInt64 = 0
        func next() -> UInt64 { seq += 1; return seq }
        for name in ["r.a", "r.b", "r.c"] { Self.publish(counters, name, owner: 0, seq: next()) }
        let rootA = counters.ref(for: Self.type("r.a"), owner: 0) { _ in false }
        counters.addDelivered(7, rootA)
        // uid 1000 publishes 100 types: the table fills, then it forgets only its own.
        for n in 0..<100 { Self.publish(counters, "x.t\(n)", owner: 1000, seq: next()) }
        #expect(counters.count == 8)
        #expect(Self.names(counters).isSuperset(of: ["r.a", "r.b", "r.c"]), "root's types kept: \(Self.names(counters))")
        #expect(counters.count(ownedBy: 0) == 3 && counters.count(ownedBy: 1000) == 5)
        #expect(counters.slot(counters.index(rootA)!).delivered == 7, "root's counters kept")
        // Its newest five are the ones kept.
        #expect(Self.names(counters).isSuperset(of: (95..<100).map { "x.t\($0)" }))
        // Root below its share (8 / 2 = 4) takes the oldest of the uid holding the most.
        Self.publish(counters, "r.d", owner: 0, seq: next())
        #expect(counters.count(ownedBy: 0) == 4 && counters.count(ownedBy: 1000) == 4)
        #expect(!Self.names(counters).contains("x.t95"))
        // At its share, root forgets its own oldest.
        Self.publish(counters, "r.e", owner: 0, seq: next())
        #expect(counters.count(ownedBy: 0) == 4 && !Self.names(counters).contains("r.a"))
        #expect(Self.names(counters).isSuperset(of: ["r.b", "r.e"]) && counters.count(ownedBy: 1000) == 4)
    }

    @Test("more uids than slots: each new type takes the oldest of the largest holder, nothing traps")
    func moreUIDsThanSlots() {
        let counters = TypeCounters(capacity: 2)
        for uid in UInt32(0)..<6 { Self.publish(counters, "u.t\(uid)", owner: 1000 + uid, seq: UInt64(uid + 1)) }
        #expect(counters.count == 2 && Self.names(counters) == ["u.t4", "u.t5"])
    }

    @Test("a type published by another uid moves to that uid's share")
    func aTypeMovesToItsLastPublisher() {
        let counters = TypeCounters(capacity: 4)
        Self.publish(counters, "s.a", owner: 0, seq: 1)
        Self.publish(counters, "s.a", owner: 1000, seq: 2)
        #expect(counters.count(ownedBy: 0) == 0 && counters.count(ownedBy: 1000) == 1)
        Self.publish(counters, "s.a", owner: 0, seq: 3)
        #expect(counters.count(ownedBy: 0) == 1 && counters.count(ownedBy: 1000) == 0)
    }

    @Test("a retained type keeps its counters while retained, and is forgotten once it is not")
    func aRetainedTypeIsPinned() {
        let counters = TypeCounters(capacity: 4)
        var retained: Set<String> = ["k.kept"]
        let kept = Self.publish(counters, "k.kept", owner: 1000, seq: 1, retained: retained)
        counters.addDropped(3, kept)
        for n in 0..<20 { Self.publish(counters, "k.t\(n)", owner: 1000, seq: UInt64(2 + n), retained: retained) }
        #expect(counters.index(kept) != nil && counters.slot(counters.index(kept)!).dropped == 3)
        #expect(counters.pinnedCount == 1 && counters.count(ownedBy: 1000) == 3)
        retained = []
        // Unretained: the next eviction sends it back to its uid's list as the oldest, the one after forgets it.
        Self.publish(counters, "k.u0", owner: 1000, seq: 30, retained: retained)
        #expect(counters.pinnedCount == 0 && counters.index(kept) == nil, "back in its list as the oldest, then forgotten first")
    }

    @Test func aQueuedEventKeepsItsTypeInWhatWasPadding() {
        // entryOverheadBytes charges 32 bytes per queued frame: the type's Ref must not grow the entry.
        #expect(MemoryLayout<OutboundQueue.Entry>.stride == 32 && OutboundQueue.entryOverheadBytes == 32)
    }

    @Test("a broker with a full table of counters keeps the newest types and counts as stats does")
    func aFullBrokerTableKeepsTheNewest() {
        let h = BrokerHarness { $0.maxTrackedTypes = 4 }
        let publisher = h.connect(), subscriber = h.connect()
        h.send(subscriber, #"{"op":"subscribe","type":"n.>"}"#)
        for i in 0..<6 { h.send(publisher, #"{"op":"publish","type":"n.t\#(i)"}"#) }
        h.send(publisher, #"{"op":"publish","type":"n.t\u0035"}"#)  // escaped: found by name, the same type
        h.send(publisher, #"{"op":"publish","type":"n.t0"}"#)  // forgotten (t0 and t1 were the oldest): from 0 again
        h.send(publisher, #"{"op":"types","req":1}"#)
        let reply = h.read(publisher).last!
        let list = reply.array("types") as? [[String: Any]] ?? []
        #expect(list.compactMap { $0["type"] as? String } == ["n.t0", "n.t5", "n.t4", "n.t3"], "\(reply)")
        let published = list.compactMap { ($0["published"] as? NSNumber)?.intValue }
        #expect(published == [1, 2, 1, 1], "n.t0 was forgotten before it came back: it starts from 0")
        _ = h.read(subscriber)
        h.checkInvariants()
        h.closeAll()
    }
}
