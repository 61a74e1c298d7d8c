// The `CLIError` for an `error` reply: every command that reports a refusal
// (publish, listen, wait, get, request, serve, ...) says it this way.
//
// Before editing: the exit statuses are part of the interface (docs/CLI.md
// "Exit status"); a new error code needs its status here.
import EventBusCommandLine
@_spi(Package) import EventBusProtocol

extension Reply {
    /// The `CLIError` for an `error` reply: the broker's message, and an exit
    /// status chosen by its code (see `ExitStatus`).
    /// - Parameter action: what failed, e.g. `"publish"`.
    package func failure(_ action: String) -> CLIError {
        let code = string("code") ?? "unknown"
        let message = string("message") ?? "no message"
        let status: ExitStatus
        switch ErrorCode(rawValue: code) {
        case .badFrame, .badRequest, .badType, .frameTooLarge: status = .dataError
        case .forbidden: status = .noPermission
        case .limit, .slowConsumer, .timeout: status = .temporaryFailure
        case .noResponders: status = .noResponders
        case .noReply: status = .noReply
        case .serviceError: status = .serviceFailed
        case .unknownOp, nil: status = .protocolError
        }
        return CLIError(status, "\(action) failed: \(message) (\(code))")
    }
}
