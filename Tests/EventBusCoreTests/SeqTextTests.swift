// SeqText (the broker's kept seq digits, EventWriter.swift): every seq it is asked for, one
// more than the last, the same again or any jump, reads as its decimal text.
@testable import EventBusCore
import Testing

@Suite("SeqText")
struct SeqTextTests {
    static func read(_ text: inout SeqText, _ seq: UInt64) -> String {
        String(decoding: text.text(for: seq), as: UTF8.self)
    }

    @Test func consecutiveSeqsCarryAcrossEveryDigitCount() {
        var text = SeqText()
        var runs: [ClosedRange<UInt64>] = [1...1_050]
        var power: UInt64 = 10
        for _ in 1...19 {
            runs.append(power - 5...power + 5)  // the first of each run is a jump
            if power > UInt64.max / 10 { break }
            power *= 10
        }
        for run in runs {
            for seq in run {
                let got = Self.read(&text, seq)
                if got != String(seq) {
                    Issue.record("seq \(seq) read as \(got)")
                    return
                }
            }
        }
    }

    @Test(arguments: [
        [UInt64(5), 5, 6, 4, 1_000, 999, 1_000, 1_001],
        [9, 10, 99, 100, 101, 100, 0, 1],
        [UInt64.max - 1, UInt64.max, UInt64.max, 7, 8],
        [1, 3, 4, 9_999_999, 10_000_000, 10_000_001],
    ])
    func repeatsAndJumpsAreFormattedInFull(seqs: [UInt64]) {
        var text = SeqText()
        for seq in seqs { #expect(Self.read(&text, seq) == String(seq)) }
    }
}
