// `eventbus listen` when a policy reload revokes its subscriptions (POLICY.md
// "Reload"): each revocation is said on stderr at once; the listener goes on
// with the patterns it has left, and exits 77 once none is left (it used to
// wait silently for events that could no longer come).
import EventBusTestSupport
import Foundation
import Testing

@Suite("eventbus listen and revoked subscriptions")
struct CLIRevocationTests {
    @Test func eachRevocationIsSaidAndTheLastOneEndsTheListener() throws {
        let scratch = try TemporaryDirectory(prefix: "ebrevoke-")
        defer { scratch.remove() }
        let policy = scratch.file("policy.conf")
        try "default subscribe allow\n".write(toFile: policy, atomically: true, encoding: .utf8)
        let broker = try TestBroker(options: ["--policy", policy])
        let listener = try broker.start(["listen", "--format", "data", "order.>", "audit.>"])
        try broker.waitForSubscriptions(2)

        try "deny subscribe order.>\n".write(toFile: policy, atomically: true, encoding: .utf8)
        #expect(try broker.run(["reload", "--wait"]).status == 0)
        #expect(try broker.run(["publish", "audit.login", "1"]).status == 0)
        // The audit event is printed once the listener read past the revocation: it is still listening.
        let deadline = ContinuousClock.now + .seconds(10)
        while listener.stdoutSoFar() != "1\n" {
            try #require(ContinuousClock.now < deadline && listener.isRunning, "no audit event: \(listener.stdoutSoFar())")
            usleep(20_000)
        }
        #expect(listener.process.stderrSoFar().contains("the broker revoked the subscription to 'order.>'"), "\(listener.process.stderrSoFar())")

        try "deny subscribe order.>\ndeny subscribe audit.>\n".write(toFile: policy, atomically: true, encoding: .utf8)
        #expect(try broker.run(["reload", "--wait"]).status == 0)
        let run = try listener.wait()
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr.contains("the broker revoked the subscription to 'audit.>'") && run.stderr.contains("no pattern is left"), "\(run)")
    }
}
