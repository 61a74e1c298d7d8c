// TimestampFormatter (PROTOCOL.md "Events": `time` is RFC 3339 UTC with
// millisecond precision) against known instants, and against Foundation's
// Gregorian calendar for seeded random instants over the whole Int64 range.
@_spi(Package) @testable import EventBusProtocol
import Foundation
import Testing

@Suite("Timestamps")
struct TimestampTests {
    static let second: Int64 = 1_000_000_000
    static let millisecond: Int64 = 1_000_000

    static let known: [(Int64, String)] = [
        (0, "1970-01-01T00:00:00.000Z"),
        (1, "1970-01-01T00:00:00.000Z"),
        (999_999, "1970-01-01T00:00:00.000Z"),
        (millisecond, "1970-01-01T00:00:00.001Z"),
        (999 * millisecond + 999_999, "1970-01-01T00:00:00.999Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (-millisecond, "1969-12-31T23:59:59.999Z"),
        (-millisecond - 1, "1969-12-31T23:59:59.998Z"),
        (-second, "1969-12-31T23:59:59.000Z"),
        (-second - 1, "1969-12-31T23:59:58.999Z"),
        (-86_400 * second, "1969-12-31T00:00:00.000Z"),
        (951_782_400 * second, "2000-02-29T00:00:00.000Z"),  // leap year divisible by 400
        (951_868_799 * second + 500 * millisecond, "2000-02-29T23:59:59.500Z"),
        (1_709_164_800 * second, "2024-02-29T00:00:00.000Z"),
        (4_107_456_000 * second, "2100-02-28T00:00:00.000Z"),
        (4_107_542_400 * second, "2100-03-01T00:00:00.000Z"),  // 2100 is not a leap year
        (-2_203_891_200 * second, "1900-03-01T00:00:00.000Z"),  // 1900 is not either
        (-2_203_891_201 * second, "1900-02-28T23:59:59.000Z"),
        (2_147_483_647 * second, "2038-01-19T03:14:07.000Z"),
        (1_795_957_200 * second + 123 * millisecond, "2026-11-29T13:00:00.123Z"),  // PROTOCOL.md's example
        (Int64.max, "2262-04-11T23:47:16.854Z"),
        (Int64.min, "1677-09-21T00:12:43.145Z"),
    ]

    @Test("formats known instants", arguments: known)
    func formatsKnownInstants(_ ns: Int64, _ expected: String) {
        var formatter = TimestampFormatter()
        #expect(formatter.string(nanosecondsSinceEpoch: ns) == expected)
        var out: [UInt8] = [1, 2, 3]
        formatter.format(nanosecondsSinceEpoch: ns, into: &out)
        #expect(out.count == 24)
        #expect(String(decoding: out, as: UTF8.self) == expected)
    }

    @Test func theCachedSecondIsReplacedWhenTheSecondChanges() {
        var formatter = TimestampFormatter()
        let base = 1_700_000_000 * Self.second
        #expect(formatter.string(nanosecondsSinceEpoch: base + 1) == "2023-11-14T22:13:20.000Z")
        #expect(formatter.string(nanosecondsSinceEpoch: base + 999 * Self.millisecond) == "2023-11-14T22:13:20.999Z")
        #expect(formatter.string(nanosecondsSinceEpoch: base + Self.second) == "2023-11-14T22:13:21.000Z")
        #expect(formatter.string(nanosecondsSinceEpoch: base - 1) == "2023-11-14T22:13:19.999Z")  // clock went back
        #expect(formatter.string(nanosecondsSinceEpoch: base) == "2023-11-14T22:13:20.000Z")
    }

    @Test func agreesWithFoundationsGregorianCalendar() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var rng = SeededGenerator(seed: 0x7173)
        var formatter = TimestampFormatter()
        for _ in 0..<2000 {
            let ns = Int64.random(in: Int64.min...Int64.max, using: &rng)
            var second = ns / Self.second
            var rest = ns % Self.second
            if rest < 0 { second -= 1; rest += Self.second }
            let date = Date(timeIntervalSince1970: TimeInterval(second))
            let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
            let expected = String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                                  c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!, Int(rest / Self.millisecond))
            let got = formatter.string(nanosecondsSinceEpoch: ns)
            #expect(got == expected, "ns \(ns)")
            if got != expected { return }
        }
    }

    @Test func theBytesOfAMillisecondAreTheFormattedText() {
        var formatter = TimestampFormatter()
        var reference = TimestampFormatter()
        var rng = SeededGenerator(seed: 0x5747)
        // Known instants, then runs of nearby ones (the cached millisecond
        // reused, then left forwards and backwards), then random ones.
        var instants = Self.known.map(\.0)
        let base = 1_700_000_000 * Self.second + 5 * Self.millisecond
        instants += [base, base + 1, base + 999_999, base + Self.millisecond, base - 1, base, -1, 0, -1]
        instants += (0..<500).map { _ in Int64.random(in: Int64.min...Int64.max, using: &rng) }
        for ns in instants {
            let expected = reference.string(nanosecondsSinceEpoch: ns)
            let got = formatter.bytes(nanosecondsSinceEpoch: ns).withByteView { String(decoding: $0, as: UTF8.self) }
            #expect(got == expected, "ns \(ns)")
        }
    }
}
