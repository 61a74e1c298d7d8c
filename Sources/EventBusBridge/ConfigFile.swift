// The parser of `/etc/eventbus/bridge.conf`. The caller reads the file; this
// turns its text into `BridgeSettings`, or an error naming file and line.
//
// The format, one setting per line:
//
//     # eventbus-bridge settings (the same names as the flags)
//     nats   = nats://127.0.0.1:4222, nats://127.0.0.1:4223
//     node   = host-a
//     export = order.>          # repeat export/import lines for more patterns
//     export = audit.*
//     import = order.>
//     prefix = eventbus
//     reconnect-initial = 250ms
//     reconnect-max     = 30s
//     buffer-bytes      = 8M
//     buffer-events     = 10000
//     ping-interval     = 20s
//     socket = /run/eventbus/bus.sock   # or: bus = system | user
//     name = eventbus-bridge host-a     # CONNECT name
//     user = bridge                     # NATS credentials, when the server wants them
//     password = secret
//     token = ...
//
// `key = value`, blanks around both ignored; `#` starts a comment at the start
// of a line or after a blank; blank lines are ignored. `nats`, `export` and
// `import` may repeat (their values add up; `nats` and both pattern keys also
// take comma-separated lists); any other key given twice is an error.
// Durations: a number with `ms`, `s`, `m` or `h` (plain: seconds). Sizes:
// bytes, or with `K`, `M`, `G` (binary; `KiB`... accepted).
//
// Before editing: a new key needs the same name as its flag, a line in the
// table in `apply`, and a line in the format above.
import EventBusNATS
import EventBusProtocol

/// A bad line in a settings file. `description` reads `bridge.conf:3: ...`.
public struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    public let file: String
    public let line: Int
    public let message: String

    public var description: String { "\(file):\(line): \(message)" }
}

public enum ConfigFile {
    /// The keys understood, in the order of the format above.
    public static let keys = [
        "nats", "node", "export", "import", "prefix", "reconnect-initial", "reconnect-max",
        "buffer-bytes", "buffer-events", "ping-interval", "socket", "bus", "name", "user", "password", "token",
    ]
    static let repeatable: Set<String> = ["nats", "export", "import"]

    /// Parses a settings file's text.
    /// - Parameter file: the name used in errors (e.g. `/etc/eventbus/bridge.conf`).
    /// - Throws: `ConfigError` for the first bad line.
    public static func parse(_ text: String, file: String) throws(ConfigError) -> BridgeSettings {
        var settings = BridgeSettings()
        var firstLine: [String: Int] = [:]
        var number = 0
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            number += 1
            let line = withoutComment(raw).trimmingBlanks()
            if line.isEmpty { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigError(file: file, line: number, message: "expected 'key = value', not \(String(line.prefix(80)).debugDescription)")
            }
            let key = line[..<equals].trimmingBlanks().lowercased()
            let value = line[line.index(after: equals)...].trimmingBlanks()
            guard keys.contains(key) else {
                throw ConfigError(file: file, line: number, message: "unknown setting \(key.debugDescription) (known: \(keys.joined(separator: ", ")))")
            }
            guard !value.isEmpty else { throw ConfigError(file: file, line: number, message: "\(key) has no value") }
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

    /// Sets one key. Shared with the command line (step 2), so flags and file check values alike.
    /// - Throws: `SettingsError` naming the key and the bad value.
    public static func apply(_ key: String, _ value: String, to settings: inout BridgeSettings) throws(SettingsError) {
        switch key {
        case "nats":
            var servers = settings.servers ?? []
            for item in list(value) {
                guard let server = ServerAddress(url: item) else {
                    throw SettingsError("nats: \(item.debugDescription) is not a NATS URL (nats://HOST[:PORT], HOST[:PORT])")
                }
                servers.append(server)
            }
            settings.servers = servers
        case "node":
            guard let node = NodeName(value) else {
                throw SettingsError("node: \(value.debugDescription) is not a node name (1-63 of A-Z a-z 0-9 _ -)")
            }
            settings.node = node
        case "export", "import":
            var patterns = (key == "export" ? settings.exports : settings.imports) ?? []
            for item in list(value) {
                guard let pattern = Pattern(item) else { throw SettingsError("\(key): \(item.debugDescription) is not an eventbus pattern") }
                patterns.append(pattern)
            }
            if key == "export" { settings.exports = patterns } else { settings.imports = patterns }
        case "prefix":
            guard let prefix = SubjectPrefix(value) else {
                throw SettingsError("prefix: \(value.debugDescription) is not a subject prefix (1-8 tokens of A-Z a-z 0-9 _ -, joined by .)")
            }
            settings.prefix = prefix
        case "reconnect-initial", "reconnect-max", "ping-interval":
            guard let duration = parseDuration(value), duration > .zero else {
                throw SettingsError("\(key): \(value.debugDescription) is not a duration above zero (250ms, 30s, 5m, 1h)")
            }
            switch key {
            case "reconnect-initial": settings.reconnectInitial = duration
            case "reconnect-max": settings.reconnectMaximum = duration
            default: settings.pingInterval = duration
            }
        case "buffer-bytes":
            guard let bytes = parseSize(value), bytes >= 1 else { throw SettingsError("buffer-bytes: \(value.debugDescription) is not a size (8388608, 64K, 8M)") }
            settings.bufferBytes = bytes
        case "buffer-events":
            guard let count = Int(value), count >= 1 else { throw SettingsError("buffer-events: \(value.debugDescription) is not a positive whole number") }
            settings.bufferEvents = count
        case "socket":
            guard value.hasPrefix("/") else { throw SettingsError("socket: \(value.debugDescription) is not an absolute path") }
            settings.bus = .socket(value)
        case "bus":
            switch value {
            case "system": settings.bus = .system
            case "user": settings.bus = .user
            default: throw SettingsError("bus: \(value.debugDescription) is neither system nor user")
            }
        case "name": settings.name = value
        case "user": settings.user = value
        case "password": settings.password = value
        case "token": settings.token = value
        default:
            throw SettingsError("unknown setting \(key.debugDescription)")
        }
    }

    /// `a, b ,c` as `["a", "b", "c"]` (empty items dropped).
    static func list(_ value: String) -> [String] {
        value.split(separator: ",").map { $0.trimmingBlanks() }.filter { !$0.isEmpty }
    }

    /// The line up to a `#` that starts it or follows a blank.
    static func withoutComment(_ line: Substring) -> Substring {
        var previous: Character = " "
        for index in line.indices {
            let c = line[index]
            if c == "#" && (previous == " " || previous == "\t") { return line[..<index] }
            previous = c
        }
        return line
    }

    /// `500ms`, `30s`, `5m`, `1h`, or a plain number of seconds (decimals allowed).
    /// (The broker and the CLI each have one too; to be merged into one shared parser.)
    static func parseDuration(_ text: String) -> Duration? {
        var number = Substring(text)
        var scale = 1.0
        for (suffix, factor) in [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)] where text.hasSuffix(suffix) {
            number = number.dropLast(suffix.count)
            scale = factor
            break
        }
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let value = Double(number), value.isFinite, value * scale < 1e9 else { return nil }
        return .nanoseconds(Int64((value * scale * 1e9).rounded()))
    }

    /// `123`, `64K`, `8M`, `1G` (binary multiples; `KiB`, `KB`, `B` spellings accepted).
    static func parseSize(_ text: String) -> Int? {
        var digits = Substring(text)
        var multiplier = 1
        for (suffixes, factor) in [(["KiB", "KB", "K", "k"], 1 << 10), (["MiB", "MB", "M", "m"], 1 << 20), (["GiB", "GB", "G", "g"], 1 << 30)] {
            if let suffix = suffixes.first(where: { text.hasSuffix($0) }) {
                digits = digits.dropLast(suffix.count)
                multiplier = factor
                break
            }
        }
        if multiplier == 1 && digits.hasSuffix("B") { digits = digits.dropLast() }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(digits) else { return nil }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : bytes
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces, tabs and CRs (a CRLF file reads the same).
    func trimmingBlanks() -> String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" || c == "\r" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" || c == "\r" { s = s.dropLast() }
        return String(s)
    }
}
