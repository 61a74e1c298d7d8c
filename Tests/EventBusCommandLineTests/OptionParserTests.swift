// The GNU-style option parser shared by eventbusd and eventbus: every option
// form, operands, `--`, negative numbers as operands, and the usage errors.
import EventBusCommandLine
import Testing

private let specs = [
    OptionSpec("socket", "s", value: true),
    OptionSpec("timeout", "t", value: true),
    OptionSpec("quiet", "q"),
    OptionSpec("lines", "l"),
]

private func parse(_ arguments: [String], stopAtFirstOperand: Bool = false) throws(UsageError) -> ParsedArguments {
    try parseArguments(arguments[...], specs: specs, stopAtFirstOperand: stopAtFirstOperand)
}

@Suite("Option parser")
struct OptionParserTests {
    @Test(arguments: [
        ["--timeout", "5s"], ["--timeout=5s"], ["-t", "5s"], ["-t5s"], ["-qt", "5s"], ["-qt5s"],
    ])
    func everyFormOfAValueGivesTheSameOption(_ arguments: [String]) throws {
        #expect(try parse(arguments).value("timeout") == "5s")
    }

    @Test func flagsBundleAndOptionsMayFollowOperands() throws {
        let parsed = try parse(["a.b", "-ql", "c", "--socket", "/x"])
        #expect(parsed.operands == ["a.b", "c"])
        #expect(parsed.has("quiet") && parsed.has("lines"))
        #expect(parsed.value("socket") == "/x")
        #expect(parsed.operandsBeforeDoubleDash == nil)
    }

    @Test func theLastValueWinsAndOrderIsKept() throws {
        let parsed = try parse(["-t", "1s", "--quiet", "--timeout=2s"])
        #expect(parsed.value("timeout") == "2s")
        #expect(parsed.options.map(\.name) == ["timeout", "quiet", "timeout"])
        #expect(parsed.options[1].value == nil)
    }

    @Test func doubleDashEndsOptionsAndIsCounted() throws {
        let parsed = try parse(["p", "--", "-q", "--timeout"])
        #expect(parsed.operands == ["p", "-q", "--timeout"])
        #expect(parsed.operandsBeforeDoubleDash == 1)
        #expect(!parsed.has("quiet"))
    }

    @Test func negativeNumbersAndADashAreOperands() throws {
        let parsed = try parse(["-5", "-1.5e3", "-"])
        #expect(parsed.operands == ["-5", "-1.5e3", "-"])
        #expect(parsed.options.isEmpty)
        // As a value, a negative number is the value (the value's parser refuses it).
        #expect(try parse(["--timeout", "-1"]).value("timeout") == "-1")
    }

    @Test func stoppingAtTheFirstOperandLeavesTheRestUnparsed() throws {
        let parsed = try parse(["-q", "listen", "--bogus", "-x"], stopAtFirstOperand: true)
        #expect(parsed.operands == ["listen", "--bogus", "-x"])
        #expect(parsed.has("quiet"))
    }

    @Test(arguments: [
        (["--bogus"], "unknown option '--bogus'"),
        (["--quite"], "unknown option '--quite'; did you mean '--quiet'?"),
        (["--timout"], "unknown option '--timout'; did you mean '--timeout'?"),
        (["-x"], "unknown option '-x'"),
        (["-qx"], "unknown option '-x'"),
        (["--timeout"], "option '--timeout' needs a value"),
        (["-t"], "option '-t' needs a value"),
        (["--quiet=yes"], "option '--quiet' takes no value"),
    ])
    func usageErrorsAreOneLineNamingTheOption(_ arguments: [String], _ message: String) {
        let error = #expect(throws: UsageError.self) { try parse(arguments) }
        #expect(error?.message == message)
    }

    @Test func valuesAreReadWithTheirParserAndBadOnesNameTheOption() throws {
        let parsed = try parse(["-t", "1h30m"])
        #expect(try parsed.value("timeout", as: parseDuration) == .seconds(5400))
        #expect(try parsed.value("socket", as: parseDuration) == nil)
        let error = #expect(throws: UsageError.self) { try parse(["--timeout=soon"]).value("timeout", as: parseDuration) }
        #expect(error?.message == "invalid duration 'soon' for --timeout: no number before 'soon' (examples: \(durationExamples))")
    }
}
