// eventbusd --socket in a folder other users may write (/tmp/bus.sock, as in
// the README's quick start): another uid can bind the path first. The broker
// refuses to start (69) as for any live socket, and says whose it is
// instead of calling it "another broker".
import EventBusSystem
import EventBusTestSupport
import Foundation
import Testing

@Suite("eventbusd on a path another uid listens on",
       .enabled(if: getuid() == 0 && findInPath("setpriv") != nil && findInPath("socat") != nil, "needs root, setpriv and socat"))
struct BrokerSquattedPathTests {
    @Test func theRefusalNamesTheUidListeningThere() throws {
        let scratch = try TemporaryDirectory(prefix: "ebsquat-")
        defer { scratch.remove() }
        #expect(chmod(scratch.path, 0o1777) == 0)
        let path = scratch.file("bus.sock")
        let squatter = try SpawnedProcess("setpriv", ["--reuid", "4321", "--regid", "4321", "--clear-groups",
                                                      findInPath("socat")!, "UNIX-LISTEN:\(path),fork", "EXEC:/bin/cat"], in: scratch)
        defer {
            squatter.send(signal: SIGTERM)
            _ = try? squatter.waitBlocking()
        }
        // Listening once a connection to the path succeeds (bounded: 10 s).
        let deadline = ContinuousClock.now + .seconds(10)
        while (try? FileDescriptor.connectedUnixSocket(toPath: path, nonBlocking: true))?.close() == nil {
            try #require(ContinuousClock.now < deadline && squatter.isRunning, "socat as uid 4321 is not listening on \(path)")
            usleep(20_000)
        }

        let run = try runProcess(cliProduct("eventbusd"), ["--socket", path])
        #expect(run.status == .exited(69), "\(run.status): \(run.stderr)")
        #expect(run.stderr.contains("a process of uid 4321"), "\(run.stderr)")
        #expect(!run.stderr.contains("another broker"), "\(run.stderr)")
    }
}
