// Unit tests of the client's flow control (PROTOCOL.md "Flow control (1.2)",
// DeliveryLedger.swift, FlowGate.swift): the bus's buffer of waiting events
// is bounded in events and bytes, a full buffer makes the reader wait until
// it is down to half, nothing is dropped for a consumer that keeps taking,
// and a stalled one loses events reported once, with a count. No sockets.
import Dispatch
@_spi(Package) import EventBusProtocol
import Testing
@testable import EventBus

@Suite struct FlowLedgerTests {
    final class Registration {}
    /// Kept alive so the two identifiers differ.
    let registrations = (Registration(), Registration())
    var a: ObjectIdentifier { ObjectIdentifier(registrations.0) }
    var b: ObjectIdentifier { ObjectIdentifier(registrations.1) }
    let second: Int64 = 1_000_000_000

    @Test func aFullBufferMakesTheReaderWaitUntilItIsDownToHalf() {
        var ledger = DeliveryLedger(maxEvents: 4, maxBytes: 1 << 20, stallNanoseconds: second)
        for seq in 1...3 { let got = ledger.admit(a, pattern: "t", cost: 10, seq: UInt64(seq), now: 0); #expect(got == .queue) }
        do { let got = ledger.readerMustWait(); #expect(!got, "3 of 4: the reader reads on") }
        do { let got = ledger.admit(a, pattern: "t", cost: 10, seq: 4, now: 0); #expect(got == .queue) }
        do { let got = ledger.readerMustWait(); #expect(got && ledger.readerWaiting) }
        do { let got = ledger.took(a, cost: 10, now: 1); #expect(got.wakeReader == false, "3 left: above half") }
        do { let got = ledger.readerMustWait(); #expect(got, "still waiting above half, not at the limit minus one") }
        do { let got = ledger.took(a, cost: 10, now: 2); #expect(got.wakeReader == true, "2 left: half") }
        do { let got = ledger.readerMustWait(); #expect(!got && ledger.events == 2 && ledger.bytes == 20) }
    }

    @Test func theByteLimitCountsToo() {
        var ledger = DeliveryLedger(maxEvents: 1000, maxBytes: 1000, stallNanoseconds: second)
        do { let got = ledger.admit(a, pattern: "t", cost: 600, seq: 1, now: 0); #expect(got == .queue) }
        do { let got = ledger.readerMustWait(); #expect(!got) }
        do { let got = ledger.admit(b, pattern: "u", cost: 400, seq: 2, now: 0); #expect(got == .queue) }
        do { let got = ledger.readerMustWait(); #expect(got, "1000 bytes over two registrations: full") }
        do { let got = ledger.took(a, cost: 600, now: 1); #expect(got.wakeReader) }
        #expect(ledger.bytes == 400)
        #expect(DeliveryLedger.cost(of: RawEvent(metadata: metadata(seq: 1), data: Array("[1,2]".utf8))) == 5 + 128)
    }

    @Test func aConsumerThatKeepsTakingLosesNothingHoweverLongTheReaderWaits() {
        var ledger = DeliveryLedger(maxEvents: 2, maxBytes: 1 << 20, stallNanoseconds: second)
        var seq: UInt64 = 0
        var now: Int64 = 0
        for _ in 0..<1000 {
            while !ledger.readerMustWait() {
                seq += 1
                do { let got = ledger.admit(a, pattern: "t", cost: 1, seq: seq, now: now); #expect(got == .queue) }
            }
            do { let got = ledger.markStalled(now: now); #expect(got != nil, "a deadline to look at again") }
            now += second / 2  // one event every half stall timeout: slow, but steady
            do { let got = ledger.took(a, cost: 1, now: now); #expect(got.loss == nil) }
            _ = ledger.markStalled(now: now)
        }
        #expect(!ledger.isBehind(a) && seq >= 1000)
    }

    @Test func aStalledConsumerFallsBehindOnceAndItsLossIsOneNoticeWithACount() {
        var ledger = DeliveryLedger(maxEvents: 3, maxBytes: 1 << 20, stallNanoseconds: second)
        for seq in 1...2 { _ = ledger.admit(a, pattern: "slow.>", cost: 1, seq: UInt64(seq), now: 0) }
        _ = ledger.admit(b, pattern: "fast", cost: 1, seq: 3, now: 0)
        do { let got = ledger.readerMustWait(); #expect(got) }
        do { let got = ledger.took(b, cost: 1, now: second / 2); #expect(got.wakeReader == false, "2 left of 3: above half") }
        do { let got = ledger.markStalled(now: second - 1); #expect(got == second, "a's deadline: 1 s after its queue filled") }
        #expect(!ledger.isBehind(a))
        do { let got = ledger.markStalled(now: second); #expect(got == nil, "a is behind: its 2 stop counting, the reader reads on") }
        #expect(ledger.isBehind(a) && !ledger.isBehind(b) && !ledger.readerWaiting && ledger.events == 0)
        for seq in 4...53 { let got = ledger.admit(a, pattern: "slow.>", cost: 1, seq: UInt64(seq), now: second); #expect(got == .drop) }
        do { let got = ledger.admit(b, pattern: "fast", cost: 1, seq: 54, now: second); #expect(got == .queue, "the others are served") }
        do { let got = ledger.took(a, cost: 1, now: 2 * second); #expect(got.loss == nil, "one still queued: the run goes on") }
        let loss = ledger.took(a, cost: 1, now: 2 * second).loss
        #expect(loss == LocalLoss(pattern: "slow.>", count: 50, sinceSeq: 4), "one report for the run")
        #expect(!ledger.isBehind(a))
        do { let got = ledger.admit(a, pattern: "slow.>", cost: 1, seq: 55, now: 2 * second); #expect(got == .queue) }
        #expect(ledger.events == 2)
    }

    @Test func closingARegistrationStopsCountingItsQueueAndReportsAnUnfinishedLoss() {
        var ledger = DeliveryLedger(maxEvents: 2, maxBytes: 1 << 20, stallNanoseconds: 0)
        _ = ledger.admit(a, pattern: "t", cost: 5, seq: 1, now: 0)
        _ = ledger.admit(a, pattern: "t", cost: 5, seq: 2, now: 0)
        do { let got = ledger.readerMustWait(); #expect(got) }
        _ = ledger.markStalled(now: 0)
        #expect(ledger.isBehind(a))
        _ = ledger.admit(a, pattern: "t", cost: 5, seq: 3, now: 0)
        do { let got = ledger.close(a); #expect(got.loss == LocalLoss(pattern: "t", count: 1, sinceSeq: 3)) }
        #expect(ledger.events == 0 && ledger.bytes == 0 && ledger.queued(a) == 0)
        _ = ledger.admit(b, pattern: "u", cost: 5, seq: 4, now: 0)
        let closed = ledger.close(b)
        #expect(!closed.wakeReader && closed.loss == nil && ledger.events == 0)
        do { let got = ledger.took(b, cost: 5, now: 1); #expect(got.wakeReader == false, "a late take of a closed registration changes nothing") }
        #expect(ledger.events == 0 && ledger.bytes == 0)
    }

    /// A sink on a gate of 100 events, its consumer the test: 300 events
    /// handed over at once are all queued (the bound makes the reader stop,
    /// it never drops), and taking them frees the gate.
    @Test func aSinkQueuesPastTheLimitWithoutDroppingAndTakingFreesTheGate() async {
        let gate = FlowGate(maxEvents: 100, maxBytes: 1 << 30, stallTimeout: .seconds(3600), wake: DispatchSemaphore(value: 0))
        let notices = Locked<[BusNotice]>([])
        gate.noticeTarget.withLock { $0 = { notice in notices.withLock { $0.append(notice) } } }
        let (sink, stream) = Sink<UInt64>.make(flow: gate, pattern: "t", transform: { raw throws(EventBusError) in raw.metadata.seq })
        for seq in 1...300 { #expect(sink.deliver(RawEvent(metadata: metadata(seq: UInt64(seq)), data: [0x31])) == .delivered) }
        #expect(gate.readerWait(longest: 10) != nil, "full: the reader would wait")
        var taken: [UInt64] = []
        for await item in stream {
            guard case .value(let seq) = item else { continue }
            taken.append(seq)
            if taken.count == 250 { break }
        }
        #expect(taken == Array(1...250))
        #expect(gate.readerWait(longest: 10) == nil && gate.ledger.withLock { $0.events } == 50)
        sink.finish(nil, discardQueued: true)
        #expect(gate.ledger.withLock { $0.events } == 0 && notices.withLock { $0 }.isEmpty)
    }

    /// Through the gate: a stalled sink's loss arrives as one notice.
    @Test func theGateSendsOneNoticeForAStalledSinksRun() async {
        let gate = FlowGate(maxEvents: 10, maxBytes: 1 << 30, stallTimeout: .zero, wake: DispatchSemaphore(value: 0))
        let notices = Locked<[BusNotice]>([])
        gate.noticeTarget.withLock { $0 = { notice in notices.withLock { $0.append(notice) } } }
        let (sink, stream) = Sink<UInt64>.make(flow: gate, pattern: "t.>", transform: { raw throws(EventBusError) in raw.metadata.seq })
        for seq in 1...10 { _ = sink.deliver(RawEvent(metadata: metadata(seq: UInt64(seq)), data: [0x31])) }
        #expect(gate.readerWait(longest: 10) == nil, "stall timeout 0: behind at once, the reader reads on")
        for seq in 11...1010 { #expect(sink.deliver(RawEvent(metadata: metadata(seq: UInt64(seq)), data: [0x31])) == .droppedBehind) }
        var taken = 0
        for await _ in stream {
            taken += 1
            if taken == 10 { break }
        }
        #expect(notices.withLock { $0 } == [.droppedLocally(pattern: "t.>", count: 1000, sinceSeq: 11)])
        #expect(sink.deliver(RawEvent(metadata: metadata(seq: 1011), data: [0x31])) == .delivered, "caught up: served again")
    }

    func metadata(seq: UInt64) -> EventMetadata {
        EventMetadata(type: "t.a", seq: seq, time: "2026-12-01T00:00:00.000Z", source: "s", id: "i", pid: 1, uid: 1, gid: 1, isLocal: false)
    }
}
