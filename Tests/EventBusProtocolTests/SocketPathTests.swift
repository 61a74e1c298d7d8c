// SocketPath.resolve (PROTOCOL.md "Transport"): first that applies, the
// `--socket PATH` flag; `--system` or `--user`; `$EVENTBUS_SOCKET`; the user
// bus when XDG_RUNTIME_DIR is set and the process is not root; the system bus.
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Socket path")
struct SocketPathTests {
    static let full = ["EVENTBUS_SOCKET": "/tmp/env.sock", "XDG_RUNTIME_DIR": "/run/user/1000"]

    static let table: [(String, BusSelection, [String: String], UInt32, String)] = [
        ("--socket beats everything", .path("/x/flag.sock"), full, 1000, "/x/flag.sock"),
        ("--socket beats everything for root", .path("/x/flag.sock"), full, 0, "/x/flag.sock"),
        ("--system beats the environment", .system, full, 1000, "/run/eventbus/bus.sock"),
        ("--user beats EVENTBUS_SOCKET", .user, full, 1000, "/run/user/1000/eventbus/bus.sock"),
        ("--user works for root too", .user, full, 0, "/run/user/1000/eventbus/bus.sock"),
        ("EVENTBUS_SOCKET beats the user bus", .automatic, full, 1000, "/tmp/env.sock"),
        ("EVENTBUS_SOCKET applies to root", .automatic, full, 0, "/tmp/env.sock"),
        ("user bus for a non-root process", .automatic, ["XDG_RUNTIME_DIR": "/run/user/1000"], 1000, "/run/user/1000/eventbus/bus.sock"),
        ("system bus for root even with XDG_RUNTIME_DIR", .automatic, ["XDG_RUNTIME_DIR": "/run/user/0"], 0, "/run/eventbus/bus.sock"),
        ("system bus without XDG_RUNTIME_DIR", .automatic, [:], 1000, "/run/eventbus/bus.sock"),
        ("empty EVENTBUS_SOCKET is ignored", .automatic, ["EVENTBUS_SOCKET": "", "XDG_RUNTIME_DIR": "/r"], 5, "/r/eventbus/bus.sock"),
        ("empty XDG_RUNTIME_DIR is ignored", .automatic, ["XDG_RUNTIME_DIR": ""], 1000, "/run/eventbus/bus.sock"),
        ("relative --socket is kept as given", .path("bus.sock"), [:], 1000, "bus.sock"),
    ]

    @Test("resolves the first rule that applies", arguments: table)
    func resolvesFirstRuleThatApplies(_ row: (String, BusSelection, [String: String], UInt32, String)) throws {
        let path = try SocketPath.resolve(row.1, environment: row.2, effectiveUID: row.3)
        #expect(path == row.4, "\(row.0)")
    }

    @Test func userWithoutRuntimeDirectoryIsAnError() {
        #expect(throws: SocketPath.ResolutionError.self) {
            try SocketPath.resolve(.user, environment: ["EVENTBUS_SOCKET": "/x"], effectiveUID: 1000)
        }
        #expect(throws: SocketPath.ResolutionError.self) {
            try SocketPath.resolve(.user, environment: ["XDG_RUNTIME_DIR": ""], effectiveUID: 1000)
        }
    }

    @Test func emptySocketFlagIsAnError() {
        #expect(throws: SocketPath.ResolutionError.self) {
            try SocketPath.resolve(.path(""), environment: Self.full, effectiveUID: 1000)
        }
    }

    @Test func wellKnownPaths() {
        #expect(SocketPath.systemBus == "/run/eventbus/bus.sock")
        #expect(SocketPath.userBus(runtimeDirectory: "/run/user/42") == "/run/user/42/eventbus/bus.sock")
    }

    @Test(arguments: [
        ("/run/eventbus/bus.sock", "/run/user/1000", WellKnownBus.system),
        ("/run/user/1000/eventbus/bus.sock", "/run/user/1000", .user),
        ("/run/user/1000/eventbus/bus.sock", nil, nil),
        ("/run/user/1000/eventbus/bus.sock", "", nil),
        ("/run/user/1001/eventbus/bus.sock", "/run/user/1000", nil),
        ("/tmp/x/eventbus/bus.sock", "/run/user/1000", nil),
    ] as [(String, String?, WellKnownBus?)])
    func wellKnownBusIsRecognisedByItsExactPath(path: String, runtime: String?, expected: WellKnownBus?) {
        #expect(SocketPath.wellKnownBus(path, runtimeDirectory: runtime) == expected)
    }

    @Test func startFailureHintNamesTheUnitCommandsOfTheBusTried() {
        #expect(SocketPath.startFailureHint(for: "/run/eventbus/bus.sock", runtimeDirectory: nil)
            == "it may have failed to start (see 'systemctl status eventbus.service' and 'journalctl -u eventbus')")
        #expect(SocketPath.startFailureHint(for: "/run/user/7/eventbus/bus.sock", runtimeDirectory: "/run/user/7")
            == "it may have failed to start (see 'systemctl --user status eventbus.service' and 'journalctl --user -u eventbus')")
        #expect(SocketPath.startFailureHint(for: "/tmp/bus.sock", runtimeDirectory: "/run/user/7")
            == "it may have exited (see its standard error or log)")
    }

    /// No socket at a well-known path: start its socket unit, or, when systemd
    /// gave up on it after failed starts (`service-start-limit-hit`, which a
    /// plain start does not clear), `reset-failed` first (stop 42's trial).
    /// The system bus is started by hand with `--system`, the option that
    /// names it, not a path a user must copy (stop 44's trial).
    @Test func startCommandNamesResetFailedForAFailedSocketUnitOfTheBusTried() {
        #expect(SocketPath.startCommand(for: "/run/eventbus/bus.sock")
            == "start it with 'eventbusd --system' or 'systemctl start eventbus.socket'; "
            + "when the socket unit failed ('systemctl status eventbus.socket eventbus.service'), fix the cause ('journalctl -u eventbus'), "
            + "then 'systemctl reset-failed eventbus.service eventbus.socket' and start it again")
        #expect(SocketPath.startCommand(for: "/run/user/7/eventbus/bus.sock")
            == "start it with 'eventbusd --socket /run/user/7/eventbus/bus.sock' or 'systemctl --user start eventbus.socket'; "
            + "when the socket unit failed ('systemctl --user status eventbus.socket eventbus.service'), fix the cause ('journalctl --user -u eventbus'), "
            + "then 'systemctl --user reset-failed eventbus.service eventbus.socket' and start it again")
        #expect(SocketPath.startCommand(for: "/tmp/bus.sock") == "start it with 'eventbusd --socket /tmp/bus.sock'")
    }

    @Test func userBusHintOnlyForRootFailingTheSystemBusWithAUserBusSocketThere() {
        let there: (String) -> Bool = { $0 == "/run/user/0/eventbus/bus.sock" }
        #expect(SocketPath.userBusHint(afterFailing: SocketPath.systemBus, runtimeDirectory: "/run/user/0", effectiveUID: 0, choice: "give --user", isSocket: there)
            == "a user bus is at /run/user/0/eventbus/bus.sock, but root gets the system bus unless it asks: give --user")
        #expect(SocketPath.userBusHint(afterFailing: SocketPath.systemBus, runtimeDirectory: "/run/user/0", effectiveUID: 1000, choice: "x", isSocket: there) == nil)
        #expect(SocketPath.userBusHint(afterFailing: "/tmp/bus.sock", runtimeDirectory: "/run/user/0", effectiveUID: 0, choice: "x", isSocket: there) == nil)
        #expect(SocketPath.userBusHint(afterFailing: SocketPath.systemBus, runtimeDirectory: "/run/user/5", effectiveUID: 0, choice: "x", isSocket: there) == nil)
        #expect(SocketPath.userBusHint(afterFailing: SocketPath.systemBus, runtimeDirectory: "", effectiveUID: 0, choice: "x", isSocket: { _ in true }) == nil)
        #expect(SocketPath.userBusHint(afterFailing: SocketPath.systemBus, runtimeDirectory: nil, effectiveUID: 0, choice: "x", isSocket: { _ in true }) == nil)
    }
}
