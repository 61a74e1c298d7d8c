// The policy file format (PROTOCOL.md "Access policy (1.1)", "Quotas (1.1)";
// docs/POLICY.md): accepted lines, the error table (every error names
// file:line and what is wrong), merging several files all or nothing.
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Policy file format")
struct ParserTests {
    @Test func acceptedLinesAndWhatTheyHold() {
        guard let policy = load("""
            # a comment line
              allow   publish  system.>   user=root   # trailing comment
            deny subscribe user.%u.> group=auditors\r
            \tdeny connect - user=2002 group=50
            allow bridge - group=staff user=eventbus-bridge
            default publish deny
            limit connections 1024 user=eventbus-bridge
            limit outbound 16M group=staff
            limit subscriptions unlimited
            limit inbound 512k
            limit retained 1G user=0

            """) else { return }
        #expect(policy.rules.count == 4)
        let r = policy.rules
        #expect(r[0] == PolicyRule(effect: .allow, action: .publish, pattern: "system.>", uid: 0, userName: "root", origin: .line(path: "test.conf", line: 2)))
        #expect(r[1].pattern == "user.%u.>" && r[1].gid == 3001 && r[1].groupName == "auditors" && r[1].level == .user)
        #expect(r[2].action == .connect && r[2].pattern == nil && r[2].uid == 2002 && r[2].gid == 50 && r[2].userName == nil)
        #expect(r[3].uid == 998 && r[3].gid == 50 && r[3].origin == .line(path: "test.conf", line: 5))
        #expect(policy.defaultLines == [PolicyDefault(action: .publish, effect: .deny, origin: .line(path: "test.conf", line: 6))])
        #expect(policy.limits.map(\.value) == [.value(1024), .value(16 << 20), .unlimited, .value(512 << 10), .value(1 << 30)])
        #expect(policy.limits.map(\.resource) == [.connections, .outbound, .subscriptions, .inbound, .retained])
    }

    @Test("errors name file:line and what is wrong", arguments: [
        ("allow publish", "test.conf:1: allow publish needs a pattern"),
        ("allow", "test.conf:1: allow needs an action and a pattern: allow connect|publish|subscribe|bridge|hold|serve PATTERN|- [user=U] [group=G]"),
        ("allow publsh a.b", "test.conf:1: unknown action \"publsh\" (expected connect, publish, subscribe, bridge, hold or serve)"),
        ("permit publish a.b", "test.conf:1: unknown keyword \"permit\" (expected allow, deny, default or limit)"),
        ("deny connect", "test.conf:1: deny connect needs \"-\" as its pattern"),
        ("deny connect a.b", "test.conf:1: connect rules take \"-\" as their pattern, not \"a.b\""),
        ("deny bridge >", "test.conf:1: bridge rules take \"-\" as their pattern, not \">\""),
        ("deny publish -", "test.conf:1: publish rules take a pattern, not \"-\""),
        ("deny publish a..b", "test.conf:1: bad pattern \"a..b\": empty segment (two dots, or a dot at an end)"),
        ("deny publish a.>.b", "test.conf:1: bad pattern \"a.>.b\": > may only be the last segment"),
        ("deny publish a/b", "test.conf:1: bad pattern \"a/b\": a segment is *, > or made of A-Z a-z 0-9 _ - : only"),
        ("deny publish a*", "test.conf:1: bad pattern \"a*\": a segment is *, > or made of A-Z a-z 0-9 _ - : only"),
        ("deny publish user.%c.>", "test.conf:1: bad pattern \"user.%c.>\": % must be followed by u (%u, the connection's uid)"),
        ("deny publish user.%", "test.conf:1: bad pattern \"user.%\": % must be followed by u (%u, the connection's uid)"),
        ("deny publish %u*", "test.conf:1: bad pattern \"%u*\": a segment is *, > or made of A-Z a-z 0-9 _ - : only"),
        ("deny publish a.b user=mallory", "test.conf:1: unknown user \"mallory\""),
        ("deny publish a.b group=nogroup", "test.conf:1: unknown group \"nogroup\""),
        ("deny publish a.b user=1 user=2", "test.conf:1: user= given twice"),
        ("deny publish a.b group=1 group=1", "test.conf:1: group= given twice"),
        ("deny publish a.b user=", "test.conf:1: user= needs a name or a number"),
        ("deny publish a.b unit=foo.service", "test.conf:1: unknown qualifier \"unit=\" (expected user= or group=)"),
        ("deny publish a.b extra", "test.conf:1: unexpected \"extra\" (expected user=U or group=G)"),
        ("deny publish a.b user=4294967295", "test.conf:1: unknown user \"4294967295\""),
        ("default bridge allow", "test.conf:1: bridge has no default: it is denied unless an allow bridge rule matches"),
        ("default publish maybe", "test.conf:1: unknown effect \"maybe\" (expected allow or deny)"),
        ("default publish", "test.conf:1: default needs an action and an effect: default publish|subscribe|connect|serve allow|deny"),
        ("default publish deny user=1", "test.conf:1: unexpected \"user=1\" after default publish deny (a default applies to everyone)"),
        ("default pub deny", "test.conf:1: unknown action \"pub\" (expected publish, subscribe, connect or serve)"),
        ("limit sockets 5", "test.conf:1: unknown resource \"sockets\" (expected connections, subscriptions, inbound, outbound, retained)"),
        ("limit connections", "test.conf:1: limit needs a resource and a value: limit RESOURCE VALUE [user=U] [group=G] (resources: connections, subscriptions, inbound, outbound, retained)"),
        ("limit connections many", "test.conf:1: bad limit value \"many\" (expected a number with an optional K, M or G suffix, or unlimited)"),
        ("limit outbound 16T", "test.conf:1: bad limit value \"16T\" (expected a number with an optional K, M or G suffix, or unlimited)"),
        ("limit outbound -1", "test.conf:1: bad limit value \"-1\" (expected a number with an optional K, M or G suffix, or unlimited)"),
        ("limit outbound 99999999999G", "test.conf:1: limit value \"99999999999G\" is too large (at most 2^53)"),
        ("limit outbound 1M user=nobody", "test.conf:1: unknown user \"nobody\""),
    ])
    func errorNamesFileAndLine(_ text: String, _ expected: String) {
        #expect(loadErrors([PolicySource(path: "test.conf", text: text)]) == [expected])
    }

    @Test func patternsMustStayValidForEveryUID() {
        // 245 bytes + %u: fine for uid 0, too long for a 10-digit uid.
        let long = String(repeating: "a.", count: 121) + "bbb." + "%u"  // 246 + 2 bytes
        #expect(loadErrors([PolicySource(path: "p.conf", text: "deny publish \(long)")])
            == ["p.conf:1: bad pattern \"\(long)\": longer than 255 bytes once %u is a 10-digit uid"])
        let plain = String(repeating: "a", count: 256)
        #expect(loadErrors([PolicySource(path: "p.conf", text: "deny publish \(plain)")]) == ["p.conf:1: bad pattern \"\(plain)\": longer than 255 bytes"])
    }

    @Test func everyErrorOfEveryFileIsReportedAndNothingLoads() {
        let sources = [
            PolicySource(path: "/usr/share/eventbus/policy.conf", text: "default publish allow\n"),
            PolicySource(path: "/etc/eventbus/policy.conf", text: "allow publish a.b\n\nallow pubish a.b\ndeny publish a..b\n"),
            PolicySource(path: "/etc/eventbus/policy.d/10-x.conf", text: "limit connections 5 user=ghost\n"),
        ]
        #expect(loadErrors(sources) == [
            "/etc/eventbus/policy.conf:3: unknown action \"pubish\" (expected connect, publish, subscribe, bridge, hold or serve)",
            "/etc/eventbus/policy.conf:4: bad pattern \"a..b\": empty segment (two dots, or a dot at an end)",
            "/etc/eventbus/policy.d/10-x.conf:1: unknown user \"ghost\"",
        ])
    }

    @Test func filesMergeInTheOrderGiven() throws {
        let policy = try AccessPolicy.load([
            PolicySource(path: "vendor.conf", text: "deny publish system.>\nallow publish system.> user=0\n"),
            PolicySource(path: "admin.conf", text: "allow publish system.> user=alice\n"),
            PolicySource(path: "policy.d/10-a.conf", text: "deny subscribe secret.>\n"),
        ], resolver: testNames, brokerUID: testBrokerUID)
        #expect(policy.paths == ["vendor.conf", "admin.conf", "policy.d/10-a.conf"])
        #expect(policy.rules.map(\.origin.description) == ["vendor.conf:1", "vendor.conf:2", "admin.conf:1", "policy.d/10-a.conf:1"])
        #expect(policy.view(for: who(2001)).publish(type("system.x")).isAllowed)
        #expect(!policy.view(for: who(2002)).publish(type("system.x")).isAllowed)
        #expect(!policy.view(for: who(2002)).receive(type("secret.x")).isAllowed)
    }

    @Test func namesAreResolvedOnceWhenTheFileIsRead() throws {
        final class CountingResolver: PolicyNameResolver {
            var asked: [String] = []
            func uid(ofUser name: String) -> UInt32? { asked.append("user " + name); return name == "svc" ? 777 : nil }
            func gid(ofGroup name: String) -> UInt32? { asked.append("group " + name); return name == "ops" ? 88 : nil }
        }
        let resolver = CountingResolver()
        let policy = try AccessPolicy.load([PolicySource(path: "x.conf", text: "allow publish backup.> user=svc\nallow subscribe audit.> group=ops\ndeny publish a user=12\n")],
                                           resolver: resolver, brokerUID: 1)
        #expect(resolver.asked == ["user svc", "group ops"])  // numbers never reach the resolver
        #expect(policy.rules.map(\.uid) == [777, nil, 12] && policy.rules.map(\.gid) == [nil, 88, nil])
        _ = policy.view(for: who(777))
        #expect(resolver.asked.count == 2)
    }
}
