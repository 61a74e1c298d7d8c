// The parser of `/etc/eventbus/bridge.conf`. The caller reads the file; this
// turns its text into `BridgeSettings`, or an error naming file and line.
// `apply` is also what the command line calls for each flag, so a value is
// checked the same way wherever it is given.
//
// The format, one setting per line (config/bridge.conf is the commented example):
//
//     # eventbus-bridge settings (the same names as the flags)
//     nats   = nats://127.0.0.1:4222, nats://127.0.0.1:4223
//     node   = host-a
//     export = order.>          # repeat export/import lines for more patterns
//     export = audit.*
//     import = order.>
//     export-requests = thumb.>     # (issue 36) requests no local server takes go out
//     import-requests = thumb.>
//     export-group = thumbs:thumb.>@thumbd # (issue 36) group events no local member takes go out
//     import-group = thumbs:thumb.>@thumbd # and other machines' come to local members (of user thumbd's group)
//     prefix = eventbus
//     reconnect-initial = 250ms
//     reconnect-max     = 30s
//     buffer-bytes      = 8M
//     buffer-events     = 10000
//     ping-interval     = 20s
//     socket = /run/eventbus/bus.sock   # or: bus = system | user
//     name = eventbus-bridge-host-a     # CONNECT name
//     status-file = /run/eventbus-bridge/host-a.json
//     log-level = info
//     nats-user = eventbus-bridge       # NATS credentials (file only: never on a command line)
//     nats-password = secret
//     nats-token = ...
//
// `key = value`, blanks around both ignored; `#` starts a comment at the start
// of a line or after a blank; blank lines are ignored (the line format of every
// settings file, split by EventBusCommandLine's `SettingsFile`, as eventbusd's). `nats`, `export` and
// `import` may repeat (their values add up; `nats` and both pattern keys also
// take comma-separated lists); any other key given twice is an error.
// Durations and sizes are read by EventBusCommandLine's parsers, as every
// executable's flags are: DURATION as systemd.time(7) (`250ms`, `30s`,
// `5min`, plain seconds), SIZE in bytes or with `K`, `M`, `G` (binary).
//
// Before editing: a new key needs the same name as its flag (credentials are
// the exception: file only), a case in `apply`, and a line in the format above.
import EventBusCommandLine
import EventBusLog
import EventBusNATS
import EventBusSystem
@_spi(Package) import EventBusProtocol

package enum ConfigFile {
    /// The keys understood, in the order of the format above.
    package static let keys = [
        "nats", "node", "export", "import", "export-requests", "import-requests", "export-group", "import-group", "prefix", "reconnect-initial", "reconnect-max",
        "buffer-bytes", "buffer-events", "ping-interval", "socket", "bus", "name", "status-file", "log-level",
        "nats-user", "nats-password", "nats-token",
    ]
    /// The keys that have no flag (secrets must not show in ps(1)).
    package static let fileOnly: Set<String> = ["nats-user", "nats-password", "nats-token"]
    static let repeatable: Set<String> = ["nats", "export", "import", "export-requests", "import-requests", "export-group", "import-group"]

    /// Parses a settings file's text.
    /// - Parameter file: the name used in errors (e.g. `/etc/eventbus/bridge.conf`).
    /// - Throws: `ConfigError` for the first bad line.
    package static func parse(_ text: String, file: String) throws(ConfigError) -> BridgeSettings {
        var settings = BridgeSettings()
        var firstLine: [String: Int] = [:]
        for line in try SettingsFile.lines(text, file: file) {
            let (number, key, value) = (line.line, line.key, line.value)
            guard keys.contains(key) else {
                // A typo is answered with the key meant, as on the command line.
                let near = Suggestion.closest(to: key, among: keys).map { "; did you mean \($0.debugDescription)?" }
                throw ConfigError(file: file, line: number, message: "unknown setting \(key.debugDescription)" + (near ?? " (known: \(keys.joined(separator: ", ")))"))
            }
            if let first = firstLine[key], !repeatable.contains(key) {
                throw ConfigError(file: file, line: number, message: "\(key) is already set on line \(first)")
            }
            if (key == "socket" && firstLine["bus"] != nil) || (key == "bus" && firstLine["socket"] != nil) {
                throw ConfigError(file: file, line: number, message: "give socket or bus, not both")
            }
            firstLine[key] = firstLine[key] ?? number
            do {
                try apply(key, value, to: &settings)
            } catch {
                throw ConfigError(file: file, line: number, message: error.description)
            }
        }
        return settings
    }

    /// Sets one key; the command line calls it for each flag, so flags and
    /// file check values alike.
    /// - Parameters:
    ///   - key: a name of `keys` (`"reconnect-max"`).
    ///   - shownAs: the name errors use (`"--reconnect-max"` for a flag); default `key`.
    /// - Throws: `SettingsError` naming the setting and the bad value, e.g.
    ///   `invalid duration 'soon' for reconnect-max: no number before 'soon' (examples: ...)`.
    package static func apply(_ key: String, _ value: String, to settings: inout BridgeSettings, shownAs: String? = nil) throws(SettingsError) {
        let name = shownAs ?? key
        /// `value` through an EventBusCommandLine parser, its error worded for this setting.
        func parsed<T>(_ parse: (String) throws(ValueError) -> T) throws(SettingsError) -> T {
            do {
                return try parse(value)
            } catch {
                throw SettingsError(error.message(for: name))
            }
        }
        /// `existing` and then each item of `value`'s comma list, made by
        /// `make`; an item it does not make is an error saying it is not `what`.
        func listed<T>(_ existing: [T]?, _ what: String, _ make: (String) -> T?) throws(SettingsError) -> [T] {
            var items = existing ?? []
            for item in list(value) {
                guard let made = make(item) else { throw SettingsError("\(name): \(item.debugDescription) is not \(what)") }
                items.append(made)
            }
            return items
        }
        switch key {
        case "nats":
            settings.servers = try listed(settings.servers, "a NATS URL (nats://HOST[:PORT], HOST[:PORT])") { ServerAddress(url: $0) }
        case "node":
            guard let node = NodeName(value) else {
                throw SettingsError("\(name): \(value.debugDescription) is not a node name (1-63 of A-Z a-z 0-9 _ -)")
            }
            settings.node = node
        case "export":
            settings.exports = try listed(settings.exports, "an eventbus pattern") { Pattern($0) }
        case "import":
            settings.imports = try listed(settings.imports, "an eventbus pattern") { Pattern($0) }
        case "export-requests":  // (issue 36)
            settings.requestExports = try listed(settings.requestExports, "an eventbus pattern") { Pattern($0) }
        case "import-requests":  // (issue 36)
            settings.requestImports = try listed(settings.requestImports, "an eventbus pattern") { Pattern($0) }
        case "export-group", "import-group":  // (issue 36)
            var groups = (key == "export-group" ? settings.groupExports : settings.groupImports) ?? []
            for item in list(value) {
                switch GroupSpec.read(item) {
                case .success(let group): groups.append(group)
                case .failure(let error): throw SettingsError("\(name): \(error)")
                }
            }
            if key == "export-group" { settings.groupExports = groups } else { settings.groupImports = groups }
        case "prefix":
            guard let prefix = SubjectPrefix(value) else {
                throw SettingsError("\(name): \(value.debugDescription) is not a subject prefix (1-8 tokens of A-Z a-z 0-9 _ -, joined by .)")
            }
            settings.prefix = prefix
        case "reconnect-initial", "reconnect-max", "ping-interval":
            let duration = try parsed(parseDuration)
            guard duration > .zero else { throw SettingsError("\(name): \(value.debugDescription) is not a duration above zero") }
            switch key {
            case "reconnect-initial": settings.reconnectInitial = duration
            case "reconnect-max": settings.reconnectMaximum = duration
            default: settings.pingInterval = duration
            }
        case "buffer-bytes":
            settings.bufferBytes = try parsed { v throws(ValueError) in try parseSize(v, minimum: 1) }
        case "buffer-events":
            settings.bufferEvents = try parsed(parseCount)
        case "socket":
            guard value.hasPrefix("/") else { throw SettingsError("\(name): \(value.debugDescription) is not an absolute path") }
            settings.bus = .path(value)
        case "bus":
            switch value {
            case "system": settings.bus = .system
            case "user": settings.bus = .user
            default: throw SettingsError("\(name): \(value.debugDescription) is neither system nor user")
            }
        case "status-file":
            guard value.hasPrefix("/") else { throw SettingsError("\(name): \(value.debugDescription) is not an absolute path") }
            settings.statusFile = value
        case "log-level":
            guard let level = LogLevel(name: value) else {
                throw SettingsError("\(name): \(value.debugDescription) is not error, warning, notice, info or debug")
            }
            settings.logLevel = level
        case "name": settings.name = value
        case "nats-user": settings.user = value
        case "nats-password": settings.password = value
        case "nats-token": settings.token = value
        default:
            throw SettingsError("unknown setting \(key.debugDescription)")
        }
    }

    /// (attacker) The warning due when config file `file` holds NATS
    /// credentials (`nats-password`, `nats-token`) and every local user may
    /// read it (the package installs bridge.conf 0644): any of them could log
    /// in to NATS as the bridge, and put on this bus what the link carries in.
    /// A warning, not a refusal (ssh refuses a private key others can read):
    /// the secret is out by the time the bridge looks, and refusing would turn
    /// it into an outage of the link at the next restart or upgrade (exit 78
    /// is not restarted) rather than a line that says what to fix. Group
    /// read is how the bridge's own group is given the file: not warned.
    /// - Returns: nil when none is due (no secret, not world-readable, or the file cannot be stat'ed).
    package static func credentialsWarning(file: String, settings: BridgeSettings) -> String? {
        var held: [String] = []
        if settings.password != nil { held.append("nats-password") }
        if settings.token != nil { held.append("nats-token") }
        guard !held.isEmpty, let mode = try? FileSystem.permissions(ofPath: file), mode & 0o004 != 0 else { return nil }
        return "\(file) holds NATS credentials (\(held.joined(separator: ", "))) and every local user can read it (mode \(String(mode & 0o777, radix: 8))): "
            + "any of them can connect to NATS as this bridge; let only root and the bridge read it (chmod o-r: e.g. owner root, group eventbus-bridge, mode 640)"
    }

    /// `a, b ,c` as `["a", "b", "c"]` (empty items dropped).
    static func list(_ value: String) -> [String] {
        value.split(separator: ",").map { $0.trimmingBlanks() }.filter { !$0.isEmpty }
    }
}
