// Standard output and standard error for the CLI, written with write(2)
// through EventBusSystem (no stdio buffering, no Foundation).
//
// Before editing: a reader that went away (EPIPE, e.g. `eventbus listen |
// head -n 1`) is not an error: it ends the command quietly with status 0.
// SIGPIPE is ignored in main.swift, so EPIPE arrives here as an error value.
@_spi(Package) import EventBusCLI
import EventBusSystem

/// Bytes for standard output, collected and written in one call per batch
/// (one batch per read from the broker, so every event is flushed as soon
/// as the frames that carried it have been handled).
struct StandardOutput {
    private(set) var pending: [UInt8] = []

    init() { pending.reserveCapacity(1 << 16) }

    var isEmpty: Bool { pending.isEmpty }

    mutating func append(_ bytes: [UInt8]) { pending.append(contentsOf: bytes) }
    mutating func append(_ text: String) { pending.append(contentsOf: text.utf8) }

    /// Appends with a closure that writes into the buffer directly.
    mutating func withBuffer(_ body: (inout [UInt8]) -> Void) { body(&pending) }

    /// Writes everything buffered.
    /// - Throws: `CLIError.quiet(.success)` when the reader has gone (EPIPE);
    ///   `.ioError` for any other write failure.
    mutating func flush() throws(CLIError) {
        guard !pending.isEmpty else { return }
        defer { pending.removeAll(keepingCapacity: true) }
        try StandardOutput.write(pending)
    }

    /// Writes `bytes` to fd 1 at once.
    static func write(_ bytes: [UInt8]) throws(CLIError) {
        do throws(SystemError) {
            try FileDescriptor.standardOutput.writeAll(bytes.span.bytes)
        } catch {
            if error.errno == .brokenPipe { throw .quiet(.success) }
            throw CLIError(.ioError, "cannot write to standard output: \(error.errno)")
        }
    }

    static func write(_ text: String) throws(CLIError) { try write(Array(text.utf8)) }
}

/// Writes one line `eventbus: <message>` to fd 2; failures are ignored
/// (there is nowhere left to report them).
func printError(_ message: String) {
    let bytes = Array("eventbus: \(message)\n".utf8)
    do { try FileDescriptor.standardError.writeAll(bytes.span.bytes) } catch {}
}
