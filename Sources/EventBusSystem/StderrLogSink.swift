// The plain-text log sink: one line per message on fd 2, for a terminal, a
// pipe or a file (the journal has its own sink, EventBusSystemd).
//
// Before editing: it must never block the event loop (see `write`).
import EventBusLog

/// Writes `eventbusd[<pid>]: <level>: message key=value...` lines to fd 2.
package struct StderrLogSink: LogSink {
    /// Program name shown at the start of each line.
    package let program: String

    /// - Parameter program: name printed before each line, e.g. `"eventbusd"`.
    package init(program: String) { self.program = program }

    package func write(level: LogLevel, message: String, fields: [(String, String)]) {
        var line = "\(program): \(level.name): \(message)"
        for (key, value) in fields { line += " \(key.lowercased())=\(value)" }
        line += "\n"
        // A full non-blocking stderr (EAGAIN) or a failed write drops the rest
        // of the line: the sink must not block the event loop.
        let bytes = Array(line.utf8)
        let span = bytes.span.bytes
        var offset = 0
        while offset < span.byteCount,
              case .complete(let n)? = try? FileDescriptor.standardError.write(span.extracting(droppingFirst: offset)),
              n > 0 {
            offset += n
        }
    }
}
