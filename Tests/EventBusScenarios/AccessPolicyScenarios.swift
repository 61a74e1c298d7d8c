// PROTOCOL.md "Access policy (1.1)", "Bridged events (1.1)", the policy's
// part in "Retained events" and the `serve` rule of "Request/reply (1.3)":
// every rule that needs only a connection's uid and groups, written once
// (UIDBus.swift) and run in process (EventBusServerTests, no root) and
// against eventbusd with setpriv'd clients (EventBusIntegrationTests, root).
//
// Before editing: what needs the process or the CLI stays in
// AccessPolicyTests.swift (`--check-policy`, a bad policy at start, `eventbus
// reload --wait`'s own output lives in the process harness's `reload`).
// Uids 4321-4323, groups 4390/4391.
import EventBusTestSupport
import Foundation
import Testing

package let accessPolicyScenarios: [BusScenario] = [
    BusScenario("A denied publish is forbidden for that uid only, names the rule, takes no seq, and is logged once per uid and rule",
                policy: "deny publish secret.>\nallow publish secret.> user=4322\n") { bus in
        let path = bus.policyPath
        let root = try bus.connect(uid: 0)
        let user = try bus.connect(uid: 4321)
        let allowed = try bus.connect(uid: 4322)
        let first = try root.publish("open.a")
        for _ in 0..<2 {
            let denied = try user.error(#"{"op":"publish","type":"secret.x","req":2}"#)
            #expect(denied.code == "forbidden" && denied.string("message") == "publish secret.x denied for uid 4321 by \(path):1", "\(denied)")
        }
        #expect(try allowed.publish("secret.x").seq == first.seq + 1, "the user= rule lets uid 4322 publish")
        #expect(try root.publish("open.b").seq == first.seq + 2, "the denied publishes took no seq")
        #expect(try root.error(#"{"op":"publish","type":"secret.y","req":3}"#).code == "forbidden", "the rule binds root too")
        #expect(try root.stats().int("published") == 3)
        let log = bus.logText()
        let logged = log.components(separatedBy: "\n").filter { $0.contains("denied: publish secret.x denied for uid 4321 by \(path):1 (pid ") }
        #expect(logged.count == 1, "\(log)")
    },

    BusScenario("subscribe > under a deny is filtered and never delivers a denied type; another uid's matching rule does not apply",
                policy: "deny subscribe secret.> user=4321\n") { bus in
        let user = try bus.connect(uid: 4321)
        let other = try bus.connect(uid: 4322)
        #expect(try user.ok(#"{"op":"subscribe","type":">","req":1}"#).bool("filtered") == true)
        let exact = try user.ok(#"{"op":"subscribe","type":"open.x","req":2}"#)
        #expect(exact.has("filtered") == false, "an unfiltered subscription says nothing: \(exact)")
        #expect(try other.ok(#"{"op":"subscribe","type":">","req":1}"#).has("filtered") == false)
        let root = try bus.connect(uid: 0)
        #expect(try root.publish("secret.x").delivered == 1, "only the other uid's subscription takes it")
        try root.publish("secret.y.z")
        try root.publish("open.done")
        #expect(try user.eventTypes(until: "open.done") == ["open.done"])
        try user.expectNoFrame()
        #expect(try other.eventTypes(until: "open.done") == ["secret.x", "secret.y.z", "open.done"])
    },

    BusScenario("Containment is exact: with only allow subscribe foo.*, foo.> is filtered (foo.a, never foo.a.b) and bar.> forbidden",
                policy: "default subscribe deny\nallow subscribe foo.*\n") { bus in
        let user = try bus.connect(uid: 4321)
        #expect(try user.ok(#"{"op":"subscribe","type":"foo.>","req":1}"#).bool("filtered") == true)
        let refused = try user.error(#"{"op":"subscribe","type":"bar.>","req":2}"#)
        #expect(refused.code == "forbidden" && refused.string("message") == "subscribe bar.> denied for uid 4321 by \(bus.policyPath):1 (default subscribe deny)", "\(refused)")
        let root = try bus.connect(uid: 0)
        try root.publish("foo.a.b")
        try root.publish("bar.a")
        try root.publish("foo.a")
        #expect(try user.eventTypes(until: "foo.a") == ["foo.a"])
        try user.expectNoFrame()
        #expect(try root.stats().int("subscriptions") == 1, "bar.> was not added")
    },

    BusScenario("A group rule applies to a supplementary or primary group, and only when the connection has it",
                policy: "deny subscribe audit.>\nallow subscribe audit.> group=4390\n") { bus in
        let member = try bus.connect(uid: 4321, groups: [4390])
        #expect(try member.ok(#"{"op":"subscribe","type":"audit.>","req":1}"#).has("filtered") == false)
        let primary = try bus.connect(uid: 4322, gid: 4390)
        #expect(try primary.ok(#"{"op":"subscribe","type":"audit.>","req":1}"#).has("filtered") == false)
        let outsider = try bus.connect(uid: 4321, groups: [4391])
        #expect(try outsider.error(#"{"op":"subscribe","type":"audit.>","req":1}"#).code == "forbidden", "the same uid without the group")
    },

    BusScenario("%u stands for the connection's own uid, root's too",
                policy: "default subscribe deny\nallow subscribe box.%u.>\n") { bus in
        let user = try bus.connect(uid: 4321)
        try user.ok(#"{"op":"subscribe","type":"box.4321.>","req":1}"#)
        #expect(try user.error(#"{"op":"subscribe","type":"box.4322.>","req":2}"#).code == "forbidden")
        try bus.connect(uid: 4322).ok(#"{"op":"subscribe","type":"box.4322.x","req":1}"#)
        let root = try bus.connect(uid: 0)
        #expect(try root.error(#"{"op":"subscribe","type":"box.4321.>","req":1}"#).code == "forbidden", "root is bound too")
        try root.ok(#"{"op":"subscribe","type":"box.0.>","req":2}"#)
    },

    BusScenario("connect denied: error forbidden without req, then the broker closes; an allowed uid connects",
                policy: "default connect deny\nallow connect - user=0\n") { bus in
        let frames = try bus.connect(uid: 4321).readUntilEOF()
        #expect(frames.count == 1 && frames[0].code == "forbidden" && frames[0].req == nil, "\(frames)")
        #expect(frames.first?.string("message") == "connect denied for uid 4321 by \(bus.policyPath):1 (default connect deny)")
        #expect(try bus.connect(uid: 0).stats().int("connections") == 1)
    },

    BusScenario("A reload revokes a subscription the new policy forbids: error with type, no req, connection open, no more events of it",
                policy: "default subscribe allow\n") { bus in
        let user = try bus.connect(uid: 4321)
        try user.subscribe("secret.>", "open.>")
        try bus.writePolicy("deny subscribe secret.>\n")
        #expect(try bus.reload() == .reloaded(generation: 2))
        let revoked = try user.readFrames(until: { $0.op == "error" }).last!
        #expect(revoked.code == "forbidden" && revoked.type == "secret.>" && !revoked.has("req"), "\(revoked)")
        #expect(revoked.string("message")?.hasPrefix("subscribe secret.> denied for uid 4321 by \(bus.policyPath):1") == true, "\(revoked)")
        let root = try bus.connect(uid: 0)
        try root.publish("secret.x")
        try root.publish("open.x")
        #expect(try user.eventTypes(until: "open.x") == ["open.x"])
        try user.expectNoFrame()
        let stats = try root.stats()
        #expect(stats.int("policy_generation") == 2 && stats.int("subscriptions") == 1, "\(stats)")
    },

    BusScenario("A reload of an invalid file keeps the old policy, answers with file:line and logs it",
                policy: "deny publish secret.>\n") { bus in
        let user = try bus.connect(uid: 4321)
        try bus.writePolicy("allow publish >\nallow publsh x\n")
        let reason = "\(bus.policyPath):2: unknown action \"publsh\" (expected connect, publish, subscribe, bridge, hold or serve)"
        #expect(try bus.reload() == .refused(generation: 1, reason: reason))
        #expect(bus.logText().contains("failed to reload the access policy: \(reason)"), "\(bus.logText())")
        #expect(try user.error(#"{"op":"publish","type":"secret.x","req":1}"#).code == "forbidden")
        #expect(try bus.connect(uid: 0).stats().int("policy_generation") == 1)
    },

    BusScenario("Publishing eventbus.> is forbidden even when a file allows it",
                policy: "allow publish eventbus.>\nallow publish eventbus.x user=4321\n") { bus in
        let user = try bus.connect(uid: 4321), root = try bus.connect(uid: 0)
        #expect(try user.error(#"{"op":"publish","type":"eventbus.x","req":1}"#).code == "forbidden")
        #expect(try root.error(#"{"op":"publish","type":"eventbus.y","req":1}"#).code == "forbidden")
    },

    BusScenario("The shipped policy: system.> published by root only, user.<uid>.> private to its uid and root",
                policy: shippedPolicy) { bus in
        let root = try bus.connect(uid: 0)
        let alice = try bus.connect(uid: 4321)
        let bob = try bus.connect(uid: 4322)
        let systemRule = try #require(shippedPolicy.split(separator: "\n", omittingEmptySubsequences: false).firstIndex {
            $0.hasPrefix("deny") && $0.contains("publish") && $0.contains("system.>")
        })
        #expect(try alice.error(#"{"op":"publish","type":"system.reboot","req":1}"#).string("message")
                == "publish system.reboot denied for uid 4321 by \(bus.policyPath):\(systemRule + 1)")
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
    },

    BusScenario("origin needs the bridge right; with it, the event is delivered with origin unchanged",
                policy: "allow bridge - user=4321\n") { bus in
        let subscriber = try bus.connect(uid: 0)
        try subscriber.ok(#"{"op":"subscribe","type":"remote.>","req":1}"#)
        let origin = #"{"node":"host-b","instance":"9f2c","seq":9123,"time":"2026-11-29T13:00:00.123Z","pid":811,"uid":1000,"gid":1000}"#
        let denied = try bus.connect(uid: 4322).error(#"{"op":"publish","type":"remote.x","req":1,"origin":\#(origin)}"#)
        #expect(denied.code == "forbidden" && denied.string("message")?.hasPrefix("bridge denied for uid 4322") == true, "\(denied)")
        #expect(try subscriber.error(#"{"op":"publish","type":"remote.x","req":2,"origin":\#(origin)}"#).code == "forbidden",
                "a policy file without a bridge rule for root denies root")
        try bus.connect(uid: 4321).ok(#"{"op":"publish","type":"remote.x","req":1,"origin":\#(origin)}"#)
        let event = try subscriber.readFrame()
        #expect(event.type == "remote.x" && event.raw.contains(#","origin":\#(origin),"#) && event.int("uid") == 4321, "\(event)")
    },

    BusScenario("Without a policy file, bridge is for uid 0 and the broker's uid only; hello lists policy and origin") { bus in
        let root = try bus.connect(uid: 0)
        let features = try root.ok(#"{"op":"hello","req":1}"#).fields["features"] as? [String] ?? []
        #expect(features.contains("policy") && features.contains("origin"), "\(features)")
        try root.ok(#"{"op":"publish","type":"remote.x","req":2,"origin":{"node":"b"}}"#)
        #expect(try bus.connect(uid: 4321).error(#"{"op":"publish","type":"remote.x","req":1,"origin":{"node":"b"}}"#).code == "forbidden")
    },

    BusScenario("Retained events after last, history replays after since, and clear obey the policy (issue 12)",
                policy: "deny subscribe secret.>\ndeny publish secret.> user=4321\n") { bus in
        let root = try bus.connect(uid: 0)
        try root.ok(#"{"op":"publish","type":"secret.x","retain":true,"req":1}"#)
        try root.ok(#"{"op":"publish","type":"open.x","retain":true,"req":2}"#)
        let user = try bus.connect(uid: 4321)
        let ok = try user.ok(#"{"op":"subscribe","type":">","last":true,"since":0,"req":1}"#)
        #expect(ok.bool("filtered") == true && ok.int("retained") == 1, "\(ok)")
        let frames = try user.settle()
        // The replay left out open.x (sent as retained) and secret.x (denied).
        #expect(frames.map { "\($0.type!) \($0.bool("retained") == true ? "retained" : "replayed")" } == ["open.x retained"], "\(frames)")
        #expect(try user.error(#"{"op":"subscribe","type":"secret.x","last":true,"req":2}"#).code == "forbidden")
        let clear = try user.error(#"{"op":"clear","type":"secret.x","req":3}"#)
        #expect(clear.code == "forbidden" && clear.string("message")?.contains("publish secret.x denied") == true, "\(clear)")
        #expect(try user.ok(#"{"op":"clear","type":"open.x","req":4}"#).bool("removed") == true)
        #expect(try root.stats().int("retained") == 1, "the denied clear removed nothing")
    },

    BusScenario("Serving needs serve as well as subscribe: forbidden names the rule, filtered when partial, requests of denied types never reach it",
                policy: "deny serve system.>\nallow serve system.> user=0\ndeny subscribe secret.>\n") { bus in
        let root = try bus.connect(uid: 0)
        let user = try bus.connect(uid: 4321)
        let denied = try user.error(#"{"op":"subscribe","type":"system.>","serve":true,"req":1}"#)
        #expect(denied.code == "forbidden" && (denied.string("message") ?? "").contains("serve system.> denied for uid 4321 by \(bus.policyPath):1"), "\(denied.raw)")
        let hidden = try user.error(#"{"op":"subscribe","type":"secret.x","serve":true,"req":2}"#)
        #expect(hidden.code == "forbidden" && (hidden.string("message") ?? "").contains("subscribe secret.x"), "\(hidden.raw)")
        // Listening to system.> stays allowed: serve is about answering.
        #expect(try user.ok(#"{"op":"subscribe","type":"system.>","req":3}"#).bool("filtered") == nil)
        let wide = try user.ok(#"{"op":"subscribe","type":">","serve":true,"req":4}"#)
        #expect(wide.bool("filtered") == true && wide.bool("serve") == true)
        // Root's request of system.x reaches nobody: the user may not answer it.
        #expect(try root.error(#"{"op":"request","type":"system.reboot","req":5}"#).code == "no_responders")
        #expect(try root.error(#"{"op":"request","type":"secret.x","req":6}"#).code == "no_responders")
        try root.send(#"{"op":"request","type":"thumb.make","req":7}"#)
        let request = try user.readFrame()
        #expect(request.op == "request" && request.type == "thumb.make", "\(request.raw)")
        try user.ok(#"{"op":"reply","to":"\#(request.string("reply") ?? "")","data":"ok","req":8}"#)
        let answer = try root.readFrame()
        #expect(answer.req == .integer(7) && (answer.object("reply")?["uid"] as? NSNumber)?.intValue == 4321, "\(answer.raw)")
        // Root serves system.>.
        try root.ok(#"{"op":"subscribe","type":"system.>","serve":true,"req":9}"#)
        try user.send(#"{"op":"request","type":"system.status","req":10}"#)
        #expect(try root.readFrame().op == "request", "root serves system.>")
    },
]

/// config/policy.conf, the policy the packages install.
private let shippedPolicy: String = (try? String(contentsOfFile: repositoryFile("config/policy.conf"), encoding: .utf8)) ?? "# config/policy.conf is missing\n"
