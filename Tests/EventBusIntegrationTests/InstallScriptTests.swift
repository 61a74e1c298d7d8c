// scripts/install and scripts/uninstall into temporary trees: `--user` into a
// temporary HOME with no user manager answering, `--prefix` with DESTDIR, and
// uninstall with the same arguments leaving nothing behind. The scripts install
// this build's debug products (`--bin-dir`), so no release build runs here.
// The Python client (clients/python) is imported from where it was installed,
// with /usr/bin/python3 as on Debian (the user site directory for --user).
// Also: every script exits 64 on a usage error and 0 on --help.
//
// Before editing: never run the scripts here without DESTDIR or a temporary
// HOME, and keep XDG_RUNTIME_DIR pointing at a temporary folder, so no real
// systemd manager is ever reached.
import EventBusTestSupport
import Foundation
import Testing

/// The repository's root (where scripts/ is), from this file's path.
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

@Suite("scripts/install and scripts/uninstall", .timeLimit(.minutes(2)))
struct InstallScriptTests {
    /// Runs `scripts/NAME ARGS` with `environment` over the test's, no
    /// D-Bus session and `XDG_RUNTIME_DIR` in `scratch` (no user manager there).
    private func script(_ name: String, _ arguments: [String], environment: [String: String?] = [:], in scratch: TemporaryDirectory) throws -> ProcessOutput {
        var changes: [String: String?] = ["DBUS_SESSION_BUS_ADDRESS": nil, "XDG_CONFIG_HOME": nil, "DESTDIR": nil,
                                           "XDG_RUNTIME_DIR": scratch.file("run")]
        for (key, value) in environment { changes[key] = value }
        try FileManager.default.createDirectory(atPath: scratch.file("run"), withIntermediateDirectories: true)
        return try SpawnedProcess(repositoryRoot + "/scripts/" + name, arguments, in: scratch, environment: changes)
            .waitBlocking(timeout: .seconds(60))
    }

    /// Every path under `root`, relative, sorted ("" entries excluded).
    private func tree(_ root: String) -> [String] {
        (FileManager.default.subpaths(atPath: root) ?? []).sorted()
    }

    /// Checks `path` is an executable ELF file without a symbol table, and that it runs.
    private func expectStrippedExecutable(_ path: String, in scratch: TemporaryDirectory) throws {
        #expect(FileManager.default.isExecutableFile(atPath: path), "\(path)")
        if let readelf = findInPath("readelf") {
            let sections = try SpawnedProcess(readelf, ["-S", "-W", path], in: scratch).waitBlocking(timeout: .seconds(10))
            #expect(sections.status == 0)
            #expect(!sections.stdout.contains(".symtab"), "\(path) still has its symbol table")
        }
        let version = try SpawnedProcess(path, ["--version"], in: scratch).waitBlocking(timeout: .seconds(10))
        #expect(version.status == 0, "\(path) --version: \(version.stderr)")
    }

    /// Runs `python3 -c 'import eventbus; print(eventbus.__file__)'` with
    /// `environment`; returns the module's file, or nil when the import failed.
    /// Bytecode is written as an import as root would write it: uninstall must remove it.
    private func importedPythonClient(environment: [String: String?], in scratch: TemporaryDirectory) throws -> String? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return nil }
        var changes: [String: String?] = ["PYTHONPATH": nil, "PYTHONUSERBASE": nil, "PYTHONDONTWRITEBYTECODE": nil]
        for (key, value) in environment { changes[key] = value }
        let output = try SpawnedProcess("/usr/bin/python3", ["-c", "import eventbus; print(eventbus.__file__)"], in: scratch, environment: changes)
            .waitBlocking(timeout: .seconds(20))
        return output.status == 0 ? output.stdout.trimmingCharacters(in: .whitespacesAndNewlines) : nil
    }

    @Test func userInstallPutsBinariesAndUnitsUnderHomeAndUninstallRemovesThemAll() throws {
        let scratch = try TemporaryDirectory(prefix: "ebin.")
        let home = scratch.file("home")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        let installed = try script("install", ["--user", "--bin-dir", productsDirectory()], environment: ["HOME": home], in: scratch)
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        #expect(installed.stdout.contains("no systemd user manager answers here; did not run systemctl"), "\(installed.stdout)")

        try expectStrippedExecutable(home + "/.local/bin/eventbusd", in: scratch)
        try expectStrippedExecutable(home + "/.local/bin/eventbus", in: scratch)
        try expectStrippedExecutable(home + "/.local/bin/eventbus-bridge", in: scratch)
        let unit = try String(contentsOfFile: home + "/.config/systemd/user/eventbus.service", encoding: .utf8)
        #expect(unit.split(separator: "\n").filter { $0.hasPrefix("ExecStart=") } == ["ExecStart=\(home)/.local/bin/eventbusd --state-dir ${STATE_DIRECTORY} $EVENTBUSD_OPTIONS"])
        #expect(FileManager.default.fileExists(atPath: home + "/.config/systemd/user/eventbus.socket"))
        #expect(!tree(home).contains { $0.contains("systemd/system") || $0.contains("sysusers") || $0.hasSuffix("bridge.conf") }, "no system units, user or bridge config for --user: \(tree(home))")
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") {
            let module = try importedPythonClient(environment: ["HOME": home], in: scratch)
            #expect(module?.hasPrefix(home + "/.local/lib/python3") == true && module?.hasSuffix("/site-packages/eventbus/__init__.py") == true,
                    "python3 -c 'import eventbus' after --user: \(module ?? "failed")")
        }

        let removed = try script("uninstall", ["--user"], environment: ["HOME": home], in: scratch)
        #expect(removed.status == 0, "\(removed.stdout)\(removed.stderr)")
        #expect(tree(home) == [], "left behind: \(tree(home))")
    }

    @Test(arguments: [
        ("/usr/local", "/etc/systemd/system", "/etc/systemd/user"),
        ("/usr", "/usr/lib/systemd/system", "/usr/lib/systemd/user"),
        ("/opt/eventbus", "/opt/eventbus/lib/systemd/system", "/opt/eventbus/lib/systemd/user"),
    ])
    func prefixInstallWithDestdirFollowsThePrefixAndUninstallLeavesTheStageEmpty(prefix: String, systemUnits: String, userUnits: String) throws {
        let scratch = try TemporaryDirectory(prefix: "ebin.")
        let stage = scratch.file("stage")
        try FileManager.default.createDirectory(atPath: stage, withIntermediateDirectories: false)
        let installed = try script("install", ["--prefix", prefix, "--bin-dir", productsDirectory()], environment: ["DESTDIR": stage], in: scratch)
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        #expect(installed.stdout.contains("DESTDIR is set: staged under \(stage), systemctl not run"))

        try expectStrippedExecutable(stage + prefix + "/bin/eventbusd", in: scratch)
        try expectStrippedExecutable(stage + prefix + "/bin/eventbus", in: scratch)
        try expectStrippedExecutable(stage + prefix + "/bin/eventbus-bridge", in: scratch)
        let bridgeUnit = try String(contentsOfFile: stage + systemUnits + "/eventbus-bridge.service", encoding: .utf8)
        #expect(bridgeUnit.split(separator: "\n").filter { $0.hasPrefix("ExecStart=") } == ["ExecStart=\(prefix)/bin/eventbus-bridge --system --config /etc/eventbus/bridge.conf"])
        let metricsUnit = try String(contentsOfFile: stage + systemUnits + "/eventbus-metrics.service", encoding: .utf8)
        #expect(metricsUnit.split(separator: "\n").filter { $0.hasPrefix("ExecStart=") } == ["ExecStart=\(prefix)/bin/eventbus --system stats --prometheus --output /var/lib/prometheus/node-exporter/eventbus.prom"])
        #expect(FileManager.default.fileExists(atPath: stage + systemUnits + "/eventbus-metrics.timer"))
        let sysusers = prefix == "/usr/local" ? "/etc/sysusers.d" : prefix + "/lib/sysusers.d"
        #expect(FileManager.default.fileExists(atPath: stage + sysusers + "/eventbus-bridge.conf"), "\(tree(stage))")
        for conf in ["bridge.conf", "eventbusd.conf"] {
            #expect(FileManager.default.contents(atPath: stage + "/etc/eventbus/" + conf) == FileManager.default.contents(atPath: repositoryRoot + "/config/" + conf))
        }
        for (directory, bus) in [(systemUnits, "--system"), (userUnits, "--user")] {
            let unit = try String(contentsOfFile: stage + directory + "/eventbus.service", encoding: .utf8)
            let lines = unit.split(separator: "\n")
            let start = bus == "--system" ? "ExecStart=\(prefix)/bin/eventbusd --system --state-dir ${STATE_DIRECTORY} $EVENTBUSD_OPTIONS" : "ExecStart=\(prefix)/bin/eventbusd --state-dir ${STATE_DIRECTORY} $EVENTBUSD_OPTIONS"
            #expect(lines.filter { $0.hasPrefix("ExecStart=") } == [Substring(start)], "\(directory)")
            #expect(lines.filter { $0.hasPrefix("ExecReload=") } == ["ExecReload=\(prefix)/bin/eventbus \(bus) reload --wait"], "\(directory)")
            #expect(FileManager.default.fileExists(atPath: stage + directory + "/eventbus.socket"))
        }
        // The vendor policy, where the installed broker looks for it (../share/eventbus from its bin).
        let vendor = stage + prefix + "/share/eventbus/policy.conf"
        #expect(FileManager.default.contents(atPath: vendor) == FileManager.default.contents(atPath: repositoryRoot + "/config/policy.conf"))
        let check = try SpawnedProcess(stage + prefix + "/bin/eventbusd", ["--system", "--check-policy"], in: scratch).waitBlocking(timeout: .seconds(10))
        #expect(check.status == 0 && check.stdout.hasPrefix("# effective policy of ") && check.stdout.contains(" \(vendor)"), "\(check.stdout)\(check.stderr)")
        // The Python client, where python3 looks for the prefix (Debian: /usr/local/lib/python3.X/dist-packages,
        // /usr/lib/python3/dist-packages), or PREFIX/lib/python3/dist-packages elsewhere.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") {
            let installed = tree(stage).filter { $0.hasSuffix("-packages/eventbus/__init__.py") }
            #expect(installed.count == 1, "\(tree(stage))")
            let packages = "/" + (installed.first ?? "").replacingOccurrences(of: "/eventbus/__init__.py", with: "")
            let module = try importedPythonClient(environment: ["PYTHONPATH": stage + packages], in: scratch)
            #expect(module == stage + packages + "/eventbus/__init__.py", "python3 -c 'import eventbus' from the stage: \(module ?? "failed")")
            if prefix == "/opt/eventbus" {
                #expect(packages == "/opt/eventbus/lib/python3/dist-packages")
            } else {
                let path = try SpawnedProcess("/usr/bin/python3", ["-c", "import sys; print(sys.path)"], in: scratch).waitBlocking(timeout: .seconds(20))
                #expect(packages.hasPrefix(prefix + "/lib/python3") && path.stdout.contains("'\(packages)'"), "\(packages) is on python3's path: \(path.stdout)")
            }
        }

        let removed = try script("uninstall", ["--prefix", prefix], environment: ["DESTDIR": stage], in: scratch)
        #expect(removed.status == 0, "\(removed.stdout)\(removed.stderr)")
        #expect(tree(stage) == [], "left behind: \(tree(stage))")
    }

    @Test func uninstallKeepsADirectoryThatInstallCreatedOnceItHoldsSomethingElse() throws {
        let scratch = try TemporaryDirectory(prefix: "ebin.")
        let stage = scratch.file("stage")
        try FileManager.default.createDirectory(atPath: stage, withIntermediateDirectories: false)
        let environment: [String: String?] = ["DESTDIR": stage]
        #expect(try script("install", ["--prefix", "/opt/eb", "--bin-dir", productsDirectory()], environment: environment, in: scratch).status == 0)
        try "mine\n".write(toFile: stage + "/opt/eb/bin/other-tool", atomically: false, encoding: .utf8)
        let removed = try script("uninstall", ["--prefix", "/opt/eb"], environment: environment, in: scratch)
        #expect(removed.status == 0)
        #expect(tree(stage) == ["opt", "opt/eb", "opt/eb/bin", "opt/eb/bin/other-tool"], "\(removed.stdout)")
    }

    @Test func uninstallKeepsAnEditedBridgeConfig() throws {
        let scratch = try TemporaryDirectory(prefix: "ebin.")
        let stage = scratch.file("stage")
        try FileManager.default.createDirectory(atPath: stage, withIntermediateDirectories: false)
        let environment: [String: String?] = ["DESTDIR": stage]
        #expect(try script("install", ["--bin-dir", productsDirectory()], environment: environment, in: scratch).status == 0)
        try "nats = 127.0.0.1:4222\nnode = mine\n".write(toFile: stage + "/etc/eventbus/bridge.conf", atomically: false, encoding: .utf8)
        let again = try script("install", ["--bin-dir", productsDirectory()], environment: environment, in: scratch)
        #expect(again.stdout.contains("kept \(stage)/etc/eventbus/bridge.conf"), "\(again.stdout)")
        let removed = try script("uninstall", [], environment: environment, in: scratch)
        #expect(removed.status == 0 && removed.stdout.contains("kept \(stage)/etc/eventbus/bridge.conf (edited"), "\(removed.stdout)")
        #expect(tree(stage) == ["etc", "etc/eventbus", "etc/eventbus/bridge.conf"], "\(tree(stage))")
    }

    /// scripts/install links these three with the Swift runtime static (issue 23): one
    /// that imports Foundation gets static Foundation, whose temporary-file code uses
    /// glibc's `mktemp`, and the link warns "the use of `mktemp' is dangerous". The
    /// debug build links Foundation dynamically, so its NEEDED entries show an import.
    @Test(.enabled(if: findInPath("readelf") != nil, "needs readelf (binutils)"), arguments: ["eventbusd", "eventbus", "eventbus-bridge"])
    func theStaticallyLinkedProgramsLinkNoFoundation(program: String) throws {
        let scratch = try TemporaryDirectory(prefix: "ebin.")
        let dynamic = try SpawnedProcess(findInPath("readelf")!, ["-d", "-W", productsDirectory() + "/" + program], in: scratch).waitBlocking(timeout: .seconds(10))
        #expect(dynamic.status == 0, "\(dynamic.stderr)")
        #expect(dynamic.stdout.contains("(NEEDED)"), "\(dynamic.stdout)")
        #expect(!dynamic.stdout.contains("libFoundation"), "\(program) imports Foundation: \(dynamic.stdout)")
    }

    @Test(arguments: ["install", "uninstall", "test", "bench", "check-units", "demo", "deps", "fuzz", "soak"])
    func usageErrorsExit64AndHelpExits0(name: String) throws {
        let scratch = try TemporaryDirectory(prefix: "ebin.")
        let wrong = try script(name, ["--no-such-option"], in: scratch)
        #expect(wrong.status == 64, "scripts/\(name) --no-such-option: \(wrong.stderr)")
        #expect(!wrong.stderr.isEmpty)
        let help = try script(name, ["--help"], in: scratch)
        #expect(help.status == 0, "scripts/\(name) --help: \(help.stderr)")
        #expect(help.stdout.contains("Usage: scripts/\(name)"), "scripts/\(name) --help: \(help.stdout)")
    }
}
