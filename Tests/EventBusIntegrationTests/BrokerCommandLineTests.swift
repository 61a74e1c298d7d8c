// `eventbusd`'s command line against the built binary: the documented
// `--exit-idle-time 5min` starts a broker that answers, every option in
// `--help` is accepted with a value of the kind the help names, and bad values
// exit 64 with one line that names the option and shows good values.
import EventBusTestSupport
import Foundation
import Testing

@Suite("eventbusd command line")
struct BrokerCommandLineTests {
    /// README.md and docs/SYSTEMD.md tell users to run this; 0.1 exited 64 on it.
    @Test func exitIdleTimeOfFiveMinutesStartsABrokerThatAnswersAPing() throws {
        try withBroker(["--exit-idle-time", "5min", "--shutdown-timeout", "1.5s"]) { broker in
            let client = try broker.connect()
            #expect(try client.request(#"{"op":"ping","req":1}"#).op == "ok")
        }
    }

    /// A value of the kind each metavariable of the help names.
    static let samples = [
        "PATH": "/tmp/eventbusd-help-test.sock", "OCTAL": "0660", "SIZE": "2M", "N": "10",
        "DURATION": "1h30m", "LEVEL": "debug", "FILE": "/dev/null", "DIR": "/tmp/eventbusd-help-test-state", "USER": "root",
    ]

    @Test func everyOptionInTheHelpIsAcceptedWithAValueOfItsKind() throws {
        let eventbusd = try builtProduct("eventbusd")
        let help = try runProcess(eventbusd, ["--help"], timeout: .seconds(10))
        #expect(help.status == .exited(0))
        // `  -s, --socket PATH   ...`, `      --system   ...`: the option column of each line.
        let pattern = try NSRegularExpression(pattern: #"^\s+(?:-([A-Za-z]), )?--([a-z][a-z-]*)(?: ([A-Z]+))?\s"#, options: [.anchorsMatchLines])
        let text = help.stdout as NSString
        var arguments: [String] = []
        var names: [String] = []
        for match in pattern.matches(in: help.stdout, range: NSRange(location: 0, length: text.length)) {
            let name = text.substring(with: match.range(at: 2))
            names.append(name)
            arguments.append("--" + name)
            if match.range(at: 3).location != NSNotFound {
                let metavariable = text.substring(with: match.range(at: 3))
                arguments.append(try #require(Self.samples[metavariable], "no sample for \(metavariable) (--\(name))"))
            }
            if match.range(at: 1).location != NSNotFound {
                // The short form takes the same value.
                arguments.append("-" + text.substring(with: match.range(at: 1)))
                if match.range(at: 3).location != NSNotFound { arguments.append(arguments[arguments.count - 2]) }
            }
        }
        #expect(names.count >= 14, "help options: \(names)")
        for expected in ["socket", "system", "user", "mode", "max-frame", "max-outbound", "max-queued", "max-connections",
                         "max-subscriptions", "exit-idle-time", "shutdown-timeout", "log-level", "help", "version"] {
            #expect(names.contains(expected), "--\(expected) is not in eventbusd --help")
        }
        // --help last: every option before it is parsed and checked first.
        let run = try runProcess(eventbusd, arguments + ["--help"], timeout: .seconds(10))
        #expect(run.status == .exited(0), "\(arguments): \(run.stderr)")
    }

    @Test(arguments: [
        (["--exit-idle-time", "5x"], "--exit-idle-time"),
        (["--shutdown-timeout=-1s"], "--shutdown-timeout"),
        (["--max-frame", "10"], "--max-frame"),
        (["--max-connections", "0"], "--max-connections"),
    ])
    func badValuesExit64WithOneLineNamingTheOptionAndGoodValues(_ arguments: [String], _ option: String) throws {
        let run = try runProcess(try builtProduct("eventbusd"), arguments, timeout: .seconds(10))
        #expect(run.status == .exited(64))
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.filter { $0 == "\n" }.count == 1, "\(run.stderr)")
        #expect(run.stderr.contains(option) && run.stderr.contains("(examples: "), "\(run.stderr)")
        #expect(run.stderr.contains("eventbusd --help"))
    }

    @Test(arguments: [["--bogus"], ["extra"], ["--exit-idle-time"], ["--system=yes"], ["--mode", "999"], ["--log-level", "loud"]])
    func usageErrorsExit64WithOneLine(_ arguments: [String]) throws {
        let run = try runProcess(try builtProduct("eventbusd"), arguments, timeout: .seconds(10))
        #expect(run.status == .exited(64))
        #expect(run.stderr.hasPrefix("eventbusd: "), "\(run.stderr)")
        #expect(run.stderr.filter { $0 == "\n" }.count == 1, "\(run.stderr)")
    }
}
