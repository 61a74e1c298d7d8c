// The eventbus-bridge command line, run as a process: --help and --version,
// exit statuses (sysexits: 64 usage, 78 config file, 69 no live bridge for
// --status), every option of the help accepted, the config file read with
// flags overriding it, and --status printing a running bridge's counters.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

extension BridgeSuites {
    @Suite("eventbus-bridge command line")
    struct BridgeCommandLineTests {
        private func bridge(_ arguments: [String], environment: [String: String?] = [:]) throws -> ProcessOutput {
            try runProcess(try builtProduct("eventbus-bridge"), arguments, environment: withoutSystemdVariables().merging(environment) { $1 }, timeout: .seconds(20))
        }

        @Test func helpAndVersionExitZero() throws {
            let help = try bridge(["--help"])
            #expect(help.status == .exited(0) && help.stdout.hasPrefix("Usage: eventbus-bridge"), "\(help.stdout)")
            let version = try bridge(["-V"])
            #expect(version.status == .exited(0) && version.stdout.hasPrefix("eventbus-bridge "))
        }

        @Test(arguments: [
            (["--bogus"], "unknown option '--bogus'"),
            (["--node", "a", "--export", ">"], "no NATS server"),
            (["--nats", "127.0.0.1:1", "--export", ">"], "no node name"),
            (["--nats", "127.0.0.1:1", "--node", "a"], "nothing to bridge"),
            (["--nats", "127.0.0.1:1", "--node", "a.b", "--export", ">"], "--node: \"a.b\" is not a node name"),
            (["--nats", "127.0.0.1:1", "--node", "a", "--export", ">", "--reconnect-max", "5x"], "invalid duration '5x' for --reconnect-max"),
            (["--nats", "127.0.0.1:1", "--node", "a", "--export", ">", "--buffer-events", "0"], "invalid number '0' for --buffer-events"),
            (["--system", "--user", "--nats", "x"], "give only one of --socket, --system and --user"),
            (["extra"], "unexpected argument 'extra'"),
        ])
        func usageErrorsExit64WithOneLine(arguments: [String], message: String) throws {
            let run = try bridge(arguments)
            #expect(run.status == .exited(64), "\(arguments): \(run.stderr)")
            #expect(run.stderr.contains(message) && run.stderr.contains("(see eventbus-bridge --help)"), "\(run.stderr)")
        }

        /// eventbusd `--bridge FILE`: the same file format, checked before a socket is bound.
        @Test func eventbusdRefusesABadBridgeFileOrUserWith78AndBindsNothing() throws {
            let directory = try TemporaryDirectory(prefix: "ebcl-")
            let file = directory.file("bridge.conf")
            try "node = a\nexprot = x\n".write(toFile: file, atomically: false, encoding: .utf8)
            let good = directory.file("good.conf")
            try "nats = 127.0.0.1:1\nnode = a\nexport = >\n".write(toFile: good, atomically: false, encoding: .utf8)
            let socket = directory.file("s")
            func broker(_ arguments: [String]) throws -> ProcessOutput {
                try runProcess(try builtProduct("eventbusd"), ["--socket", socket] + arguments, environment: withoutSystemdVariables(), timeout: .seconds(20))
            }
            for (arguments, message) in [
                (["--bridge", file], "\(file):2: unknown setting \"exprot\""),
                (["--bridge", directory.file("none.conf")], "cannot read the bridge file"),
                (["--bridge", good, "--bridge-user", "no-such-user-eb"], "no user named 'no-such-user-eb'"),
                (["--bridge-user", "0"], "--bridge-user is given without --bridge"),
            ] {
                let run = try broker(arguments)
                #expect(run.status == .exited(78) && run.stderr.contains(message), "\(arguments): \(run.stderr)")
                #expect(access(socket, F_OK) != 0, "no socket left behind")
            }
        }

        /// (attacker6) `eventbusd --check-config` reads the bridge file too: a
        /// group without `@USER` is warned about once, naming the `@USER`
        /// form; with it, no warning; a name given with two users, or an
        /// unknown user, is refused (78).
        @Test func checkConfigWarnsOnceOfAGroupWithoutAUser() throws {
            let directory = try TemporaryDirectory(prefix: "ebcl-")
            defer { directory.remove() }
            func check(_ text: String) throws -> ProcessOutput {
                let file = directory.file("bridge.conf")
                try text.write(toFile: file, atomically: false, encoding: .utf8)
                return try runProcess(try builtProduct("eventbusd"), ["--socket", directory.file("s"), "--bridge", file, "--check-config"],
                                      environment: withoutSystemdVariables(), timeout: .seconds(20))
            }
            let open = try check("nats = 127.0.0.1:1\nnode = a\nexport-group = work:job.>\nimport-group = work:job.>\n")
            #expect(open.status == .exited(0), "\(open.stderr)")
            let warnings = open.stdout.split(separator: "\n").filter { $0.contains("without @USER") }
            #expect(warnings.count == 1 && warnings[0].hasPrefix("# warning: ") && warnings[0].contains("NAME:PATTERN@USER")
                    && warnings[0].contains("export-group work:job.>, import-group work:job.>"), "\(open.stdout)")
            let named = try check("nats = 127.0.0.1:1\nnode = a\nexport-group = work:job.>@root\nimport-group = work:job.>@0\n")
            #expect(named.status == .exited(0) && !named.stdout.contains("warning") && named.stdout.contains("export-group [work:job.>@root]"), "\(named.stdout)\(named.stderr)")
            let two = try check("nats = 127.0.0.1:1\nnode = a\nexport-group = work:job.>@root\nimport-group = work:job.>@4321\n")
            #expect(two.status == .exited(78) && two.stderr.contains("group work is given with @4321 and @root"), "\(two.stderr)")
            let nobody = try check("nats = 127.0.0.1:1\nnode = a\nexport-group = work:job.>@no-such-user-eb\n")
            #expect(nobody.status == .exited(78) && nobody.stderr.contains("no local user named \"no-such-user-eb\""), "\(nobody.stderr)")
        }

        @Test func aBadConfigFileExits78NamingFileAndLine() throws {
            let directory = try TemporaryDirectory(prefix: "ebcl-")
            let file = directory.file("bridge.conf")
            try "node = a\nexprot = x\n".write(toFile: file, atomically: false, encoding: .utf8)
            let bad = try bridge(["--config", file])
            #expect(bad.status == .exited(78) && bad.stderr.contains("\(file):2: unknown setting \"exprot\""), "\(bad.stderr)")
            let missing = try bridge(["--config", directory.file("none.conf")])
            #expect(missing.status == .exited(78) && missing.stderr.contains("cannot read the config file"), "\(missing.stderr)")
        }

        /// bridge.conf is installed root:eventbus-bridge 0640 (it can hold NATS
        /// credentials): another user who tries the bridge by hand is told why.
        @Test(.enabled(if: getuid() == 0 && findInPath("setpriv") != nil, "needs root and setpriv"))
        func aConfigFileTheUserMayNotReadSaysWhoMay() throws {
            let directory = try TemporaryDirectory(prefix: "ebcl-")
            chmod(directory.path, 0o755)  // uid 4321 reaches the file, not its contents
            let file = directory.file("bridge.conf")
            try "nats = nats://127.0.0.1:1\nnode = a\nexport = x.>\nnats-password = s3cret\n".write(toFile: file, atomically: false, encoding: .utf8)
            chmod(file, 0o640)
            let run = try runProcess(findInPath("setpriv")!, ["--reuid", "4321", "--regid", "4321", "--clear-groups", try builtProduct("eventbus-bridge"), "--config", file],
                                     environment: withoutSystemdVariables(), timeout: .seconds(20))
            #expect(run.status == .exited(78), "\(run.stderr)")
            #expect(run.stderr.contains("cannot read the config file \(file): Permission denied (it can hold NATS credentials, so as installed only root "
                + "and the group eventbus-bridge read it: run the bridge as root, or as its unit does, as the user eventbus-bridge)"), "\(run.stderr)")
        }

        @Test func everyOptionOfTheHelpIsAccepted() throws {
            let help = try bridge(["--help"]).stdout
            let options = Set(help.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "[" || $0 == "]" || $0 == "," })
                .filter { $0.hasPrefix("--") && $0.count > 2 }.map { String($0.prefix { $0 != "=" && $0 != "." }) })
            #expect(options.count >= 20, "\(options.sorted())")
            for option in options {
                let run = try bridge([option, "x"])
                #expect(!run.stderr.contains("unknown option"), "\(option): \(run.stderr)")
            }
        }

        @Test func statusWithoutARunningBridgeExits69() throws {
            let directory = try TemporaryDirectory(prefix: "ebcl-")
            let run = try bridge(["--status"], environment: ["RUNTIME_DIRECTORY": directory.path, "XDG_RUNTIME_DIR": nil])
            #expect(run.status == .exited(69) && run.stderr.contains("no running bridge found"), "\(run.stderr)")
        }

        @Test(.enabled(if: NATSCluster.isAvailable))
        func statusPrintsTheRunningBridgesCountersAndTheConfigFileIsRead() throws {
            let cluster = try NATSCluster(count: 1)
            let broker = try BrokerProcess()
            defer { broker.cleanUp() }
            let directory = try TemporaryDirectory(prefix: "ebcl-")
            let file = directory.file("bridge.conf")
            // The file names the NATS server and an import; the flags add the bus and override the node.
            try "nats = \(cluster.url(0))\nnode = from-file\nimport = x.>\nbuffer-events = 7\n".write(toFile: file, atomically: false, encoding: .utf8)
            let process = try SpawnedProcess(try builtProduct("eventbus-bridge"), ["--config", file, "--socket", broker.socketPath, "--node", "flag"],
                                             in: directory, environment: withoutSystemdVariables(["RUNTIME_DIRECTORY": directory.path]), mergeStderr: true)
            defer { process.send(signal: SIGKILL) }
            let statusPath = directory.file("flag.json")
            try waitUntil("the status file with both links up") {
                guard let text = try? String(contentsOfFile: statusPath, encoding: .utf8) else { return false }
                return text.contains(#""bus":"up""#) && text.contains(#""link":"up""#)
            }
            let status = try bridge(["--status"], environment: ["RUNTIME_DIRECTORY": directory.path])
            #expect(status.status == .exited(0), "\(status.stderr)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any], "\(status.stdout)")
            #expect(object["node"] as? String == "flag" && object["bus_path"] as? String == broker.socketPath)
            #expect(object["server"] as? String == cluster.url(0) && (object["pid"] as? NSNumber)?.int32Value == process.pid)
            for key in ["buffered", "buffered_bytes", "exported", "imported", "reconnects", "dropped", "exporting", "updated"] {
                #expect(object[key] != nil, "\(key) missing: \(status.stdout)")
            }
            let one = try bridge(["--status", "--node", "flag"], environment: ["RUNTIME_DIRECTORY": directory.path])
            #expect(one.status == .exited(0) && one.stdout == status.stdout)
            process.send(signal: SIGTERM)
            #expect(try process.waitBlocking().status == .exited(0))
            #expect(!FileManager.default.fileExists(atPath: statusPath), "a clean stop removes the status file")
        }

        /// The link inside eventbusd writes the same status file where eventbus-bridge would
        /// (`$RUNTIME_DIRECTORY/NODE.json`), so `eventbus-bridge --status` prints it; the file's
        /// `socket` and `log-level` are the broker's own there: ignored, with a notice.
        @Test(.enabled(if: NATSCluster.isAvailable))
        func theLinkInsideEventbusdIsSeenByStatusAndIgnoresTheFilesSocketAndLogLevel() throws {
            let cluster = try NATSCluster(count: 1)
            let directory = try TemporaryDirectory(prefix: "ebcl-")
            let file = directory.file("bridge.conf")
            try "nats = \(cluster.url(0))\nnode = inside\nexport = x.>\nsocket = /nonexistent/bus.sock\nlog-level = debug\n".write(toFile: file, atomically: false, encoding: .utf8)
            let broker = try BrokerProcess(arguments: ["--bridge", file], environment: ["RUNTIME_DIRECTORY": directory.path])
            defer { broker.cleanUp() }
            let statusPath = directory.file("inside.json")
            try waitUntil("the status file with both links up") {
                guard let text = try? String(contentsOfFile: statusPath, encoding: .utf8) else { return false }
                return text.contains(#""bus":"up""#) && text.contains(#""link":"up""#)
            }
            let status = try bridge(["--status", "--node", "inside"], environment: ["RUNTIME_DIRECTORY": directory.path])
            #expect(status.status == .exited(0), "\(status.stderr)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any], "\(status.stdout)")
            #expect((object["pid"] as? NSNumber)?.int32Value == broker.pid && object["server"] as? String == cluster.url(0), "\(object)")
            #expect(broker.stderrText().contains("bridge: \(file): socket/bus, log-level ignored inside eventbusd"), "\(broker.stderrText())")
            #expect(broker.terminate() == .exited(0))
            #expect(!FileManager.default.fileExists(atPath: statusPath), "a clean stop removes the status file")
        }

        /// `--socket` with a relative path is the current directory's, as for
        /// `eventbus --socket` (it was refused as "not an absolute path"); the
        /// bridge keeps it absolute (reconnects, the status's `bus_path`).
        @Test(.enabled(if: NATSCluster.isAvailable))
        func aRelativeSocketOnTheCommandLineIsTheCurrentDirectorys() throws {
            let cluster = try NATSCluster(count: 1)
            let broker = try BrokerProcess()
            defer { broker.cleanUp() }
            #expect(broker.socketPath == broker.directory.path + "/s")
            let statusPath = broker.directory.file("rel.json")
            // (SpawnedProcess keeps the test's directory: the shell moves first.)
            let process = try SpawnedProcess("/bin/sh", ["-c", #"cd "$1" && shift && exec "$@""#, "sh", broker.directory.path, try builtProduct("eventbus-bridge"),
                                                         "--socket", "s", "--nats", cluster.url(0), "--node", "rel", "--status-file", statusPath, "--export", "x.>"],
                                             in: broker.directory, environment: withoutSystemdVariables(), mergeStderr: true)
            defer { process.send(signal: SIGKILL) }
            try waitUntil("the status file with the bus up") {
                (try? String(contentsOfFile: statusPath, encoding: .utf8))?.contains(#""bus":"up""#) == true
            }
            let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: statusPath))) as? [String: Any])
            #expect(object["bus_path"] as? String == broker.socketPath, "\(object)")
            // bridge.conf's socket must still be absolute (relative to what?).
            let file = broker.directory.file("rel.conf")
            try "socket = s\n".write(toFile: file, atomically: false, encoding: .utf8)
            let refused = try bridge(["--config", file, "--nats", cluster.url(0), "--node", "x"])
            #expect(refused.status == .exited(78) && refused.stderr.contains("not an absolute path"), "\(refused.stderr)")
        }

        /// (attacker) bridge.conf with `nats-password` or `nats-token` that every
        /// local user may read: a warning naming the file, its mode and the fix
        /// (not a refusal: ConfigFile.credentialsWarning says why); none when
        /// only its owner and group may read it, or when it holds no secret.
        @Test(.enabled(if: NATSCluster.isAvailable))
        func aConfigFileWithCredentialsThatOthersCanReadIsWarnedAbout() throws {
            let cluster = try NATSCluster(count: 1)
            let broker = try BrokerProcess()
            defer { broker.cleanUp() }
            let file = broker.directory.file("bridge.conf")
            func run(_ text: String, mode: Int) throws -> String {
                try text.write(toFile: file, atomically: false, encoding: .utf8)
                try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file)
                let process = try SpawnedProcess(try builtProduct("eventbus-bridge"), ["--config", file, "--socket", broker.socketPath,
                                                                                       "--status-file", broker.directory.file("cred.json")],
                                                 in: broker.directory, environment: withoutSystemdVariables(), mergeStderr: true)
                defer { process.send(signal: SIGKILL) }
                // The warning comes before the first connection's line.
                try waitUntil("the bridge connected to the bus") { process.stdoutSoFar().contains("connected to the bus at") }
                return process.stdoutSoFar()
            }
            let base = "nats = \(cluster.url(0))\nnode = cred\nexport = x.>\n"
            let open = try run(base + "nats-user = bridge\nnats-password = secret\n", mode: 0o644)
            let line = open.split(separator: "\n").first { $0.contains("holds NATS credentials") } ?? ""
            #expect(line.contains("warning") && line.contains(file) && line.contains("(nats-password)") && line.contains("mode 644") && line.contains("chmod o-r"), "\(open)")
            #expect(!(try run(base + "nats-token = secret\n", mode: 0o640)).contains("holds NATS credentials"))
            #expect(!(try run(base + "nats-user = bridge\n", mode: 0o644)).contains("holds NATS credentials"), "a user name is no secret")
        }

        /// (attacker) The recommended leaf node listens on 127.0.0.1; without
        /// an authorization block every local user can publish on it, and
        /// what the link imports reaches the bus as the bridge's uid, past
        /// the policy that binds the user's own connections. The link says so.
        @Test(.enabled(if: NATSCluster.isAvailable))
        func aNATSServerWithoutCredentialsIsWarnedAboutWhenTheLinkImports() throws {
            let cluster = try NATSCluster(count: 1)
            let directory = try TemporaryDirectory(prefix: "ebcl-")
            let file = directory.file("bridge.conf")
            try "nats = \(cluster.url(0))\nnode = open\nimport = x.>\nimport-requests = q.>\n".write(toFile: file, atomically: false, encoding: .utf8)
            let broker = try BrokerProcess(arguments: ["--bridge", file], environment: ["RUNTIME_DIRECTORY": directory.path])
            defer { broker.cleanUp() }
            try waitUntil("the warning about the open NATS server") { broker.stderrText().contains("asks for no credentials") }
            let line = broker.stderrText().split(separator: "\n").first { $0.contains("asks for no credentials") } ?? ""
            #expect(line.contains("warning") && line.contains("publish the imported types and ask this bus's servers as this bridge's uid"), "\(line)")
            #expect(broker.terminate() == .exited(0))
        }
    }
}
