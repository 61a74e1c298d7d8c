// `eventbus stats --prometheus` (issue 21): the exposition passes
// `promtool check metrics` (Debian `prometheus`), names from the broker are
// escaped in label values, `--max-types` keeps the busiest, no series is
// labelled by something that changes per scrape or per connection (issue
// 33: per-client series named by client, pid and uid, summed per process,
// only for connections older than `--min-client-age`, never the exporter's
// own; an idle bus scraped twice has the same series), a broker that
// does not answer gives `eventbus_up 0`, `--output` replaces the file
// atomically and readable by others, and a real `prometheus-node-exporter`
// serves the file's `eventbus_` lines on /metrics (its textfile collector).
//
// Before editing: promtool and node_exporter come from scripts/deps; the
// exporter listens on 127.0.0.1 on a port the kernel picked free just before,
// with every collector but textfile off.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("CLI: stats --prometheus", .enabled(if: findInPath("promtool") != nil, "needs promtool (Debian prometheus, scripts/deps)"))
struct CLIMetricsTests {
    /// `promtool check metrics` of `text`: its status and output.
    static func promtool(_ text: String, in scratch: TemporaryDirectory) throws -> CLIRun {
        try RunningProcess(findInPath("promtool")!, ["check", "metrics"], in: scratch, stdin: text).wait(timeout: .seconds(30))
    }

    @Test("the exposition passes promtool check metrics and has the counters of stats, types and clients")
    func expositionPassesPromtool() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "m.>"])
        try broker.waitForSubscriptions(1)
        for type in ["m.a", "m.a", "m.b"] { #expect(try broker.run(["publish", type, "1"]).status == 0) }
        let run = try broker.run(["stats", "--prometheus"])
        #expect(run.status == 0, "\(run)")
        let check = try Self.promtool(run.stdout, in: broker.scratch)
        #expect(check.status == 0 && check.stdout.isEmpty && check.stderr.isEmpty, "\(check)\n\(run.stdout)")
        let lines = Set(run.stdoutLines)
        for expected in ["eventbus_up 1", "eventbus_published_total 3", "eventbus_delivered_total 3", "eventbus_subscriptions 1",
                         #"eventbus_type_published_total{type="m.a"} 2"#, #"eventbus_type_delivered_total{type="m.b"} 1"#,
                         #"eventbus_type_subscribers{type="m.a"} 1"#, "# TYPE eventbus_type_dropped_total counter"] {
            #expect(lines.contains(expected), "missing \(expected) in\n\(run.stdout)")
        }
        #expect(!run.stdoutLines.contains { $0.hasPrefix("eventbus_client_") }, "the listener is younger than --min-client-age: \(run.stdout)")
        let all = try broker.run(["stats", "--prometheus", "--min-client-age", "0"])
        #expect(all.stdoutLines.contains(#"eventbus_client_delivered_total{client="eventbus-listen",pid="\#(listener.pid)",uid="\#(getuid())"} 3"#), "\(all.stdout)")
        #expect(!all.stdout.contains("eventbus-stats"), "the exporter's own connection makes no series: \(all.stdout)")
        #expect(try Self.promtool(all.stdout, in: broker.scratch).status == 0)
        let busiest = try broker.run(["stats", "--prometheus", "--max-types", "1"]).stdoutLines.filter { $0.hasPrefix("eventbus_type_published_total{") }
        #expect(busiest == [#"eventbus_type_published_total{type="m.a"} 2"#])
        listener.send(signal: SIGTERM)
        _ = try listener.wait()
    }

    /// `name{labels}` of every sample line: the series, without their values.
    static func series(_ exposition: String) -> Set<String> {
        Set(exposition.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { String($0[..<($0.lastIndex(of: " ") ?? $0.endIndex)]) })
    }

    @Test("an idle bus scraped again has the same series: no label per scrape or per connection of the exporter")
    func idleBusKeepsItsSeries() throws {
        let broker = try TestBroker()
        let listener = try broker.start(["listen", "idle.>"])
        try broker.waitForSubscriptions(1)
        // With --min-client-age 1s the listener has series once it is a second
        // old, and the test's own short-lived connections (stats polls) none.
        let arguments = ["stats", "--prometheus", "--min-client-age", "1s"]
        try waitUntil("the listener is a second old") {
            try broker.run(arguments).stdout.contains(#"eventbus_client_connections{client="eventbus-listen",pid="\#(listener.pid)""#)
        }
        for arguments in [["stats", "--prometheus"], arguments] {
            var scrapes: [Set<String>] = []
            for _ in 0..<3 {
                let run = try broker.run(arguments)
                #expect(run.status == 0, "\(run)")
                #expect(!run.stdout.contains("conn="), "no connection id in a label: \(run.stdout)")
                scrapes.append(Self.series(run.stdout))
            }
            #expect(scrapes[0] == scrapes[1] && scrapes[1] == scrapes[2], "\(arguments): \(scrapes)")
        }
        listener.send(signal: SIGTERM)
        _ = try listener.wait()
    }

    @Test("per-client series: summed per client, pid and uid, only connections older than --min-client-age, never the exporter's own")
    func clientSeriesHaveAStableIdentity() throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let old = formatter.string(from: Date(timeIntervalSinceNow: -3600))
        let young = formatter.string(from: Date())
        func client(_ conn: Int, _ name: String, pid: Int, since: String, queued: Int, held: Bool = false) -> String {
            #"{"conn":\#(conn),"client":"\#(name)","pid":\#(pid),"uid":1000,"gid":1000,"since":"\#(since)","patterns":[],"queued_bytes":\#(queued),"published":1,"delivered":2,"dropped":0,"overflow":"wait","echo":false,"holding":0,"held":\#(held),"behind":false}"#
        }
        let clients = [
            client(7, "eventbus-stats", pid: 300, since: old, queued: 0),  // the exporter's own (hello's conn)
            client(1, "svc", pid: 100, since: old, queued: 10),
            client(2, "svc", pid: 100, since: old, queued: 5, held: true),
            client(3, "svc", pid: 101, since: old, queued: 1),
            client(4, "eventbus-publish", pid: 200, since: young, queued: 0),
            client(5, "odd", pid: 400, since: "not a time", queued: 0),
        ]
        let replies = [
            #"{"op":"ok","req":0,"server":"eventbusd","version":"x","protocol":1,"instance":"i","conn":7,"features":[]}"#,
            #"{"op":"ok","req":1,"connections":6,"published":1,"delivered":0,"dropped":0,"instance":"i"}"#,
            #"{"op":"ok","req":2,"types":[]}"#,
            #"{"op":"ok","req":3,"clients":[\#(clients.joined(separator: ","))]}"#,
        ]
        var outputs: [String] = []
        for extra in [[], ["--min-client-age", "0"], ["--min-client-age", "0", "--max-clients", "1"]] {
            let fake = try FakeBroker(sending: Array((replies.joined(separator: "\n") + "\n").utf8))
            let scratch = try TemporaryDirectory(prefix: "ebcli.")
            defer { scratch.remove() }
            let run = try RunningProcess(cliProduct("eventbus"), ["--socket", fake.path, "stats", "--prometheus"] + extra, in: scratch).wait()
            #expect(run.status == 0, "\(run)")
            let check = try Self.promtool(run.stdout, in: scratch)
            #expect(check.status == 0 && check.stdout.isEmpty && check.stderr.isEmpty, "\(check)\n\(run.stdout)")
            #expect(!run.stdout.contains("conn=") && !run.stdout.contains("eventbus-stats") && !run.stdout.contains("odd"), "\(run.stdout)")
            outputs.append(run.stdout)
        }
        let svc = #"{client="svc",pid="100",uid="1000"}"#
        for expected in ["eventbus_client_queued_bytes\(svc) 15", "eventbus_client_connections\(svc) 2", "eventbus_client_held\(svc) 1",
                         "eventbus_client_delivered_total\(svc) 4", #"eventbus_client_connections{client="svc",pid="101",uid="1000"} 1"#] {
            #expect(outputs[0].contains(expected + "\n"), "missing \(expected) in\n\(outputs[0])")
        }
        #expect(!outputs[0].contains("eventbus-publish"), "younger than --min-client-age: \(outputs[0])")
        #expect(outputs[1].contains(#"eventbus_client_connections{client="eventbus-publish",pid="200",uid="1000"} 1"#), "\(outputs[1])")
        let bounded = outputs[2].split(separator: "\n").filter { $0.hasPrefix("eventbus_client_connections{") }
        #expect(bounded == ["eventbus_client_connections\(svc) 2"], "--max-clients 1 keeps the largest queue: \(outputs[2])")
    }

    @Test("label values escape quotes, backslashes and newlines from the broker; promtool accepts them")
    func labelValuesAreEscaped() throws {
        let replies = [
            #"{"op":"ok","req":1,"connections":1,"published":1,"delivered":0,"dropped":0,"instance":"a\"b"}"#,
            #"{"op":"ok","req":2,"types":[{"type":"q\"b\\n\nx","published":1,"delivered":0,"dropped":0,"subscribers":0,"retained":false,"last_seq":1,"last_time":"t"}]}"#,
            #"{"op":"ok","req":3,"clients":[{"conn":1,"client":"c\nd","pid":1,"uid":0,"queued_bytes":0,"published":1,"delivered":0,"dropped":0,"overflow":"wait","echo":false}]}"#,
        ]
        let fake = try FakeBroker(sending: Array((replies.joined(separator: "\n") + "\n").utf8))
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        defer { scratch.remove() }
        let run = try RunningProcess(cliProduct("eventbus"), ["--socket", fake.path, "stats", "--prometheus"], in: scratch).wait()
        #expect(run.status == 0, "\(run)")
        #expect(run.stdoutLines.contains(#"eventbus_type_published_total{type="q\"b\\n\nx"} 1"#), "\(run.stdout)")
        #expect(run.stdoutLines.contains(#"eventbus_info{instance="a\"b"} 1"#), "\(run.stdout)")
        let check = try Self.promtool(run.stdout, in: scratch)
        #expect(check.status == 0, "\(check)\n\(run.stdout)")
    }

    @Test("--output replaces the file atomically, mode 0644; a broker that is gone gives eventbus_up 0 and status 69")
    func outputFileAndUnavailableBroker() throws {
        let broker = try TestBroker()
        let path = broker.scratch.file("eventbus.prom")
        #expect(try broker.run(["stats", "--prometheus", "--output", path]).status == 0)
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o644)
        #expect(try String(contentsOfFile: path, encoding: .utf8).contains("eventbus_up 1\n"))
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
        try broker.stop()
        let gone = try broker.run(["stats", "--prometheus", "--output", path])
        #expect(gone.status == 69 && gone.stderr.contains("cannot connect"), "\(gone)")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("eventbus_up 0\n") && !text.contains("eventbus_published_total"), "no stale figures: \(text)")
        #expect(try Self.promtool(text, in: broker.scratch).status == 0)
    }

    @Test("node_exporter's textfile collector serves the eventbus_ lines on /metrics",
          .enabled(if: findInPath("prometheus-node-exporter") != nil && findInPath("python3") != nil, "needs prometheus-node-exporter and python3"))
    func nodeExporterServesTheFile() throws {
        let broker = try TestBroker()
        #expect(try broker.run(["publish", "ne.x", "1"]).status == 0)
        let textfiles = broker.scratch.file("textfile")
        try FileManager.default.createDirectory(atPath: textfiles, withIntermediateDirectories: true)
        #expect(try broker.run(["stats", "--prometheus", "--output", textfiles + "/eventbus.prom"]).status == 0)
        let python = findInPath("python3")!
        let port = try RunningProcess(python, ["-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"], in: broker.scratch).wait().stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let exporter = try RunningProcess(findInPath("prometheus-node-exporter")!, [
            "--web.listen-address=127.0.0.1:\(port)", "--collector.disable-defaults", "--collector.textfile",
            "--collector.textfile.directory=\(textfiles)",
        ], in: broker.scratch)
        defer {
            exporter.send(signal: SIGTERM)
            _ = try? exporter.wait()
        }
        let fetch = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())"
        var body = ""
        try waitUntil("node_exporter answers on port \(port)") {
            guard exporter.isRunning else { throw TestFailure("node_exporter exited: \(exporter.process.stderrSoFar())") }
            let run = try RunningProcess(python, ["-c", fetch, "http://127.0.0.1:\(port)/metrics"], in: broker.scratch).wait()
            body = run.stdout
            return run.status == 0
        }
        let lines = body.components(separatedBy: "\n")
        #expect(lines.contains("eventbus_up 1") && lines.contains(#"eventbus_type_published_total{type="ne.x"} 1"#), "\(body.prefix(3000))")
        #expect(lines.contains("node_textfile_scrape_error 0"), "\(body.prefix(3000))")
    }
}
