// `eventbus types` and `eventbus top` (issue 21) as a person uses them: the
// types table and its JSON lines; `top` without a terminal (plain snapshots,
// JSON lines with rates from counter differences) and in a pseudo-terminal
// (a frame drawn on the alternate screen, q quits, SIGTERM and ^Z put the
// terminal mode back, a resize redraws at the new width); the held/behind
// marks and hostile names from a canned broker; a broker that goes away.
//
// Before editing: the pty side is a small Python script (the standard
// library's os.openpty and termios) that reports what it saw as one JSON
// line; nothing here sleeps to settle: each step waits for the text it needs.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("CLI: types and top")
struct CLITopTests {
    @Test("types prints the table, most recently published first, and --json lines; PATTERN filters")
    func typesTableAndJSON() throws {
        let broker = try TestBroker()
        for type in ["top.a", "top.b", "other.c"] { #expect(try broker.run(["publish", type, "1"]).status == 0) }
        let table = try broker.run(["types"])
        #expect(table.status == 0, "\(table)")
        #expect(table.stdoutLines.first?.split(separator: " ").joined(separator: " ") == "TYPE PUBLISHED DELIVERED DROPPED REQUESTS SUBS RETAINED LAST SEQ LAST TIME", "\(table)")
        #expect(table.stdoutLines.dropFirst().map { String($0.prefix(7)) } == ["other.c", "top.b  ", "top.a  "], "\(table)")
        let json = try broker.run(["types", "top.>", "--json"])
        let objects = try json.stdoutLines.map(jsonObject)
        #expect(objects.map { $0["type"] as? String } == ["top.b", "top.a"] && objects.allSatisfy { $0["published"] as? Int == 1 }, "\(json)")
        #expect(try broker.run(["types", "--limit", "1", "--json"]).stdoutLines.count == 1)
        #expect(try broker.run(["types", "a..b"]).status == 64)
        // --format, as every command with structured output takes it.
        #expect(try broker.run(["types", "top.>", "--format", "json"]).stdout == json.stdout)
        #expect(try broker.run(["types", "-f", "table"]).stdout == table.stdout)
        for wrong in [["types", "--format", "xml"], ["types", "--json", "--format", "table"],
                      ["top", "--format", "table"], ["top", "--json", "-f", "view"]] {
            let result = try broker.run(wrong)
            #expect(result.status == 64 && result.stdout.isEmpty && result.stderr.hasPrefix("eventbus: "), "\(wrong): \(result)")
        }
    }

    @Test("top without a terminal prints one plain snapshot per interval, and with --json one object per line with rates")
    func topWithoutATerminal() throws {
        let broker = try TestBroker()
        #expect(try broker.run(["publish", "plain.x", "1"]).status == 0)
        let plain = try broker.run(["top", "--count", "2", "--interval", "100ms"])
        #expect(plain.status == 0, "\(plain)")
        #expect(!plain.stdout.contains("\u{1B}"), "no escapes in a pipe")
        #expect(plain.stdout.components(separatedBy: "eventbus top  ").count == 3, "\(plain)")
        #expect(plain.stdout.contains("plain.x") && plain.stdout.contains("CONN") && plain.stdout.contains("up 00:00:"), "\(plain)")
        let json = try broker.run(["top", "--json", "--count", "2", "--interval", "100ms"])
        let lines = try json.stdoutLines.map(jsonObject)
        #expect(lines.count == 2, "\(json)")
        let formatted = try broker.run(["top", "--format", "json", "--count", "1"])
        #expect(try formatted.stdoutLines.map(jsonObject).count == 1, "\(formatted)")
        #expect(lines.first?["events_per_s"] is NSNull && lines.last?["events_per_s"] is NSNumber, "the first poll has no rates: \(json)")
        let types = lines.last?["types"] as? [[String: Any]] ?? []
        #expect(types.contains { $0["type"] as? String == "plain.x" && $0["published"] as? Int == 1 && $0["events_per_s"] as? Double == 0 }, "\(json)")
    }

    @Test("top, types and stats --prometheus exit 69 naming the socket when no broker answers at start")
    func noBrokerAtStart() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        defer { scratch.remove() }
        for arguments in [["top"], ["types"], ["stats", "--prometheus"]] {
            let run = try RunningProcess(cliProduct("eventbus"), ["--socket", scratch.file("none.sock")] + arguments, in: scratch).wait()
            #expect(run.status == 69 && run.stderr.contains("cannot connect to the broker at \(scratch.file("none.sock"))"), "\(arguments): \(run)")
        }
    }

    @Test("top shows the broker's held, behind and holding marks and escapes what the broker names")
    func topShowsFlowControlMarks() throws {
        let replies = [
            #"{"op":"ok","req":1,"connections":2,"subscriptions":1,"published":5,"delivered":5,"dropped":0,"queued_bytes":4194304,"uptime_s":90061,"instance":"canned","held":1,"holds":3,"stalls":1}"#,
            #"{"op":"ok","req":2,"types":[{"type":"evil\u001b[2J","published":5,"delivered":5,"dropped":0,"subscribers":1,"retained":false,"last_seq":5,"last_time":"2026-12-01T00:00:00.000Z"}]}"#,
            #"{"op":"ok","req":3,"clients":[{"conn":3,"client":"slow\u001b]0;x\u0007","pid":10,"uid":1000,"gid":1000,"queued_bytes":4194304,"published":0,"delivered":5,"dropped":0,"overflow":"wait","echo":false,"holding":2,"held":false,"behind":true},{"conn":4,"client":"pub","pid":11,"uid":1000,"gid":1000,"queued_bytes":0,"published":5,"delivered":0,"dropped":0,"overflow":"wait","echo":false,"holding":0,"held":true,"behind":false}]}"#,
        ]
        let fake = try FakeBroker(sending: Array((replies.joined(separator: "\n") + "\n").utf8))
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        defer { scratch.remove() }
        let run = try RunningProcess(cliProduct("eventbus"), ["--socket", fake.path, "top", "--count", "1"], in: scratch).wait()
        #expect(run.status == 0, "\(run)")
        #expect(!run.stdout.contains("\u{1B}") && !run.stdout.contains("\u{07}"), "\(run.stdout)")
        #expect(run.stdout.contains(#"evil\x1B[2J"#) && run.stdout.contains(#"slow\x1B]0;x"#), "names escaped, then cut to the column: \(run.stdout)")
        #expect(run.stdout.contains("up 1d 01:01:01") && run.stdout.contains("held 1  holds 3  stalls 1"), "\(run.stdout)")
        let rows = run.stdoutLines.filter { $0.hasPrefix(String(repeating: " ", count: 14) + "3 ") || $0.hasPrefix(String(repeating: " ", count: 14) + "4 ") }
        #expect(rows.count == 2, "\(run.stdout)")
        #expect(rows.first?.contains("[#####.....]  50%") == true && rows.first?.hasSuffix("BEHIND holding 2") == true, "\(rows)")
        #expect(rows.last?.hasSuffix("held") == true, "\(rows)")
    }

    @Test("top keeps running when the broker goes away, says so, and shows the new broker run")
    func topSurvivesABrokerRestart() throws {
        let broker = try TestBroker()
        let top = try broker.start(["top", "--count", "15", "--interval", "200ms"])
        try waitUntil("the first snapshot") { top.stdoutSoFar().contains("CONN") }
        let first = try #require(top.stdoutSoFar().components(separatedBy: "instance ").dropFirst().first?.prefix(16))
        try broker.stop()
        try waitUntil("top noticed") { !top.process.stderrSoFar().isEmpty }
        try broker.start()
        let run = try top.wait(timeout: .seconds(20))
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains("retrying every interval"), "\(run)")
        let instances = run.stdout.components(separatedBy: "instance ").dropFirst().map { String($0.prefix(16)) }
        #expect(instances.count >= 2 && instances[0] == String(first) && instances.last != instances[0], "\(run)")
    }

    @Test("top --count ends while the broker is away: failed polls count, and the last one failing exits 69")
    func topCountEndsWithoutABroker() throws {
        let broker = try TestBroker()
        let top = try broker.start(["top", "--count", "10", "--interval", "100ms"])
        try waitUntil("the first snapshot") { top.stdoutSoFar().contains("CONN") }
        try broker.stop()
        let run = try top.wait(timeout: .seconds(20))
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("retrying every interval"), "\(run)")
    }
}

/// A pty driven by Python (os.openpty, termios), running `eventbus top`.
@Suite("CLI: top in a pseudo-terminal", .enabled(if: findInPath("python3") != nil, "needs python3"))
struct CLITopTerminalTests {
    /// Runs `top` in a pty of 100×30 and does `action` once a frame is drawn:
    /// `q` (press q), `TERM` (SIGTERM), `TSTP` (SIGTSTP, checked while stopped,
    /// then SIGCONT and q), `WINCH` (resize to 60×20, wait for a redraw, q),
    /// `GONE` (SIGTERM to the broker whose pid follows, wait for the view to say so, q).
    /// Prints one JSON object: status, the mode before/during/after, what was drawn.
    static let driver = #"""
import fcntl, json, os, select, signal, struct, sys, termios, time
binary, socket, action = sys.argv[1:4]
broker_pid = int(sys.argv[4]) if len(sys.argv) > 4 else 0
master, slave = os.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
before = termios.tcgetattr(slave)
pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2): os.dup2(slave, fd)
    os.close(master); os.close(slave)
    os.execv(binary, [binary, "--socket", socket, "top", "--interval", "200ms"])
out = b""
def read_until(pred, timeout=10):
    global out
    end = time.time() + timeout
    while not pred() and time.time() < end:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try: out += os.read(master, 65536)
            except OSError: break
    return pred()
drew = read_until(lambda: b"TYPE" in out and b"CONN" in out)
during = termios.tcgetattr(slave)
result = {"drew": drew, "raw_during": (during[3] & (termios.ICANON | termios.ECHO)) == 0}
if action == "q":
    os.write(master, b"q")
elif action == "TERM":
    os.kill(pid, signal.SIGTERM)
elif action == "TSTP":
    os.kill(pid, signal.SIGTSTP)
    _, status = os.waitpid(pid, os.WUNTRACED)
    result["stopped"] = os.WIFSTOPPED(status)
    result["restored_while_stopped"] = termios.tcgetattr(slave) == before
    mark = len(out)
    os.kill(pid, signal.SIGCONT)
    result["redrawn"] = read_until(lambda: out.rfind(b"\x1b[?1049h") > mark and out.rfind(b"CONN") > mark)
    result["raw_again"] = (termios.tcgetattr(slave)[3] & termios.ICANON) == 0
    os.write(master, b"q")
elif action == "GONE":
    mark = len(out)
    os.kill(broker_pid, signal.SIGTERM)
    result["told"] = read_until(lambda: out.find(b"retrying every interval", mark) > 0)
    os.write(master, b"q")
elif action == "WINCH":
    mark = len(out)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 20, 60, 0, 0))
    result["redrawn"] = read_until(lambda: out.rfind(b"CONN", mark) > mark)
    frame = out[out.rfind(b"\x1b[H"):].decode("utf-8", "replace")
    plain = frame.replace("\x1b[7m", "").replace("\x1b[0m", "").replace("\x1b[1m", "").replace("\x1b[H", "").replace("\x1b[J", "")
    lines = plain.replace("\x1b[K", "").replace("\r", "").split("\n")  # the pty writes LF as CR LF
    result["widest"] = max(len(line) for line in lines)
    result["widest_line"] = max(lines, key=len)
    os.write(master, b"q")
_, status = os.waitpid(pid, 0)
read_until(lambda: False, timeout=0.3)
result.update(status=os.waitstatus_to_exitcode(status), restored=termios.tcgetattr(slave) == before,
              entered=b"\x1b[?1049h" in out, left=out.rstrip().endswith(b"\x1b[?25h\x1b[?1049l"))
print(json.dumps(result))
"""#

    func drive(_ action: String) throws -> [String: Any] {
        let broker = try TestBroker()
        #expect(try broker.run(["publish", "pty.x", "1"]).status == 0)
        let run = try RunningProcess(findInPath("python3")!, ["-c", Self.driver, cliProduct("eventbus"), broker.socket, action], in: broker.scratch).wait(timeout: .seconds(30))
        guard run.status == 0, let line = run.stdoutLines.last else { throw TestFailure("pty driver failed: \(run)") }
        return try jsonObject(line)
    }

    @Test("a frame is drawn on the alternate screen with keys read one at a time; q quits and restores the terminal")
    func qQuitsAndRestores() throws {
        let r = try drive("q")
        #expect(r["drew"] as? Bool == true && r["raw_during"] as? Bool == true && r["entered"] as? Bool == true, "\(r)")
        #expect(r["status"] as? Int == 0 && r["restored"] as? Bool == true && r["left"] as? Bool == true, "\(r)")
    }

    @Test("SIGTERM ends top with the terminal restored")
    func sigtermRestores() throws {
        let r = try drive("TERM")
        #expect(r["drew"] as? Bool == true && r["status"] as? Int == 0 && r["restored"] as? Bool == true && r["left"] as? Bool == true, "\(r)")
    }

    @Test("SIGTSTP stops top with the terminal restored; SIGCONT takes it again and redraws")
    func sigtstpRestoresAndResumes() throws {
        let r = try drive("TSTP")
        #expect(r["stopped"] as? Bool == true && r["restored_while_stopped"] as? Bool == true, "\(r)")
        #expect(r["redrawn"] as? Bool == true && r["raw_again"] as? Bool == true && r["status"] as? Int == 0 && r["restored"] as? Bool == true, "\(r)")
    }

    @Test("a broker that goes away is shown in the view, which keeps running; q still quits and restores the terminal")
    func brokerGoneIsShown() throws {
        let broker = try BrokerProcess(arguments: [])
        defer { broker.cleanUp() }
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        defer { scratch.remove() }
        let run = try RunningProcess(findInPath("python3")!, ["-c", Self.driver, cliProduct("eventbus"), broker.socketPath, "GONE", "\(broker.pid)"], in: scratch).wait(timeout: .seconds(30))
        let r = try jsonObject(try #require(run.stdoutLines.last, "\(run)"))
        #expect(r["drew"] as? Bool == true && r["told"] as? Bool == true && r["status"] as? Int == 0 && r["restored"] as? Bool == true, "\(r)")
    }

    @Test("a resize (SIGWINCH) redraws within the new width")
    func resizeRedraws() throws {
        let r = try drive("WINCH")
        #expect(r["redrawn"] as? Bool == true && (r["widest"] as? Int ?? 999) <= 60 && r["restored"] as? Bool == true, "\(r)")
    }
}
