// eventbusd's configuration file (eventbusd.conf(5), config/eventbusd.conf)
// against the real binary: a setting in the file reaches the running broker,
// a command-line flag wins over it, a bad line names FILE:LINE and exits 78,
// an unknown key is refused, the user bus finds its own file, and the shipped
// config/eventbusd.conf documents every key of the option table and is valid
// as written when uncommented. Also `--version` (one source: EventBusRelease):
// every program prints the version, the protocol edition and the features the
// broker lists in `hello`, and the Python package carries the same version.
import EventBusTestSupport
import Foundation
import Testing

@Suite("eventbusd configuration file and --version")
struct ConfigFileTests {
    /// A file of this repository, by its path from the root.
    static func repositoryFile(_ path: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path + "/" + path
    }

    /// Writes `text` to NAME in a new temporary directory; returns the directory and the path.
    static func configFile(_ text: String, name: String = "eventbusd.conf") throws -> (TemporaryDirectory, String) {
        let dir = try TemporaryDirectory(prefix: "eb-conf-")
        let path = dir.path + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return (dir, path)
    }

    /// The keys of eventbusd.conf as the broker names them when refusing an
    /// unknown one (`(the keys: socket, system, ...)`): its option table.
    static func keysOfTheOptionTable() throws -> [String] {
        let (dir, path) = try Self.configFile("no-such-key = 1\n")
        defer { dir.remove() }
        let run = try runProcess(try builtProduct("eventbusd"), ["--config", path, "--check-config"], timeout: .seconds(10))
        let text = run.stderr
        let start = try #require(text.range(of: "(the keys: "), "\(text)")
        let end = try #require(text.range(of: ")", range: start.upperBound..<text.endIndex))
        return text[start.upperBound..<end.lowerBound].components(separatedBy: ", ")
    }

    @Test func aSettingInTheFileReachesTheBrokerAndTheCommandLineWins() throws {
        let (dir, path) = try Self.configFile("# two patterns per connection\nmax-subscriptions = 2\n")
        defer { dir.remove() }
        try withBroker(["--config", path]) { broker in
            let client = try broker.connect()
            for (req, pattern) in [(1, "a.*"), (2, "b.*")] {
                #expect(try client.request(#"{"op":"subscribe","req":\#(req),"type":"\#(pattern)"}"#).op == "ok")
            }
            let third = try client.request(#"{"op":"subscribe","req":3,"type":"c.*"}"#)
            #expect(third.code == "limit", "the file's max-subscriptions = 2 applies: \(third)")
        }
        try withBroker(["--config", path, "--max-subscriptions", "3"]) { broker in
            let client = try broker.connect()
            for (req, pattern) in [(1, "a.*"), (2, "b.*"), (3, "c.*")] {
                let reply = try client.request(#"{"op":"subscribe","req":\#(req),"type":"\#(pattern)"}"#)
                #expect(reply.op == "ok", "--max-subscriptions 3 wins over the file: \(reply)")
            }
        }
    }

    /// (1.3) `max-group-members` from the file bounds another uid's group.
    @Test func maxGroupMembersInTheFileBoundsAGroup() throws {
        guard getuid() == 0, findInPath("setpriv") != nil else { return }
        let (dir, path) = try Self.configFile("max-group-members = 1\n")
        defer { dir.remove() }
        try withBroker(["--config", path]) { broker in
            chmod(broker.directory.path, 0o755)  // other uids reach the socket
            let workers = try connectAs(uid: 4325, path: broker.socketPath, count: 2)
            #expect(try workers[0].request(#"{"op":"subscribe","type":"job","group":"w","req":1}"#).op == "ok")
            let second = try workers[1].request(#"{"op":"subscribe","type":"job","group":"w","req":2}"#)
            #expect(second.code == "limit" && (second.string("message") ?? "").contains("--max-group-members 1"), "the file's max-group-members = 1 applies: \(second)")
        }
    }

    @Test(arguments: [
        ("max-connections = 10\nmax-frame = tiny\n", 2, "max-frame"),
        ("log-level = info\n\nthis is not a setting\n", 3, "expected 'key = value'"),
        ("max-conections = 10\n", 1, "unknown key 'max-conections': it is not a setting; did you mean 'max-connections'?"),
        ("frobnicate = 10\n", 1, "unknown key 'frobnicate': it is not a setting (the keys: socket, system, user, mode, max-frame"),
        ("check-policy = yes\n", 1, "for the command line only"),
        ("system = maybe\n", 1, "system takes yes or no"),
    ])
    func aBadLineNamesFileAndLineAndExits78(_ text: String, _ line: Int, _ words: String) throws {
        let (dir, path) = try Self.configFile(text)
        defer { dir.remove() }
        let socket = dir.path + "/bus.sock"
        let run = try runProcess(try builtProduct("eventbusd"), ["--config", path, "--socket", socket], timeout: .seconds(10))
        #expect(run.status == .exited(78), "\(run.stderr)")
        #expect(run.stderr.contains("\(path):\(line): ") && run.stderr.contains(words), "\(run.stderr)")
        #expect(run.stderr.filter { $0 == "\n" }.count == 1, "one line: \(run.stderr)")
        #expect(access(socket, F_OK) != 0, "no socket left behind")
        let check = try runProcess(try builtProduct("eventbusd"), ["--config", path, "--check-config"], timeout: .seconds(10))
        #expect(check.status == .exited(78) && check.stderr == run.stderr, "\(check.stderr)")
    }

    @Test func aMissingConfigFileGivenByNameExits78() throws {
        let dir = try TemporaryDirectory(prefix: "eb-conf-")
        defer { dir.remove() }
        let run = try runProcess(try builtProduct("eventbusd"), ["--config", dir.path + "/none.conf", "--socket", dir.path + "/bus.sock"], timeout: .seconds(10))
        #expect(run.status == .exited(78))
        #expect(run.stderr.contains(dir.path + "/none.conf: cannot read the configuration file"), "\(run.stderr)")
    }

    @Test func checkConfigSaysWhereEachSettingComesFrom() throws {
        let (dir, path) = try Self.configFile("log-level = debug\nhistory-events = 5\n")
        defer { dir.remove() }
        let run = try runProcess(try builtProduct("eventbusd"), ["-c", path, "--log-level", "error", "--check-config"], timeout: .seconds(10))
        #expect(run.status == .exited(0), "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map { String($0) }
        #expect(lines.first == "# \(path): valid")
        #expect(lines.contains { $0.hasPrefix("log-level = debug ") && $0.hasSuffix("# \(path):1, overridden by the command line") }, "\(run.stdout)")
        #expect(lines.contains { $0.hasPrefix("history-events = 5 ") && $0.hasSuffix("# \(path):2") }, "\(run.stdout)")
        #expect(lines.contains { $0.hasPrefix("log-level = error ") && $0.hasSuffix("# command line") }, "\(run.stdout)")
    }

    /// The user unit runs `eventbusd` with no bus flag in the user manager:
    /// the user bus, which reads $XDG_CONFIG_HOME/eventbus/eventbusd.conf.
    @Test func theUserBusReadsItsOwnFileAndAnotherSocketReadsNone() throws {
        let dir = try TemporaryDirectory(prefix: "eb-conf-")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path + "/config/eventbus", withIntermediateDirectories: true)
        try "max-connections = 7\n".write(toFile: dir.path + "/config/eventbus/eventbusd.conf", atomically: true, encoding: .utf8)
        let environment: [String: String?] = ["XDG_RUNTIME_DIR": dir.path, "XDG_CONFIG_HOME": dir.path + "/config", "EVENTBUS_SOCKET": nil]
        let user = try runProcess(try builtProduct("eventbusd"), ["--user", "--check-config"], environment: environment, timeout: .seconds(10))
        #expect(user.status == .exited(0), "\(user.stderr)")
        #expect(user.stdout.contains("# \(dir.path)/config/eventbus/eventbusd.conf: valid") && user.stdout.contains("max-connections = 7"), "\(user.stdout)")
        let other = try runProcess(try builtProduct("eventbusd"), ["--socket", dir.path + "/other.sock", "--check-config"], environment: environment, timeout: .seconds(10))
        #expect(other.status == .exited(0) && other.stdout.hasPrefix("# no configuration file read"), "\(other.stdout)")
    }

    /// Every key of the option table is documented in the shipped file as a
    /// commented `#key = value` line, and the file with every such line
    /// uncommented is valid: a new option fails here until config/eventbusd.conf shows it.
    @Test func theShippedFileDocumentsEveryKeyAndIsValidUncommented() throws {
        let keys = try Self.keysOfTheOptionTable()
        #expect(keys.count >= 25 && keys.contains("max-connections") && keys.contains("policy"), "\(keys)")
        #expect(!keys.contains("help") && !keys.contains("config") && !keys.contains("check-config"), "\(keys)")
        let shipped = try String(contentsOfFile: Self.repositoryFile("config/eventbusd.conf"), encoding: .utf8)
        let documented = Set(shipped.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { return nil }
            let key = line.dropFirst()[..<equals].trimmingCharacters(in: .whitespaces)
            return key.allSatisfy { $0.isLowercase || $0 == "-" } && !key.isEmpty ? key : nil
        })
        for key in keys { #expect(documented.contains(key), "config/eventbusd.conf has no '#\(key) = ...' line") }
        for key in documented { #expect(keys.contains(key), "config/eventbusd.conf shows '\(key)', which eventbusd does not take") }
        // Uncommented as written (the socket choice lines apply in order, `system = no` leaves it out).
        let uncommented = shipped.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            if line.hasPrefix("#"), let key = documented.first(where: { line.dropFirst().hasPrefix($0 + " =") }), !key.isEmpty { return String(line.dropFirst()) }
            return String(line)
        }.joined(separator: "\n")
        // (attacker6) --check-config reads the bridge file and resolves the bridge user too:
        // a valid file in place of /etc's, and a user that exists here.
        let bridgeFile = "/etc/eventbus/bridge.conf"
        #expect(uncommented.contains("bridge = \(bridgeFile)") && uncommented.contains("bridge-user = eventbus-bridge"), "the example's bridge lines")
        let (dir, path) = try Self.configFile(uncommented.replacingOccurrences(of: "bridge = \(bridgeFile)", with: "bridge = BRIDGE_FILE")
            .replacingOccurrences(of: "bridge-user = eventbus-bridge", with: "bridge-user = root"))
        defer { dir.remove() }
        try "nats = 127.0.0.1:1\nnode = a\nexport = >\n".write(toFile: dir.path + "/bridge.conf", atomically: false, encoding: .utf8)
        try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: "BRIDGE_FILE", with: dir.path + "/bridge.conf")
            .write(toFile: path, atomically: false, encoding: .utf8)
        let run = try runProcess(try builtProduct("eventbusd"), ["--config", path, "--check-config"], timeout: .seconds(10))
        #expect(run.status == .exited(0), "\(run.stderr)")
        #expect(run.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.count == keys.count, "every key given once: \(run.stdout)")
    }

    /// `--version`: three lines, the same for each program, the features the
    /// broker lists in `hello` (with the history on).
    @Test func everyProgramPrintsVersionEditionAndTheBrokersFeatures() throws {
        let daemon = try runProcess(try builtProduct("eventbusd"), ["--version"], timeout: .seconds(10))
        #expect(daemon.status == .exited(0))
        let lines = daemon.stdout.split(separator: "\n").map { String($0) }
        #expect(lines.count == 3, "\(daemon.stdout)")
        let version = try #require(lines.first?.split(separator: " ").last.map(String.init))
        #expect(version.split(separator: ".").count == 3 && version.split(separator: ".").allSatisfy { Int($0) != nil }, "\(version)")
        let edition = version.split(separator: ".").prefix(2).joined(separator: ".")
        #expect(lines[1].hasPrefix("protocol 1, edition \(edition) ("), "\(lines[1])")
        #expect(lines[2].hasPrefix("features: "))
        let features = lines[2].dropFirst("features: ".count).split(separator: " ").map(String.init)
        try withBroker { broker in
            let hello = try broker.connect().request(#"{"op":"hello","req":1}"#)
            #expect(hello.string("version") == version)
            #expect((hello["features"] as? [Any])?.compactMap { $0 as? String } == features, "\(hello)")
        }
        for (program, arguments) in [("eventbus", ["--version"]), ("eventbus-bridge", ["--version"])] {
            guard let path = try? builtProduct(program) else { continue }  // built by its own suite
            let run = try runProcess(path, arguments, timeout: .seconds(10))
            #expect(run.status == .exited(0))
            #expect(run.stdout == daemon.stdout.replacingOccurrences(of: "eventbusd ", with: program + " ", options: .anchored), "\(program): \(run.stdout)")
        }
        let python = try String(contentsOfFile: Self.repositoryFile("clients/python/eventbus/__init__.py"), encoding: .utf8)
        #expect(python.contains("__version__ = \"\(version)\""), "clients/python/eventbus/__init__.py must carry \(version)")
        let changelog = try String(contentsOfFile: Self.repositoryFile("CHANGELOG.md"), encoding: .utf8)
        #expect(changelog.contains("\n## \(version):"), "CHANGELOG.md has no section for \(version)")
    }
}
