// The exit statuses every executable of the package uses, sysexits(3) where
// one fits, so that the same failure exits the same way from each.
//
// Before editing: the numbers are part of each program's documented
// interface (`--help`, docs/CLI.md, docs/BRIDGE.md); never renumber a case.

/// The process exit statuses of the executables, from sysexits(3) where one fits
/// (`eventbus`, `eventbusd`, `eventbus-bridge`).
package enum ExitStatus: Int32, Sendable {
    /// Success.
    case success = 0
    /// `eventbus get`: no retained event matched; `eventbus clear`: there
    /// was none to remove (1.1).
    case nothing = 1
    /// (1.3) `eventbus request`: the service answered with an error
    /// (`service_error`), as a command that ran and failed; no sysexits(3)
    /// case fits.
    case serviceFailed = 2
    /// (1.3) `eventbus request`: every server the request reached went away
    /// (closed, withdrew, stalled) without replying (`no_reply`); no
    /// sysexits(3) case fits.
    case noReply = 3
    /// `EX_USAGE`: bad option, missing or malformed argument.
    case usage = 64
    /// `EX_DATAERR`: the data to publish is not valid JSON, or the broker
    /// rejected a request as malformed (`bad_frame`, `bad_request`, `bad_type`,
    /// `frame_too_large`).
    case dataError = 65
    /// `EX_NOUSER` ("addressee unknown"): (1.3) `eventbus request`: nobody
    /// serves the type (`no_responders`).
    case noResponders = 67
    /// `EX_UNAVAILABLE`: the broker cannot be reached or closed the connection.
    case unavailable = 69
    /// `EX_SOFTWARE`: an internal error. `eventbus`: a broker reply it
    /// cannot understand (a receipt with no `seq`), or a system call with no
    /// other status failing (poll(2), waitpid(2)); `eventbusd` and
    /// `eventbus-bridge`: they could not start or run their event loop.
    case software = 70
    /// `EX_IOERR`: reading standard input or writing standard output failed.
    case ioError = 74
    /// `EX_TEMPFAIL`: the broker refused for now (`limit`, `slow_consumer`).
    case temporaryFailure = 75
    /// `EX_PROTOCOL`: the broker answered with an error code this CLI does not know.
    case protocolError = 76
    /// `EX_NOPERM`: permission denied on the socket, or `forbidden`.
    case noPermission = 77
    /// `EX_CONFIG`: a configuration file cannot be read or is invalid
    /// (eventbusd's policy files, `bridge.conf`).
    case config = 78
    /// Nothing arrived in time (`--timeout`), as timeout(1) exits.
    case timedOut = 124
    /// `wait`'s COMMAND was found but could not be run (as env(1)).
    case cannotExecute = 126
    /// `wait`'s COMMAND was not found (as env(1)).
    case commandNotFound = 127
}
