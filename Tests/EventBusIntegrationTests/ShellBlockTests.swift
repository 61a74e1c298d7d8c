// Every ```sh block of README.md and docs/CLI.md runs as written against a
// real broker (issue 33: the Quick start, pasted as a block, showed
// nothing), so a pasted block cannot break again.
//
// How a block runs: in bash, in a scratch folder (also $HOME), in a process
// group of its own, with EVENTBUS_SOCKET set to a broker the test started
// (unless the block starts its own) and the built programs first in PATH. It
// passes when it exits with status 0 and prints nothing on stderr (a broker
// the block starts may log its `info` lines); one marked `until interrupted`
// (a listener, `tail -F`) also passes when it is still running once the
// broker has a new subscription or a new event from it: then it is stopped.
// The process group is stopped afterwards (background jobs included).
//
// The substitutions, stated once: `swift build` lines are not run (the test
// has built the programs); `$PWD/.build/release` and `.build/release` are the
// built programs' folder; `/tmp/bus.sock` is the test's socket; `/var/log/`
// is the scratch folder's log/. Fixtures in the scratch folder: items.json,
// log/app.log, ./start-build.sh N (publishes build.N.done {"status":"ok"})
// and a `systemctl` first in PATH that publishes backup.finished (what the
// backup unit of the example would do).
//
// A block may be preceded by `<!-- test: ... -->` (invisible on GitHub), of
// `;`-separated words: `not run: REASON` (listed in `notRun` below),
// `setup: CODE` (run first: values for the block's variables), `after
// previous` (the block before it, e.g. a service in "one terminal", runs in
// the background meanwhile, once it has subscribed), `own broker`
// (no broker at the socket: the block starts it), `lines` (each line runs
// alone: a list of separate examples), `until interrupted` (see above),
// `exits N` (the status expected),
// `crontab` (a crontab line: its command is run), `prints: TEXT` (standard
// output must show TEXT), `stderr: TEXT` (a line of standard error holding
// TEXT is expected, e.g. the message of a failure the block shows).
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// One ```sh block of a document.
struct ShellBlock: CustomStringConvertible, Sendable {
    var file: String
    var line: Int
    var code: String
    var marks: [String]

    var description: String { "\(file):\(line)" }

    /// The value of mark `key: VALUE` or `key VALUE` (`setup: x=1` gives
    /// `x=1`, `exits 124` gives `124`), nil if absent; "" for a bare mark.
    func mark(_ key: String) -> String? {
        for mark in marks {
            if mark == key { return "" }
            if mark.hasPrefix(key + ":") || mark.hasPrefix(key + " ") {
                return String(mark.dropFirst(key.count + 1)).trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    /// Every value of a repeatable mark (`prints:`).
    func marks(_ key: String) -> [String] {
        marks.filter { $0.hasPrefix(key + ":") }.map { String($0.dropFirst(key.count + 1)).trimmingCharacters(in: .whitespaces) }
    }
}

@Suite("Shell blocks of README.md and docs/CLI.md", .serialized,
       .enabled(if: findInPath("jq") != nil && findInPath("socat") != nil && findInPath("setsid") != nil, "needs jq, socat and setsid"))
struct ShellBlockTests {
    static let root = InterfaceAgreementTests.root

    /// The blocks that cannot run here, by file and first word.
    static let notRun: Set<String> = [
        "README.md: apt",  // installs the packages
        "README.md: scripts/demo",  // builds and runs everything
        "README.md: scripts/install",  // installs system-wide, drives systemd
        "docs/CLI.md: source",  // changes the interactive shell
        "docs/CLI.md: swift",  // a release build
    ]

    /// Every ```sh block of `file`, with the marks of a `<!-- test: ... -->` line just before it.
    static func blocks(in file: String) throws -> [ShellBlock] {
        let lines = try String(contentsOfFile: root + "/" + file, encoding: .utf8).components(separatedBy: "\n")
        var blocks: [ShellBlock] = []
        var index = 0
        while index < lines.count {
            guard lines[index] == "```sh" else { index += 1; continue }
            var marks: [String] = []
            if index > 0, lines[index - 1].hasPrefix("<!-- test: "), lines[index - 1].hasSuffix(" -->") {
                marks = lines[index - 1].dropFirst(11).dropLast(4).split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            }
            var end = index + 1
            while end < lines.count, lines[end] != "```" { end += 1 }
            blocks.append(ShellBlock(file: file, line: index + 1, code: lines[(index + 1)..<end].joined(separator: "\n"), marks: marks))
            index = end + 1
        }
        return blocks
    }

    static func allBlocks() throws -> [ShellBlock] { try blocks(in: "README.md") + blocks(in: "docs/CLI.md") }

    @Test("the blocks that are not run are marked with a reason and listed here")
    func notRunBlocksAreListed() throws {
        let blocks = try Self.allBlocks()
        #expect(blocks.count >= 20, "\(blocks.count) blocks")
        let marked = blocks.filter { $0.mark("not run") != nil }
        for block in marked { #expect(!(block.mark("not run") ?? "").isEmpty, "\(block): say why it is not run") }
        #expect(Set(marked.map { "\($0.file): \($0.code.prefix { $0 != " " && $0 != "\n" })" }) == Self.notRun)
    }

    /// The code of `block` with the stated substitutions: the socket, the built programs, /var/log.
    static func substituted(_ code: String, socket: String, scratch: String) -> String {
        code.components(separatedBy: "\n").filter { !$0.hasPrefix("swift build") }.joined(separator: "\n")
            .replacingOccurrences(of: "$PWD/.build/release", with: productsDirectory())
            .replacingOccurrences(of: ".build/release", with: productsDirectory())
            .replacingOccurrences(of: "/tmp/bus.sock", with: socket)
            .replacingOccurrences(of: "/var/log/", with: scratch + "/log/")
    }

    /// The fixtures the blocks use, in `scratch`.
    static func makeFixtures(in scratch: TemporaryDirectory) throws {
        let manager = FileManager.default
        for folder in ["bin", "log", "home"] { try manager.createDirectory(atPath: scratch.file(folder), withIntermediateDirectories: true) }
        let files = [
            ("items.json", #"{"items": [{"id": 1}, {"id": 2}]}"# + "\n", false),
            ("log/app.log", "started\n", false),
            ("start-build.sh", "#!/bin/sh\nexec eventbus publish \"build.$1.done\" '{\"status\": \"ok\"}'\n", true),
            ("bin/systemctl", "#!/bin/sh\nexec eventbus publish backup.finished\n", true),
        ]
        for (name, text, executable) in files {
            guard manager.createFile(atPath: scratch.file(name), contents: Data(text.utf8), attributes: executable ? [.posixPermissions: 0o755] : nil) else {
                throw TestFailure("cannot create the fixture \(name)")
            }
        }
    }

    /// `stats` numbers of the broker at `socket` (zeros while none answers).
    static func counts(_ socket: String) -> (subscriptions: Int, published: Int) {
        guard let stats = try? LineClient(socket).request(#"{"op":"stats","req":1}"#) else { return (0, 0) }
        return (stats["subscriptions"] as? Int ?? 0, stats["published"] as? Int ?? 0)
    }

    /// The environment of a block (see the file comment).
    static func environment(socket: String, scratch: TemporaryDirectory) -> [String: String?] {
        [
            "EVENTBUS_SOCKET": socket, "HOME": scratch.file("home"), "NO_COLOR": nil, "XDG_RUNTIME_DIR": nil,
            "PATH": scratch.file("bin") + ":" + productsDirectory() + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
        ]
    }

    /// Runs `code` as the file comment says; returns a failure message, or nil.
    static func run(_ code: String, block: ShellBlock, socket: String, scratch: TemporaryDirectory) throws -> String? {
        let script = "cd \(scratch.path)\n" + (block.mark("setup").map { $0 + "\n" } ?? "") + code
        let before = counts(socket)
        let process = try SpawnedProcess(findInPath("setsid")!, ["/bin/bash", "-c", script], in: scratch, environment: environment(socket: socket, scratch: scratch))
        defer {
            // The block's process group: background jobs, a listener still running.
            kill(-process.pid, SIGTERM)
            process.send(signal: SIGTERM)
            _ = process.waitForExit(timeout: .seconds(10))
            let deadline = ContinuousClock.now + .seconds(5)
            while kill(-process.pid, 0) == 0 && ContinuousClock.now < deadline { usleep(10_000) }
        }
        let interruptible = block.mark("until interrupted") != nil
        let deadline = ContinuousClock.now + .seconds(60)
        var stopped = false
        while process.reap() == nil {
            guard ContinuousClock.now < deadline else { return "still running after 60 s: \(process.stderrSoFar())" }
            let now = interruptible ? counts(socket) : before
            if now.subscriptions > before.subscriptions || now.published > before.published {
                // Running until interrupted, subscribed: settle with a ping, then stop it.
                _ = try? LineClient(socket).request(#"{"op":"ping","req":1}"#)
                if process.reap() == nil { stopped = true; break }
            }
            usleep(20_000)
        }
        let status = process.reap()
        if !stopped {
            let expected = Int32(block.mark("exits") ?? "0") ?? 0
            if status?.exitCode != expected { return "exit status \(status.map { "\($0)" } ?? "?"), not \(expected)" }
        }
        let expected = block.marks("stderr")
        let stderr = process.stderrSoFar().split(separator: "\n").filter { line in
            !line.hasPrefix("eventbusd: info: ") && !expected.contains { line.contains($0) }
        }
        if !stderr.isEmpty { return "stderr: \(stderr.joined(separator: "\n"))" }
        for text in block.marks("prints") {
            // A background job's output may come after the block has exited.
            let until = ContinuousClock.now + .seconds(30)
            while !process.stdoutSoFar().contains(text) && ContinuousClock.now < until { usleep(20_000) }
            if !process.stdoutSoFar().contains(text) { return "stdout does not show \(text): \(process.stdoutSoFar())" }
        }
        return nil
    }

    @Test("every block runs as written", arguments: try ShellBlockTests.allBlocks().filter { $0.mark("not run") == nil })
    func blockRuns(_ block: ShellBlock) throws {
        let scratch = try TemporaryDirectory(prefix: "ebsh.")
        defer { scratch.remove() }
        try Self.makeFixtures(in: scratch)
        var broker: TestBroker? = nil
        let socket: String
        if block.mark("own broker") != nil {
            socket = scratch.file("bus.sock")
        } else {
            broker = try TestBroker(scratch: scratch)
            socket = broker!.socket
        }
        defer { try? broker?.stop() }
        var code = Self.substituted(block.code, socket: socket, scratch: scratch.path)
        if block.mark("crontab") != nil {
            code = code.split(separator: " ", maxSplits: 5).dropFirst(5).joined(separator: " ")
        }
        // `after previous`: that block runs in the background, subscribed, while this one runs.
        var background: SpawnedProcess? = nil
        defer {
            if let background {
                kill(-background.pid, SIGTERM)
                _ = background.waitForExit(timeout: .seconds(10))
            }
        }
        if block.mark("after previous") != nil {
            let blocks = try Self.blocks(in: block.file)
            let previous = try #require(blocks.last { $0.line < block.line }, "\(block): no block before it")
            let before = Self.counts(socket).subscriptions
            background = try SpawnedProcess(findInPath("setsid")!, ["/bin/bash", "-c", "cd \(scratch.path)\n" + Self.substituted(previous.code, socket: socket, scratch: scratch.path)],
                                            in: scratch, environment: Self.environment(socket: socket, scratch: scratch))
            try waitUntil("\(previous) has subscribed") { Self.counts(socket).subscriptions > before || background?.isRunning == false }
            #expect(background?.isRunning == true, "\(previous) exited: \(background?.stderrSoFar() ?? "")")
        }
        let units = block.mark("lines") != nil
            ? code.components(separatedBy: "\n").filter { !$0.isEmpty && !$0.hasPrefix("#") }
            : [code]
        for unit in units {
            let failure = try Self.run(unit, block: block, socket: socket, scratch: scratch)
            #expect(failure == nil, "\(block): \(failure ?? "")\n\(unit)")
        }
    }

    @Test("docs/CLI.md's current-value line falls back to USD when nothing is retained, and reads EUR when it is")
    func currencyFallbackFallsBack() throws {
        let line = try #require(try Self.allBlocks().flatMap { $0.code.components(separatedBy: "\n") }.first { $0.contains("code=USD") })
        let broker = try TestBroker()
        func code() throws -> CLIRun {
            try RunningProcess("/bin/bash", ["-c", line + "\nprintf '%s' \"$code\""], in: broker.scratch, environment: [
                "EVENTBUS_SOCKET": broker.socket, "PATH": productsDirectory() + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
            ]).wait()
        }
        let none = try code()
        #expect(none.stdout == "USD" && none.stderr.isEmpty, "\(none)")
        #expect(try broker.run(["publish", "--retain", "currency.changed", #"{"code": "EUR"}"#]).status == 0)
        let eur = try code()
        #expect(eur.stdout == "EUR" && eur.stderr.isEmpty, "\(eur)")
    }
}
