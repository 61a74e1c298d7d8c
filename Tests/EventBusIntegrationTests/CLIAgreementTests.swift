// The CLI's commands agree with each other and say what a new user needs
// (issue 23): `--json` and `--format json` on every command whose output is
// structured, a warning for `listen --last 2`, a note for `listen --since`
// ahead of the broker, every command named in `hello` (so `eventbus clients`
// shows it), and the `--user` hint for root when the system bus is absent
// but a user bus is there.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("eventbus flags and notes that agree")
struct CLIAgreementTests {
    /// Each command's output with `--json`, then with `--format json`.
    @Test(arguments: [
        ["get", "mode"],
        ["listen", "--last", "--count", "1", "mode"],
        ["wait", "mode", "--", "true"],
    ])
    func eventCommandsTakeJsonAsFormatJson(_ arguments: [String]) throws {
        let broker = try TestBroker()
        #expect(try broker.run(["publish", "--retain", "mode", #""dark""#]).status == 0)
        var outputs: [String] = []
        for flag in [["--json"], ["--format", "json"], ["-j"]] {
            var args = arguments
            args.insert(contentsOf: flag, at: 1)
            if args[0] == "wait" {
                // `wait` prints a live event: publish one once it has subscribed.
                let waiter = try broker.start(args)
                try broker.waitForSubscriptions(1)
                #expect(try broker.run(["publish", "--id", "fixed", "mode", #""light""#]).status == 0)
                let run = try waiter.wait()
                #expect(run.status == 0, "\(args): \(run)")
                outputs.append(try jsonObject(run.stdout)["id"] as? String ?? "?")
            } else {
                let run = try broker.run(args)
                #expect(run.status == 0, "\(args): \(run)")
                outputs.append(run.stdout)
            }
        }
        #expect(outputs[0] == outputs[1] && outputs[1] == outputs[2], "\(outputs)")
        if arguments[0] != "wait" { #expect(try jsonObject(outputs[0])["data"] as? String == "dark") } else { #expect(outputs[0] == "fixed") }
    }

    @Test func statsAndClientsTakeBothSpellingsToo() throws {
        let broker = try TestBroker()
        for flags in [["--json"], ["--format", "json"], ["-f", "json"], ["-j"]] {
            let stats = try broker.run(["stats"] + flags)
            #expect(stats.status == 0, "\(flags): \(stats)")
            #expect(try jsonObject(stats.stdout)["instance"] is String, "\(flags): \(stats)")
            let clients = try broker.run(["clients"] + flags)
            #expect(clients.status == 0, "\(flags): \(clients)")
            #expect(try clients.stdoutLines.allSatisfy { try jsonObject($0)["conn"] is Int }, "\(flags): \(clients)")
        }
        let table = try broker.run(["stats", "--format", "table"])
        #expect(table.status == 0 && table.stdoutLines.contains { $0.hasPrefix("published ") }, "\(table)")
        // `me` one member a line, its limits too; none is raw JSON (root: no limit applies).
        let uid = getuid()
        #expect(table.stdoutLines.contains { $0.split(separator: " ") == ["me.uid", "\(uid)"] }, "\(table.stdout)")
        #expect(table.stdoutLines.contains { $0.hasPrefix("me.queued_bytes ") }, "\(table.stdout)")
        if uid == 0 {
            #expect(table.stdoutLines.contains { $0.split(separator: " ") == ["me.limits.queued_bytes", "unlimited"] }, "\(table.stdout)")
        }
        #expect(!table.stdout.contains("{") && !table.stdoutLines.contains { $0.hasPrefix("me ") }, "\(table.stdout)")
        for arguments in [["stats", "--json", "--format", "table"], ["clients", "-j", "-f", "table"], ["listen", "--json", "--format", "data"], ["stats", "--format", "xml"]] {
            let run = try broker.run(arguments)
            #expect(run.status == 64 && run.stderr.hasPrefix("eventbus: "), "\(arguments): \(run)")
        }
    }

    @Test func listenLastWarnsWhenItsFirstPatternIsABareNumber() throws {
        let broker = try TestBroker()
        let number = try broker.run(["listen", "--last", "2", "--timeout", "200ms"])
        #expect(number.status == 124, "\(number)")
        #expect(number.stderr.hasPrefix("eventbus: warning: '2' is taken as a PATTERN (the event type '2'): --last takes no number"), "\(number)")
        let type = try broker.run(["listen", "--last", "mode", "--timeout", "200ms"])
        #expect(type.status == 124 && type.stderr.isEmpty, "\(type)")
        let noLast = try broker.run(["listen", "2", "--timeout", "200ms"])
        #expect(noLast.stderr.isEmpty, "a numeric type without --last is no mistake: \(noLast)")
    }

    @Test func listenSinceAheadOfTheBrokerSaysSoOnStderr() throws {
        let broker = try TestBroker()
        for n in 1...2 { #expect(try broker.run(["publish", "tick", "\(n)"]).status == 0) }
        let ahead = try broker.start(["listen", "--since", "100", "--format", "data", "--count", "1", "tick"])
        try broker.waitForSubscriptions(1)
        #expect(try broker.run(["publish", "tick", "3"]).status == 0)
        let run = try ahead.wait()
        #expect(run.status == 0 && run.stdout == "3\n", "new events still print: \(run)")
        #expect(run.stderr.hasPrefix("eventbus: --since 100 is ahead of the broker: its newest event is seq 2, so nothing is replayed"), "\(run)")
        let behind = try broker.run(["listen", "--since", "2", "--format", "data", "--count", "1", "tick"])
        #expect(behind.stdout == "3\n" && behind.stderr.isEmpty, "\(behind)")
        let atNewest = try broker.run(["listen", "--since", "3", "--timeout", "200ms", "tick"])
        #expect(atNewest.status == 124 && atNewest.stderr.isEmpty, "seq 3 is the newest, not ahead: \(atNewest)")
    }

    @Test func everyCommandNamesItselfInHelloAndPublishKeepsItsPidSource() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "--format", "json", "--count", "1", "named"])
        let waiter = try broker.start(["wait", "never.happens"])
        try broker.waitForSubscriptions(2)
        let clients = try broker.run(["clients", "--json"])
        let names = try clients.stdoutLines.compactMap { try jsonObject($0)["client"] as? String }.sorted()
        #expect(names == ["eventbus-clients", "eventbus-listen", "eventbus-wait"], "\(clients)")
        let publish = try broker.start(["publish", "named", "1"])
        let published = try publish.wait()
        #expect(published.status == 0, "\(published)")
        let event = try jsonObject(try listener.wait().stdout)
        #expect(event["source"] as? String == "pid/\(publish.pid)", "the documented default source stays: \(event)")
        waiter.send(signal: SIGTERM)
        _ = try? waiter.wait()
    }

    /// `eventbus --help` (user bus) and `eventbusd --help` (system bus) show
    /// shell lines that write the options drop-in: run them (under a scratch
    /// HOME, the system path moved under the scratch folder) and read the file.
    @Test(arguments: [("eventbus", "~/.config/systemd/user"), ("eventbusd", "/etc/systemd/system")])
    func helpSaysHowToSetTheIdleTimeWithoutAnEditor(program: String, unitDirectory: String) throws {
        let scratch = try TemporaryDirectory(prefix: "ebhelp.")
        let help = try RunningProcess(cliProduct(program), ["--help"], in: scratch).wait()
        let lines = help.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex { $0.hasPrefix("  mkdir -p \(unitDirectory)/eventbus.service.d") }, "\(help.stdout)")
        let end = try #require(lines[start...].firstIndex { $0.hasSuffix("/eventbus.service.d/options.conf") })
        #expect(lines[end + 1].contains("daemon-reload") && lines[end + 1].contains("try-restart eventbus"))
        let script = lines[start...end].joined(separator: "\n").replacingOccurrences(of: " /etc/", with: " \(scratch.path)/etc/")
        let home = scratch.path + "/home"
        let ran = try RunningProcess("/bin/sh", ["-c", script], in: scratch, environment: ["HOME": home]).wait()
        #expect(ran.status == 0, "\(script)\n\(ran)")
        let written = unitDirectory.hasPrefix("~") ? home + unitDirectory.dropFirst() : scratch.path + unitDirectory
        let dropIn = try String(contentsOfFile: written + "/eventbus.service.d/options.conf", encoding: .utf8)
        #expect(dropIn == "[Service]\nEnvironment=\"EVENTBUSD_OPTIONS=--exit-idle-time 5min\"\n")
        #expect(try RunningProcess(cliProduct("eventbusd"), ["--exit-idle-time", "5min", "--help"], in: scratch).wait().status == 0)
    }

    @Test(.enabled(if: geteuid() == 0 && access("/run/eventbus/bus.sock", F_OK) != 0, "needs root and no system bus"))
    func rootWithoutASystemBusIsToldOfTheUserBus() throws {
        let runtime = try TemporaryDirectory(prefix: "ebrt.")
        #expect(mkdir(runtime.path + "/eventbus", 0o700) == 0)
        let userBus = runtime.path + "/eventbus/bus.sock"
        let broker = try BrokerProcess(arguments: [], socketPath: userBus)
        defer { _ = broker.terminate(timeout: .seconds(5)) }
        let run = try RunningProcess(cliProduct("eventbus"), ["ping"], in: runtime, environment: ["XDG_RUNTIME_DIR": runtime.path]).wait()
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("(a user bus is at \(userBus), but root gets the system bus unless it asks: give --user; or is eventbusd running?"), "\(run)")
        let user = try RunningProcess(cliProduct("eventbus"), ["--user", "ping"], in: runtime, environment: ["XDG_RUNTIME_DIR": runtime.path]).wait()
        #expect(user.status == 0, "\(user)")
        let none = try RunningProcess(cliProduct("eventbus"), ["ping"], in: runtime, environment: ["XDG_RUNTIME_DIR": runtime.path + "/none"]).wait()
        #expect(none.status == 69 && !none.stderr.contains("user bus"), "\(none)")
    }
}
