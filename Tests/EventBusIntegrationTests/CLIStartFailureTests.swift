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

    /// After a few failed starts systemd gives up on the socket unit and removes the socket:
    /// then only `reset-failed` lets it start again (docs/SYSTEMD.md).
    @Test func noSocketOnTheUserBusPointsAtStartingAndAtTheUnitsStatus() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        let run = try RunningProcess(cliProduct("eventbus"), ["--user", "ping"], in: scratch, environment: ["XDG_RUNTIME_DIR": scratch.path]).wait()
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.hasSuffix("or 'systemctl --user start eventbus.socket'; when the socket unit failed ('systemctl --user status eventbus.socket eventbus.service'), "
            + "fix the cause ('journalctl --user -u eventbus'), then 'systemctl --user reset-failed eventbus.service eventbus.socket' and start it again)\n"), "\(run)")
    }

    /// A socket another user may not reach (its folder 0700 here; the socket's own
    /// mode does the same) says which permissions are missing, status 77.
    @Test(.enabled(if: getuid() == 0 && findInPath("setpriv") != nil, "needs root and setpriv"))
    func aSocketInAFolderTheUserMayNotSearchNamesBothPermissions() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        chmod(scratch.path, 0o700)
        let socket = scratch.file("bus.sock")
        let fake = try ClosingListener(path: socket)
        defer { fake.stop() }
        let run = try RunningProcess(findInPath("setpriv")!, ["--reuid", "4321", "--regid", "4321", "--clear-groups", cliProduct("eventbus"), "--socket", socket, "ping"], in: scratch).wait()
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr == "eventbus: cannot connect to the broker at \(socket): Permission denied (you need write permission on the socket and "
            + "search permission on its folders: see eventbusd --mode and SocketGroup= in the .socket unit)\n", "\(run)")
    }
}
