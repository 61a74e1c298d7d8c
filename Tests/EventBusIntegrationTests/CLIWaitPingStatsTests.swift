// `eventbus wait`, `ping` and `stats` against a real broker, and the usage
// conventions every subcommand shares (`--help`, `--version`, exit 64 with
// one stderr line).
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("eventbus wait, ping, stats")
struct CLIWaitPingStatsTests {
    @Test func waitRunsCommandOnlyAfterSubscribingSoItsEventIsNeverMissed() throws {
        let broker = try TestBroker()
        // COMMAND publishes the awaited event itself, immediately: only a
        // subscription made before COMMAND starts can see it.
        let publish = "'\(cliProduct("eventbus"))' --socket '\(broker.socket)' publish job.done '{\"ok\": true}'"
        for _ in 1...3 {
            let run = try broker.run(["wait", "--timeout", "10s", "--format", "data", "job.*", "--", "/bin/sh", "-c", publish])
            #expect(run.status == 0, "\(run)")
            #expect(run.stdout == "{\"ok\":true}\n")
            #expect(run.stderr == "")
        }
    }

    @Test func waitWithoutCommandPrintsTheFirstMatchingEvent() throws {
        let broker = try TestBroker()
        let waiter = try broker.start(["wait", "--format", "data", "build.finished", "build.failed"])
        try broker.waitForSubscriptions(2)
        _ = try LineClient(broker.socket).request("{\"op\":\"publish\",\"req\":1,\"type\":\"build.started\",\"data\":0}")
        _ = try LineClient(broker.socket).request("{\"op\":\"publish\",\"req\":1,\"type\":\"build.failed\",\"data\":1}")
        let run = try waiter.wait()
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "1\n")
    }

    @Test func waitTimesOutWith124() throws {
        let broker = try TestBroker()
        let run = try broker.run(["wait", "--timeout", "300ms", "never.happens", "--", "true"])
        #expect(run.status == 124, "\(run)")
        #expect(run.stdout == "")
        #expect(run.stderr == "eventbus: timed out after 300ms waiting for an event matching 'never.happens'\n")
    }

    @Test func waitReportsCommandFailureWithItsStatus() throws {
        let broker = try TestBroker()
        let failed = try broker.run(["wait", "--timeout", "10s", "x.y", "--", "/bin/sh", "-c", "exit 3"])
        #expect(failed.status == 3, "\(failed)")
        #expect(failed.stderr == "eventbus: '/bin/sh' failed (exit status 3)\n")
        let missing = try broker.run(["wait", "x.y", "--", "/nonexistent/command"])
        #expect(missing.status == 127, "\(missing)")
        #expect(missing.stderr.hasPrefix("eventbus: cannot run '/nonexistent/command': "))
    }

    @Test func waitQuietPrintsNothing() throws {
        let broker = try TestBroker()
        let publish = "'\(cliProduct("eventbus"))' --socket '\(broker.socket)' publish a.b 1"
        let run = try broker.run(["wait", "-q", "a.b", "--", "/bin/sh", "-c", publish])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "")
    }

    @Test func pingAnswersZeroQuietly() throws {
        let broker = try TestBroker()
        let run = try broker.run(["ping"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "" && run.stderr == "")
    }

    @Test func pingWaitSucceedsOnceTheBrokerStarts() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        let socket = scratch.path + "/bus.sock"
        // A stand-in at the path takes ping's first attempt and closes it:
        // the sentinel that ping tried before the broker was there.
        let standIn = try ClosingListener(path: socket)
        let ping = try RunningProcess(cliProduct("eventbus"), ["--socket", socket, "ping", "--wait", "10s"], in: scratch)
        let deadline = ContinuousClock.now + .seconds(10)
        while standIn.acceptedCount == 0 {
            try #require(ContinuousClock.now < deadline, "ping never tried to connect")
            usleep(5_000)
        }
        standIn.stop()  // unlinks the path
        #expect(ping.isRunning)
        let broker = try TestBroker(scratch: scratch)
        let run = try ping.wait()
        #expect(run.status == 0, "\(run)")
        _ = broker
    }

    @Test func pingWaitGivesUpWithUnavailable() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        let run = try RunningProcess(cliProduct("eventbus"), ["--socket", scratch.path + "/bus.sock", "ping", "--wait", "200ms"], in: scratch).wait()
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains(scratch.path + "/bus.sock"))
    }

    @Test func statsShowsTheBrokersCounters() throws {
        let broker = try TestBroker()
        _ = try broker.run(["publish", "a.b", "1"])
        let json = try broker.run(["stats", "--json"])
        #expect(json.status == 0, "\(json)")
        let object = try jsonObject(json.stdout)
        #expect(object["op"] == nil && object["req"] == nil)
        #expect(object["published"] as? Int == 1)
        for key in ["connections", "subscriptions", "delivered", "dropped", "queued_bytes", "uptime_s", "instance"] {
            #expect(object[key] != nil, "missing \(key)")
        }
        let text = try broker.run(["stats"])
        #expect(text.status == 0)
        #expect(text.stdoutLines.contains { $0.hasPrefix("published ") && $0.hasSuffix(" 1") })
        #expect(text.stdoutLines.contains { $0.hasPrefix("instance ") && $0.hasSuffix(object["instance"] as? String ?? "?") })
    }
}

@Suite("eventbus usage")
struct CLIUsageTests {
    private func run(_ arguments: [String]) throws -> CLIRun {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        return try RunningProcess(cliProduct("eventbus"), ["--socket", scratch.path + "/none.sock"] + arguments, in: scratch).wait()
    }

    @Test(arguments: [
        [],
        ["frobnicate"],
        ["publish"],
        ["publish", "--bogus", "a.b"],
        ["publish", "a.b", "1", "2"],
        ["publish", "--string", "x", "a.b", "1"],
        ["publish", "--lines=yes", "a.b"],
        ["listen", "--count"],
        ["listen", "--count", "0"],
        ["listen", "--format", "xml"],
        ["listen", "--timeout", "soon"],
        ["wait"],
        ["wait", "a.b", "--"],
        ["ping", "--wait", "-1"],
        ["stats", "extra"],
        ["stats", "--prometheus", "--format", "json"],
        ["stats", "--prometheus", "-f", "table"],
        ["--system", "--user", "ping"],
    ])
    func usageErrorsExit64WithOneLineOnStderr(_ arguments: [String]) throws {
        let result = try run(arguments)
        #expect(result.status == 64, "\(arguments): \(result)")
        #expect(result.stdout == "")
        #expect(result.stderr.hasPrefix("eventbus: "))
        #expect(result.stderr.filter { $0 == "\n" }.count == 1, "\(result.stderr)")
        #expect(result.stderr.contains("--help"))
    }

    @Test(arguments: ["publish", "listen", "wait", "get", "clear", "stats", "ping", "reload"])
    func eachCommandHasHelpWithExamples(_ command: String) throws {
        for form in [[command, "--help"], [command, "-h"], ["help", command]] {
            let result = try run(form)
            #expect(result.status == 0, "\(form): \(result)")
            #expect(result.stdout.hasPrefix("Usage: eventbus \(command)"))
            #expect(result.stdout.contains("Examples:"))
            #expect(result.stdout.contains("Exit status:"))
            #expect(result.stderr == "")
        }
    }

    @Test func topLevelHelpAndVersion() throws {
        let help = try run(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.hasPrefix("Usage: eventbus "))
        for command in ["publish", "listen", "wait", "get", "clear", "stats", "ping", "reload"] { #expect(help.stdout.contains(command)) }
        for form in [["--version"], ["-V"], ["listen", "--version"]] {
            let version = try run(form)
            #expect(version.status == 0)
            #expect(version.stdout.hasPrefix("eventbus "))
            #expect(version.stdoutLines.count == 3, "version, protocol edition, features: \(version.stdout)")
        }
    }

    @Test func optionFormsAreGNUStyle() throws {
        let broker = try TestBroker()
        // --opt=value, -ovalue, bundled short flags, options after operands, `--` before an operand.
        let listener = try broker.start(["listen", "a.b", "--format=data", "-n1", "--timeout", "10s"])
        try broker.waitForSubscriptions(1)
        let run = try broker.run(["publish", "-p", "--", "a.b", "-3"])
        #expect(run.status == 0, "\(run)")
        #expect(try listener.wait().stdout == "-3\n")
    }
}
