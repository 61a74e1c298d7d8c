// (issue 37, item 7) A large frame that arrives over several reads is
// validated as its bytes come and answered from that scan (Broker+Scan.swift),
// with the answer a frame read whole gets; a small one, or one in a single
// read, is read whole as before.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Frames scanned as they arrive")
struct FrameScanTests {
    /// `frame` + LF fed in pieces of `piece` bytes; returns the replies queued.
    private func feed(_ h: BrokerHarness, _ c: Connection, _ frame: String, piece: Int) -> [Frame] {
        let bytes = utf8(frame + "\n")
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + piece)
            h.sendRaw(c, Array(bytes[offset..<end]))
            offset = end
        }
        return h.peek(c)
    }

    @Test func aLargeFrameInPiecesIsAnsweredFromItsScan() {
        let h = BrokerHarness()
        let c = h.connect()
        let big = #"{"op":"ping","x":["# + Array(repeating: String(repeating: "[", count: 100) + String(repeating: "]", count: 100), count: 400).joined(separator: ",") + #"],"req":1}"#
        let replies = feed(h, c, big, piece: 16 << 10)
        #expect(h.broker.scannedFrames == 1)
        #expect(replies.count == 1 && replies.first?.int("req") == 1 && replies.first?.op == "ok")
        #expect(c.input.scan == nil)
    }

    @Test func aBrokenLargeFrameGetsTheSameErrorAsWhole() {
        let bad = #"{"op":"ping","x":""# + String(repeating: "a", count: 40_000) + #"\q"}"#
        let scanned = BrokerHarness(), whole = BrokerHarness()
        let c1 = scanned.connect(), c2 = whole.connect()
        let a = feed(scanned, c1, bad, piece: 20_000)
        let b = feed(whole, c2, bad, piece: 1 << 20)
        #expect(scanned.broker.scannedFrames == 1 && whole.broker.scannedFrames == 0)
        #expect(a.map(\.raw) == b.map(\.raw) && a.count == 1)
    }

    @Test func smallFramesAndBlankLinesAreReadWhole() {
        let h = BrokerHarness()
        let c = h.connect()
        _ = feed(h, c, #"{"op":"ping","req":2}"#, piece: 5)
        _ = feed(h, c, String(repeating: " ", count: 40_000), piece: 16 << 10)  // blank: skipped, not scanned
        let replies = feed(h, c, #"{"op":"ping","req":3}"#, piece: 7)
        #expect(h.broker.scannedFrames == 0)
        #expect(replies.compactMap { $0.int("req") } == [2, 3])
    }
}
