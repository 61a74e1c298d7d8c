// The bridge's counters on disk, for `eventbus-bridge --status` (docs/BRIDGE.md
// "Counters"): the running bridge rewrites one JSON line every second in its
// runtime directory (atomically: a new file renamed over the old one) and
// removes it on a clean stop; `--status` prints every such file it finds and
// says which are stale (not rewritten for `staleAfter`: that bridge is not
// running, or is stuck).
//
// Before editing: the writer and the reader find the directory by the same
// rule (`directory`), so a status file written under systemd
// (`RuntimeDirectory=eventbus-bridge`, i.e. /run/eventbus-bridge) is found by an
// administrator's `eventbus-bridge --status` with no option at all.
import EventBusCommandLine
import EventBusSystem

package enum StatusFile {
    /// How often the running bridge rewrites its file.
    package static let interval: Duration = .seconds(1)
    /// A file older than this belongs to no live bridge.
    package static let staleAfter: Duration = .seconds(5)

    /// Where a bridge keeps its status file, first that applies:
    /// `$RUNTIME_DIRECTORY` (systemd's `RuntimeDirectory=`), `/run/eventbus-bridge`
    /// for root, `$XDG_RUNTIME_DIR/eventbus-bridge` for other users; nil when none applies.
    package static func directory(environment: [String: String], effectiveUID: UInt32) -> String? {
        if let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first, !runtime.isEmpty { return String(runtime) }
        if effectiveUID == 0 { return "/run/eventbus-bridge" }
        if let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty { return xdg + "/eventbus-bridge" }
        return nil
    }

    /// The directories `--status` looks in without `--status-file`: the one
    /// of `directory` and the system bridges' `/run/eventbus-bridge`.
    package static func searchDirectories(environment: [String: String], effectiveUID: UInt32) -> [String] {
        var result: [String] = []
        if let own = directory(environment: environment, effectiveUID: effectiveUID) { result.append(own) }
        if !result.contains("/run/eventbus-bridge") { result.append("/run/eventbus-bridge") }
        return result
    }

    /// `DIR/NODE.json`, or the configured `status-file`.
    package static func path(for configuration: BridgeConfiguration, environment: [String: String], effectiveUID: UInt32) -> String? {
        if let file = configuration.statusFile { return file }
        return directory(environment: environment, effectiveUID: effectiveUID).map { "\($0)/\(configuration.node.text).json" }
    }

    /// Replaces the file at `path` with `json` and a newline (`DurableFile`:
    /// write `path.tmp`, then rename(2); not fsynced, it is rewritten every
    /// second), mode 0644 less the umask, creating its directory (0755) when missing.
    /// - Throws: `SystemError` of the directory creation or the write.
    package static func write(_ json: String, to path: String) throws {
        try FileSystem.createDirectories(FileSystem.parentDirectory(of: path), mode: 0o755)
        let bytes = Array((json + "\n").utf8)
        try DurableFile.replace(path, with: bytes.span.bytes, durable: false, mode: 0o644)
    }

    /// Removes the file (a clean stop); errors are ignored.
    package static func remove(_ path: String) {
        try? FileSystem.unlink(path)
    }

    /// One status file as `--status` found it.
    package struct Found {
        var path: String
        var line: String
        /// Seconds since it was last written.
        var age: Double
    }

    /// The status files at `paths` (files) or in the directories `directories` (`*.json`), oldest name first.
    package static func find(paths: [String], directories: [String]) -> [Found] {
        var files = paths
        for directory in directories {
            let names = ((try? FileSystem.directoryEntries(directory)) ?? nil) ?? []
            files += names.filter { $0.hasSuffix(".json") }.map { "\(directory)/\($0)" }
        }
        return files.compactMap { path in
            guard let data = try? FileSystem.readFile(path, maxBytes: 1 << 20),
                  let modified = try? FileSystem.modificationNanoseconds(ofPath: path) else { return nil }
            let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
            let line = String(decoding: data.drop(while: isSpace).reversed().drop(while: isSpace).reversed(), as: UTF8.self)
            return Found(path: path, line: line, age: max(0, Double(Clock.wallNanoseconds() - modified) / 1e9))
        }
    }

    /// `--status`: prints the status file of each running bridge found (one JSON
    /// line each) and returns the exit status: 0 when at least one was found and
    /// all are fresh, 69 when none was found or one is stale.
    package static func printStatus(_ settings: BridgeSettings, environment: [String: String]) -> Int32 {
        let uid = ProcessIdentity.effectiveUID
        var paths: [String] = []
        var directories: [String] = []
        if let file = settings.statusFile {
            paths = [file]
        } else if let node = settings.node {
            directories = []
            paths = searchDirectories(environment: environment, effectiveUID: uid).map { "\($0)/\(node.text).json" }
        } else {
            directories = searchDirectories(environment: environment, effectiveUID: uid)
        }
        let found = find(paths: paths, directories: directories)
        guard !found.isEmpty else {
            let looked = (paths.isEmpty ? directories.map { $0 + "/*.json" } : paths).joined(separator: ", ")
            StderrLogSink(program: "eventbus-bridge").write(level: .error, message: "no running bridge found (looked for \(looked))", fields: [])
            return ExitStatus.unavailable.rawValue
        }
        var stale = false
        for status in found {
            print(status.line)
            if status.age > Double(staleAfter.components.seconds) {
                stale = true
                StderrLogSink(program: "eventbus-bridge").write(level: .warning, message: "\(status.path) was last written \(Int(status.age)) s ago: that bridge is not running (or is stuck)", fields: [])
            }
        }
        return stale ? ExitStatus.unavailable.rawValue : ExitStatus.success.rawValue
    }
}
