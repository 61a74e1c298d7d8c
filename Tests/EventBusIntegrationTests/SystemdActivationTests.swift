// eventbusd under systemd's own systemd-socket-activate: it serves the passed socket
// without binding or unlinking, serves a client that connected before it started,
// refuses --accept, and sends READY=1, WATCHDOG=1, RELOADING=1 (SIGHUP) and
// STOPPING=1 to NOTIFY_SOCKET.
//
// Before editing: children are started with posix_spawn (see `SpawnedProcess` for why
// not Foundation.Process), every wait is bounded, and systemd-socket-activate passes
// only TERM/PATH/USER/HOME and what `-E` names on to the broker.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite(.enabled(if: findInPath("systemd-socket-activate") != nil, "needs systemd-socket-activate (package systemd)"),
       .timeLimit(.minutes(1)))
struct SystemdActivationTests {
    @Test(arguments: [nil, "bus"] as [String?])
    func brokerServesThePassedSocketWithoutBindingOrUnlinkingIt(fdName: String?) async throws {
        let dir = try TemporaryDirectory(prefix: "ebsa.")
        let path = dir.file("bus.sock"), other = dir.file("other.sock")
        let broker = try SystemdFixture.spawn("systemd-socket-activate",
                                       ["-l", path] + (fdName.map { ["--fdname=\($0)"] } ?? [])
                                           + [SystemdFixture.eventbusd, "--socket", other], in: dir)
        try await waitForListeningSocket(path)
        let inode = try SystemdFixture.inode(path)
        // systemd-socket-activate starts the broker on this first connection.
        let first = try LineClient(path)
        try first.send(#"{"op":"ping","req":1}"#)
        #expect(try first.readLine() == #"{"op":"ok","req":1}"#)
        let second = try LineClient(path)
        try second.send(#"{"op":"ping","req":"two"}"#)
        #expect(try second.readLine() == #"{"op":"ok","req":"two"}"#)

        let finished = try await broker.stop(SIGTERM)
        #expect(finished.status == 0, "stderr: \(finished.stderr)")
        #expect(try SystemdFixture.inode(path) == inode, "the passed socket's path was replaced or removed")
        #expect(access(other, F_OK) != 0, "--socket was bound although sockets were passed")
    }

    @Test func clientThatConnectedBeforeTheBrokerStartedIsServed() async throws {
        let dir = try TemporaryDirectory(prefix: "ebsa.")
        let path = dir.file("bus.sock"), go = dir.file("go")
        // `exec` keeps the pid, so LISTEN_PID (set for sh) still names the broker.
        let broker = try SystemdFixture.spawn("systemd-socket-activate",
                                       ["-l", path, "/bin/sh", "-c", #"until [ -e "$1" ]; do sleep 0.01; done; exec "$0""#,
                                        SystemdFixture.eventbusd, go], in: dir)
        try await waitForListeningSocket(path)
        let early = try LineClient(path)
        try early.send(#"{"op":"ping","req":"early"}"#)
        #expect(!(try early.hasInput(within: .milliseconds(100))), "something answered before the broker started")
        try createEmptyFile(go)
        #expect(try early.readLine() == #"{"op":"ok","req":"early"}"#)
        #expect(try await broker.stop(SIGTERM).status == 0)
    }

    @Test func acceptModeIsRefusedWithAClearMessageAndNonZeroExit() async throws {
        let dir = try TemporaryDirectory(prefix: "ebsa.")
        let path = dir.file("bus.sock")
        let activator = try SystemdFixture.spawn("systemd-socket-activate", ["--accept", "-l", path, SystemdFixture.eventbusd], in: dir)
        try await waitForListeningSocket(path)
        let client = try LineClient(path)
        try client.send(#"{"op":"ping","req":1}"#)
        #expect(try client.readToEnd() == "", "a broker given a connected socket must not serve it")
        try await pollUntil("the broker's exit being logged") { activator.stderrSoFar().contains("died with code") }
        let log = try await activator.stop(SIGTERM).stderr
        #expect(log.contains("fd 3 (name 'unknown') is not a listening AF_UNIX stream socket; Accept=yes is not supported"))
        #expect(!log.contains("died with code 0"), "log: \(log)")
    }

    @Test func readyArrivesOnceAndTheSocketServesWhenItDoes() async throws {
        let (path, notify, broker) = try await SystemdFixture.activateWithNotifySocket()
        let first = try LineClient(path)
        #expect(try notify.receive(ignoringStatus: true) == "READY=1")
        try first.send(#"{"op":"ping","req":1}"#)
        #expect(try first.readLine() == #"{"op":"ok","req":1}"#)
        let later = try LineClient(path)
        try later.send(#"{"op":"ping","req":2}"#)
        #expect(try later.readLine() == #"{"op":"ok","req":2}"#)
        // No watchdog without WATCHDOG_USEC, and READY=1 only once (STATUS= may come).
        let rest = try notify.receiveAll(for: .milliseconds(200))
        #expect(rest.filter { !$0.hasPrefix("STATUS=") } == [])
        _ = try await broker.stop(SIGTERM)
    }

    @Test func watchdogPingsArriveAtHalfTheWatchdogInterval() async throws {
        let (path, notify, broker) = try await SystemdFixture.activateWithNotifySocket(["-E", "WATCHDOG_USEC=1000000"])
        _ = try LineClient(path)  // starts the broker
        #expect(try notify.receive(ignoringStatus: true) == "READY=1")
        let start = ContinuousClock.now
        let pings = try notify.receiveStamped(for: .milliseconds(2600)).filter { $0.text == "WATCHDOG=1" }.map { $0.at - start }
        _ = try await broker.stop(SIGTERM)
        // Every 500 ms is 5 pings in 2.6 s; wide bounds for a loaded machine. What systemd
        // enforces is that no gap reaches WATCHDOG_USEC (1 s).
        #expect((3...7).contains(pings.count), "pings at \(pings)")
        let gaps = zip(pings.dropFirst(), pings).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 < .seconds(1) }, "gaps \(gaps)")
        #expect(gaps.allSatisfy { $0 > .milliseconds(250) }, "gaps \(gaps)")
    }

    @Test func exitIdleTimeExitsWhenIdleAndTheNextClientIsServedByARestartedBroker() async throws {
        let dir = try TemporaryDirectory(prefix: "ebsa.")
        let path = dir.file("bus.sock")
        // Plays systemd's part: keep the listening socket, start the broker again
        // whenever it exits. `exec` in a subshell keeps $BASHPID, so LISTEN_PID names it.
        let script = #"while :; do ( LISTEN_PID=$BASHPID exec "$0" --exit-idle-time 300ms ); echo "broker exited $?" >&2; sleep 0.05; done"#
        let activator = try SystemdFixture.spawn("systemd-socket-activate",
                                                 ["-l", path, "/bin/bash", "-c", script, SystemdFixture.eventbusd], in: dir)
        try await waitForListeningSocket(path)
        func instance() throws -> String {
            let client = try LineClient(path)
            try client.send(#"{"op":"hello","req":1}"#)
            let reply = try client.readLine()
            let object = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]
            return try #require(object?["instance"] as? String, "reply: \(reply)")
        }
        let first = try instance()  // the client closes on return
        try await pollUntil("the idle broker exiting") { activator.stderrSoFar().contains("broker exited 0") }
        #expect(activator.stderrSoFar().contains("--exit-idle-time"))
        let second = try instance()
        #expect(first != second, "the second client was not served by a new broker run")
        _ = try await activator.stop(SIGTERM)
    }

    @Test func sighupReloadsBetweenReloadingAndReady() async throws {
        let (path, notify, broker) = try await SystemdFixture.activateWithNotifySocket()
        let client = try LineClient(path)
        #expect(try notify.receive(ignoringStatus: true) == "READY=1")
        try client.send(#"{"op":"subscribe","type":"eventbus.policy.>","req":1}"#)
        #expect(try client.readLine() == #"{"op":"ok","req":1,"type":"eventbus.policy.>"}"#)
        kill(broker.pid, SIGHUP)
        let reloading = try #require(try notify.receive(ignoringStatus: true))
        #expect(reloading.hasPrefix("RELOADING=1\nMONOTONIC_USEC="), "\(reloading)")
        #expect(try notify.receive(ignoringStatus: true) == "READY=1")
        let event = try client.readLine()
        #expect(event.contains(#""type":"eventbus.policy.reloaded""#) && event.contains(#""data":{"generation":2,"files":[]}"#), "\(event)")
        _ = try await broker.stop(SIGTERM)
    }

    @Test func stoppingArrivesOnSigtermAndTheBrokerExitsZero() async throws {
        let (path, notify, broker) = try await SystemdFixture.activateWithNotifySocket()
        let client = try LineClient(path)
        #expect(try notify.receive(ignoringStatus: true) == "READY=1")
        try client.send(#"{"op":"ping","req":1}"#)
        #expect(try client.readLine() == #"{"op":"ok","req":1}"#)
        kill(broker.pid, SIGTERM)
        let after = try notify.receiveAll(until: { $0 == "STOPPING=1" })
        #expect(after.last == "STOPPING=1", "got \(after)")
        let finished = try await broker.wait()
        #expect(finished.status == 0, "stderr: \(finished.stderr)")
        #expect(access(path, F_OK) == 0, "the broker unlinked a path it did not bind")
    }
}

/// What only these tests need; processes, sockets and waits come from EventBusTestSupport.
private enum SystemdFixture {
    /// The `eventbusd` built next to this test bundle.
    static let eventbusd = productsDirectory() + "/eventbusd"

    /// A child with stdout and stderr in one log, without the runner's systemd variables.
    static func spawn(_ executable: String, _ arguments: [String], in directory: TemporaryDirectory) throws -> SpawnedProcess {
        try SpawnedProcess(executable, arguments, in: directory, environment: withoutSystemdVariables(), mergeStderr: true)
    }

    /// systemd-socket-activate serving `<dir>/bus.sock` with eventbusd, its
    /// NOTIFY_SOCKET a test receiver, `options` added; returns once the socket exists.
    static func activateWithNotifySocket(_ options: [String] = []) async throws
        -> (path: String, notify: DatagramReceiver, activator: SpawnedProcess) {
        let dir = try TemporaryDirectory(prefix: "ebsa.")
        let path = dir.file("bus.sock")
        let notify = try DatagramReceiver(path: dir.file("notify.sock"))
        let activator = try spawn("systemd-socket-activate",
                                  ["-l", path, "-E", "NOTIFY_SOCKET=\(notify.path)"] + options + [eventbusd], in: dir)
        try await waitForListeningSocket(path)
        return (path, notify, activator)
    }

    static func inode(_ path: String) throws -> UInt64 {
        var status = stat()
        guard stat(path, &status) == 0 else { throw TestFailure("stat \(path) failed: errno \(errno)") }
        return UInt64(status.st_ino)
    }
}
