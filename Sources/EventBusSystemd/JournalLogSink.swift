// Logging to the systemd journal with structured fields, and telling whether stderr
// already goes there.
//
// Before editing: `sd_journal_sendv` is used (not the variadic `sd_journal_send`, which
// Swift cannot call); every field is a "NAME=value" string, values may hold any bytes.
import CSystemd
import EventBusLog
import EventBusSystem
import Glibc

/// A `LogSink` writing one structured journal entry per message with `sd_journal_sendv(3)`:
/// `PRIORITY=` (the `LogLevel` raw value, syslog numbering), `MESSAGE=`,
/// `SYSLOG_IDENTIFIER=`, then each field, e.g. `EVENTBUS_CONN=7`, `EVENTBUS_PID=1234`.
///
/// Field names are normalised to the journal's rules (`systemd.journal-fields(7)`:
/// upper-case `A-Z`, `0-9`, `_`, not starting with `_` or a digit, at most 64 bytes):
/// lower-case letters are upper-cased, other bytes become `_`, leading `_` and digits
/// are dropped, and a name left empty drops its field. When the journal cannot be
/// reached (`sd_journal_sendv` fails) the message is written to stderr instead, so it
/// is not lost. Use it when `stderrIsJournal()` is true.
package struct JournalLogSink: LogSink {
    /// The `SYSLOG_IDENTIFIER=` of every entry, e.g. `"eventbusd"`.
    package let identifier: String

    /// - Parameter identifier: the `SYSLOG_IDENTIFIER=` value (what `journalctl -t` matches).
    package init(identifier: String) { self.identifier = identifier }

    package func write(level: LogLevel, message: String, fields: [(String, String)]) {
        let entry = journalEntry(identifier: identifier, level: level, message: message, fields: fields)
        if sendToJournal(entry) < 0 {
            StderrLogSink(program: identifier).write(level: level, message: message, fields: fields)
        }
    }
}

/// Writes the one line of a start-up failure (before the broker's logger
/// exists) so that it reaches the journal however systemd wired stderr:
/// - started by systemd (`startedBySystemd()`) with stderr connected to the
///   journal: a stderr line with the `<3>` priority prefix journald's stream
///   transport reads (`sd-daemon(3)`; `SyslogLevelPrefix=` is on by default),
///   which journald attributes to the unit even when the process has already
///   exited;
/// - started by systemd with stderr elsewhere (`StandardError=null`, a file, a
///   terminal): a structured entry with `sd_journal_sendv(3)` (`PRIORITY=`,
///   `SYSLOG_IDENTIFIER=`, as `JournalLogSink`), and the plain stderr line too;
/// - otherwise: the plain stderr line of `StderrLogSink`
///   (`eventbusd: error: <message>`).
package struct StartupFailureLogSink: LogSink {
    /// The program name and `SYSLOG_IDENTIFIER=`, e.g. `"eventbusd"`.
    package let program: String

    /// - Parameter program: the name before each line and the journal identifier.
    package init(program: String) { self.program = program }

    package func write(level: LogLevel, message: String, fields: [(String, String)]) {
        let plain = StderrLogSink(program: program)
        guard startedBySystemd() else { return plain.write(level: level, message: message, fields: fields) }
        if stderrIsJournal() {
            // One physical line per message: the prefix applies to the line it starts.
            let line = message.map { $0.isNewline ? " " : $0 }
            let bytes = Array("<\(level.rawValue)>\(program): \(level.name): \(String(line))\n".utf8)
            _ = try? FileDescriptor.standardError.writeAll(bytes.span.bytes)
        } else {
            _ = sendToJournal(journalEntry(identifier: program, level: level, message: message, fields: fields))
            plain.write(level: level, message: message, fields: fields)
        }
    }
}

/// True when systemd started this process as (part of) a unit: `$INVOCATION_ID`
/// or `$JOURNAL_STREAM` is set (`systemd.exec(5)`, "Environment Variables in
/// Spawned Processes").
package func startedBySystemd() -> Bool {
    environment("INVOCATION_ID") != nil || environment("JOURNAL_STREAM") != nil
}

/// True when fd 2 is connected to the journal: `$JOURNAL_STREAM` is set (as
/// `<device>:<inode>`, decimal) and matches `fstat(2)` of fd 2 (`systemd.exec(5)`,
/// "JOURNAL_STREAM"). A redirected stderr (`2>file`, a pipe) no longer matches, even
/// though the variable was inherited.
package func stderrIsJournal() -> Bool {
    var status = stat()
    guard fstat(2, &status) == 0 else { return false }
    return journalStreamMatches(environment("JOURNAL_STREAM"), device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
}

/// Whether a `JOURNAL_STREAM` value (`"<device>:<inode>"`) names this device and inode.
func journalStreamMatches(_ value: String?, device: UInt64, inode: UInt64) -> Bool {
    guard let value else { return false }
    let parts = value.split(separator: ":", omittingEmptySubsequences: false)
    guard parts.count == 2, let valueDevice = UInt64(parts[0]), let valueInode = UInt64(parts[1]) else { return false }
    return valueDevice == device && valueInode == inode
}

/// The `NAME=value` strings of one journal entry, in the order sent.
func journalEntry(identifier: String, level: LogLevel, message: String, fields: [(String, String)]) -> [String] {
    var entry = [
        "PRIORITY=\(level.rawValue)",
        "MESSAGE=\(message)",
        "SYSLOG_IDENTIFIER=\(identifier)",
    ]
    for (key, value) in fields {
        if let name = journalFieldName(key) { entry.append("\(name)=\(value)") }
    }
    return entry
}

/// `key` made into a valid journal field name (`systemd.journal-fields(7)`), or nil when
/// nothing usable is left: `"conn id"` -> `"CONN_ID"`, `"_PID"` -> `"PID"`.
func journalFieldName(_ key: String) -> String? {
    var bytes: [UInt8] = []
    for byte in key.utf8 {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"): bytes.append(byte - 32)
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): bytes.append(byte)
        default: bytes.append(UInt8(ascii: "_"))
        }
    }
    let start = bytes.firstIndex { !($0 == UInt8(ascii: "_") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)) }
    guard let start else { return nil }
    return String(decoding: bytes[start...].prefix(64), as: UTF8.self)
}

/// Sends one entry with `sd_journal_sendv(3)`: all strings are packed into one buffer
/// and named by one range each (`IOVectors`, which owns the iovec array; the buffer
/// is held until the call returns). Returns its result (0, or a negative errno).
private func sendToJournal(_ entry: [String]) -> CInt {
    var buffer: [UInt8] = []
    var ranges: [Range<Int>] = []
    for field in entry {
        let start = buffer.count
        buffer.append(contentsOf: field.utf8)
        ranges.append(start..<buffer.count)
    }
    var vectors = IOVectors(capacity: ranges.count)
    return withExtendedLifetime(buffer) {
        let bytes = buffer.span.bytes
        for range in ranges { vectors.append(bytes.extracting(range)) }
        return vectors.withIOVecs { sd_journal_sendv($0, CInt($1)) }
    }
}
