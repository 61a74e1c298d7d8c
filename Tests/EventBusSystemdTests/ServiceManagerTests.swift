// ServiceManager in real processes: notifications reach a test NOTIFY_SOCKET, and the
// watchdog interval follows WATCHDOG_USEC/WATCHDOG_PID; the broker's STATUS= text
// says "1 connection" but "0 connections".
import EventBusSystemd
import EventBusTestSupport
import Glibc
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ServiceManagerTests {
    @Test func notificationsArriveOnNotifySocketInOrder() async throws {
        let dir = try makeTempDirectory()
        let receiver = try DatagramReceiver(path: dir.file("notify.sock"))
        let finished = try await run(probePath, ["notify", "status=3 connections\n2 subscriptions", "ready", "watchdog", "stopping"],
                                     environment: ["NOTIFY_SOCKET": receiver.path], in: dir)
        #expect(finished.status == 0, "stderr: \(finished.stderr)")
        #expect(try receiver.receive() == "STATUS=3 connections 2 subscriptions")
        #expect(try receiver.receive() == "READY=1")
        #expect(try receiver.receive() == "WATCHDOG=1")
        #expect(try receiver.receive() == "STOPPING=1")
        #expect(try receiver.receive(timeout: .milliseconds(100)) == nil)
    }

    @Test(arguments: [
        (0, 0, 0 as UInt64, "0 connections, 0 subscriptions, 0 events/s"),
        (1, 1, 1, "1 connection, 1 subscription, 1 events/s"),
        (2, 40, 350, "2 connections, 40 subscriptions, 350 events/s"),
    ])
    func statusTextCountsInTheSingularOnlyForOne(connections: Int, subscriptions: Int, rate: UInt64, expected: String) {
        #expect(ServiceManager.statusText(connections: connections, subscriptions: subscriptions, eventsPerSecond: rate) == expected)
    }

    @Test func notificationsWithoutNotifySocketAreSilentNoOps() async throws {
        let dir = try makeTempDirectory()
        let finished = try await run(probePath, ["notify", "ready", "status=x", "watchdog", "stopping"], in: dir)
        #expect(finished.status == 0)
        #expect(finished.stderr == "")
    }

    /// `$$` in the assignments is the probe's own pid (`sh -c '... exec probe'`).
    @Test(arguments: [
        ("WATCHDOG_USEC=2000000", "interval-us=1000000"),
        ("WATCHDOG_USEC=2000000 WATCHDOG_PID=$$", "interval-us=1000000"),
        ("WATCHDOG_USEC=30000000 WATCHDOG_PID=$$", "interval-us=15000000"),
        ("WATCHDOG_USEC=2000000 WATCHDOG_PID=1", "interval=nil"),
        ("WATCHDOG_USEC=soon", "interval=nil"),
        ("WATCHDOG_PID=$$", "interval=nil"),
        ("", "interval=nil"),
    ])
    func watchdogIntervalIsHalfOfWatchdogUsecForThisProcess(assignments: String, expected: String) async throws {
        let dir = try makeTempDirectory()
        let finished = try await run("/bin/sh", ["-c", "\(assignments) exec \"$0\" watchdog", probePath], in: dir)
        #expect(finished.status == 0, "stderr: \(finished.stderr)")
        #expect(finished.stdout == expected + "\n")
    }
}
