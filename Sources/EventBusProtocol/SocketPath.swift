// Which socket path a broker or client uses (PROTOCOL.md "Transport"), as a
// pure function of flags, environment and effective uid so it can be tested.

/// The two well-known buses and the explicit choices of PROTOCOL.md "Transport".
public enum BusSelection: Equatable, Sendable {
    /// `--socket PATH`
    case path(String)
    /// `--system`
    case system
    /// `--user`
    case user
    /// No flag: `$EVENTBUS_SOCKET`, else the user bus for a non-root process
    /// with `XDG_RUNTIME_DIR`, else the system bus.
    case automatic
}

/// Socket path resolution.
@_spi(Package) public enum SocketPath {
    /// `/run/eventbus/bus.sock`
    @_spi(Package) public static let systemBus = "/run/eventbus/bus.sock"

    /// The user bus path for a runtime directory: `$XDG_RUNTIME_DIR/eventbus/bus.sock`.
    @_spi(Package) public static func userBus(runtimeDirectory: String) -> String {
        runtimeDirectory + "/eventbus/bus.sock"
    }

    /// Errors resolving a path.
    @_spi(Package) public struct ResolutionError: Error, Equatable, Sendable, CustomStringConvertible {
        @_spi(Package) public let description: String
    }

    /// Resolves the socket path, first that applies: `--socket PATH`; `--system`
    /// or `--user`; `$EVENTBUS_SOCKET`; the user bus when `XDG_RUNTIME_DIR` is set
    /// and the process is not root; the system bus (PROTOCOL.md "Transport").
    /// - Throws: `ResolutionError` for `--user` without `XDG_RUNTIME_DIR`, or an empty path.
    @_spi(Package) public static func resolve(_ selection: BusSelection, environment: [String: String], effectiveUID: UInt32) throws(ResolutionError) -> String {
        let runtime = environment["XDG_RUNTIME_DIR"].flatMap { $0.isEmpty ? nil : $0 }
        switch selection {
        case .path(let path):
            guard !path.isEmpty else { throw ResolutionError(description: "the socket path is empty") }
            return path
        case .system:
            return systemBus
        case .user:
            guard let runtime else { throw ResolutionError(description: "--user needs XDG_RUNTIME_DIR to be set") }
            return userBus(runtimeDirectory: runtime)
        case .automatic:
            if let path = environment["EVENTBUS_SOCKET"], !path.isEmpty { return path }
            if let runtime, effectiveUID != 0 { return userBus(runtimeDirectory: runtime) }
            return systemBus
        }
    }
}
