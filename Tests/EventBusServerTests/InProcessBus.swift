// The in-process harness of the shared scenarios (EventBusScenarios,
// UIDBus.swift): a scenario's broker is an `InProcessBroker` with the
// scenario's options applied through `ServerConfiguration.apply(option:)` (the
// code eventbusd's options go through) and its policy written to a file of a
// temporary directory; its clients are handed connections of made-up uids. No
// root, no other process.
//
// Before editing: `reload` signals the server's thread and waits for the
// broker's `eventbus.policy.reloaded`/`refused` event on a uid-0 connection of
// its own, then unsubscribes it (so no subscription count changes) and keeps
// it open until the scenario ends.
import EventBusScenarios
import EventBusServer
import EventBusTestSupport
import Foundation
import Testing

/// A `UIDBus` over an in-process broker.
final class InProcessBus: UIDBus {
    let broker: InProcessBroker
    let policyPath: String
    private var watchers: [RawClient] = []

    init(_ broker: InProcessBroker, policyPath: String) {
        self.broker = broker
        self.policyPath = policyPath
    }

    func connect(uid: UInt32, gid: UInt32?, groups: [UInt32], count: Int) throws -> [RawClient] {
        try (0..<count).map { _ in try broker.connect(uid: uid, gid: gid, groups: groups) }
    }

    func reload() throws -> ReloadOutcome {
        let watcher = try broker.connect(uid: 0)
        watchers.append(watcher)
        try watcher.ok(#"{"op":"subscribe","type":"eventbus.policy.>","req":"reload-watch"}"#)
        broker.reload()
        let event = try watcher.readFrame(timeout: .seconds(30))
        try watcher.ok(#"{"op":"unsubscribe","type":"eventbus.policy.>","req":"reload-unwatch"}"#)
        guard let generation = event.object("data")?["generation"] as? Int else { throw TestFailure("a reload event without generation: \(event.raw)") }
        switch event.type {
        case "eventbus.policy.reloaded": return .reloaded(generation: generation)
        case "eventbus.policy.refused": return .refused(generation: generation, reason: event.object("data")?["error"] as? String ?? "")
        default: throw TestFailure("not a reload event: \(event.raw)")
        }
    }

    func logText() -> String { broker.log.all.joined(separator: "\n") }
}

/// Runs `scenario` on an in-process broker made as it asks.
func runInProcess(_ scenario: BusScenario) throws {
    let options = try scenario.optionPairs()
    let directory = try TemporaryDirectory(prefix: "ebsrv-")
    defer { directory.remove() }
    let policyPath = directory.file("policy.conf")
    if let policy = scenario.policy { try policy.write(toFile: policyPath, atomically: true, encoding: .utf8) }
    try withServer(policyFile: scenario.policy == nil ? nil : policyPath, configure: { configuration in
        for option in options {
            guard try configuration.apply(option: option.name, option.value, shownAs: "--" + option.name) else {
                throw TestFailure("--\(option.name) is not a server option")
            }
        }
    }) { broker in
        try scenario.body(InProcessBus(broker, policyPath: policyPath))
    }
}

@Suite("Per-uid rules, in process (no root)")
struct InProcessScenarioTests {
    @Test("Access policy (PROTOCOL.md 1.1)", arguments: accessPolicyScenarios)
    func accessPolicy(_ scenario: BusScenario) throws { try runInProcess(scenario) }

    @Test("Quotas (PROTOCOL.md 1.1)", arguments: quotaScenarios)
    func quotas(_ scenario: BusScenario) throws { try runInProcess(scenario) }

    @Test("The bridge right (PROTOCOL-NOTES.md, issue 36)", arguments: bridgeRightScenarios)
    func bridgeRight(_ scenario: BusScenario) throws { try runInProcess(scenario) }

    @Test("Request/reply with other uids (PROTOCOL.md 1.3)", arguments: requestReplyScenarios)
    func requestReply(_ scenario: BusScenario) throws { try runInProcess(scenario) }

    @Test("Queue groups with other uids (PROTOCOL.md 1.3)", arguments: queueGroupScenarios)
    func queueGroups(_ scenario: BusScenario) throws { try runInProcess(scenario) }

    @Test("The fair-share scheduler's shared turns", arguments: schedulingScenarios)
    func scheduling(_ scenario: BusScenario) throws { try runInProcess(scenario) }

    @Test("Per-type counters against another uid (PROTOCOL.md 1.2)", arguments: typeCounterScenarios)
    func typeCounters(_ scenario: BusScenario) throws { try runInProcess(scenario) }

    @Test("Parked never-reading subscribers of another uid (issues 20, 37)", arguments: parkedScenarios)
    func parked(_ scenario: BusScenario) throws { try runInProcess(scenario) }

    @Test("Memory counted as allocated (issue 20)", arguments: memoryScenarios)
    func memory(_ scenario: BusScenario) throws { try runInProcess(scenario) }
}
