// The broker's table of published types (EventTypeTable.swift): a type is
// found by its bytes as the type it is, whatever its length (the two words
// and the length identify types of up to 16 bytes, longer ones are compared
// in full), invalid and reserved bytes are refused, a full table replaces
// entries without ever answering with another type, and route lists follow
// every subscription change, through the broker. The publish verdict kept
// per type is one view's, and only an allowing one.
@testable import EventBusCore
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Event type table")
struct EventTypeTableTests {
    /// `entry(for:)` of `text`, and the type the entry holds.
    static func lookUp(_ table: inout EventTypeTable, _ text: String) -> EventType? {
        let bytes = utf8(text)
        return bytes.withUnsafeBytes { raw in table.entry(for: raw.bytes).map { table.type($0) } }
    }

    @Test("every length finds the type it is", arguments: [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 23, 24, 25, 40, 255])
    func everyLengthFindsItsType(_ length: Int) {
        var rng = SeededGenerator(seed: UInt64(length))
        var table = EventTypeTable(capacity: 4, seed: 7)
        let alphabet = Array("ab".utf8)  // two letters: many types share words
        var seen: [String] = []
        for _ in 0..<200 {
            let text = String(decoding: (0..<length).map { _ in alphabet[Int(rng.next() % 2)] }, as: UTF8.self)
            seen.append(text)
            for again in [text, seen[Int(rng.next() % UInt64(seen.count))]] {
                #expect(Self.lookUp(&table, again)?.name == again)
            }
        }
        #expect(table.count <= 4)
    }

    @Test("bytes that are no publishable type are refused", arguments: ["", "a..b", "a.*", "a.>", ".a", "a.", "é", "a b", "eventbus.x", "eventbus.a.b"])
    func refusesWhatIsNoType(_ text: String) {
        var table = EventTypeTable(capacity: 8, seed: 1)
        #expect(Self.lookUp(&table, text) == nil)
        #expect(table.count == 0)
    }

    @Test func aFullTableReplacesEntries() {
        var table = EventTypeTable(capacity: 1, seed: 3)
        for round in 0..<3 {
            for text in ["order.created", "order.paid", "x"] {
                #expect(Self.lookUp(&table, text)?.name == text, "round \(round)")
            }
        }
        #expect(table.count == 1)
    }

    @Test func routesFollowEverySubscriptionChange() {
        let h = BrokerHarness()
        let publisher = h.connect()
        let a = h.connect(), b = h.connect(), c = h.connect()
        var req = 0
        func delivered(_ type: String) -> Int? {
            req += 1
            h.send(publisher, #"{"op":"publish","req":\#(req),"type":"\#(type)"}"#)
            return h.read(publisher).last?.int("delivered")
        }
        h.send(a, #"{"op":"subscribe","type":"t.x"}"#)
        #expect(delivered("t.x") == 1)
        h.send(b, #"{"op":"subscribe","type":"t.x"}"#)
        #expect(delivered("t.x") == 2)
        h.send(c, #"{"op":"subscribe","type":"t.*"}"#)
        #expect(delivered("t.x") == 3)
        #expect(delivered("t.y") == 1)
        h.send(a, #"{"op":"unsubscribe","type":"t.x"}"#)
        #expect(delivered("t.x") == 2)
        h.close(c)
        #expect(delivered("t.x") == 1)
        #expect(delivered("t.y") == 0)
        h.close(b)
        #expect(delivered("t.x") == 0)
        for connection in [a, b, c] { _ = h.read(connection) }
        h.checkInvariants()
        h.closeAll()
    }

    @Test func anEscapedTypeAndAPlainOneAreTheSameType() {
        let h = BrokerHarness()
        let publisher = h.connect(), subscriber = h.connect()
        h.send(subscriber, #"{"op":"subscribe","type":"ab"}"#)
        h.send(publisher, #"{"op":"publish","type":"a\u0062","data":1}"#, #"{"op":"publish","type":"ab","data":2}"#)
        let events = h.read(subscriber).filter { $0.op == "event" }
        #expect(events.map(\.type) == ["ab", "ab"])
        h.closeAll()
    }

    @Test func aKeptPublishVerdictIsOneViewsAndDenialsAreAskedEveryTime() throws {
        let policy = try AccessPolicy.load([PolicySource(path: "p.conf", text: "deny publish system.>\nallow publish system.> user=0\n")], resolver: TableNameResolver(), brokerUID: 0)
        let h = BrokerHarness { $0.policy = policy }
        let root = h.connect(uid: 0), user = h.connect(uid: 1000), subscriber = h.connect(uid: 0)
        h.send(subscriber, #"{"op":"subscribe","type":"system.>"}"#)
        for round in 1...3 {
            // Allowed for root (its view kept), still denied for uid 1000, each time.
            h.send(root, #"{"op":"publish","req":\#(round),"type":"system.reboot"}"#)
            #expect(h.read(root).last?.int("delivered") == 1)
            h.send(user, #"{"op":"publish","req":\#(round),"type":"system.reboot"}"#)
            #expect(h.read(user).last?.code == "forbidden", "round \(round)")
        }
        #expect(h.read(subscriber).filter { $0.op == "event" }.count == 3)
        h.closeAll()
    }
}
