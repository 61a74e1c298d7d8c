// RateLimitedLogSink: burst per key per interval, one summary line per suppressed run,
// warnings untouched, bounded keys, and exact counts under concurrent writers.
import EventBusLog
@testable import EventBusSystemd
import EventBusSystem
import Synchronization
import Testing

/// Records what reaches it.
final class CapturingSink: LogSink {
    struct Entry: Equatable {
        var level: LogLevel
        var message: String
        var fields: [String]
    }

    private let entries = Mutex<[Entry]>([])

    func write(level: LogLevel, message: String, fields: [(String, String)]) {
        entries.withLock { $0.append(Entry(level: level, message: message, fields: fields.map { "\($0.0)=\($0.1)" })) }
    }

    var messages: [String] { entries.withLock { $0.map(\.message) } }
    var all: [Entry] { entries.withLock { $0 } }
}

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let base = ContinuousClock.now
    private let offset = Mutex(Duration.zero)

    func now() -> ContinuousClock.Instant { base + offset.withLock { $0 } }
    func advance(by duration: Duration) { offset.withLock { $0 += duration } }
}

@Suite struct RateLimitedLogSinkTests {
    let capture = CapturingSink()
    let clock = ManualClock()

    func makeSink(burst: Int = 3, maxKeys: Int = 256) -> RateLimitedLogSink {
        let clock = self.clock
        return RateLimitedLogSink(wrapping: capture, burst: burst, interval: .seconds(10), maxKeys: maxKeys, now: { clock.now() })
    }

    @Test func burstPassesThenOneSummaryLineWhenTheIntervalEnds() {
        let sink = makeSink()
        for conn in 1...10 { sink.write(level: .notice, message: "slow consumer", fields: [("EVENTBUS_CONN", "\(conn)")]) }
        #expect(capture.all.map(\.fields) == [["EVENTBUS_CONN=1"], ["EVENTBUS_CONN=2"], ["EVENTBUS_CONN=3"]])
        clock.advance(by: .seconds(9))
        sink.write(level: .notice, message: "slow consumer", fields: [])
        #expect(capture.messages.count == 3)
        clock.advance(by: .seconds(1))
        sink.write(level: .notice, message: "slow consumer", fields: [("EVENTBUS_CONN", "99")])
        #expect(capture.all.suffix(2) == [
            .init(level: .notice, message: "suppressed 8 messages like: slow consumer", fields: ["EVENTBUS_SUPPRESSED=8"]),
            .init(level: .notice, message: "slow consumer", fields: ["EVENTBUS_CONN=99"]),
        ])
    }

    @Test func messagesDifferingOnlyInNumbersShareAKey() {
        let sink = makeSink(burst: 2)
        for conn in 1...5 { sink.write(level: .notice, message: "connection \(conn) (pid \(conn * 100)) is a slow consumer", fields: []) }
        #expect(capture.messages == ["connection 1 (pid 100) is a slow consumer", "connection 2 (pid 200) is a slow consumer"])
        clock.advance(by: .seconds(10))
        sink.flush()
        #expect(capture.messages.last == "suppressed 3 messages like: connection # (pid #) is a slow consumer")
    }

    /// (attacker) One uid's lines of a kind never use up another uid's burst
    /// of the same kind: a local user cannot hide root's lines by repeating its own.
    @Test func eachUIDHasItsOwnBurst() {
        let sink = makeSink(burst: 2)
        for conn in 1...5 { sink.write(level: .notice, message: "connection \(conn) (pid 9) reached a limit", fields: [("EVENTBUS_UID", "4321")]) }
        sink.write(level: .notice, message: "connection 6 (pid 1) reached a limit", fields: [("EVENTBUS_UID", "0")])
        #expect(capture.messages == ["connection 1 (pid 9) reached a limit", "connection 2 (pid 9) reached a limit",
                                     "connection 6 (pid 1) reached a limit"])
        clock.advance(by: .seconds(10))
        sink.flush()
        #expect(capture.messages.last == "suppressed 3 messages like: uid 4321: connection # (pid #) reached a limit")
    }

    @Test(arguments: [("a1b22c333", "a#b#c#"), ("", ""), ("42", "#"), ("no digits", "no digits"), ("v1.2.3", "v#.#.#")])
    func keyReplacesDigitRunsWithHash(message: String, key: String) {
        #expect(rateLimitKey(message) == key)
    }

    @Test func keysAreLimitedSeparately() {
        let sink = makeSink(burst: 1)
        for _ in 0..<3 {
            sink.write(level: .debug, message: "connected", fields: [])
            sink.write(level: .notice, message: "limit reached", fields: [])
        }
        #expect(capture.messages == ["connected", "limit reached"])
    }

    @Test(arguments: [LogLevel.warning, .error])
    func warningsAndErrorsAreNeverLimited(level: LogLevel) {
        let sink = makeSink(burst: 1)
        for _ in 0..<50 { sink.write(level: level, message: "failed to accept connection", fields: []) }
        #expect(capture.messages.count == 50)
    }

    @Test func flushWritesSummariesOnlyForEndedWindows() {
        let sink = makeSink(burst: 1)
        for _ in 0..<4 { sink.write(level: .notice, message: "a", fields: []) }
        clock.advance(by: .seconds(5))
        for _ in 0..<3 { sink.write(level: .info, message: "b", fields: []) }
        sink.flush()
        #expect(capture.messages == ["a", "b"])
        clock.advance(by: .seconds(5))
        sink.flush()
        #expect(capture.messages == ["a", "b", "suppressed 3 messages like: a"])
        clock.advance(by: .seconds(5))
        sink.flush()
        sink.flush()
        #expect(capture.messages == ["a", "b", "suppressed 3 messages like: a", "suppressed 2 messages like: b"])
    }

    @Test func flushIncludingOpenWindowsWritesEveryPendingSummary() {
        let sink = makeSink(burst: 1)
        for _ in 0..<3 { sink.write(level: .notice, message: "a", fields: []) }
        sink.write(level: .notice, message: "b", fields: [])
        sink.flush(includingOpenWindows: true)
        #expect(capture.messages == ["a", "b", "suppressed 2 messages like: a"])
        // The windows are gone: the next message starts a fresh one.
        sink.write(level: .notice, message: "a", fields: [])
        #expect(capture.messages.last == "a")
    }

    @Test func summaryCarriesTheMostSevereSuppressedLevel() {
        let sink = makeSink(burst: 1)
        sink.write(level: .debug, message: "x", fields: [])
        sink.write(level: .debug, message: "x", fields: [])
        sink.write(level: .notice, message: "x", fields: [])
        clock.advance(by: .seconds(10))
        sink.flush()
        #expect(capture.all.last?.level == .notice)
    }

    @Test func keysBeyondMaxKeysShareOneBucket() {
        let sink = makeSink(burst: 2, maxKeys: 3)
        let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
        for word in words { sink.write(level: .notice, message: word, fields: []) }
        // Two keys of their own, then the shared bucket lets `burst` more through.
        #expect(capture.messages == ["alpha", "beta", "gamma", "delta"])
        clock.advance(by: .seconds(10))
        sink.flush()
        #expect(capture.messages.last == "suppressed 6 messages like: \(overflowKey)")
    }

    @Test func concurrentWritersGetExactCounts() async {
        let sink = makeSink(burst: 5)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<500 { sink.write(level: .notice, message: "flood", fields: []) }
                }
            }
        }
        #expect(capture.messages.count == 5)
        clock.advance(by: .seconds(10))
        sink.flush()
        #expect(capture.messages.last == "suppressed 3995 messages like: flood")
    }
}
