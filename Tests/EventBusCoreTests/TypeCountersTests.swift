// The per-type counters (TypeCounters.swift, PROTOCOL.md "Per-type counters
// (1.2)"): at most `capacity` types, the least recently published forgotten
// first, a forgotten type published again starting from 0, and a kept `Ref`
// (an `EventTypeTable` entry's, a queued event's) finding nothing once its
// slot went to another type. Through the broker: a full table of counters
// in a small broker, and counts that agree with `stats`.
@testable import EventBusCore
import EventBusProtocol
import Foundation
import Testing

@Suite("Per-type counters")
struct TypeCountersTests {
    static func type(_ name: String) -> EventType { EventType(name)! }

    @Test func theLeastRecentlyPublishedTypeIsForgottenFirst() {
        let counters = TypeCounters(capacity: 3)
        func publish(_ name: String, seq: UInt64) -> TypeCounters.Ref {
            let ref = counters.ref(for: Self.type(name))
            #expect(counters.notePublished(ref, seq: seq, wallNanoseconds: Int64(seq)))
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
        let c = counters.ref(for: Self.type("c"))
        _ = publish("e", seq: 6)
        #expect(counters.index(c) == nil)
        counters.addDropped(1, c)  // counted for no one
        let again = publish("c", seq: 7)
        #expect(counters.slot(counters.index(again)!).published == 1 && counters.slot(counters.index(again)!).dropped == 0)
        #expect(counters.index(TypeCounters.none) == nil)
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
