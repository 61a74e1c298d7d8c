// The shipped system-bus policy, config/policy.conf (issue 16): everyone may
// connect, subscribe and publish, except that `system.>` may be published by
// uid 0 only and `user.<uid>.>` is private to that uid (and uid 0) for publish
// and receive. A table of decisions read from the file in the repository.
import EventBusPolicy
import Foundation
@_spi(Package) import EventBusProtocol
import Testing

/// config/policy.conf, read from the repository this test file sits in.
func shippedPolicyText() throws -> String {
    let path = String(#filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/")) + "/config/policy.conf"
    return try String(contentsOfFile: path, encoding: .utf8)
}

@Suite("Shipped policy (config/policy.conf)")
struct ShippedPolicyTests {
    static let alice = who(1000, groups: [27, 100])
    static let bob = who(1001)

    static let cases: [Case] = [
        // connect
        row(who(0), .connect, "-", "allow"), row(alice, .connect, "-", "allow"), row(who(65534), .connect, "-", "allow"),
        // publish: open, except system.> and others' user.<uid>.>
        row(alice, .publish, "order.created", "allow"),
        row(alice, .publish, "settings.changed", "allow"),
        row(alice, .publish, "system.reboot", "deny", "policy.conf:22"),
        row(alice, .publish, "system.a.b", "deny", "policy.conf:22"),
        row(who(0), .publish, "system.reboot", "allow", "policy.conf:23"),
        row(alice, .publish, "systemd.x", "allow"),
        row(alice, .publish, "user.1000.note", "allow", "policy.conf:29"),
        row(alice, .publish, "user.1000.a.b", "allow", "policy.conf:29"),
        row(alice, .publish, "user.1001.note", "deny", "policy.conf:27"),
        row(alice, .publish, "user.1000", "deny", "policy.conf:27"),  // user.<uid>.> needs a segment after the uid
        row(who(0), .publish, "user.1001.note", "allow"),
        row(bob, .publish, "user.1001.note", "allow"),
        row(alice, .publish, "eventbus.started", "deny", "reserved"),
        row(who(0), .publish, "eventbus.started", "deny", "reserved"),
        // receive (per type)
        row(alice, .subscribe, "system.reboot", "allow"),
        row(alice, .subscribe, "user.1000.note", "allow"),
        row(alice, .subscribe, "user.1001.note", "deny", "policy.conf:28"),
        row(who(0), .subscribe, "user.1001.note", "allow"),
        row(alice, .subscribe, "secrets.rotated", "allow"),
        // subscribe (patterns)
        row(alice, .subscribe, ">", "filtered"),
        row(alice, .subscribe, "user.>", "filtered"),
        row(alice, .subscribe, "user.1000.>", "allowed"),
        row(alice, .subscribe, "user.1001.>", "forbidden", "policy.conf:28"),
        row(alice, .subscribe, "user.*.note", "filtered"),
        row(alice, .subscribe, "order.>", "allowed"),
        row(alice, .subscribe, "system.>", "allowed"),
        row(who(0), .subscribe, ">", "allowed"),
        // (1.3) serve: subscribe and serve both; only uid 0 serves system.>
        row(alice, .serve, "system.reboot", "deny", "policy.conf:38"),
        row(who(0), .serve, "system.reboot", "allow"),
        row(alice, .serve, "thumb.make", "allow"),
        row(alice, .serve, "user.1001.ask", "deny", "policy.conf:28"),
        row(alice, .serve, "system.>", "forbidden"),
        row(alice, .serve, ">", "filtered"),
        row(alice, .serve, "thumb.>", "allowed"),
        row(who(0), .serve, "system.>", "allowed"),
        // bridge: a policy file exists and none allows it
        row(who(0), .bridge, "-", "deny", "bridgeNeedsRule"),
        row(alice, .bridge, "-", "deny", "bridgeNeedsRule"),
    ]

    @Test func decisionsOfTheShippedFile() throws {
        let text = try shippedPolicyText()
        let policy = try AccessPolicy.load([PolicySource(path: "policy.conf", text: text)], resolver: testNames, brokerUID: testBrokerUID)
        check(policy, Self.cases)
        #expect(policy.warnings() == [])
    }

    @Test func mostTypesAreDecidedAtTheFirstSegment() throws {
        // What keeps routing at one lookup: a type outside system.>, user.> and
        // eventbus.> is decided by its first segment alone.
        let text = try shippedPolicyText()
        let policy = try AccessPolicy.load([PolicySource(path: "policy.conf", text: text)], resolver: testNames, brokerUID: testBrokerUID)
        let view = policy.view(for: Self.alice)
        #expect(view.publish(type("bench.t")).isAllowed)
        #expect(view.constantPublishVerdict == nil && view.constantReceiveVerdict == nil)
        #expect(AccessPolicy.withoutFiles(brokerUID: 0).view(for: Self.alice).constantReceiveVerdict?.isAllowed == true)
    }
}

@Suite("docs/POLICY.md recipes on top of the shipped policy")
struct RecipeTests {
    static func shippedPlus(_ path: String, _ text: String) throws -> AccessPolicy {
        let names = TableNameResolver(users: ["backup": 34, "kiosk": 1500], groups: ["auditors": 3001])
        return try AccessPolicy.load([PolicySource(path: "/usr/share/eventbus/policy.conf", text: try shippedPolicyText()),
                                      PolicySource(path: path, text: text)], resolver: names, brokerUID: testBrokerUID)
    }

    @Test func aGroupThatMayReadAudit() throws {
        let policy = try Self.shippedPlus("10-audit.conf", "deny  subscribe audit.>\nallow subscribe audit.>  group=auditors\n")
        check(policy, [
            row(who(1000, groups: [3001]), .subscribe, "audit.>", "allowed"),
            row(who(1000, gid: 3001), .subscribe, "audit.login", "allow"),
            row(who(1000), .subscribe, "audit.>", "forbidden", "10-audit.conf:1"),
            row(who(1000), .subscribe, ">", "filtered"),
            row(who(1000), .subscribe, "audit.login", "deny", "10-audit.conf:1"),
            row(who(0), .subscribe, "audit.login", "deny", "10-audit.conf:1"),
        ])
    }

    @Test func aServiceUIDThatAloneMayPublishBackup() throws {
        let policy = try Self.shippedPlus("20-backup.conf", "deny  publish backup.>\nallow publish backup.>  user=backup\n")
        check(policy, [
            row(who(34), .publish, "backup.done", "allow", "20-backup.conf:2"),
            row(who(1000), .publish, "backup.done", "deny", "20-backup.conf:1"),
            row(who(0), .publish, "backup.done", "deny", "20-backup.conf:1"),
            row(who(1000), .subscribe, "backup.>", "allowed"),
        ])
    }

    @Test func aReadOnlyUser() throws {
        let policy = try Self.shippedPlus("30-readonly.conf", "deny publish >  user=kiosk\n")
        check(policy, [
            row(who(1500), .connect, "-", "allow"),
            row(who(1500), .publish, "order.created", "deny", "30-readonly.conf:1"),
            row(who(1500), .publish, "user.1500.note", "deny", "30-readonly.conf:1"),
            row(who(1500), .subscribe, ">", "filtered"),
            row(who(1500), .subscribe, "order.>", "allowed"),
            row(who(1000), .publish, "order.created", "allow"),
        ])
    }
}
