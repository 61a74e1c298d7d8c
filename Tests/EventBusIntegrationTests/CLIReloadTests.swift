// `eventbus reload` when the socket's other end is not the broker, as under
// socket activation (the service manager called listen(2), so SO_PEERCRED
// names it): the CLI must not signal that process, and `$MAINPID` (what
// systemd gives `ExecReload=`) names the broker instead. A socat relay owned
// by this test stands in for the service manager's socket.
//
// Before editing: socat without `fork` serves one connection, so the relay
// is started with `fork`; SIGHUP would end socat, which is how a wrongly
// signalled peer shows.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("eventbus reload: the broker's pid", .enabled(if: findInPath("socat") != nil, "needs socat"))
struct CLIReloadTests {
    @Test("A socket whose peer is not eventbusd is refused (69) and that process is not signalled; with $MAINPID the broker reloads")
    func refusesAPeerThatIsNotTheBrokerAndUsesMainPID() throws {
        try withBroker { broker in
            let relay = broker.directory.file("relay.sock")
            let socat = try SpawnedProcess("socat", ["UNIX-LISTEN:\(relay),fork", "UNIX-CONNECT:\(broker.socketPath)"], in: broker.directory)
            defer { socat.send(signal: SIGTERM); _ = try? socat.waitBlocking(timeout: .seconds(5)) }
            try waitUntil("socat listening on \(relay)") { isListeningUnixSocket(relay) }

            let refused = try runCLI(["--socket", relay, "reload", "--wait", "--timeout", "5s"], in: broker.directory, environment: ["MAINPID": nil])
            #expect(refused.status == .exited(69), "\(refused.stderr)")
            #expect(refused.stderr.contains("is pid \(socat.pid) (socat), not eventbusd, so it was not signalled"), "\(refused.stderr)")
            #expect(socat.isRunning, "socat was signalled")

            let reloaded = try runCLI(["--socket", relay, "reload", "--wait", "--timeout", "5s"], in: broker.directory, environment: ["MAINPID": "\(broker.pid)"])
            #expect(reloaded.status == .exited(0), "\(reloaded.stderr)")
            #expect(reloaded.stdout == "policy reloaded: generation 2\n", "\(reloaded.stdout)")
        }
    }

    /// Runs the `eventbus` CLI to completion.
    private func runCLI(_ arguments: [String], in directory: TemporaryDirectory, environment: [String: String?]) throws -> ProcessOutput {
        var changes = environment
        changes["EVENTBUS_SOCKET"] = .some(nil)
        return try SpawnedProcess(try builtProduct("eventbus"), arguments, in: directory, environment: changes).waitBlocking(timeout: .seconds(30))
    }
}
