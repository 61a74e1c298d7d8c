// Denials are logged once per (uid, rule) per minute (issue 16), so an
// attacker who repeats a forbidden request cannot flood the journal, and one
// who varies what is denied cannot grow the broker's memory.
//
// Before editing: pure and O(1) per call: time comes in as an argument, keys
// live in two windows (this interval and the one before) that rotate, and a
// window holds at most `capacity` keys; beyond that, denials are summed in
// one overflow line per interval.

/// Says whether to log a denial now.
///
/// Example:
/// ```
/// var limiter = DenialLogLimiter()
/// if case .log(let suppressed) = limiter.admit(uid: 1000, origin: verdict.origin, nowNanoseconds: monotonic) {
///     log("publish system.x denied ... (\(suppressed) more since the last line)")
/// }
/// ```
package struct DenialLogLimiter: Sendable {
    /// What to do with one denial.
    package enum Decision: Equatable, Sendable {
        /// Log it; `suppressed` denials of the same (uid, rule) went unlogged since its last line.
        case log(suppressed: Int)
        /// Log one line for denials of keys that did not fit: `count` of them
        /// (this one included) since the last such line.
        case logOverflow(count: Int)
        /// Do not log.
        case suppress
    }

    private struct Key: Hashable {
        var uid: UInt32
        var origin: Int32
    }

    private struct Entry {
        var loggedAt: Int64
        var suppressed: Int
    }

    /// Nanoseconds between two lines for one key (default 60 s).
    package let intervalNanoseconds: Int64
    /// Keys per window at most.
    package let capacity: Int
    private var current: [Key: Entry] = [:]
    private var previous: [Key: Entry] = [:]
    private var windowStart: Int64? = nil
    private var overflowLoggedAt: Int64? = nil
    private var overflowCount = 0

    /// - Parameters:
    ///   - intervalNanoseconds: at most one line per key per this long (60 s).
    ///   - capacity: keys per window (4096); beyond, one overflow line per interval.
    package init(intervalNanoseconds: Int64 = 60_000_000_000, capacity: Int = 4096) {
        precondition(intervalNanoseconds > 0 && capacity > 0)
        self.intervalNanoseconds = intervalNanoseconds
        self.capacity = capacity
    }

    /// Keys remembered (both windows), for tests of the bound.
    package var rememberedKeys: Int { current.count + previous.count }

    /// Records a denial of `uid` by the rule `origin` (a `PolicyVerdict.origin`).
    /// - Parameter nowNanoseconds: CLOCK_MONOTONIC, never decreasing.
    package mutating func admit(uid: UInt32, origin: Int32, nowNanoseconds now: Int64) -> Decision {
        rotate(now)
        let key = Key(uid: uid, origin: origin)
        if var entry = current[key] ?? previous[key] {
            if now - entry.loggedAt < intervalNanoseconds {
                entry.suppressed += 1
                store(key, entry)
                return .suppress
            }
            let suppressed = entry.suppressed
            store(key, Entry(loggedAt: now, suppressed: 0))
            return .log(suppressed: suppressed)
        }
        guard current.count < capacity else {
            overflowCount += 1
            if let last = overflowLoggedAt, now - last < intervalNanoseconds { return .suppress }
            overflowLoggedAt = now
            defer { overflowCount = 0 }
            return .logOverflow(count: overflowCount)
        }
        current[key] = Entry(loggedAt: now, suppressed: 0)
        return .log(suppressed: 0)
    }

    /// Keeps an entry in the current window (moving it out of the previous one).
    private mutating func store(_ key: Key, _ entry: Entry) {
        if current[key] != nil || current.count < capacity {
            current[key] = entry
            previous[key] = nil
        } else {
            previous[key] = entry
        }
    }

    /// Starts a new window once the current one is an interval old; entries
    /// two windows old are older than an interval and are forgotten.
    private mutating func rotate(_ now: Int64) {
        guard let start = windowStart else { windowStart = now; return }
        guard now - start >= intervalNanoseconds else { return }
        if now - start >= 2 * intervalNanoseconds {
            previous.removeAll()
        } else {
            previous = current
        }
        current.removeAll(keepingCapacity: true)
        windowStart = now
    }
}
