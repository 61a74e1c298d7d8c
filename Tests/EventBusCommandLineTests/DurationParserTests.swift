// The DURATION table: what systemd.time(7) accepts for time spans is accepted
// with the same value (rows checked against `systemd-analyze timespan` of
// systemd 252), and what it refuses is refused with the right problem.
import EventBusCommandLine
import Testing

private let second: Int64 = 1_000_000_000
private let minute = 60 * second
private let hour = 60 * minute
private let day = 24 * hour

@Suite("DURATION parsing")
struct DurationParserTests {
    @Test(arguments: [
        // The forms the docs and the issue name.
        ("500ms", 500_000_000), ("2s", 2 * second), ("5min", 5 * minute), ("5m", 5 * minute),
        ("1h30m", hour + 30 * minute), ("1d", day), ("2 min", 2 * minute), ("1.5s", 1_500_000_000),
        ("30", 30 * second), ("0", 0), ("0s", 0), ("10", 10 * second), ("2.5s", 2_500_000_000),
        // Every unit name of systemd.time(7).
        ("1us", 1_000), ("1usec", 1_000), ("1\u{B5}s", 1_000), ("1\u{3BC}s", 1_000),
        ("1ms", 1_000_000), ("1msec", 1_000_000),
        ("1s", second), ("1sec", second), ("1second", second), ("2seconds", 2 * second),
        ("1m", minute), ("1min", minute), ("1minute", minute), ("5minutes", 5 * minute),
        ("1h", hour), ("1hr", hour), ("1hour", hour), ("2hours", 2 * hour), ("48hr", 48 * hour),
        ("1d", day), ("1day", day), ("2days", 2 * day),
        ("1w", 7 * day), ("1week", 7 * day), ("2weeks", 14 * day),
        ("1M", 2_629_800 * second), ("1month", 2_629_800 * second), ("2months", 2 * 2_629_800 * second),
        ("1y", 31_557_600 * second), ("1year", 31_557_600 * second), ("2years", 2 * 31_557_600 * second),
        // systemd.time(7)'s own examples.
        ("2 h", 2 * hour), ("2hours", 2 * hour), ("1y 12month", 31_557_600 * second + 12 * 2_629_800 * second),
        ("55s500ms", 55_500_000_000), ("300ms20s 5day", 300_000_000 + 20 * second + 5 * day),
        // Components add up; white space around and between them; a bare number is seconds.
        ("1h 30min", hour + 30 * minute), ("5 min 3 s", 5 * minute + 3 * second), ("1h 30", hour + 30 * second),
        ("30 1h", hour + 30 * second), ("1sec1", 2 * second), ("5 5", 10 * second), (" 5s ", 5 * second),
        ("1\ts", second), ("1 d", day),
        // Fractions, exact to the nanosecond.
        (".5s", 500_000_000), ("1.0s", second), ("001s", second), ("1.5h", hour + 30 * minute),
        ("1.999999999s", 1_999_999_999), ("0.000000001s", 1), ("0.0000000001s", 0), ("1.5us", 1_500),
        ("1.5", 1_500_000_000),
        // The largest span accepted: 100 years.
        ("100y", 100 * 31_557_600 * second), ("36525d", 100 * 31_557_600 * second),
    ] as [(String, Int64)])
    func acceptsWhatSystemdAccepts(_ text: String, _ nanoseconds: Int64) throws {
        #expect(try parseDuration(text) == .nanoseconds(nanoseconds), "'\(text)'")
        #expect(try parseDuration(text).totalNanoseconds == nanoseconds)
    }

    @Test(arguments: [
        ("", .empty), (" ", .empty), ("\t", .empty),
        ("-1s", .negative), ("-5", .negative), ("1s -1s", .negative), ("-0", .negative),
        ("s", .missingNumber(before: "s")), ("min", .missingNumber(before: "min")), ("soon", .missingNumber(before: "soon")),
        ("1h min", .missingNumber(before: "min")), ("us", .missingNumber(before: "us")),
        ("5x", .unknownUnit("x")), ("5mi", .unknownUnit("mi")), ("1secs", .unknownUnit("secs")),
        ("1mins", .unknownUnit("mins")), ("1hrs", .unknownUnit("hrs")), ("1S", .unknownUnit("S")),
        ("1Min", .unknownUnit("Min")), ("1ns", .unknownUnit("ns")), ("1nsec", .unknownUnit("nsec")),
        ("1e3", .unknownUnit("e")), ("infinity", .missingNumber(before: "infinity")), ("0x10", .unknownUnit("x")),
        ("5.", .malformedNumber("5.")), ("1.s", .malformedNumber("1.")), ("1.5.5s", .malformedNumber("1.5.5")),
        (".", .malformedNumber(".")), ("..5s", .malformedNumber("..5")),
        ("1,5s", .unexpectedCharacter(",")), ("+5s", .unexpectedCharacter("+")), ("1_000s", .unexpectedCharacter("_")),
        ("5s;", .unexpectedCharacter(";")), ("1h,30m", .unexpectedCharacter(",")),
        // Overflow: more than 100 years, and numbers beyond Int64 of any size.
        ("101y", .tooLarge(limit: "100 years")), ("36525.000001d", .tooLarge(limit: "100 years")),
        ("100y 1s", .tooLarge(limit: "100 years")), ("999999999999999999d", .tooLarge(limit: "100 years")),
        ("9223372036854775807us", .tooLarge(limit: "100 years")), ("18446744073709551615us", .tooLarge(limit: "100 years")),
        ("99999999999999999999999999", .tooLarge(limit: "100 years")), ("100000000000y", .tooLarge(limit: "100 years")),
    ] as [(String, ValueError.Problem)])
    func refusesWhatSystemdRefuses(_ text: String, _ problem: ValueError.Problem) {
        let error = #expect(throws: ValueError.self, "'\(text)'") { try parseDuration(text) }
        #expect(error?.problem == problem, "'\(text)': \(String(describing: error))")
        #expect(error?.kind == "duration")
        #expect(error?.value == text)
    }

    @Test func errorMessagesNameTheOptionAndGiveExamplesThatParse() throws {
        let error = #expect(throws: ValueError.self) { try parseDuration("5x") }
        let message = try #require(error).message(for: "--timeout")
        #expect(message == "invalid duration '5x' for --timeout: unknown unit 'x' (examples: \(durationExamples))")
        for example in durationExamples.split(separator: ",") {
            #expect(throws: Never.self) { try parseDuration(String(example)) }
        }
    }

    @Test(arguments: [
        (0 as Int64, "0"), (1, "0.001us"), (1_050, "1.050us"), (1_000, "1us"), (500_000_000, "500ms"),
        (2 * second, "2s"), (5 * minute, "5min"), (hour + 30 * minute, "1h 30min"), (day + 1, "1d 0.001us"),
        (3 * day + 4 * hour + 5 * minute + 6 * second + 7_008_009, "3d 4h 5min 6s 7ms 8.009us"),
    ] as [(Int64, String)])
    func durationTextIsSystemdsDisplayAndParsesBack(_ nanoseconds: Int64, _ text: String) throws {
        #expect(durationText(.nanoseconds(nanoseconds)) == text)
        #expect(try parseDuration(text).totalNanoseconds == nanoseconds)
    }

    @Test func totalNanosecondsSaturates() {
        #expect(Duration.seconds(Int64.max).totalNanoseconds == .max)
        #expect(Duration.seconds(Int64.min).totalNanoseconds == .min)
        #expect(Duration.milliseconds(1500).totalNanoseconds == 1_500_000_000)
        #expect(maxDuration.totalNanoseconds < Int64.max / 2, "now + maxDuration cannot overflow")
    }
}
