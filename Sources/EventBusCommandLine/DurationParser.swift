// The one DURATION parser of every executable (`eventbusd --exit-idle-time`,
// `--shutdown-timeout`; `eventbus listen --timeout`, `wait --timeout`,
// `ping --wait`): time spans as systemd.time(7) "Parsing time spans" reads
// them, so a value that works in a unit file works on our command lines.
//
// Before editing: the grammar is systemd's (checked against
// `systemd-analyze timespan` of systemd 252): components `NUMBER [UNIT]` added
// up, white space allowed around and between them, a bare number is seconds,
// units are case-sensitive (`m` is minutes, `M` months). Every example in the
// docs is run through this parser by a test (DocumentedDurationTests), and the
// table of good and bad inputs is DurationParserTests.

/// Parses a DURATION: one or more components `NUMBER [UNIT]`, added up
/// (systemd.time(7) "Parsing time spans").
///
/// `500ms`, `2s`, `5min`, `5m`, `1h30m`, `1h 30min`, `2 min`, `1.5s`, `.5s`,
/// `1d`, `2weeks`, `30` (plain numbers are seconds), `0`. NUMBER is decimal
/// digits with an optional fraction (`1.5`, `.5`; not `5.` or `1e3`). UNIT is
/// one of `us`/`usec`/`µs`, `ms`/`msec`, `s`/`sec`/`second`/`seconds`,
/// `m`/`min`/`minute`/`minutes`, `h`/`hr`/`hour`/`hours`, `d`/`day`/`days`,
/// `w`/`week`/`weeks`, `M`/`month`/`months` (30.44 days),
/// `y`/`year`/`years` (365.25 days).
///
/// Not accepted (systemd refuses them too): a sign, exponents, commas, units
/// in other cases (`5S`, `1Min`); systemd's `infinity` is not accepted either,
/// since no option here has a use for it.
/// - Parameter text: the value as given on the command line.
/// - Returns: the span, exact to the nanosecond (finer fractions are dropped).
/// - Throws: `ValueError` (kind `"duration"`) naming the problem: `.empty`,
///   `.negative`, `.missingNumber` (`s`), `.unknownUnit` (`5x`),
///   `.malformedNumber` (`5.`), `.unexpectedCharacter` (`1,5s`), or
///   `.tooLarge` beyond `maxDuration` (100 years).
package func parseDuration(_ text: String) throws(ValueError) -> Duration {
    var syntax = DurationSyntax(text)
    return .nanoseconds(try syntax.parse())
}

/// The longest DURATION accepted: 100 years (of 365.25 days). Far beyond any
/// timeout, and small enough that `now + span` on CLOCK_MONOTONIC (as
/// nanoseconds in an Int64) can never overflow.
package let maxDuration: Duration = .seconds(100 * 31_557_600)

/// Examples shown in every error message about a DURATION.
package let durationExamples = "10, 500ms, 30s, 5min, 1h30m, 2d"

extension Duration {
    /// The duration in whole nanoseconds (finer parts dropped), saturating at
    /// `Int64.max` and `Int64.min`; exact for everything `parseDuration` returns.
    package var totalNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflowAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflowAgain { return seconds < 0 ? .min : .max }
        return sum
    }
}

/// A duration as systemd displays a time span (systemd.time(7) "Displaying
/// time spans"), which `parseDuration` reads back unchanged: `"2s"`,
/// `"500ms"`, `"1h 30min"`, `"0"`. Negative durations are shown as `"0"`;
/// nanoseconds below a microsecond are shown as a fraction of `us`.
package func durationText(_ duration: Duration) -> String {
    var rest = max(duration.totalNanoseconds, 0)
    if rest == 0 { return "0" }
    var parts: [String] = []
    for (name, length) in [("d", 86_400_000_000_000 as Int64), ("h", 3_600_000_000_000), ("min", 60_000_000_000),
                           ("s", 1_000_000_000), ("ms", 1_000_000)] where rest >= length {
        parts.append("\(rest / length)\(name)")
        rest %= length
    }
    if rest > 0 {
        let (microseconds, nanoseconds) = rest.quotientAndRemainder(dividingBy: 1_000)
        let fraction = nanoseconds == 0 ? "" : "." + String(String(nanoseconds + 1_000).dropFirst())
        parts.append("\(microseconds)\(fraction)us")
    }
    return parts.joined(separator: " ")
}

/// One parse of one DURATION text, scalar by scalar.
private struct DurationSyntax {
    let text: String
    let scalars: [Unicode.Scalar]
    var index = 0

    init(_ text: String) {
        self.text = text
        scalars = Array(text.unicodeScalars)
    }

    /// Unit names and their length in nanoseconds (systemd's table, src/basic/time-util.c).
    static let units: [String: Int64] = {
        let second: Int64 = 1_000_000_000
        var table: [String: Int64] = [:]
        for (names, nanoseconds) in [
            (["us", "usec", "\u{B5}s", "\u{3BC}s"], 1_000 as Int64),
            (["ms", "msec"], 1_000_000),
            (["s", "sec", "second", "seconds"], second),
            (["m", "min", "minute", "minutes"], 60 * second),
            (["h", "hr", "hour", "hours"], 3_600 * second),
            (["d", "day", "days"], 86_400 * second),
            (["w", "week", "weeks"], 604_800 * second),
            (["M", "month", "months"], 2_629_800 * second),
            (["y", "year", "years"], 31_557_600 * second),
        ] {
            for name in names { table[name] = nanoseconds }
        }
        return table
    }()

    func failure(_ problem: ValueError.Problem) -> ValueError {
        ValueError(kind: "duration", value: text, problem: problem, examples: durationExamples)
    }

    static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r"
    }

    static func isDigit(_ scalar: Unicode.Scalar) -> Bool { scalar >= "0" && scalar <= "9" }

    mutating func skipSpace() {
        while index < scalars.count && Self.isSpace(scalars[index]) { index += 1 }
    }

    /// Takes the longest run of scalars satisfying `belongs`.
    mutating func take(while belongs: (Unicode.Scalar) -> Bool) -> String {
        var taken = String.UnicodeScalarView()
        while index < scalars.count && belongs(scalars[index]) {
            taken.append(scalars[index])
            index += 1
        }
        return String(taken)
    }

    mutating func parse() throws(ValueError) -> Int64 {
        let limit = maxDuration.totalNanoseconds
        var total: Int64 = 0
        skipSpace()
        guard index < scalars.count else { throw failure(.empty) }
        while index < scalars.count {
            if scalars[index] == "-" { throw failure(.negative) }
            let number = take { Self.isDigit($0) || $0 == "." }
            if number.isEmpty {
                let word = take { $0.properties.isAlphabetic }
                if !word.isEmpty { throw failure(.missingNumber(before: word)) }
                throw failure(.unexpectedCharacter(Character(scalars[index])))
            }
            skipSpace()
            let unitName = take { $0.properties.isAlphabetic }
            var unit: Int64 = 1_000_000_000
            if !unitName.isEmpty {
                guard let known = Self.units[unitName] else { throw failure(.unknownUnit(unitName)) }
                unit = known
            }
            let component = try nanoseconds(of: number, unit: unit, limit: limit)
            total += component  // both at most `limit`, far below Int64.max / 2
            guard total <= limit else { throw failure(.tooLarge(limit: "100 years")) }
            skipSpace()
        }
        return total
    }

    /// `number` (digits with at most one `.`) times `unit`, exact to the
    /// nanosecond as systemd computes it: each fraction digit is worth a tenth
    /// of the one before.
    func nanoseconds(of number: String, unit: Int64, limit: Int64) throws(ValueError) -> Int64 {
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, !(parts.count == 2 && parts[1].isEmpty), !(parts[0].isEmpty && parts.count == 1) else {
            throw failure(.malformedNumber(number))
        }
        var whole: Int64 = 0
        for digit in parts[0].utf8 {
            let (times10, overflow) = whole.multipliedReportingOverflow(by: 10)
            guard !overflow, times10 <= limit else { throw failure(.tooLarge(limit: "100 years")) }
            whole = times10 + Int64(digit - 0x30)
        }
        let (scaled, overflow) = whole.multipliedReportingOverflow(by: unit)
        guard !overflow, scaled <= limit else { throw failure(.tooLarge(limit: "100 years")) }
        var result = scaled
        if parts.count == 2 {
            var place = unit
            for digit in parts[1].utf8 {
                place /= 10
                if place == 0 { break }
                result += Int64(digit - 0x30) * place
            }
        }
        guard result <= limit else { throw failure(.tooLarge(limit: "100 years")) }
        return result
    }
}
