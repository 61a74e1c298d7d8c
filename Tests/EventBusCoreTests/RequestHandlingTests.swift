// Request handling in the broker (PROTOCOL.md "Requests", "Semantics"):
// subscribe/unsubscribe replies and limits, hello, stats, ping, the reply rules
// for `req`, error frames that keep the connection usable, and the connection
// limit.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Subscriptions")
struct SubscriptionTests {
    @Test func subscribeIsIdempotentAndAnswersWithTheType() {
        let h = BrokerHarness()
        let c = h.connect()
        h.send(c, #"{"op":"subscribe","type":"a.*","req":1}"#, #"{"op":"subscribe","type":"a.*","req":2}"#)
        let replies = h.read(c)
        #expect(replies.map(\.op) == ["ok", "ok"])
        #expect(replies.map(\.type) == ["a.*", "a.*"])
        #expect(c.patterns.count == 1)
        #expect(h.broker.statistics.subscriptions == 1)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func unsubscribingAnswersRemovedTrueThenFalse() {
        let h = BrokerHarness()
        let c = h.connect()
        h.send(c, #"{"op":"subscribe","type":"a.>"}"#, #"{"op":"unsubscribe","type":"a.>","req":1}"#,
               #"{"op":"unsubscribe","type":"a.>","req":2}"#, #"{"op":"unsubscribe","type":"never.subscribed","req":3}"#)
        let replies = h.read(c)
        #expect(replies.map(\.op) == ["ok", "ok", "ok"])
        #expect(replies.map { $0.fields["removed"] as? Bool } == [true, false, false])
        #expect(replies.map(\.type) == ["a.>", "a.>", "never.subscribed"])
        #expect(h.broker.indexIsEmpty)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func unsubscribeRemovesExactlyThatPattern() {
        let h = BrokerHarness()
        let c = h.connect()
        let p = h.connect()
        h.send(c, #"{"op":"subscribe","type":"a.b"}"#, #"{"op":"subscribe","type":"a.*"}"#,
               #"{"op":"unsubscribe","type":"a.*"}"#)
        h.send(p, #"{"op":"publish","type":"a.b"}"#, #"{"op":"publish","type":"a.c"}"#)
        #expect(h.read(c).map(\.type) == ["a.b"])
        h.checkInvariants()
        h.closeAll()
    }

    @Test func afterTheOKOfAnUnsubscribeNoEventOfThatPatternArrives() {
        let h = BrokerHarness()
        let c = h.connect()
        let p = h.connect()
        h.send(c, #"{"op":"subscribe","type":"a"}"#)
        h.send(p, #"{"op":"publish","type":"a"}"#)
        h.send(c, #"{"op":"unsubscribe","type":"a","req":"u"}"#)
        h.send(p, #"{"op":"publish","type":"a"}"#)
        // The event queued before the unsubscribe arrives before its ok; nothing after.
        #expect(h.read(c).map(\.op) == ["event", "ok"])
        h.closeAll()
    }

    @Test func subscriptionLimitAnswersLimitAndKeepsTheExistingOnes() {
        let h = BrokerHarness { $0.maxSubscriptionsPerConnection = 2 }
        let c = h.connect()
        h.send(c, #"{"op":"subscribe","type":"a","req":1}"#, #"{"op":"subscribe","type":"b","req":2}"#,
               #"{"op":"subscribe","type":"c","req":3}"#, #"{"op":"subscribe","type":"a","req":4}"#,
               #"{"op":"subscribe","type":"d"}"#)
        let replies = h.read(c)
        #expect(replies.map(\.op) == ["ok", "ok", "error", "ok", "error"])
        #expect(replies[2].code == "limit" && replies[2].int("req") == 3)
        #expect(replies[4].code == "limit" && !replies[4].has("req"))
        #expect(c.patterns == [Pattern("a")!, Pattern("b")!])
        #expect(h.takeNotices().filter { if case .limitReached = $0 { true } else { false } }.count == 2)
        // Room again after an unsubscribe.
        h.send(c, #"{"op":"unsubscribe","type":"b"}"#, #"{"op":"subscribe","type":"c","req":5}"#)
        #expect(h.read(c).map(\.op) == ["ok"])
        h.checkInvariants()
        h.closeAll()
    }

    @Test func subscriptionsVanishWithTheirConnection() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect(), p = h.connect()
        h.send(a, #"{"op":"subscribe","type":"x.*"}"#, #"{"op":"subscribe","type":"x.y"}"#, #"{"op":"subscribe","type":">"}"#)
        h.send(b, #"{"op":"subscribe","type":"x.*"}"#, #"{"op":"subscribe","type":"x.y"}"#)
        #expect(h.close(a).effects == [.close(a.id, .now)])
        #expect(h.close(a).isEmpty, "idempotent")
        h.checkInvariants()
        #expect(h.broker.statistics.subscriptions == 2)
        h.send(p, #"{"op":"publish","type":"x.y","req":1}"#)
        #expect(h.read(p).first?.int("delivered") == 1)
        h.close(b)
        h.checkInvariants()
        #expect(h.broker.indexIsEmpty)
        h.closeAll()
    }
}

@Suite("Requests")
struct RequestHandlingTests {
    @Test func helloReplyDescribesTheBrokerAndTheConnection() throws {
        let h = BrokerHarness { $0.serverName = "eventbusd"; $0.version = "9.9.9" }
        _ = h.connect()
        let c = h.connect()
        h.send(c, #"{"op":"hello","client":"cli","req":"h"}"#)
        let reply = try #require(h.read(c).first)
        #expect(reply.op == "ok" && reply.string("req") == "h")
        #expect(reply.string("server") == "eventbusd" && reply.string("version") == "9.9.9")
        #expect(reply.int("protocol") == 1)
        #expect(reply.string("instance") == BrokerHarness.instance)
        #expect(reply.int("conn") == Int(c.publicID) && c.id == 2, "the public id, not the counter (PublicConnectionID.swift)")
        #expect((reply.fields["features"] as? [String])?.contains("overflow") == true)
        #expect(c.clientName == "cli")
        h.closeAll()
    }

    @Test func aSecondHelloIsBadRequestAndChangesNothing() {
        let h = BrokerHarness()
        let c = h.connect()
        h.send(c, #"{"op":"hello","overflow":"drop-old","req":1}"#, #"{"op":"hello","echo":true,"overflow":"disconnect","req":2}"#)
        let replies = h.read(c)
        #expect(replies.map(\.op) == ["ok", "error"])
        #expect(replies.last?.code == "bad_request" && replies.last?.int("req") == 2)
        #expect(c.overflow == .dropOld && c.echo == false)
        h.closeAll()
    }

    @Test func pingAnswersOnlyWhenAskedWithReq() {
        let h = BrokerHarness()
        let c = h.connect()
        h.send(c, #"{"op":"ping"}"#, #"{"op":"ping","req":"p"}"#, #"{"op":"ping","req":-9007199254740992}"#)
        let replies = h.read(c)
        #expect(replies.map(\.raw) == [#"{"op":"ok","req":"p"}"#, #"{"op":"ok","req":-9007199254740992}"#])
        h.closeAll()
    }

    @Test func statsReportsTheCounters() throws {
        let h = BrokerHarness()
        let s1 = h.connect(), s2 = h.connect(), p = h.connect()
        h.send(s1, #"{"op":"subscribe","type":"a"}"#, #"{"op":"subscribe","type":"b"}"#)
        h.send(s2, #"{"op":"subscribe","type":"a"}"#)
        h.send(p, #"{"op":"publish","type":"a"}"#, #"{"op":"publish","type":"b"}"#, #"{"op":"publish","type":"c"}"#)
        h.elapsedNanoseconds = 61_900_000_000
        let queued = h.broker.statistics.queuedBytes
        h.send(p, #"{"op":"stats","req":1}"#)
        let stats = try #require(h.read(p).first)
        #expect(stats.int("connections") == 3)
        #expect(stats.int("subscriptions") == 3)
        #expect(stats.int("published") == 3)
        #expect(stats.int("delivered") == 3)
        #expect(stats.int("dropped") == 0)
        #expect(stats.int("queued_bytes") == queued)
        #expect(stats.int("uptime_s") == 61)
        #expect(stats.string("instance") == BrokerHarness.instance)
        h.checkInvariants()
        h.closeAll()
    }

    @Test func errorsAreAnsweredAndTheConnectionStaysUsable() {
        let h = BrokerHarness { $0.maxFrameBytes = 64 }
        let c = h.connect()
        let tooBig = #"{"op":"ping","req":1,"pad":""# + String(repeating: "x", count: 80) + #""}"#
        h.send(c, "not json", tooBig, #"{"op":"nope","req":2}"#, #"{"req":3}"#, #"{"op":"publish","type":"a..b","req":4}"#,
               #"{"op":"publish","type":"eventbus.x","req":5}"#, #"{"op":"subscribe","type":"a.>.b","req":6}"#,
               #"{"op":"ping","req":1.5}"#, #"{"op":"ping","req":7}"#)
        let replies = h.read(c)
        #expect(replies.map(\.code) == ["bad_frame", "frame_too_large", "unknown_op", "bad_request", "bad_type", "forbidden",
                                        "bad_type", "bad_request", nil])
        #expect(replies.map { $0.int("req") } == [nil, nil, 2, 3, 4, 5, 6, nil, 7])
        #expect(replies.allSatisfy { $0.op == "ok" || ($0.op == "error" && $0.string("message")?.isEmpty == false) })
        #expect(h.lastStep.effects.isEmpty, "nothing paused or closed")
        #expect(!c.isClosed)
        h.closeAll()
    }

    @Test func aFrameSplitAcrossReadsIsHandledOnce() {
        let h = BrokerHarness()
        let c = h.connect()
        let bytes = utf8(#"{"op":"ping","req":1}"# + "\r\n" + #"{"op":"ping","req":2}"# + "\n")
        for b in bytes { h.sendRaw(c, [b]) }
        h.sendRaw(c, [])
        #expect(h.read(c).map { $0.int("req") } == [1, 2])
        h.closeAll()
    }

    @Test func theConnectionLimitRefusesWithALimitError() throws {
        let h = BrokerHarness { $0.maxConnections = 2 }
        let a = h.connect()
        _ = h.connect()
        guard case .failure(let refused) = h.broker.open(credentials: Credentials(pid: 1, uid: 1, gid: 1)) else {
            Issue.record("a third connection was admitted")
            return
        }
        let frame = parseFrame(Array(refused.frame.dropLast()))
        #expect(refused.frame.last == 0x0A)
        #expect(frame.op == "error" && frame.code == "limit" && !frame.has("req"))
        #expect(h.broker.connectionCount == 2 && h.broker.statistics.connections == 2)
        h.close(a)
        let c = h.connect()
        #expect(c.id == 3, "connection ids are not reused")
        h.checkInvariants()
        h.closeAll()
    }

    @Test func aStepListsEachConnectionWithNewOutputOnce() {
        let h = BrokerHarness()
        let a = h.connect(), b = h.connect(), idle = h.connect()
        #expect(h.send(idle, #"{"op":"ping"}"#).isEmpty, "success without req is silent")
        #expect(h.send(a, #"{"op":"subscribe","type":"t","req":1}"#, #"{"op":"ping","req":2}"#).output == [a.id])
        // The events reach a before the replies reach b; each is listed once.
        #expect(h.send(b, #"{"op":"publish","type":"t","req":3}"#, #"{"op":"publish","type":"t","req":4}"#).output == [a.id, b.id])
        #expect(h.send(a, #"{"op":"ping","req":5}"#).output == [a.id])
        #expect(h.read(a).count == 5)
        #expect(h.lastStep.isEmpty, "writing queues nothing new")
        h.closeAll()
    }
}
