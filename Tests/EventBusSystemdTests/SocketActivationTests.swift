// SocketActivation.takeListeningSockets() in real processes: under systemd's own
// systemd-socket-activate, and with hand-made LISTEN_* variables.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite(.enabled(if: findInPath("systemd-socket-activate") != nil, "needs systemd-socket-activate (package systemd)"),
       .timeLimit(.minutes(1)))
struct SocketActivationTests {
    @Test(arguments: [(["--fdname=bus"], "bus"), ([], "unknown")])
    func passedListeningSocketIsTakenWithItsNameAndServesAClientThatConnectedFirst(options: [String], name: String) async throws {
        let dir = try makeTempDirectory()
        let path = dir.file("bus.sock")
        let activator = try spawn("systemd-socket-activate", ["-l", path] + options + [probePath, "listen", "serve"], in: dir)
        try await waitForListeningSocket(path)
        // systemd-socket-activate starts the probe only once this client has connected.
        let client = try LineClient(path)
        #expect(try client.readToEnd(resetIsEOF: false) == "served fd=3 name=\(name)\n")
        let finished = try await activator.wait()
        #expect(finished.status == 0, "stderr: \(finished.stderr)")
        #expect(finished.stdout == """
            socket fd=3 name=\(name)
            env LISTEN_PID=unset LISTEN_FDS=unset LISTEN_FDNAMES=unset

            """)
        // The probe never bound or unlinked anything: the path is systemd-socket-activate's.
        #expect(access(path, F_OK) == 0)
    }

    @Test func everyPassedSocketIsTakenInFdOrder() async throws {
        let dir = try makeTempDirectory()
        let first = dir.file("a.sock"), second = dir.file("b.sock")
        let activator = try spawn("systemd-socket-activate", ["-l", first, "-l", second,
                                                   "--fdname=system:extra", probePath, "listen", "serve"], in: dir)
        try await waitForListeningSocket(first)
        try await waitForListeningSocket(second)
        let secondClient = try LineClient(second)
        let firstClient = try LineClient(first)
        #expect(try firstClient.readToEnd(resetIsEOF: false) == "served fd=3 name=system\n")
        #expect(try secondClient.readToEnd(resetIsEOF: false) == "served fd=4 name=extra\n")
        let finished = try await activator.wait()
        #expect(finished.status == 0, "stderr: \(finished.stderr)")
        #expect(finished.stdout.hasPrefix("socket fd=3 name=system\nsocket fd=4 name=extra\n"))
    }

    @Test func acceptModeIsRefusedWithOneClearLine() async throws {
        let dir = try makeTempDirectory()
        let path = dir.file("bus.sock")
        let activator = try spawn("systemd-socket-activate", ["--accept", "-l", path, probePath, "listen", "serve"], in: dir)
        try await waitForListeningSocket(path)
        let client = try LineClient(path)
        // The probe exits without serving: the connection just closes.
        #expect(try client.readToEnd(resetIsEOF: false) == "")
        // systemd-socket-activate stays up in --accept mode; it logs the child's exit first.
        try await pollUntil("the child's exit being logged") { activator.stderrSoFar().contains("died with code") }
        let finished = try await activator.stop()
        #expect(finished.stderr.contains(
            "eventbus-systemd-probe: fd 3 (name 'unknown') is not a listening AF_UNIX stream socket; Accept=yes is not supported\n"))
        #expect(finished.stderr.contains("died with code 1"))
    }
}

/// Hand-made LISTEN_* variables; `sh -c '... exec probe'` keeps the pid that `$$` names.
@Suite(.timeLimit(.minutes(1)))
struct ListenEnvironmentTests {
    private func probeListen(_ assignments: String, redirect: String = "") async throws -> ProcessOutput {
        let dir = try makeTempDirectory()
        return try await run("/bin/sh", ["-c", "\(assignments) exec \"$0\" listen \(redirect)", probePath], in: dir)
    }

    @Test func noListenVariablesMeansNotActivated() async throws {
        let finished = try await probeListen("")
        #expect(finished.status == 0)
        #expect(finished.stdout.hasPrefix("not-activated\n"))
    }

    @Test func listenPidOfAnotherProcessMeansNotActivatedAndIsStillUnset() async throws {
        let finished = try await probeListen("LISTEN_PID=1 LISTEN_FDS=1 LISTEN_FDNAMES=bus")
        #expect(finished.status == 0)
        #expect(finished.stdout == "not-activated\nenv LISTEN_PID=unset LISTEN_FDS=unset LISTEN_FDNAMES=unset\n")
    }

    @Test(arguments: [
        ("LISTEN_PID=$$ LISTEN_FDS=x", "LISTEN_FDS='x'", "Invalid argument"),
        ("LISTEN_PID=$$ LISTEN_FDS=0", "LISTEN_FDS='0'", "Invalid argument"),
        ("LISTEN_PID=pid LISTEN_FDS=1", "LISTEN_PID='pid'", "Invalid argument"),
        ("LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=a:b", "LISTEN_FDNAMES='a:b'", "Invalid argument"),
        ("LISTEN_PID=$$ LISTEN_FDS=2", "LISTEN_FDS='2'", "Bad file descriptor"),
    ])
    func malformedListenVariablesAreRefusedWithOneLine(assignments: String, named: String, reason: String) async throws {
        // fd 3 is an open file, so only the malformed part can be at fault.
        let finished = try await probeListen(assignments, redirect: "3</dev/null")
        #expect(finished.status == 1)
        let lines = finished.stderr.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(finished.stderr.hasPrefix("eventbus-systemd-probe: invalid socket activation environment ("))
        #expect(finished.stderr.contains(named))
        #expect(finished.stderr.contains("sd_listen_fds_with_names: \(reason)"))
    }

    @Test func passedFileThatIsNotASocketIsRefused() async throws {
        let finished = try await probeListen("LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=bus", redirect: "3</dev/null")
        #expect(finished.status == 1)
        #expect(finished.stderr ==
            "eventbus-systemd-probe: fd 3 (name 'bus') is not a listening AF_UNIX stream socket; Accept=yes is not supported\n")
    }
}
