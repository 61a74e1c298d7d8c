// Where to look when a broker accepted a connection and closed it before
// answering anything: under socket activation that is what a broker that
// failed to start looks like (systemd accepted the connection on its behalf),
// so the message names the unit's status and journal commands of the bus that
// was tried. Shared by the CLI and the client library so they say the same.
//
// Before editing: the user bus is recognised by its exact path under
// `XDG_RUNTIME_DIR` (PROTOCOL.md "Transport"), never by a suffix.

/// Which of the two well-known buses a socket path is.
public enum WellKnownBus: Equatable, Sendable {
    /// `/run/eventbus/bus.sock`, served by the system manager's `eventbus.socket`.
    case system
    /// `$XDG_RUNTIME_DIR/eventbus/bus.sock`, served by the user manager's `eventbus.socket`.
    case user
}

extension SocketPath {
    /// The well-known bus `path` is, or nil for any other path.
    /// - Parameter runtimeDirectory: `$XDG_RUNTIME_DIR` (nil or empty: no user bus).
    public static func wellKnownBus(_ path: String, runtimeDirectory: String?) -> WellKnownBus? {
        if path == systemBus { return .system }
        if let runtimeDirectory, !runtimeDirectory.isEmpty, path == userBus(runtimeDirectory: runtimeDirectory) { return .user }
        return nil
    }

    /// What may have happened when the broker at `path` closed a connection
    /// before answering, and how to look, e.g. for the user bus:
    /// `it may have failed to start (see 'systemctl --user status eventbus.service'
    /// and 'journalctl --user -u eventbus')`; for another path:
    /// `it may have exited (see its standard error or log)`.
    /// - Parameter runtimeDirectory: `$XDG_RUNTIME_DIR`, to recognise the user bus.
    public static func startFailureHint(for path: String, runtimeDirectory: String?) -> String {
        switch wellKnownBus(path, runtimeDirectory: runtimeDirectory) {
        case .system:
            "it may have failed to start (see 'systemctl status eventbus.service' and 'journalctl -u eventbus')"
        case .user:
            "it may have failed to start (see 'systemctl --user status eventbus.service' and 'journalctl --user -u eventbus')"
        case nil:
            "it may have exited (see its standard error or log)"
        }
    }
}
