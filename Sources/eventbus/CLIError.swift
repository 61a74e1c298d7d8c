// The one error type every subcommand throws (its exit statuses, sysexits(3),
// are EventBusCommandLine's `ExitStatus`). `main.swift` is the only place that prints an error and
// exits: subcommands throw `CLIError` and never call exit(3) themselves.
import EventBusCommandLine

/// Why a subcommand stops: an exit status and, unless quiet, one line for
/// stderr (printed as `eventbus: <message>`).
struct CLIError: Error {
    /// The process exit status (0...255).
    var status: Int32
    /// The line to print after `eventbus: `, or nil to exit quietly.
    var message: String?

    init(_ status: ExitStatus, _ message: String?) {
        self.status = status.rawValue
        self.message = message
    }

    init(status: Int32, message: String?) {
        self.status = status
        self.message = message
    }

    /// A usage error for `command`, pointing at its `--help`.
    static func usage(_ command: String?, _ text: String) -> CLIError {
        let help = command.map { "eventbus \($0) --help" } ?? "eventbus --help"
        return CLIError(.usage, "\(text) (see '\(help)')")
    }

    /// Exit quietly with `status` (a closed stdout exits 0, a timeout 124).
    static func quiet(_ status: ExitStatus) -> CLIError { CLIError(status, nil) }
}
