// Rate limiting in front of a log sink, so a flood of notices (slow-consumer drops,
// limit hits) cannot fill the journal.
//
// Before editing: decisions are made under the mutex, writes happen after unlocking,
// so a slow sink never blocks other threads' decisions and is never called re-entrantly
// with the lock held.
import EventBusLog
import EventBusSystem
import Synchronization

/// A `LogSink` that lets at most `burst` messages per key through in each `interval`
/// at `.notice`, `.info` and `.debug`, and passes `.warning` and `.error` untouched
/// (the same scheme as journald's `RateLimitIntervalSec=`/`RateLimitBurst=`,
/// `journald.conf(5)`, but per message key).
///
/// The key is the message text with every run of ASCII digits replaced by `#`, so
/// `connection 7 (pid 812) is a slow consumer` and `connection 9 (pid 90) is a slow consumer`
/// share the key `connection # (pid #) is a slow consumer`. A message with an
/// `EVENTBUS_UID` field is keyed by that uid too (`uid 4321: connection # ...`),
/// so each uid has its own burst: a local user who makes the broker log a
/// kind of line over and over uses up only its own (the threat model: no uid
/// hurts another, log lines included), never hides another uid's lines of the
/// same kind. When a key's interval ends with
/// messages suppressed, one line `suppressed 42 messages like: <key>`
/// (field `EVENTBUS_SUPPRESSED=42`) is written at
/// the next call of `write` or `flush()`; call `flush()` every few seconds (e.g. with
/// the STATUS refresh) and at shutdown to get it promptly. At most `maxKeys` keys are
/// tracked at once; messages with further keys share one bucket. Thread-safe
/// (`Synchronization.Mutex`).
package final class RateLimitedLogSink: LogSink {
    /// Messages per key let through in each interval.
    package let burst: Int
    /// The length of one rate-limit window.
    package let interval: Duration
    /// Distinct keys tracked at once (the bound on this sink's memory).
    package let maxKeys: Int

    private let sink: any LogSink
    private let now: @Sendable () -> ContinuousClock.Instant
    private let state = Mutex(State())

    /// - Parameters:
    ///   - sink: where messages that pass go.
    ///   - burst: messages per key per interval (default 10, at least 1).
    ///   - interval: the window length (default 10 s).
    ///   - maxKeys: keys tracked at once (default 256, at least 1).
    package convenience init(wrapping sink: any LogSink, burst: Int = 10, interval: Duration = .seconds(10), maxKeys: Int = 256) {
        self.init(wrapping: sink, burst: burst, interval: interval, maxKeys: maxKeys, now: { ContinuousClock.now })
    }

    /// As the public initialiser, with the clock given (for tests).
    init(wrapping sink: any LogSink, burst: Int, interval: Duration, maxKeys: Int,
         now: @escaping @Sendable () -> ContinuousClock.Instant) {
        precondition(burst >= 1 && maxKeys >= 1 && interval > .zero, "RateLimitedLogSink needs burst, maxKeys and interval > 0")
        self.sink = sink
        self.burst = burst
        self.interval = interval
        self.maxKeys = maxKeys
        self.now = now
    }

    package func write(level: LogLevel, message: String, fields: [(String, String)]) {
        let at = now()
        let (summaries, pass) = state.withLock { state in
            let summaries = state.expire(at: at, interval: interval)
            if level < .notice { return (summaries, true) }
            return (summaries, state.admit(rateLimitKey(message, fields: fields), level: level, at: at, interval: interval, burst: burst, maxKeys: maxKeys))
        }
        for summary in summaries { summary.write(to: sink) }
        if pass { sink.write(level: level, message: message, fields: fields) }
    }

    /// Writes the summary line of every window that has ended with messages suppressed.
    ///
    /// - Parameter includingOpenWindows: also close the windows still running and write
    ///   their summaries (at shutdown, so no count is lost); default false.
    package func flush(includingOpenWindows: Bool = false) {
        let at = now()
        let summaries = state.withLock { $0.expire(at: at, interval: includingOpenWindows ? .zero : interval) }
        for summary in summaries { summary.write(to: sink) }
    }
}

/// The rate-limit key of a message: `rateLimitKey(message)`, after `uid N: `
/// when `fields` has `EVENTBUS_UID` (each uid its own burst).
func rateLimitKey(_ message: String, fields: [(String, String)]) -> String {
    guard let uid = fields.first(where: { $0.0 == uidField })?.1 else { return rateLimitKey(message) }
    return "uid \(uid): " + rateLimitKey(message)
}

/// The journal field that names the uid a message is about.
let uidField = "EVENTBUS_UID"

/// `message` with each run of ASCII digits replaced by `#` (ids and counts vary; the text does not).
func rateLimitKey(_ message: String) -> String {
    var key: [UInt8] = []
    key.reserveCapacity(message.utf8.count)
    var inDigits = false
    for byte in message.utf8 {
        if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
            if !inDigits { key.append(UInt8(ascii: "#")) }
            inDigits = true
        } else {
            key.append(byte)
            inDigits = false
        }
    }
    return String(decoding: key, as: UTF8.self)
}

/// The key that messages share once `maxKeys` keys are tracked.
let overflowKey = "(other messages)"

/// One "suppressed N messages" line to write.
struct Suppression {
    var key: String
    var count: Int
    var level: LogLevel

    func write(to sink: any LogSink) {
        sink.write(level: level, message: "suppressed \(count) messages like: \(key)",
                   fields: [("EVENTBUS_SUPPRESSED", String(count))])
    }
}

/// Per-key windows; only touched under the sink's mutex.
private struct State {
    struct Window {
        var start: ContinuousClock.Instant
        var passed: Int
        var suppressed: Int
        /// The most severe level among suppressed messages.
        var level: LogLevel
    }

    var windows: [String: Window] = [:]
    /// The earliest instant at which some window ends (skip the scan before it).
    var nextEnd: ContinuousClock.Instant?

    /// Removes ended windows; returns the summaries of those that suppressed something.
    mutating func expire(at now: ContinuousClock.Instant, interval: Duration) -> [Suppression] {
        guard let end = nextEnd, now >= end || interval == .zero else { return [] }
        var summaries: [Suppression] = []
        var earliest: ContinuousClock.Instant?
        for (key, window) in windows {
            if now - window.start >= interval {
                windows[key] = nil
                if window.suppressed > 0 { summaries.append(Suppression(key: key, count: window.suppressed, level: window.level)) }
            } else if earliest.map({ window.start + interval < $0 }) ?? true {
                earliest = window.start + interval
            }
        }
        nextEnd = earliest
        return summaries.sorted { $0.key < $1.key }
    }

    /// Counts one message under `key`; returns whether it may be written.
    mutating func admit(_ key: String, level: LogLevel, at now: ContinuousClock.Instant,
                        interval: Duration, burst: Int, maxKeys: Int) -> Bool {
        let key = windows[key] != nil || windows.count < maxKeys - 1 ? key : overflowKey
        if var window = windows[key] {
            defer { windows[key] = window }
            if window.passed < burst {
                window.passed += 1
                return true
            }
            window.suppressed += 1
            window.level = min(window.level, level)
            return false
        }
        windows[key] = Window(start: now, passed: 1, suppressed: 0, level: level)
        if nextEnd.map({ now + interval < $0 }) ?? true { nextEnd = now + interval }
        return true
    }
}
