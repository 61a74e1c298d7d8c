// The one error type every subcommand throws (its exit statuses, sysexits(3),
// are EventBusCommandLine's `ExitStatus`). The `eventbus` executable's
// `main.swift` is the only place that prints an error and exits: subcommands
// throw `CLIError` and never call exit(3) themselves.
import EventBusCommandLine

/// Why a subcommand stops: an exit status and, unless quiet, one line for
/// stderr (printed as `eventbus: <message>`).
package struct CLIError: Error, Equatable {
    /// The process exit status (0...255).
    package var status: Int32
    /// The line to print after `eventbus: `, or nil to exit quietly.
    package var message: String?

    package init(_ status: ExitStatus, _ message: String?) {
        self.status = status.rawValue
        self.message = message
    }

    package init(status: Int32, message: String?) {
        self.status = status
        self.message = message
    }

    /// A usage error for `command`, pointing at its `--help`.
    package static func usage(_ command: String?, _ text: String) -> CLIError {
        let help = command.map { "eventbus \($0) --help" } ?? "eventbus --help"
        return CLIError(.usage, "\(text) (see '\(help)')")
    }

    /// Exit quietly with `status` (a closed stdout exits 0, a timeout 124).
    package static func quiet(_ status: ExitStatus) -> CLIError { CLIError(status, nil) }
}
