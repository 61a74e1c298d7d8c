// `limit` lines (PROTOCOL.md "Quotas (1.1)"), the `--check-policy` rendering
// (it parses back to the same policy), and the denial log limiter (once per
// (uid, rule) per minute, bounded memory).
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import Testing

@Suite("limit lines")
struct LimitTests {
    static let text = """
        limit connections 64
        limit connections 1024 group=staff
        limit connections 512 group=auditors
        limit connections 4096 user=eventbus-bridge
        limit outbound 128M user=eventbus-bridge
        limit subscriptions unlimited group=staff
        limit retained 1M
        """

    @Test func userBeatsGroupBeatsEveryoneAndTheSmallestWinsAtOneLevel() {
        guard let policy = load(Self.text) else { return }
        let plain = policy.view(for: who(1000)).limits
        #expect(plain[.connections]?.value == .value(64))
        #expect(plain[.retained]?.value == .value(1 << 20))
        #expect(plain[.outbound] == nil && plain[.subscriptions] == nil && plain[.inbound] == nil)
        let staff = policy.view(for: who(1000, groups: [50])).limits
        #expect(staff[.connections]?.value == .value(1024))
        #expect(staff[.subscriptions]?.value == .unlimited)
        let both = policy.view(for: who(1000, groups: [50, 3001])).limits
        #expect(both[.connections]?.value == .value(512))  // two groups: the smaller
        #expect(both[.connections]?.origin == .line(path: "test.conf", line: 3))
        let bridge = policy.view(for: who(998, groups: [50])).limits
        #expect(bridge[.connections]?.value == .value(4096))
        #expect(bridge[.outbound]?.value == .value(128 << 20))
    }

    @Test func uidZeroAndTheBrokersUIDTakeOnlyLinesNamingThem() {
        guard let policy = load(Self.text + "\nlimit inbound 1M user=0\n") else { return }
        let root = policy.view(for: who(0, groups: [50])).limits
        #expect(root[.connections] == nil && root[.retained] == nil)
        #expect(root[.inbound]?.value == .value(1 << 20))
        #expect(policy.view(for: who(testBrokerUID)).limits.isEmpty)
    }
}

@Suite("--check-policy output")
struct RenderTests {
    static let text = """
        default publish deny
        allow publish backup.> user=eventbus-bridge   # names become numbers
        allow subscribe audit.> group=auditors
        deny subscribe user.>
        allow subscribe user.%u.>
        deny connect - user=2002
        allow bridge - user=998
        limit connections 1024 user=eventbus-bridge
        limit outbound 16M
        """

    @Test func rendersEveryRuleWithNumbersAndItsOrigin() {
        guard let policy = load(Self.text, path: "/etc/eventbus/policy.conf") else { return }
        let lines = policy.renderEffective().split(separator: "\n").map(String.init)
        #expect(lines.first == "# effective policy of 1 file: /etc/eventbus/policy.conf")
        #expect(lines.contains("default publish deny                        # /etc/eventbus/policy.conf:1"))
        #expect(lines.contains("default subscribe allow                     # built in"))
        #expect(lines.contains("allow publish backup.> user=998             # /etc/eventbus/policy.conf:2, user=eventbus-bridge"))
        #expect(lines.contains("allow subscribe audit.> group=3001          # /etc/eventbus/policy.conf:3, group=auditors"))
        #expect(lines.contains("allow subscribe user.%u.>                   # /etc/eventbus/policy.conf:5, %u: ranks as a user rule"))
        #expect(lines.contains("limit connections 1024 user=998             # /etc/eventbus/policy.conf:8, user=eventbus-bridge"))
        #expect(lines.contains("limit outbound 16M                          # /etc/eventbus/policy.conf:9"))
    }

    @Test func theOutputParsesBackToTheSamePolicy() throws {
        guard let policy = load(Self.text) else { return }
        let again = try AccessPolicy.load([PolicySource(path: "rendered", text: policy.renderEffective())], resolver: TableNameResolver(), brokerUID: testBrokerUID)
        func strip(_ r: PolicyRule) -> String { "\(r.effect) \(r.action) \(r.pattern ?? "-") \(String(describing: r.uid)) \(String(describing: r.gid))" }
        #expect(again.rules.map(strip) == policy.rules.map(strip))
        #expect(again.limits.map { "\($0.resource) \($0.value) \(String(describing: $0.uid))" } == policy.limits.map { "\($0.resource) \($0.value) \(String(describing: $0.uid))" })
        for action in [PolicyAction.connect, .publish, .subscribe] {
            #expect(again.defaultVerdict(action).effect == policy.defaultVerdict(action).effect)
        }
        // The built-in line is a rule of its own when read back; same decisions.
        #expect(!again.view(for: who(5)).publish(type("eventbus.x")).isAllowed)
    }

    @Test func warnsAboutLinesThatCanNeverDecide() {
        guard let policy = load("deny subscribe secret.>\nallow subscribe secret.keys\nallow subscribe secret.x user=1\ndefault publish allow\ndefault publish deny\n") else { return }
        #expect(policy.warnings() == [
            "test.conf:2 allow subscribe secret.keys never applies: test.conf:1 deny subscribe secret.> beats it at the same level",
            "test.conf:4 default publish allow never applies: a default publish deny beats it",
        ])
        #expect(policy.renderEffective().contains("# warning: test.conf:2 allow subscribe secret.keys never applies"))
    }

    @Test func withoutFilesSaysSo() {
        #expect(AccessPolicy.withoutFiles(brokerUID: 42).renderEffective().hasPrefix("# no policy file: everything is allowed, bridge only to uid 0 and uid 42\n"))
        // A broker running as root names uid 0 once.
        let asRoot = AccessPolicy.withoutFiles(brokerUID: 0).renderEffective()
        #expect(asRoot.hasPrefix("# no policy file: everything is allowed, bridge only to uid 0\n"))
        #expect(asRoot.contains("# bridge: allowed to uid 0 only (no policy file)\n"))
    }
}

@Suite("Denial log limiter")
struct DenialLogLimiterTests {
    static let second: Int64 = 1_000_000_000

    @Test func oncePerUIDAndRulePerMinute() {
        var limiter = DenialLogLimiter()
        #expect(limiter.admit(uid: 1000, origin: 7, nowNanoseconds: 0) == .log(suppressed: 0))
        #expect(limiter.admit(uid: 1000, origin: 7, nowNanoseconds: 1 * Self.second) == .suppress)
        #expect(limiter.admit(uid: 1000, origin: 8, nowNanoseconds: 2 * Self.second) == .log(suppressed: 0))  // another rule
        #expect(limiter.admit(uid: 1001, origin: 7, nowNanoseconds: 3 * Self.second) == .log(suppressed: 0))  // another uid
        #expect(limiter.admit(uid: 1000, origin: 7, nowNanoseconds: 59 * Self.second) == .suppress)
        #expect(limiter.admit(uid: 1000, origin: 7, nowNanoseconds: 60 * Self.second) == .log(suppressed: 2))
        #expect(limiter.admit(uid: 1000, origin: 7, nowNanoseconds: 61 * Self.second) == .suppress)
        #expect(limiter.admit(uid: 1000, origin: 7, nowNanoseconds: 100 * Self.second) == .suppress)
        #expect(limiter.admit(uid: 1000, origin: 7, nowNanoseconds: 120 * Self.second) == .log(suppressed: 2))
        // Two windows later the key is forgotten (and its count with it).
        #expect(limiter.admit(uid: 1000, origin: 7, nowNanoseconds: 125 * Self.second) == .suppress)
        #expect(limiter.admit(uid: 1000, origin: 7, nowNanoseconds: 400 * Self.second) == .log(suppressed: 0))
    }

    @Test func aKeyIsNeverLoggedTwiceWithinTheIntervalAcrossWindowRotations() {
        var limiter = DenialLogLimiter()
        var rng = SeededGenerator(seed: 0x106)
        var lastLogged: [UInt32: Int64] = [:]
        var now: Int64 = 0
        for _ in 0..<20_000 {
            now += Int64.random(in: 0...(3 * Self.second), using: &rng)
            let uid = UInt32.random(in: 0..<50, using: &rng)
            if case .log = limiter.admit(uid: uid, origin: 1, nowNanoseconds: now) {
                if let last = lastLogged[uid] { #expect(now - last >= 60 * Self.second) }
                lastLogged[uid] = now
            } else if let last = lastLogged[uid] {
                #expect(now - last < 60 * Self.second, "uid \(uid) was suppressed more than a minute after its last line")
            }
        }
    }

    @Test func memoryStaysBoundedWhenEverythingVaries() {
        var limiter = DenialLogLimiter(capacity: 100)
        var overflowLines = 0, lines = 0
        for i in 0..<100_000 {
            switch limiter.admit(uid: UInt32(i), origin: Int32(i % 7), nowNanoseconds: Int64(i) * 1_000_000) {
            case .log: lines += 1
            case .logOverflow: overflowLines += 1
            case .suppress: break
            }
            #expect(limiter.rememberedKeys <= 200)
        }
        // 100 s of denials: every key is new; 100 fit per 60 s window, the rest
        // are summed into one overflow line per minute.
        #expect(lines <= 300 && overflowLines <= 3 && overflowLines >= 1)
    }
}
