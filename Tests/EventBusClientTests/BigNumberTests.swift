// (issue 37) Values JSON allows but Foundation may not decode, against the
// real broker: a 5000-digit integer, 1e400 and a value nested 510 deep reach
// a raw stream byte for byte; a typed receiver that cannot decode one is told
// (`undecodable`) and counts it lost (`droppedLocally`, count 1, its seq):
// no event is skipped unseen.
@testable import EventBusClient
import EventBusTestSupport
import Foundation
import Testing

/// An event whose number field is an `Int`.
private struct BigCounted: BusEvent {
    static let eventType = "big.counted"
    var n: Int
}

@Suite struct BigNumberTests {
    static let hugeInteger = "9" + String(repeating: "0", count: 4999)
    static let deep = String(repeating: "[", count: 510) + "1" + String(repeating: "]", count: 510)

    @Test func everyValueReachesARawStreamAndAnUndecodableOneIsCountedLost() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(EventBus.Configuration(bus: .path(broker.socketPath), clientName: "big-numbers"))
        let notices = NoticeLog(bus)
        let raw = try bus.events(matching: "big.>")
        let typed = Log<Int>()
        let typedStream = bus.events(of: BigCounted.self)
        let consumer = Task { for try await change in typedStream { typed.append(change.event.n) } }
        try await bus.ping()

        let publisher = try RawClient(path: broker.socketPath)
        let values = [#"{"n":\#(Self.hugeInteger)}"#, #"{"n":1e400}"#, #"{"n":\#(Self.deep)}"#, #"{"n":-7}"#]
        var seqs: [UInt64] = []
        for (i, value) in values.enumerated() {
            let reply = try publisher.request(#"{"op":"publish","type":"big.counted","req":\#(i),"data":\#(value)}"#)
            seqs.append(UInt64(reply.seq ?? -1))
        }
        var got: [RawEvent] = []
        for try await event in raw {
            got.append(event)
            if got.count == values.count { break }
        }
        #expect(got.map { String(decoding: $0.data, as: UTF8.self) } == values, "every value, byte for byte")
        #expect(await eventually { typed.all == [-7] }, "the one that decodes: \(typed.all)")
        // The three that do not decode as Int: each told and counted lost, with its seq.
        let lost = await eventually {
            notices.log.all.compactMap { notice -> UInt64? in
                if case .droppedLocally(let pattern, 1, let seq) = notice, pattern == "big.counted" { return seq }
                return nil
            } == Array(seqs.prefix(3))
        }
        #expect(lost, "\(notices.log.all)")
        #expect(notices.log.all.filter { if case .undecodable = $0 { true } else { false } }.count == 3)
        // As Decimal and as text the huge integer is a value (Foundation's own limits, for the docs).
        let decimal = try? JSONDecoder().decode([String: Decimal].self, from: Data(values[0].utf8))
        let double = try? JSONDecoder().decode([String: Double].self, from: Data(values[1].utf8))
        print("big numbers: 5000-digit as Decimal: \(decimal.map { _ in "decoded" } ?? "refused"); 1e400 as Double: \(double.map { "\($0)" } ?? "refused")")
        consumer.cancel()
        publisher.close()
        bus.close()
        await broker.stop()
    }
}
