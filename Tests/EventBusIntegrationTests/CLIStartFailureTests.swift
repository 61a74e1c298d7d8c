// A broker that closes every connection before saying anything (what a
// socket-activated broker that failed to start looks like): the CLI exits 69
// and says where to look, by the bus it tried (issue 15). A broker that
// refused with a reason first (`limit`) keeps its own message: see
// CLIListenTests.
import EventBusTestSupport
import Foundation
import Testing

@Suite("eventbus against a broker that closes at once")
struct CLIStartFailureTests {
    @Test(arguments: [["ping"], ["publish", "x.y", "1"], ["stats"], ["listen"], ["wait", "x.y"]])
    func aCustomPathSaysTheBrokerClosedBeforeAnsweringAndMayHaveExited(command: [String]) throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        let socket = scratch.file("bus.sock")
        let fake = try ClosingListener(path: socket)
        defer { fake.stop() }
        let run = try RunningProcess(cliProduct("eventbus"), ["--socket", socket] + command, in: scratch).wait()
        #expect(run.status == 69, "\(command): \(run)")
        #expect(run.stderr == "eventbus: the broker at \(socket) closed the connection before answering: it may have exited (see its standard error or log)\n", "\(command)")
        #expect(run.stdout == "")
    }

    @Test func theUserBusPointsAtTheUserUnitsStatusAndJournal() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        try FileManager.default.createDirectory(atPath: scratch.file("eventbus"), withIntermediateDirectories: false)
        let socket = scratch.file("eventbus/bus.sock")
        let fake = try ClosingListener(path: socket)
        defer { fake.stop() }
        let run = try RunningProcess(cliProduct("eventbus"), ["--user", "ping"], in: scratch, environment: ["XDG_RUNTIME_DIR": scratch.path]).wait()
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr == "eventbus: the broker at \(socket) closed the connection before answering: it may have failed to start (see 'systemctl --user status eventbus.service' and 'journalctl --user -u eventbus')\n")
    }

    /// After a few failed starts systemd gives up on the socket unit and removes the socket.
    @Test func noSocketOnTheUserBusPointsAtStartingAndAtTheUnitsStatus() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        let run = try RunningProcess(cliProduct("eventbus"), ["--user", "ping"], in: scratch, environment: ["XDG_RUNTIME_DIR": scratch.path]).wait()
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.hasSuffix("or 'systemctl --user start eventbus.socket'; if that fails, see 'systemctl --user status eventbus.socket eventbus.service')\n"), "\(run)")
    }
}
