// When the broker gives freed heap memory back (BrokerServer+Memory.swift):
// HeapTrimmer's rules on the counted bytes it is shown once per loop turn.
import EventBusServer
import Testing

@Suite("Heap trimming after memory is released")
struct HeapTrimmerTests {
    static let second: Int64 = 1_000_000_000

    @Test func aFallOfReleaseBytesFromThePeakTrims() {
        var trimmer = HeapTrimmer()
        func observe(_ counted: Int, _ now: Int64) -> Bool { trimmer.observe(counted: counted, now: now) }
        #expect(!observe(40 << 20, 0))
        #expect(!observe(33 << 20, 1), "7 MiB of 40 given back: not yet")
        #expect(observe(32 << 20, 2), "8 MiB given back")
        #expect(trimmer.peak == 32 << 20)
    }

    @Test func aFallSpreadOverTwoTurnsIsTrimmedToTheEnd() {
        // 16 copies of 1 MB going over two loop turns (the flake this rule fixes):
        // the first trim at 8.4 MB given back, then 7.6 MB more falls to 0.
        var trimmer = HeapTrimmer()
        func observe(_ counted: Int, _ now: Int64) -> Bool { trimmer.observe(counted: counted, now: now) }
        let copy = 1_000_100
        #expect(!observe(16 * copy, 0))
        #expect(observe(7 * copy, 1))
        #expect(!observe(0, 2), "within the interval: held back")
        #expect(trimmer.dueAt == 1 + Self.second)
        #expect(observe(0, 1 + Self.second), "7 MB, all of what was left, given back")
        #expect(trimmer.dueAt == nil)
    }

    @Test func smallOrPartialFallsDoNotTrim() {
        var trimmer = HeapTrimmer()
        func observe(_ counted: Int, _ now: Int64) -> Bool { trimmer.observe(counted: counted, now: now) }
        #expect(!observe(1 << 20, 0))
        #expect(!observe(512 << 10, Self.second), "half, but under 1 MiB")
        var large = HeapTrimmer()
        func observeLarge(_ counted: Int, _ now: Int64) -> Bool { large.observe(counted: counted, now: now) }
        #expect(!observeLarge(6 << 20, 0))
        #expect(!observeLarge(4 << 20, Self.second), "2 MiB of 6: under half and under 8 MiB")
        #expect(observeLarge(3 << 20, 2 * Self.second), "half of the peak given back")
    }

    @Test func aTrimWaitsForTheIntervalAfterTheLastOne() {
        var trimmer = HeapTrimmer()
        func observe(_ counted: Int, _ now: Int64) -> Bool { trimmer.observe(counted: counted, now: now) }
        #expect(!observe(20 << 20, 0))
        #expect(observe(10 << 20, 10))
        #expect(!observe(30 << 20, 20))
        #expect(!observe(20 << 20, 30), "10 MiB of 30 given back within a second of the last trim")
        #expect(trimmer.dueAt == 10 + Self.second)
        #expect(!observe(25 << 20, 40), "no longer worth it: the due trim is dropped")
        #expect(trimmer.dueAt == nil)
    }
}
