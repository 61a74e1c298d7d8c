// PolicyState (the broker's policy state, PolicyState.swift): generation 1
// at start and one more per swap, the publish verdict of each policy, views
// of the policy in force only, and a denial log that starts afresh with each
// policy; and a broker reports the same through `stats` after a reload.
@testable import EventBusCore
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import Testing

@Suite("PolicyState")
struct PolicyStateTests {
    static func policy(_ text: String) throws -> AccessPolicy {
        try AccessPolicy.load([PolicySource(path: "p.conf", text: text)], resolver: TableNameResolver(), brokerUID: 0)
    }

    @Test func eachSwapIsTheNextGenerationWithItsOwnPublishVerdictAndViews() throws {
        let open = AccessPolicy.withoutFiles(brokerUID: 0)
        let closed = try Self.policy("deny publish secret.>\n")
        var state = PolicyState(policy: open)
        #expect(state.generation == 1 && state.publishIsOpen)
        let identity = PolicyIdentity(uid: 1000, gid: 1000)
        let before = state.views.view(for: identity)
        #expect(state.views.view(for: identity) === before, "one view per identity")
        state.replace(with: closed)
        #expect(state.generation == 2 && !state.publishIsOpen && state.policy.paths == closed.paths)
        let after = state.views.view(for: identity)
        #expect(after !== before, "views of the new policy")
        #expect(!after.publish(EventType("secret.x")!).isAllowed && after.publish(EventType("open.x")!).isAllowed)
        state.replace(with: try Self.policy("allow publish >\n"))
        #expect(state.generation == 3 && !state.publishIsOpen, "any publish rule means asking")
        state.replace(with: open)
        #expect(state.generation == 4 && state.publishIsOpen)
    }

    @Test func theDenialLogStartsAfreshWithEachPolicy() throws {
        var state = PolicyState(policy: try Self.policy("deny publish secret.>\n"))
        #expect(state.admitDenial(uid: 1000, origin: 0, nowNanoseconds: 1) == .log(suppressed: 0))
        #expect(state.admitDenial(uid: 1000, origin: 0, nowNanoseconds: 2) == .suppress, "once per minute")
        state.replace(with: try Self.policy("deny publish secret.>\n"))
        #expect(state.admitDenial(uid: 1000, origin: 0, nowNanoseconds: 3) == .log(suppressed: 0), "a fresh log")
    }

    @Test func aBrokerReportsTheGenerationOfItsPolicyState() throws {
        let h = BrokerHarness { $0.policy = try? Self.policy("deny publish secret.>\n") }
        let client = h.connect(uid: 1000)
        #expect(h.broker.policyGeneration == 1 && !h.broker.policyState.publishIsOpen)
        h.record(h.broker.reloadPolicy(AccessPolicy.withoutFiles(brokerUID: 0), at: h.now))
        #expect(h.broker.policyGeneration == 2 && h.broker.policyState.publishIsOpen)
        h.send(client, #"{"op":"stats","req":1}"#)
        #expect(h.read(client).first?.raw.contains(#""policy_generation":2"#) == true)
        h.closeAll()
    }
}
