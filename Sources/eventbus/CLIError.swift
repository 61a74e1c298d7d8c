// Exit statuses (sysexits(3), timeout(1)) and the one error type every
// subcommand throws. `main.swift` is the only place that prints an error and
// exits: subcommands throw `CLIError` and never call exit(3) themselves.

/// The process exit statuses of `eventbus`, from sysexits(3) where one fits.
enum ExitStatus: Int32 {
    /// Success.
    case success = 0
    /// `get`: no retained event matched; `clear`: there was none to remove.
    case nothing = 1
    /// `EX_USAGE`: bad option, missing or malformed argument.
    case usage = 64
    /// `EX_DATAERR`: the data to publish is not valid JSON, or the broker
    /// rejected a request as malformed (`bad_frame`, `bad_request`, `bad_type`,
    /// `frame_too_large`).
    case dataError = 65
    /// `EX_UNAVAILABLE`: the broker cannot be reached or closed the connection.
    case unavailable = 69
    /// `EX_SOFTWARE`: a broker reply this CLI cannot understand.
    case software = 70
    /// `EX_IOERR`: reading standard input or writing standard output failed.
    case ioError = 74
    /// `EX_TEMPFAIL`: the broker refused for now (`limit`, `slow_consumer`).
    case temporaryFailure = 75
    /// `EX_PROTOCOL`: the broker answered with an error code this CLI does not know.
    case protocolError = 76
    /// `EX_NOPERM`: permission denied on the socket, or `forbidden`.
    case noPermission = 77
    /// Nothing arrived in time (`--timeout`), as timeout(1) exits.
    case timedOut = 124
    /// `wait`'s COMMAND was found but could not be run (as env(1)).
    case cannotExecute = 126
    /// `wait`'s COMMAND was not found (as env(1)).
    case commandNotFound = 127
}

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
