// SIZE and N: binary suffixes in any spelling, minimums, and refusals.
import EventBusCommandLine
import Testing

@Suite("SIZE and N parsing")
struct SizeParserTests {
    @Test(arguments: [
        ("0", 0), ("123", 123), ("123B", 123), ("64K", 65_536), ("64k", 65_536), ("64KB", 65_536), ("64KiB", 65_536),
        ("8M", 8 << 20), ("8m", 8 << 20), ("8MB", 8 << 20), ("8MiB", 8 << 20),
        ("1G", 1 << 30), ("1g", 1 << 30), ("1GB", 1 << 30), ("1GiB", 1 << 30), ("1048576", 1 << 20),
    ] as [(String, Int)])
    func sizesWithBinarySuffixes(_ text: String, _ bytes: Int) throws {
        #expect(try parseSize(text) == bytes)
    }

    @Test(arguments: [
        ("", ValueError.Problem.empty), ("K", .missingNumber(before: "K")), ("-1", .negative), ("-1K", .negative),
        ("1.5M", .malformedNumber("1.5")), ("+5", .malformedNumber("+5")), ("1T", .unknownUnit("T")), ("8X", .unknownUnit("X")), ("10kb", .unknownUnit("kb")), ("1Kx", .unknownUnit("Kx")),
        (" 1K", .malformedNumber(" 1")), ("lots", .malformedNumber("lots")),
        ("99999999999999999999", .tooLarge(limit: "\(Int.max) bytes")), ("9999999999999G", .tooLarge(limit: "\(Int.max) bytes")),
    ])
    func badSizesAreRefused(_ text: String, _ problem: ValueError.Problem) {
        let error = #expect(throws: ValueError.self, "'\(text)'") { try parseSize(text) }
        #expect(error?.problem == problem, "'\(text)'")
        #expect(error?.kind == "size")
    }

    @Test func theMinimumIsEnforcedInBytes() throws {
        #expect(try parseSize("64", minimum: 64) == 64)
        let error = #expect(throws: ValueError.self) { try parseSize("63", minimum: 64) }
        #expect(error?.problem == .tooSmall(limit: "64 bytes"))
        #expect(error?.message(for: "--max-frame") == "invalid size '63' for --max-frame: less than the minimum 64 bytes (examples: \(sizeExamples))")
    }

    @Test(arguments: [0, 1, 1000, 1024, 65_536, 1 << 20, 3 << 20, 512 << 20, 1 << 30, 5 << 30])
    func sizeTextParsesBack(_ bytes: Int) throws {
        #expect(try parseSize(sizeText(bytes)) == bytes)
    }

    @Test func sizeTextUsesTheLargestExactSuffix() {
        #expect(sizeText(1 << 20) == "1M")
        #expect(sizeText(8 << 20) == "8M")
        #expect(sizeText(512 << 20) == "512M")
        #expect(sizeText(65_536) == "64K")
        #expect(sizeText(1000) == "1000")
    }

    @Test(arguments: [("1", 1), ("4096", 4096), ("007", 7)])
    func countsArePositiveWholeNumbers(_ text: String, _ value: Int) throws {
        #expect(try parseCount(text) == value)
    }

    @Test(arguments: [
        ("", ValueError.Problem.empty), ("0", .tooSmall(limit: "1")), ("-1", .negative), ("+1", .malformedNumber("+1")),
        ("1.0", .malformedNumber("1.0")), ("ten", .malformedNumber("ten")), ("1K", .malformedNumber("1K")),
        ("99999999999999999999", .tooLarge(limit: "\(Int.max)")),
    ])
    func badCountsAreRefused(_ text: String, _ problem: ValueError.Problem) {
        let error = #expect(throws: ValueError.self, "'\(text)'") { try parseCount(text) }
        #expect(error?.problem == problem, "'\(text)'")
    }
}
