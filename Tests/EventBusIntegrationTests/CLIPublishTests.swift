// `eventbus publish` against a real broker: DATA forms, standard input,
// `--string`, `--lines`/`--json-lines`, `--print-seq`, and the exit statuses
// for bad JSON (65, nothing sent), reserved types (77) and a missing broker (69).
import EventBusTestSupport
import Foundation
import Testing

@Suite("eventbus publish")
struct CLIPublishTests {
    /// Starts `listen --format data --count N PATTERN`, waits until it has subscribed.
    private func dataListener(_ broker: TestBroker, count: Int, pattern: String = ">") throws -> RunningProcess {
        let before = (try broker.stats()["subscriptions"] as? Int) ?? 0
        let listener = try broker.start(["listen", "--format", "data", "--count", "\(count)", pattern])
        try broker.waitForSubscriptions(before + 1)
        return listener
    }

    @Test func publishIsQuietOnSuccessAndTheEventArrivesCompacted() throws {
        let broker = try TestBroker()
        let listener = try dataListener(broker, count: 1)
        let run = try broker.run(["publish", "order.created", "{\"id\": 42,\n  \"tags\": [\"a\", \"b\"], \"s\": \"x y\"}"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "")
        #expect(run.stderr == "")
        let heard = try listener.wait()
        #expect(heard.status == 0)
        #expect(heard.stdout == "{\"id\":42,\"tags\":[\"a\",\"b\"],\"s\":\"x y\"}\n")
    }

    @Test func publishReadsPrettyJSONFromStandardInputAndCompactsIt() throws {
        let broker = try TestBroker()
        let listener = try dataListener(broker, count: 2)
        let pretty = "{\n  \"user\": \"ada\",\n  \"roles\": [\n    \"admin\"\n  ]\n}\n"
        let implicit = try broker.run(["publish", "user.login"], stdin: pretty)
        let dash = try broker.run(["publish", "user.login", "-"], stdin: "[1, 2,\n 3]")
        #expect(implicit.status == 0, "\(implicit)")
        #expect(dash.status == 0, "\(dash)")
        #expect(try listener.wait().stdoutLines == ["{\"user\":\"ada\",\"roles\":[\"admin\"]}", "[1,2,3]"])
    }

    @Test func publishWithoutDataAndWithEmptyInputSendsNull() throws {
        let broker = try TestBroker()
        let listener = try dataListener(broker, count: 1)
        let run = try broker.run(["publish", "backup.finished"])  // stdin is /dev/null: empty
        #expect(run.status == 0, "\(run)")
        #expect(try listener.wait().stdout == "null\n")
    }

    @Test func stringOptionPublishesTextAsAJSONString() throws {
        let broker = try TestBroker()
        let listener = try dataListener(broker, count: 1)
        let run = try broker.run(["publish", "--string", "disk \"sda\" at 95%\tnow", "alert.disk"])
        #expect(run.status == 0, "\(run)")
        #expect(try listener.wait().stdout == "\"disk \\\"sda\\\" at 95%\\tnow\"\n")
    }

    @Test func negativeNumberIsDataNotAnOption() throws {
        let broker = try TestBroker()
        let listener = try dataListener(broker, count: 1)
        let run = try broker.run(["publish", "temp.changed", "-5.5"])
        #expect(run.status == 0, "\(run)")
        #expect(try listener.wait().stdout == "-5.5\n")
    }

    @Test func sourceAndIDAreSentAndPrintSeqPrintsTheBrokersSeq() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "--format", "json", "--count", "1"])
        try broker.waitForSubscriptions(1)
        let run = try broker.run(["publish", "--source", "billing", "--id", "inv-7", "--print-seq", "invoice.paid", "7"])
        #expect(run.status == 0, "\(run)")
        let event = try jsonObject(try listener.wait().stdout)
        #expect(event["source"] as? String == "billing")
        #expect(event["id"] as? String == "inv-7")
        #expect(run.stdout == "\(event["seq"] as? Int ?? -1)\n")
    }

    @Test func invalidJSONExitsWithDataErrorAndSendsNothing() throws {
        let broker = try TestBroker()
        for (data, stdin) in [("{\"a\": }", nil), ("-", "{\"a\": 1"), ("hello", nil)] as [(String, String?)] {
            let run = try broker.run(["publish", "x.y", data], stdin: stdin)
            #expect(run.status == 65, "\(run)")
            #expect(run.stdout == "")
            #expect(run.stderr.hasPrefix("eventbus: "))
            #expect(run.stderr.contains("not valid JSON"))
            #expect(run.stderr.filter { $0 == "\n" }.count == 3, "message, excerpt, caret: \(run.stderr)")
        }
        let hint = try broker.run(["publish", "x.y", "hello"])
        #expect(hint.stderr.contains("--string"))
        #expect(try broker.stats()["published"] as? Int == 0)
    }

    /// Runs `eventbus --socket <absent> ARGS` (invalid data never reaches the connect).
    private func runWithoutBroker(_ arguments: [String], stdin: String? = nil) throws -> CLIRun {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        return try RunningProcess(cliProduct("eventbus"), ["--socket", scratch.path + "/absent.sock"] + arguments, in: scratch, stdin: stdin).wait()
    }

    @Test func invalidJSONShowsTheTextAroundTheOffendingByteWithACaret() throws {
        let run = try runWithoutBroker(["publish", "x.y", "{\"id\": 1, \"name\": \"ada\", \"ok\": yes}"])
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr == """
            eventbus: DATA is not valid JSON: unexpected character at byte 31
              {"id": 1, "name": "ada", "ok": yes}
                                             ^

            """)
        // Only the offending line of pretty JSON is shown, cut to 40 bytes before the offending one.
        let long = "{\n  \"pad\": \"\(String(repeating: "p", count: 60))\", \"n\": 1.}\n"
        let cut = try runWithoutBroker(["publish", "x.y", long])
        #expect(cut.stderr.components(separatedBy: "\n") == [
            "eventbus: DATA is not valid JSON: invalid number at byte 80",
            "  …\(String(repeating: "p", count: 32))\", \"n\": 1.}",
            String(repeating: " ", count: 2 + 41) + "^",
            "",
        ], "\(cut)")
    }

    @Test(arguments: ["{id: 1}", "{\"a\": 1, id: 2}", "{'id': 1}"])
    func unquotedKeysAreNamedAsTheMistake(data: String) throws {
        let run = try runWithoutBroker(["publish", "x.y", data])
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("object keys need double quotes, e.g. {\"id\": 1}"), "\(run)")
        #expect(!run.stderr.contains("--string"))
    }

    @Test func anUnquotedWordThatIsNoKeyIsNotCalledOne() throws {
        let run = try runWithoutBroker(["publish", "x.y", "[1, two]"])
        #expect(run.status == 65, "\(run)")
        #expect(!run.stderr.contains("keys"), "\(run)")
    }

    /// `while read f; do eventbus publish file.seen; done < list`: publish reads the rest of the list.
    @Test func standardInputReadForMissingDataPointsToTheWhileReadFix() throws {
        let run = try runWithoutBroker(["publish", "file.seen"], stdin: "b.txt\nc.txt\n")
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("no DATA was given, so standard input was read as DATA"), "\(run)")
        #expect(run.stderr.contains("give DATA as an argument, or '</dev/null' for none"))
        #expect(!run.stderr.contains("--string"))
        // An explicit '-' asked for standard input: no such hint.
        let dash = try runWithoutBroker(["publish", "file.seen", "-"], stdin: "b.txt\n")
        #expect(dash.status == 65, "\(dash)")
        #expect(!dash.stderr.contains("no DATA was given"))
    }

    @Test func badTypeIsAUsageErrorAndSendsNothing() throws {
        let broker = try TestBroker()
        for type in ["order..created", "order.*", "bad type"] {
            let run = try broker.run(["publish", type, "1"])
            #expect(run.status == 64, "\(run)")
            #expect(run.stderr.hasPrefix("eventbus: "))
        }
        #expect(try broker.stats()["published"] as? Int == 0)
    }

    @Test func reservedTypeExitsForbiddenWithTheBrokersMessage() throws {
        let broker = try TestBroker()
        let run = try broker.run(["publish", "eventbus.started", "1"])
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr.hasPrefix("eventbus: publish failed: "))
        #expect(run.stderr.contains("reserved"))
        #expect(run.stderr.contains("(forbidden)"))
    }

    @Test func brokerNotRunningExitsUnavailableNamingThePath() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        let socket = scratch.path + "/absent.sock"
        for command in [["publish", "x.y", "1"], ["listen"], ["stats"], ["ping"], ["wait", "x.y"]] {
            let run = try RunningProcess(cliProduct("eventbus"), ["--socket", socket] + command, in: scratch).wait()
            #expect(run.status == 69, "\(command): \(run)")
            #expect(run.stderr.hasPrefix("eventbus: cannot connect to the broker at \(socket): "))
            #expect(run.stderr.contains("eventbusd --socket \(socket)"))
            #expect(run.stdout == "")
        }
        // The environment variable is honoured the same way (PROTOCOL.md "Transport").
        let viaEnvironment = try RunningProcess(cliProduct("eventbus"), ["ping"], in: scratch, environment: ["EVENTBUS_SOCKET": socket]).wait()
        #expect(viaEnvironment.status == 69)
        #expect(viaEnvironment.stderr.contains(socket))
    }

    @Test func linesPublishesEveryLineAsOneStringEvent() throws {
        let broker = try TestBroker()
        let listener = try dataListener(broker, count: 5, pattern: "app.log.line")
        let run = try broker.run(["publish", "--lines", "--print-seq", "app.log.line"], stdin: "one\ntwo\r\n\n\"quoted\" \\ back\nlast without LF")
        #expect(run.status == 0, "\(run)")
        let seqs = run.stdoutLines.compactMap { Int($0) }
        #expect(seqs.count == 5)
        #expect(seqs == seqs.sorted() && Set(seqs).count == 5)
        #expect(try listener.wait().stdoutLines == ["\"one\"", "\"two\"", "\"\"", "\"\\\"quoted\\\" \\\\ back\"", "\"last without LF\""])
    }

    @Test func jsonLinesSkipsBlankLinesAndReportsBadOnesByLineNumber() throws {
        let broker = try TestBroker()
        let listener = try dataListener(broker, count: 3)
        let input = "{\"n\": 1}\n\nnot json\n[2]\n{\"n\":\n\"three\"\n"
        let run = try broker.run(["publish", "--lines", "--json-lines", "item.added"], stdin: input)
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("line 3 is not valid JSON"))
        #expect(run.stderr.contains("line 5 is not valid JSON"))
        #expect(try listener.wait().stdoutLines == ["{\"n\":1}", "[2]", "\"three\""])
    }

    @Test func linesKeepsGoingPastABrokerRejection() throws {
        let broker = try TestBroker()
        let listener = try dataListener(broker, count: 2)
        // A line under the CLI's cap (the 1 MiB frame limit) whose frame, with
        // its envelope, is over it is refused by the broker (frame_too_large);
        // the others go through.
        let huge = String(repeating: "x", count: (1 << 20) - 10)
        let run = try broker.run(["publish", "--lines", "big.line"], stdin: "before\n\(huge)\nafter\n")
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("publishing line 2 failed"))
        #expect(run.stderr.contains("frame_too_large"))
        #expect(try listener.wait().stdoutLines == ["\"before\"", "\"after\""])
    }
}
