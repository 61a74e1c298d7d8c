// Logging seam: library targets never print; they hand messages to a `LogSink`
// through a `Logger`. A target of its own (no I/O, no dependency), so that a
// target that only names a level or takes a logger (EventBusBridge's settings)
// needs nothing else; the sinks live with what they write to
// (`StderrLogSink` in EventBusSystem, the journal's in EventBusSystemd).
//
// Before editing: sinks are called on the broker's event-loop thread, so they
// must not block for long (stderr and journal writes are fine).

/// Severity of a log message, with syslog(3) priority numbers as raw values
/// (the journal's `PRIORITY=` field uses the same numbers).
package enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case error = 3
    case warning = 4
    case notice = 5
    case info = 6
    case debug = 7

    /// Parses `error`, `warning`, `notice`, `info` or `debug` (as given to `--log-level`).
    package init?(name: String) {
        switch name {
        case "error", "err": self = .error
        case "warning", "warn": self = .warning
        case "notice": self = .notice
        case "info": self = .info
        case "debug": self = .debug
        default: return nil
        }
    }

    /// The lowercase name, as accepted by `init?(name:)`.
    package var name: String {
        switch self {
        case .error: "error"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }

    /// More severe levels compare smaller, as syslog priorities do.
    package static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Where log messages go. `fields` are extra structured fields for the journal,
/// upper-case names such as `EVENTBUS_CONN`; a plain-text sink may append them.
package protocol LogSink: Sendable {
    /// Records one message. Called only for messages at or above the sink's level
    /// by `Logger`; must not block the caller for long.
    func write(level: LogLevel, message: String, fields: [(String, String)])
}

/// A level filter in front of a `LogSink`. Cheap to copy; `Sendable`.
package struct Logger: Sendable {
    /// Messages less severe than this are discarded before formatting.
    package var level: LogLevel
    /// The destination.
    package var sink: any LogSink

    /// - Parameters:
    ///   - level: the least severe level written (default `.info`).
    ///   - sink: where messages go.
    package init(level: LogLevel = .info, sink: any LogSink) {
        self.level = level
        self.sink = sink
    }

    /// Whether a message at `level` would be written (check before building costly messages).
    @inlinable package func enabled(_ level: LogLevel) -> Bool { level <= self.level }

    /// Writes `message()` if `level` is enabled; the message is built lazily.
    package func log(_ level: LogLevel, _ message: @autoclosure () -> String, fields: [(String, String)] = []) {
        guard enabled(level) else { return }
        sink.write(level: level, message: message(), fields: fields)
    }

    package func error(_ message: @autoclosure () -> String, fields: [(String, String)] = []) { log(.error, message(), fields: fields) }
    package func warning(_ message: @autoclosure () -> String, fields: [(String, String)] = []) { log(.warning, message(), fields: fields) }
    package func notice(_ message: @autoclosure () -> String, fields: [(String, String)] = []) { log(.notice, message(), fields: fields) }
    package func info(_ message: @autoclosure () -> String, fields: [(String, String)] = []) { log(.info, message(), fields: fields) }
    package func debug(_ message: @autoclosure () -> String, fields: [(String, String)] = []) { log(.debug, message(), fields: fields) }
}

/// A sink that starts every message with `prefix` (`bridge: `), for a part of
/// a program that logs through the program's own sink (the NATS link inside
/// eventbusd).
package struct PrefixedLogSink: LogSink {
    package let prefix: String
    package let sink: any LogSink

    package init(prefix: String, sink: any LogSink) {
        self.prefix = prefix
        self.sink = sink
    }

    package func write(level: LogLevel, message: String, fields: [(String, String)]) {
        sink.write(level: level, message: prefix + message, fields: fields)
    }
}
