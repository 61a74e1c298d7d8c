// PROTOCOL.md "Access policy (1.1)" and the `serve` rule of "Request/reply
// (1.3)" in an in-process server (InProcessBroker.swift): the rules of
// AccessPolicyTests and RequestReplyPolicyTests that need only a connection's
// uid and groups, run with handed connections of made-up uids, so they run
// without root. Fake uid 0 is root. Absence is settled with a sentinel event
// or a ping round trip, never a sleep.
//
// Before editing: the policy is given as text, said to come from
// `InProcessBroker.policyPath`; rules about files (reload, --check-policy, an
// invalid file at start) stay in the integration suites.
import EventBusTestSupport
import Foundation
import Testing

@Suite("Access policy, in process (no root)")
struct ServerPolicyTests {
    let path = InProcessBroker.policyPath

    @Test("A denied publish is forbidden for that uid only, names the rule, takes no seq, and is logged once per uid and rule")
    func deniedPublishTakesNoSeq() throws {
        try withServer(policy: "deny publish secret.>\nallow publish secret.> user=4322\n") { broker in
            let root = try broker.connect(uid: 0)
            let user = try broker.connect(uid: 4321)
            let allowed = try broker.connect(uid: 4322)
            let first = try root.publish("open.a")
            for _ in 0..<2 {
                let denied = try user.error(#"{"op":"publish","type":"secret.x","req":2}"#)
                #expect(denied.code == "forbidden" && denied.string("message") == "publish secret.x denied for uid 4321 by \(path):1", "\(denied)")
            }
            #expect(try allowed.publish("secret.x").seq == first.seq! + 1, "the user= rule lets uid 4322 publish")
            #expect(try root.publish("open.b").seq == first.seq! + 2, "the denied publishes took no seq")
            #expect(try root.error(#"{"op":"publish","type":"secret.y","req":3}"#).code == "forbidden", "the rule binds root too")
            #expect(try root.stats().int("published") == 3)
            let logged = broker.log.all.filter { $0.contains("denied: publish secret.x denied for uid 4321 by \(path):1") }
            #expect(logged.count == 1, "\(broker.log.all)")
        }
    }

    @Test("subscribe > under a deny is filtered and never delivers a denied type; another uid's matching rule does not apply")
    func filteredSubscriptionNeverDeliversADeniedType() throws {
        try withServer(policy: "deny subscribe secret.> user=4321\n") { broker in
            let user = try broker.connect(uid: 4321)
            let other = try broker.connect(uid: 4322)
            #expect(try user.ok(#"{"op":"subscribe","type":">","req":1}"#).bool("filtered") == true)
            #expect(try user.ok(#"{"op":"subscribe","type":"open.x","req":2}"#).has("filtered") == false)
            #expect(try other.ok(#"{"op":"subscribe","type":">","req":1}"#).has("filtered") == false)
            let root = try broker.connect(uid: 0)
            try root.publish("secret.x")
            try root.publish("secret.y.z")
            try root.publish("open.done")
            #expect(try user.eventTypes(until: "open.done") == ["open.done"])
            try user.expectNoFrame()
            #expect(try other.eventTypes(until: "open.done") == ["secret.x", "secret.y.z", "open.done"])
        }
    }

    @Test("Containment is exact: with only allow subscribe foo.*, foo.> is filtered (foo.a, never foo.a.b) and bar.> forbidden")
    func containmentIsExact() throws {
        try withServer(policy: "default subscribe deny\nallow subscribe foo.*\n") { broker in
            let user = try broker.connect(uid: 4321)
            #expect(try user.ok(#"{"op":"subscribe","type":"foo.>","req":1}"#).bool("filtered") == true)
            let refused = try user.error(#"{"op":"subscribe","type":"bar.>","req":2}"#)
            #expect(refused.code == "forbidden" && refused.string("message") == "subscribe bar.> denied for uid 4321 by \(path):1 (default subscribe deny)", "\(refused)")
            let root = try broker.connect(uid: 0)
            try root.publish("foo.a.b")
            try root.publish("bar.a")
            try root.publish("foo.a")
            #expect(try user.eventTypes(until: "foo.a") == ["foo.a"])
            try user.expectNoFrame()
            #expect(try root.stats().int("subscriptions") == 1, "bar.> was not added")
        }
    }

    @Test("A group rule applies to a supplementary or primary group, and only when the connection has it")
    func groupRulesNeedTheGroup() throws {
        try withServer(policy: "deny subscribe audit.>\nallow subscribe audit.> group=4390\n") { broker in
            let member = try broker.connect(uid: 4321, groups: [4390])
            #expect(try member.ok(#"{"op":"subscribe","type":"audit.>","req":1}"#).has("filtered") == false)
            let primary = try broker.connect(uid: 4322, gid: 4390)
            try primary.ok(#"{"op":"subscribe","type":"audit.x","req":1}"#)
            let outsider = try broker.connect(uid: 4323, groups: [4391])
            #expect(try outsider.error(#"{"op":"subscribe","type":"audit.>","req":1}"#).code == "forbidden")
        }
    }

    @Test("%u stands for the connection's own uid, root's too")
    func percentUIsTheConnectionsUID() throws {
        try withServer(policy: "default subscribe deny\nallow subscribe box.%u.>\n") { broker in
            let user = try broker.connect(uid: 4321)
            try user.ok(#"{"op":"subscribe","type":"box.4321.>","req":1}"#)
            #expect(try user.error(#"{"op":"subscribe","type":"box.4322.>","req":2}"#).code == "forbidden")
            try broker.connect(uid: 4322).ok(#"{"op":"subscribe","type":"box.4322.x","req":1}"#)
            let root = try broker.connect(uid: 0)
            #expect(try root.error(#"{"op":"subscribe","type":"box.4321.>","req":1}"#).code == "forbidden", "root is bound too")
            try root.ok(#"{"op":"subscribe","type":"box.0.>","req":2}"#)
        }
    }

    @Test("connect denied: error forbidden without req, then the broker closes; an allowed uid connects")
    func connectDeniedIsForbiddenThenClosed() throws {
        try withServer(policy: "default connect deny\nallow connect - user=0\n") { broker in
            let frames = try broker.connect(uid: 4321).readUntilEOF()
            #expect(frames.count == 1 && frames[0].code == "forbidden" && frames[0].req == nil, "\(frames)")
            #expect(frames.first?.string("message") == "connect denied for uid 4321 by \(path):1 (default connect deny)")
            #expect(try broker.connect(uid: 0).stats().int("connections") == 1)
        }
    }

    @Test("A reload revokes a subscription the new policy forbids: error with type, no req, connection open, no more events of it")
    func reloadRevokesForbiddenSubscriptions() throws {
        let directory = try TemporaryDirectory(prefix: "ebsrv-")
        defer { directory.remove() }
        let file = directory.file("policy.conf")
        try "default subscribe allow\n".write(toFile: file, atomically: true, encoding: .utf8)
        try withServer(policyFile: file) { broker in
            let root = try broker.connect(uid: 0)
            try root.ok(#"{"op":"subscribe","type":"eventbus.policy.>","req":1}"#)
            let user = try broker.connect(uid: 4321)
            try user.ok(#"{"op":"subscribe","type":"secret.>","req":1}"#)
            try user.ok(#"{"op":"subscribe","type":"open.>","req":2}"#)
            try "deny subscribe secret.>\n".write(toFile: file, atomically: true, encoding: .utf8)
            broker.reload()
            #expect(try root.readFrame().type == "eventbus.policy.reloaded")
            let revoked = try user.readFrames(until: { $0.op == "error" }).last!
            #expect(revoked.code == "forbidden" && revoked.type == "secret.>" && !revoked.has("req"), "\(revoked)")
            #expect(revoked.string("message")?.hasPrefix("subscribe secret.> denied for uid 4321 by \(file):1") == true, "\(revoked)")
            try root.publish("secret.x")
            try root.publish("open.x")
            #expect(try user.eventTypes(until: "open.x") == ["open.x"])
            try user.expectNoFrame()
            let stats = try root.stats()
            #expect(stats.int("policy_generation") == 2 && stats.int("subscriptions") == 2, "\(stats)")
        }
    }

    @Test("A reload of an invalid file keeps the old policy and logs file:line")
    func invalidReloadKeepsTheOldPolicy() throws {
        let directory = try TemporaryDirectory(prefix: "ebsrv-")
        defer { directory.remove() }
        let file = directory.file("policy.conf")
        try "deny publish secret.>\n".write(toFile: file, atomically: true, encoding: .utf8)
        try withServer(policyFile: file) { broker in
            let root = try broker.connect(uid: 0)
            try root.ok(#"{"op":"subscribe","type":"eventbus.policy.>","req":1}"#)
            let user = try broker.connect(uid: 4321)
            try "allow publish >\nallow publsh x\n".write(toFile: file, atomically: true, encoding: .utf8)
            broker.reload()
            #expect(try root.readFrame().type == "eventbus.policy.refused")
            let reason = "\(file):2: unknown action \"publsh\" (expected connect, publish, subscribe, bridge, hold or serve)"
            #expect(broker.log.all.contains { $0.contains("failed to reload the access policy: \(reason)") }, "\(broker.log.all)")
            #expect(try user.error(#"{"op":"publish","type":"secret.x","req":1}"#).code == "forbidden")
            #expect(try root.stats().int("policy_generation") == 1)
        }
    }

    @Test("Publishing eventbus.> is forbidden even when a file allows it")
    func reservedTypesStayForbidden() throws {
        try withServer(policy: "allow publish eventbus.>\nallow publish eventbus.x user=4321\n") { broker in
            let user = try broker.connect(uid: 4321), root = try broker.connect(uid: 0)
            #expect(try user.error(#"{"op":"publish","type":"eventbus.x","req":1}"#).code == "forbidden")
            #expect(try root.error(#"{"op":"publish","type":"eventbus.y","req":1}"#).code == "forbidden")
        }
    }

    @Test("The shipped policy: system.> published by root only, user.<uid>.> private to its uid and root")
    func shippedPolicyRows() throws {
        let shipped = try String(contentsOfFile: repositoryFile("config/policy.conf"), encoding: .utf8)
        try withServer(policy: shipped) { broker in
            let root = try broker.connect(uid: 0)
            let alice = try broker.connect(uid: 4321)
            let bob = try broker.connect(uid: 4322)
            let systemRule = try #require(shipped.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.hasPrefix("deny") && $0.contains("publish") && $0.contains("system.>") })
            #expect(try alice.error(#"{"op":"publish","type":"system.reboot","req":1}"#).string("message") == "publish system.reboot denied for uid 4321 by \(path):\(systemRule + 1)")
            #expect(try alice.error(#"{"op":"publish","type":"user.4322.note","req":2}"#).code == "forbidden")
            #expect(try alice.error(#"{"op":"subscribe","type":"user.4322.>","req":3}"#).code == "forbidden")
            try alice.ok(#"{"op":"subscribe","type":"user.4321.>","req":4}"#)
            try alice.ok(#"{"op":"subscribe","type":"system.>","req":5}"#)
            #expect(try bob.ok(#"{"op":"subscribe","type":">","req":1}"#).bool("filtered") == true)
            try alice.publish("user.4321.note", req: 6)
            try root.publish("system.reboot")
            try root.publish("user.4321.from-root")
            try root.publish("open.done")
            #expect(try bob.eventTypes(until: "open.done") == ["system.reboot", "open.done"])
            #expect(try alice.eventTypes(until: "user.4321.from-root") == ["system.reboot", "user.4321.from-root"])
            try root.ok(#"{"op":"subscribe","type":"user.>","req":2}"#)
        }
    }

    @Test("origin needs the bridge right; with it, the event is delivered with origin unchanged")
    func originNeedsTheBridgeRight() throws {
        try withServer(policy: "allow bridge - user=4321\n") { broker in
            let subscriber = try broker.connect(uid: 0)
            try subscriber.ok(#"{"op":"subscribe","type":"remote.>","req":1}"#)
            let origin = #"{"node":"host-b","instance":"9f2c","seq":9123,"time":"2026-11-29T13:00:00.123Z","pid":811,"uid":1000,"gid":1000}"#
            let denied = try broker.connect(uid: 4322).error(#"{"op":"publish","type":"remote.x","req":1,"origin":\#(origin)}"#)
            #expect(denied.code == "forbidden" && denied.string("message")?.hasPrefix("bridge denied for uid 4322") == true, "\(denied)")
            #expect(try subscriber.error(#"{"op":"publish","type":"remote.x","req":2,"origin":\#(origin)}"#).code == "forbidden",
                    "a policy file without a bridge rule for root denies root")
            try broker.connect(uid: 4321).ok(#"{"op":"publish","type":"remote.x","req":1,"origin":\#(origin)}"#)
            let event = try subscriber.readFrame()
            #expect(event.type == "remote.x" && event.raw.contains(#","origin":\#(origin),"#) && event.int("uid") == 4321, "\(event)")
        }
    }

    @Test("Without a policy file, bridge is for uid 0 and the broker's uid only; hello lists policy and origin")
    func withoutPolicyOnlyRootBridges() throws {
        try withServer { broker in
            let root = try broker.connect(uid: 0)
            let features = try root.ok(#"{"op":"hello","req":1}"#).fields["features"] as? [String] ?? []
            #expect(features.contains("policy") && features.contains("origin"), "\(features)")
            try root.ok(#"{"op":"publish","type":"remote.x","req":2,"origin":{"node":"b"}}"#)
            #expect(try broker.connect(uid: 4321).error(#"{"op":"publish","type":"remote.x","req":1,"origin":{"node":"b"}}"#).code == "forbidden")
        }
    }

    @Test("Serving needs serve as well as subscribe: forbidden names the rule, filtered when partial, requests of denied types never reach it")
    func servingNeedsServeAndSubscribe() throws {
        try withServer(policy: "deny serve system.>\nallow serve system.> user=0\ndeny subscribe secret.>\n") { broker in
            let root = try broker.connect(uid: 0)
            let user = try broker.connect(uid: 4321)
            let denied = try user.error(#"{"op":"subscribe","type":"system.>","serve":true,"req":1}"#)
            #expect(denied.code == "forbidden" && (denied.string("message") ?? "").contains("serve system.> denied for uid 4321 by \(path):1"), "\(denied.raw)")
            let hidden = try user.error(#"{"op":"subscribe","type":"secret.x","serve":true,"req":2}"#)
            #expect(hidden.code == "forbidden" && (hidden.string("message") ?? "").contains("subscribe secret.x"), "\(hidden.raw)")
            #expect(try user.ok(#"{"op":"subscribe","type":"system.>","req":3}"#).bool("filtered") == nil, "listening to system.> stays allowed")
            let wide = try user.ok(#"{"op":"subscribe","type":">","serve":true,"req":4}"#)
            #expect(wide.bool("filtered") == true && wide.bool("serve") == true)
            #expect(try root.error(#"{"op":"request","type":"system.reboot","req":5}"#).code == "no_responders")
            #expect(try root.error(#"{"op":"request","type":"secret.x","req":6}"#).code == "no_responders")
            try root.send(#"{"op":"request","type":"thumb.make","req":7}"#)
            let request = try user.readFrame()
            #expect(request.op == "request" && request.type == "thumb.make", "\(request.raw)")
            try user.ok(#"{"op":"reply","to":"\#(request.string("reply") ?? "")","data":"ok","req":8}"#)
            let answer = try root.readFrame()
            #expect(answer.req == .integer(7) && (answer.object("reply")?["uid"] as? NSNumber)?.intValue == 4321, "\(answer.raw)")
            try root.ok(#"{"op":"subscribe","type":"system.>","serve":true,"req":9}"#)
            try user.send(#"{"op":"request","type":"system.status","req":10}"#)
            #expect(try root.readFrame().op == "request", "root serves system.>")
        }
    }
}

/// A file of this repository, by its path from the root.
func repositoryFile(_ path: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path + "/" + path
}
