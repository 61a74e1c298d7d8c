// Regression tests for the breaks of issue 20 (docs/RELIABILITY.md "Attack
// round 2") in the state file, the state directory, the frames a line
// reader splits, `stats` and `conn`: against the real broker, with clients
// of other uids (`connectAs`, uids 4321...4327). The tests run as root.
//
// Before editing: each test settles with a reply before it asserts an absence.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Attack round 2: state, output, stats")
struct AttackRound2StateTests {
    // MARK: (1) The state file never brings back the past

    /// Six uids retain ~1 MB events (their share of --max-retained-bytes 8M)
    /// and republish them; root then
    /// changes `secret.key` and clears `secret.revoked`. The appended file
    /// grew past what start-up read (2 x --max-retained-bytes + 1 MiB), and
    /// after a restart the old key and the cleared revocation came back.
    /// Now the file is compacted before an append could take it past that
    /// size, and the old values never return, over two restarts.
    @Test func republishedRetainedEventsOfSixUidsNeverBringBackRootsOldValues() throws {
        let state = try TemporaryDirectory(prefix: "ebstate-")
        defer { state.remove() }
        let file = state.file("retained.jsonl")
        let arguments = ["--state-dir", state.path, "--max-retained-bytes", "8M"]
        let limit = 2 * (8 << 20) + (1 << 20)
        func fileSize() -> Int {
            var info = stat()
            return stat(file, &info) == 0 ? Int(info.st_size) : 0
        }
        let first = try BrokerProcess(arguments: arguments)
        defer { first.cleanUp() }
        chmod(first.directory.path, 0o755)  // other uids reach the socket
        let root = try first.connect()
        try root.ok(#"{"op":"publish","type":"secret.key","retain":true,"req":1,"data":"v1"}"#)
        try root.ok(#"{"op":"publish","type":"secret.revoked","retain":true,"req":2,"data":["token-7"]}"#)
        let pad = String(repeating: "x", count: 1_000_000)
        var largest = 0
        let attackers = try (0..<6).map { i in try #require(try connectAs(uid: 4321 + UInt32(i), path: first.socketPath).first) }
        for round in 0..<25 {
            for (i, attacker) in attackers.enumerated() {
                try attacker.send(#"{"op":"publish","type":"big.u\#(i)","retain":true,"req":\#(round),"data":"\#(round)\#(pad)"}"#)
            }
            for attacker in attackers { #expect(try attacker.readFrame(timeout: .seconds(30)).op == "ok") }
            largest = max(largest, fileSize())
        }
        try root.ok(#"{"op":"publish","type":"secret.key","retain":true,"req":3,"data":"v2"}"#)
        try root.ok(#"{"op":"clear","type":"secret.revoked","req":4}"#)
        for _ in 0..<20 {
            largest = max(largest, fileSize())
            usleep(50_000)
        }
        #expect(largest <= limit, "the state file reached \(largest) bytes, past \(limit)")
        #expect(first.terminate() == .exited(0))
        #expect(fileSize() <= limit)
        #expect(!first.stderrText().contains("reading its first"), "\(first.stderrText())")

        for run in 0..<2 {
            try withBroker(arguments) { broker in
                let reader = try broker.connect()
                let ok = try reader.ok(#"{"op":"subscribe","type":"secret.>","last":true,"req":1}"#)
                let events = try reader.readFrames(count: ok.int("retained") ?? 0)
                #expect(events.count == 1, "run \(run): \(events)")
                #expect(events.first?.type == "secret.key" && events.first?.string("data") == "v2", "run \(run): \(events)")
                let all = try reader.ok(#"{"op":"subscribe","type":"big.>","last":true,"req":2}"#)
                #expect(all.int("retained") == 6, "run \(run): \(all)")
                _ = try reader.readFrames(count: all.int("retained") ?? 0, timeout: .seconds(30))
            }
        }
    }

    /// A state file larger than the old read limit (a hand-made one here:
    /// 2 x 1 MiB + 1 MiB with --max-retained-bytes 1M) whose tail holds the
    /// newer value and a clear: the whole file is read, so neither the old
    /// value nor the cleared event comes back.
    @Test func aStateFileLargerThanTheOldReadLimitIsReadWhole() throws {
        let state = try TemporaryDirectory(prefix: "ebstate-")
        defer { state.remove() }
        func event(_ seq: Int, _ type: String, _ data: String) -> String {
            #"{"op":"event","seq":\#(seq),"type":"\#(type)","time":"2026-12-01T23:00:00.000Z","source":"root","id":"i\#(seq)","pid":1,"uid":0,"gid":0,"data":\#(data)}"#
        }
        var lines = [#"{"op":"eventbus-state","format":1}"#, event(1, "secret.key", #""v1""#), event(2, "secret.revoked", #"["token-7"]"#)]
        let pad = String(repeating: "y", count: 100_000)
        for seq in 3..<43 { lines.append(event(seq, "fill.x", "\"\(seq)\(pad)\"")) }
        lines.append(event(43, "secret.key", #""v2""#))
        lines.append(#"{"op":"eventbus-clear","type":"secret.revoked","seq":44}"#)
        let text = lines.joined(separator: "\n") + "\n"
        #expect(text.utf8.count > 3 << 20)
        try text.write(toFile: state.file("retained.jsonl"), atomically: false, encoding: .utf8)
        chmod(state.path, 0o700)
        try withBroker(["--state-dir", state.path, "--max-retained-bytes", "1M"]) { broker in
            let reader = try broker.connect()
            let ok = try reader.ok(#"{"op":"subscribe","type":">","last":true,"req":1}"#)
            let events = try reader.readFrames(count: ok.int("retained") ?? 0)
            #expect(Set(events.compactMap(\.type)) == ["secret.key", "fill.x"], "\(events.map(\.type))")
            #expect(events.first { $0.type == "secret.key" }?.string("data") == "v2")
            #expect(events.first { $0.type == "fill.x" }?.string("data")?.hasPrefix("42") == true)
        }
    }

    // MARK: (7) The state directory

    /// A directory made first by another uid (here chowned to 4321) is
    /// refused with exit 78 and a message naming the owner.
    @Test func aStateDirectoryOwnedByAnotherUidIsRefusedWithExit78() throws {
        let parent = try TemporaryDirectory(prefix: "ebstate-parent-")
        defer { parent.remove() }
        chmod(parent.path, 0o755)
        let directory = parent.file("state")
        mkdir(directory, 0o700)
        chown(directory, 4321, 4321)
        let broker = try BrokerProcess(arguments: ["--state-dir", directory], waitUntilReady: false)
        defer { broker.cleanUp() }
        #expect(broker.waitForExit() == .exited(78))
        #expect(broker.stderrText().contains("owned by uid 4321"), "\(broker.stderrText())")
        #expect(!pathExists(broker.socketPath), "refused before it bound")
    }

    /// A world-writable directory (even root's own) is refused too.
    @Test func aWorldWritableStateDirectoryIsRefusedWithExit78() throws {
        let directory = try TemporaryDirectory(prefix: "ebstate-")
        defer { directory.remove() }
        chmod(directory.path, 0o777)
        let broker = try BrokerProcess(arguments: ["--state-dir", directory.path], waitUntilReady: false)
        defer { broker.cleanUp() }
        #expect(broker.waitForExit() == .exited(78))
        #expect(broker.stderrText().contains("mode 0777"), "\(broker.stderrText())")
    }

    /// A missing directory is made 0700; an existing 0755 one is tightened to 0700.
    @Test func theStateDirectoryIsCreatedAndKept0700() throws {
        let parent = try TemporaryDirectory(prefix: "ebstate-parent-")
        defer { parent.remove() }
        let made = parent.file("made")
        try withBroker(["--state-dir", made]) { _ in
            #expect(fileMode(made)?.permissions == 0o700)
        }
        let loose = parent.file("loose")
        mkdir(loose, 0o755)
        chmod(loose, 0o755)
        try withBroker(["--state-dir", loose]) { _ in
            #expect(fileMode(loose)?.permissions == 0o700)
        }
    }

    /// A symlink planted at the temporary file's name (to a root-only 0600
    /// file) used to be followed by the O_CREAT|O_TRUNC open: the victim
    /// was overwritten. Now it is unlinked and the file made with O_EXCL:
    /// the victim keeps its bytes, and a symlink at the state file's own
    /// name is not read.
    @Test func aSymlinkPlantedInTheStateDirectoryIsNeverFollowed() throws {
        let state = try TemporaryDirectory(prefix: "ebstate-")
        defer { state.remove() }
        chmod(state.path, 0o700)
        let victimDirectory = try TemporaryDirectory(prefix: "ebvictim-")
        defer { victimDirectory.remove() }
        let victim = victimDirectory.file("shadow")
        try "root-only secret\n".write(toFile: victim, atomically: false, encoding: .utf8)
        chmod(victim, 0o600)
        let forged = victimDirectory.file("forged.jsonl")
        try (#"{"op":"eventbus-state","format":1}"# + "\n" + #"{"op":"event","seq":1,"type":"forged.x","time":"2026-12-01T23:00:00.000Z","source":"root","id":"i","pid":1,"uid":0,"gid":0,"data":1}"# + "\n")
            .write(toFile: forged, atomically: false, encoding: .utf8)
        symlink(victim, state.file("retained.jsonl.tmp"))
        symlink(forged, state.file("retained.jsonl"))
        try withBroker(["--state-dir", state.path]) { broker in
            let client = try broker.connect()
            let ok = try client.ok(#"{"op":"subscribe","type":">","last":true,"req":1}"#)
            #expect(ok.int("retained") == 0, "the symlinked state file was not read")
            try client.ok(#"{"op":"publish","type":"real.x","retain":true,"req":2,"data":2}"#)
            try waitUntil("the state file is written") {
                (try? String(contentsOfFile: state.file("retained.jsonl"), encoding: .utf8))?.contains("real.x") == true
            }
        }
        #expect((try? String(contentsOfFile: victim, encoding: .utf8)) == "root-only secret\n", "the victim is intact")
        var info = stat()
        #expect(lstat(state.file("retained.jsonl"), &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG, "a regular file replaced the link")
        #expect(lstat(state.file("retained.jsonl.tmp"), &info) != 0, "no temporary file left")
    }

    // MARK: (6) No frame a line reader splits

    /// A raw CR as JSON whitespace inside `data` was forwarded byte for
    /// byte; a subscriber reading with Python's universal newlines parsed
    /// the part after it as a forged event. Raw U+2028/U+2029 (and U+0085),
    /// which `str.splitlines()` splits on, were forwarded too. Now each such
    /// frame is refused (`bad_frame`, naming the character), the escaped
    /// spellings are delivered, and a Python reader of both kinds sees
    /// exactly the events published, one per line.
    @Test func noFrameTheBrokerSendsIsSplitByAPythonLineReader() throws {
        guard let python = findInPath("python3") else { throw TestFailure("python3 is not installed") }
        try withBroker { broker in
            let reader = """
            import json, socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            s.sendall(b'{"op":"subscribe","type":"line.>","req":1}\\n')
            f = s.makefile('r', encoding='utf-8')  # universal newlines: CR, LF and CRLF end a line
            lines = []
            while True:
                line = f.readline()
                if not line: break
                text = line.rstrip('\\n')
                if len(text.splitlines()) > 1: print('SPLIT', repr(text)); sys.exit(1)
                frame = json.loads(text)
                if frame.get('op') == 'event':
                    if frame['type'] == 'line.end': break
                    print(frame['type'], frame['uid'], json.dumps(frame['data']))
            """
            let script = broker.directory.file("reader.py")
            try reader.write(toFile: script, atomically: false, encoding: .utf8)
            let child = try SpawnedProcess(python, [script, broker.socketPath], in: broker.directory, stderrPath: broker.directory.file("reader.stderr"))
            let publisher = try broker.connect()
            try waitUntil("the reader is subscribed") { try publisher.stats().int("subscriptions") == 1 }
            let forged = #"{"op":"event","seq":1,"type":"system.reboot","time":"2026-12-01T23:00:00.000Z","source":"init","id":"x","pid":1,"uid":0,"gid":0,"data":{}}"#
            let refused: [(String, String)] = [
                ("cr", "{\"op\":\"publish\",\"type\":\"line.cr\",\"req\":1,\"data\":[1,\r\(forged)\r]}"),
                ("cr-top", "{\"op\":\"publish\",\r\"type\":\"line.cr2\",\"req\":2,\"data\":1}"),
                ("u2028", "{\"op\":\"publish\",\"type\":\"line.ls\",\"req\":3,\"data\":\"a\u{2028}b\"}"),
                ("u2029", "{\"op\":\"publish\",\"type\":\"line.ps\",\"req\":4,\"data\":[\"a\u{2029}b\"]}"),
                ("nel", "{\"op\":\"publish\",\"type\":\"line.nel\",\"req\":5,\"source\":\"a\u{85}b\",\"data\":1}"),
                ("id", "{\"op\":\"publish\",\"type\":\"line.id\",\"req\":6,\"id\":\"\u{2028}\",\"data\":1}"),
                ("long", "{\"op\":\"publish\",\"type\":\"line.long\",\"req\":7,\"data\":{\"k\":[1,2,{\"x\":\"\(String(repeating: "é", count: 40))\u{2029}\"}]}}"),
            ]
            for (name, frame) in refused {
                try publisher.send(frame)
                let reply = try publisher.readFrame()
                #expect(reply.op == "error" && reply.code == "bad_frame", "\(name): \(reply)")
                #expect(reply.string("message")?.contains("raw CR, U+0085, U+2028 or U+2029") == true, "\(name): \(reply)")
            }
            // The escaped spellings and a tab, LF-free whitespace: delivered.
            try publisher.ok(#"{"op":"publish","type":"line.ok","req":10,"data":{"a":"x\u2028y\u2029z\u0085","b":"\r"},"# + "\t" + #""source":"é"}"#)
            try publisher.ok(#"{"op":"publish","type":"line.end","req":11,"data":null}"#)
            #expect(child.waitForExit(timeout: .seconds(20)) == .exited(0), "\(child.stdoutSoFar()) \(child.stderrSoFar())")
            let printed = child.stdoutSoFar().split(separator: "\n").map(String.init)
            #expect(printed == [#"line.ok 0 {"a": "x\u2028y\u2029z\u0085", "b": "\r"}"#], "\(printed)")
        }
    }

    /// An error message quoting the client's input (an unknown op written
    /// with `\u2028`) wrote the separator raw; now it is escaped.
    @Test func stringsTheBrokerWritesEscapeTheUnicodeLineSeparators() throws {
        try withBroker { broker in
            let client = try broker.connect()
            try client.send(#"{"op":"bo\u2028gus\u0085\u2029","req":1}"#)
            let line = try client.readLine()
            let text = String(decoding: line, as: UTF8.self)
            #expect(!line.contains(0xE2) && !line.contains(0xC2), "\(text)")
            #expect(text.contains("unknown_op") && text.contains(#"bo\\u2028gus\\u0085\\u2029"#), "\(text)")
            #expect(text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).count == 1)
        }
    }

    // MARK: (8) stats and conn

    /// Root retains a type uid 4327 may not receive: its `stats` counted
    /// it (`retained`, `retained_bytes`: the secret's length). Now it
    /// counts only what it may receive; root still sees everything.
    @Test func statsCountsOnlyTheRetainedEventsTheCallerMayReceive() throws {
        let policy = try TemporaryDirectory(prefix: "ebpolicy-")
        defer { policy.remove() }
        let file = policy.file("policy.conf")
        try "default subscribe deny\nallow subscribe public.>\n".write(toFile: file, atomically: false, encoding: .utf8)
        try withBroker(["--policy", file]) { broker in
            chmod(broker.directory.path, 0o755)
            let root = try broker.connect()
            try root.ok(#"{"op":"publish","type":"public.x","retain":true,"req":1,"data":1}"#)
            let before = try #require(try connectAs(uid: 4327, path: broker.socketPath).first)
            let baseline = try before.stats()
            #expect(baseline.int("retained") == 1, "\(baseline)")
            let publicBytes = try #require(baseline.int("retained_bytes"))
            try root.ok(#"{"op":"publish","type":"secret.key","retain":true,"req":2,"data":"\#(String(repeating: "s", count: 777))"}"#)
            let after = try before.stats()
            #expect(after.int("retained") == 1 && after.int("retained_bytes") == publicBytes, "\(after)")
            let all = try root.stats()
            #expect(all.int("retained") == 2 && all.int("retained_bytes")! > publicBytes + 777, "\(all)")
        }
    }

    /// `hello`'s `conn` was a global counter: a uid saw how many
    /// connections others opened between two of its own. Now ids are a
    /// keyed permutation: between two of a uid's connections, with and
    /// without 50 others opened meanwhile, nothing tells the two cases apart
    /// (the ids differ from the counter, and are unique).
    @Test func connIdsDoNotRevealOthersChurn() throws {
        try withBroker { broker in
            chmod(broker.directory.path, 0o755)
            func conn(_ client: RawClient) throws -> Int { try #require(try client.ok(#"{"op":"hello","req":"h"}"#).int("conn")) }
            let watcher = try connectAs(uid: 4322, path: broker.socketPath, count: 2)
            let a = try conn(watcher[0]), b = try conn(watcher[1])
            var others: [RawClient] = []
            for _ in 0..<50 { others.append(try broker.connect()) }
            let c = try #require(try connectAs(uid: 4322, path: broker.socketPath).first)
            let third = try conn(c)
            var seen = Set([a, b, third])
            for other in others { seen.insert(try conn(other)) }
            #expect(seen.count == 53, "unique")
            #expect(seen.allSatisfy { $0 > 0 && $0 <= 1 << 48 })
            // The counter would give a+1 == b and third - b == 51.
            #expect(!(b == a + 1 && third == b + 51), "\(a) \(b) \(third)")
            #expect(Set([a, b, third]) != Set([2, 3, 54]))
            // `clients` names the same ids as `hello`.
            let listed = try watcher[0].ok(#"{"op":"clients","req":"c"}"#)
            let ids = (listed.array("clients") ?? []).compactMap { ($0 as? [String: Any])?["conn"] as? Int }
            #expect(Set(ids) == Set([a, b, third]), "\(ids)")
        }
    }
}
