// The real-process harness of the shared scenarios (EventBusScenarios,
// UIDBus.swift): a scenario's broker is eventbusd started with the
// scenario's options and `--policy` on a file holding its policy; a client of
// another uid is a connection made by `eventbus-uid-peer` run under `setpriv
// --reuid N --regid G --clear-groups|--groups …` (`connectAs`), so the broker
// learns its uid and groups from the kernel (SO_PEERCRED, SO_PEERGROUPS), as
// in production. `reload` is `eventbus reload --wait`, whose output must be
// exactly what docs/CLI.md says. The in-process twin of every scenario runs
// without root in EventBusServerTests (InProcessBus.swift).
//
// Before editing: needs root and setpriv (the suite is skipped otherwise);
// numeric ids only, no /etc/passwd changes. Uid 0's clients are the test's
// own plain connections.
import EventBusScenarios
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// A `UIDBus` over an eventbusd process.
final class ProcessBus: UIDBus {
    let broker: BrokerProcess
    let policyPath: String

    init(_ broker: BrokerProcess, policyPath: String) {
        self.broker = broker
        self.policyPath = policyPath
    }

    func connect(uid: UInt32, gid: UInt32?, groups: [UInt32], count: Int) throws -> [RawClient] {
        if uid == 0, gid == nil, groups.isEmpty { return try (0..<count).map { _ in try broker.connect() } }
        return try connectAs(uid: uid, gid: gid, groups: groups, path: broker.socketPath, count: count)
    }

    func reload() throws -> ReloadOutcome {
        let run = try SpawnedProcess(try builtProduct("eventbus"), ["--socket", broker.socketPath, "reload", "--wait"],
                                     in: broker.directory, environment: ["EVENTBUS_SOCKET": nil]).waitBlocking(timeout: .seconds(30))
        let reloaded = "policy reloaded: generation "
        if run.status == .exited(0), run.stderr.isEmpty, run.stdout.hasPrefix(reloaded), run.stdout.hasSuffix("\n"),
           let generation = Int(run.stdout.dropFirst(reloaded.count).dropLast()) {
            return .reloaded(generation: generation)
        }
        let kept = "eventbus: the broker kept its policy (generation "
        if run.status == .exited(65), run.stdout.isEmpty, run.stderr.hasPrefix(kept), run.stderr.hasSuffix("\n"),
           let close = run.stderr.range(of: "): "),
           let generation = Int(run.stderr[run.stderr.index(run.stderr.startIndex, offsetBy: kept.count)..<close.lowerBound]) {
            return .refused(generation: generation, reason: String(run.stderr[close.upperBound...].dropLast()))
        }
        throw TestFailure("eventbus reload --wait: \(run.status), stdout \(run.stdout.debugDescription), stderr \(run.stderr.debugDescription)")
    }

    func logText() -> String { broker.stderrText() }
}

/// Runs `scenario` on an eventbusd started as it asks.
func runAsProcess(_ scenario: BusScenario) throws {
    let directory = try TemporaryDirectory(prefix: "ebpol-")
    defer { directory.remove() }
    let policyPath = directory.file("policy.conf")
    var arguments = scenario.options
    if let policy = scenario.policy {
        try policy.write(toFile: policyPath, atomically: true, encoding: .utf8)
        arguments += ["--policy", policyPath]
    }
    try withSharedBroker(arguments) { broker in
        try scenario.body(ProcessBus(broker, policyPath: policyPath))
    }
}

@Suite("Per-uid rules, eventbusd with other real uids", .enabled(if: getuid() == 0 && findInPath("setpriv") != nil, "needs root and setpriv"))
struct ProcessScenarioTests {
    @Test("Access policy (PROTOCOL.md 1.1)", arguments: accessPolicyScenarios)
    func accessPolicy(_ scenario: BusScenario) throws { try runAsProcess(scenario) }

    @Test("Quotas (PROTOCOL.md 1.1)", arguments: quotaScenarios)
    func quotas(_ scenario: BusScenario) throws { try runAsProcess(scenario) }

    @Test("The bridge right (PROTOCOL-NOTES.md, issue 36)", arguments: bridgeRightScenarios)
    func bridgeRight(_ scenario: BusScenario) throws { try runAsProcess(scenario) }

    @Test("Request/reply with other uids (PROTOCOL.md 1.3)", arguments: requestReplyScenarios)
    func requestReply(_ scenario: BusScenario) throws { try runAsProcess(scenario) }

    @Test("Queue groups with other uids (PROTOCOL.md 1.3)", arguments: queueGroupScenarios)
    func queueGroups(_ scenario: BusScenario) throws { try runAsProcess(scenario) }

    @Test("The fair-share scheduler's shared turns", arguments: schedulingScenarios)
    func scheduling(_ scenario: BusScenario) throws { try runAsProcess(scenario) }

    @Test("Per-type counters against another uid (PROTOCOL.md 1.2)", arguments: typeCounterScenarios)
    func typeCounters(_ scenario: BusScenario) throws { try runAsProcess(scenario) }

    @Test("Parked never-reading subscribers of another uid (issues 20, 37)", arguments: parkedScenarios)
    func parked(_ scenario: BusScenario) throws { try runAsProcess(scenario) }

    @Test("Memory counted as allocated (issue 20)", arguments: memoryScenarios)
    func memory(_ scenario: BusScenario) throws { try runAsProcess(scenario) }
}
