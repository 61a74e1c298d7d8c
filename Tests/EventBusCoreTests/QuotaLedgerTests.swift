// QuotaLedger (the broker's quota state, QuotaLedger.swift): the outbound
// fast-path bound only falls, a fair-share release takes off what it names
// and drops an entry once nothing is left, and a broker's ledger keeps its
// header's invariants through connections that queue, pause and go.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("QuotaLedger")
struct QuotaLedgerTests {
    @Test func theFastPathBoundIsLoweredNeverRaised() {
        var ledger = QuotaLedger(outboundFastPathBytes: 1000)
        ledger.noteOutboundLimit(nil)
        #expect(ledger.outboundFastPathBytes == 1000, "no limit: unchanged")
        ledger.noteOutboundLimit(5000)
        #expect(ledger.outboundFastPathBytes == 1000, "a higher limit does not raise it")
        ledger.noteOutboundLimit(400)
        #expect(ledger.outboundFastPathBytes == 400)
        ledger.noteOutboundLimit(700)
        #expect(ledger.outboundFastPathBytes == 400)
    }

    @Test func aReleaseTakesOffWhatItNamesAndDropsAnEmptiedEntry() {
        var shares: [UInt32: Int] = [1000: 300, 2000: 50]
        QuotaLedger.release(ActorCharge(actor: 1000, bytes: 100), from: &shares)
        #expect(shares == [1000: 200, 2000: 50])
        QuotaLedger.release(ActorCharge(actor: 1000, bytes: 200), from: &shares)
        #expect(shares == [2000: 50], "nothing left: the entry goes")
        QuotaLedger.release(ActorCharge(actor: 2000, bytes: 80), from: &shares)
        #expect(shares.isEmpty, "more than held releases all of it")
    }

    @Test func aBrokersLedgerStartsAtItsSmallestConfiguredLimit() {
        let h = BrokerHarness { $0.maxOutboundBytes = 9000; $0.maxQueuedBytes = 50_000; $0.quotas.maxOutboundBytesPerUID = 20_000 }
        #expect(h.broker.ledger.outboundFastPathBytes == 9000)
        let lower = BrokerHarness { $0.maxOutboundBytes = 9000; $0.quotas.maxOutboundBytesPerUID = 3000 }
        #expect(lower.broker.ledger.outboundFastPathBytes == 3000)
    }

    @Test func theLedgerKeepsItsInvariantsThroughAPausedUidAndItsClose() {
        // uid 2001's replies over its outbound limit pause it: one account
        // counted in `usersPausedForOutbound` until its connections are gone.
        let h = BrokerHarness { $0.quotas.maxOutboundBytesPerUID = 1000 }
        let publisher = h.connect(uid: 2001)
        let pings = String(repeating: #"{"op":"ping","req":12345}"# + "\n", count: 60)  // 25-byte replies
        h.sendRaw(publisher, utf8(pings))
        #expect(publisher.input.pauses.contains(.userOutbound))
        #expect(h.broker.ledger.usersPausedForOutbound == 1 && h.broker.ledger.accounts[2001]?.outboundPaused.count == 1)
        #expect(h.broker.ledger.released.isEmpty, "released charges are applied by the queue operation that handed them back")
        h.checkInvariants()
        h.closeAll()
        #expect(h.broker.ledger.usersPausedForOutbound == 0 && h.broker.ledger.accounts.isEmpty)
        #expect(h.broker.ledger.totals.inboundBytes == 0 && h.broker.ledger.totals.inboundUIDs == 0 && h.broker.ledger.totals.subscriptionBytes == 0)
    }
}
