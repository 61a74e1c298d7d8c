// Where to look when a broker accepted a connection and closed it before
// answering anything: under socket activation that is what a broker that
// failed to start looks like (systemd accepted the connection on its behalf),
// so the message names the unit's status and journal commands of the bus that
// was tried. Shared by the CLI and the client library so they say the same.
//
// Before editing: the user bus is recognised by its exact path under
// `XDG_RUNTIME_DIR` (PROTOCOL.md "Transport"), never by a suffix.

/// Which of the two well-known buses a socket path is.
@_spi(Package) public enum WellKnownBus: Equatable, Sendable {
    /// `/run/eventbus/bus.sock`, served by the system manager's `eventbus.socket`.
    case system
    /// `$XDG_RUNTIME_DIR/eventbus/bus.sock`, served by the user manager's `eventbus.socket`.
    case user
}

extension SocketPath {
    /// The well-known bus `path` is, or nil for any other path.
    /// - Parameter runtimeDirectory: `$XDG_RUNTIME_DIR` (nil or empty: no user bus).
    @_spi(Package) public static func wellKnownBus(_ path: String, runtimeDirectory: String?) -> WellKnownBus? {
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
    @_spi(Package) public static func startFailureHint(for path: String, runtimeDirectory: String?) -> String {
        switch wellKnownBus(path, runtimeDirectory: runtimeDirectory) {
        case .system:
            "it may have failed to start (see 'systemctl status eventbus.service' and 'journalctl -u eventbus')"
        case .user:
            "it may have failed to start (see 'systemctl --user status eventbus.service' and 'journalctl --user -u eventbus')"
        case nil:
            "it may have exited (see its standard error or log)"
        }
    }

    /// How to start the broker of `path`, for a connect(2) that found no
    /// broker there (ENOENT, ECONNREFUSED): `start it with 'eventbusd
    /// --socket PATH'` (the system bus: `'eventbusd --system'`, the option
    /// that names it), and for a well-known bus the systemd way, and what
    /// to do when its socket unit failed: after a few failed starts of the
    /// broker systemd gives up on both units (`service-start-limit-hit`) and
    /// removes the socket, and a plain start fails again until
    /// `systemctl reset-failed` (docs/SYSTEMD.md "The configuration file").
    /// The CLI, the library and the Python client say the same (issue 34).
    @_spi(Package) public static func startCommand(for path: String) -> String {
        if path == systemBus {
            return "start it with 'eventbusd --system' or " + systemdStart(manager: "systemctl", journal: "journalctl")
        }
        let text = "start it with 'eventbusd --socket \(path)'"
        // The user bus of any runtime directory (the CLI's rule since issue 8).
        guard path.hasSuffix("/eventbus/bus.sock") else { return text }
        return text + " or " + systemdStart(manager: "systemctl --user", journal: "journalctl --user")
    }

    /// `'systemctl start eventbus.socket'; when the socket unit failed (...)
    /// ... 'systemctl reset-failed eventbus.service eventbus.socket' and start it again`,
    /// for `manager` `systemctl` or `systemctl --user`.
    private static func systemdStart(manager: String, journal: String) -> String {
        "'\(manager) start eventbus.socket'; when the socket unit failed ('\(manager) status eventbus.socket eventbus.service'), "
            + "fix the cause ('\(journal) -u eventbus'), then '\(manager) reset-failed eventbus.service eventbus.socket' and start it again"
    }

    /// (Issue 23) What to add when a root process could not connect to the
    /// system bus while a user bus is there: PROTOCOL.md "Transport" gives
    /// root the system bus unless it asks for the user bus, so say that one
    /// exists and how to ask, e.g.
    /// `a user bus is at /run/user/0/eventbus/bus.sock, but root gets the
    /// system bus unless it asks: give --user`.
    /// - Parameters:
    ///   - path: the path that could not be connected to.
    ///   - runtimeDirectory: `$XDG_RUNTIME_DIR` (nil or empty: no user bus).
    ///   - effectiveUID: the process's effective uid.
    ///   - isSocket: whether a path is a socket now (the caller looks, e.g.
    ///     with `FileSystem.kind(ofPath:)`: this module does no I/O); the
    ///     user bus's socket existing is the hint, not whether it answers.
    ///   - choice: how this client asks for the user bus (`give --user`,
    ///     `use Configuration(bus: .user)`).
    /// - Returns: nil unless `path` is the system bus, the process is root
    ///   and the user bus's socket exists.
    @_spi(Package) public static func userBusHint(afterFailing path: String, runtimeDirectory: String?, effectiveUID: UInt32, choice: String, isSocket: (String) -> Bool) -> String? {
        guard path == systemBus, effectiveUID == 0, let runtimeDirectory, !runtimeDirectory.isEmpty else { return nil }
        let user = userBus(runtimeDirectory: runtimeDirectory)
        guard isSocket(user) else { return nil }
        return "a user bus is at \(user), but root gets the system bus unless it asks: \(choice)"
    }
}
