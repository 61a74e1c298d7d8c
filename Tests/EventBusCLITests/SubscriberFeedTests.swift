// What `eventbus listen` and `eventbus wait` make of the broker's frames
// (EventBusCLI's `SubscriberFeed`), without a broker or a process: the
// session's frames go in as text, the steps and stderr notes come out.
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSession
import Testing

/// A feed on a CLI session (`req` 0 for `hello`) that has written its frames for `patterns`.
private func feed(_ patterns: [String], group: String? = nil, ordered: Bool = false, since: UInt64? = nil) -> SubscriberFeed {
    var session = BusSession<Never>(SessionOptions(hello: Hello(client: "eventbus-listen"), ordered: ordered, firstReq: 0))
    if let since { session.start(at: StreamPosition(instance: nil, seq: since), covering: patterns) }
    var feed = SubscriberFeed(session: session, patterns: patterns, group: group)
    feed.session.connectionStarted()
    for pattern in patterns { feed.session.subscribe(SubscriptionKey(pattern, group: group)) }
    feed.session.settle()
    _ = feed.session.takeOutput()
    return feed
}

/// Feeds `frames` and says what each step was, with the notes it queued.
private func run(_ feed: inout SubscriberFeed, _ frames: [String]) -> [String] {
    var out: [String] = []
    for frame in frames {
        let step = feed.handle(Array(frame.utf8).span.bytes)
        switch step {
        case .event(let fields): out.append("event \(fields.seq)")
        case .released:
            var seqs: [UInt64] = []
            while let (_, fields) = feed.session.takeReleased() { seqs.append(fields.seq) }
            out.append("released \(seqs.map(String.init).joined(separator: ","))")
        case .subscribed: out.append("subscribed \(feed.acknowledged)/\(feed.patterns.count)")
        case .stop(let error): out.append("stop \(error.status): \(error.message ?? "")")
        case .none: out.append("none")
        }
        out += feed.takeNotes().map { "note: " + $0 }
    }
    return out
}

private let hello = #"{"op":"ok","req":0,"instance":"r1","conn":3,"features":["history","groups"]}"#

@Suite struct SubscriberFeedTests {
    @Test func countsAcknowledgedSubscriptionsSoWaitKnowsWhenToRunItsCommand() {
        var f = feed(["a.b", "c.>"])
        let out = run(&f, [hello, #"{"op":"event","seq":4,"type":"a.b","data":1}"#, #"{"op":"ok","req":1}"#])
        #expect(!f.allSubscribed)
        #expect(run(&f, [#"{"op":"ok","req":2}"#]) == ["subscribed 2/2"])
        #expect(f.allSubscribed)
        #expect(out == ["none", "event 4", "subscribed 1/2"])
    }

    @Test func aRefusedSubscribeStopsWithTheBrokersMessageAndAStatusByItsCode() {
        var f = feed(["a.b"])
        let out = run(&f, [hello, #"{"op":"error","req":1,"code":"forbidden","message":"not for you"}"#])
        #expect(out.last == "stop 77: subscribing to 'a.b' failed: not for you (forbidden)")
        var g = feed(["a.b"])
        #expect(run(&g, [hello, #"{"op":"error","req":1,"code":"limit","message":"m"}"#]).last == "stop 75: subscribing to 'a.b' failed: m (limit)")
    }

    @Test func aRevokedPatternIsANoteUntilNoPatternIsLeftThen77() {
        var f = feed(["a.>", "b"])
        let out = run(&f, [hello, #"{"op":"ok","req":1}"#, #"{"op":"ok","req":2}"#,
                           #"{"op":"error","code":"forbidden","type":"a.>","message":"reload"}"#,
                           #"{"op":"error","code":"forbidden","type":"b","message":"reload"}"#])
        #expect(out == [
            "none", "subscribed 1/2", "subscribed 2/2",
            "none", "note: the broker revoked the subscription to 'a.>' (its access policy was reloaded): reload",
            "stop 77: the broker revoked the subscription to 'b' (its access policy was reloaded): reload; no pattern is left",
        ])
    }

    @Test func anErrorWithoutReqIsKeptAsTheReasonForACloseNotAStop() {
        var f = feed(["a"])
        let out = run(&f, [hello, #"{"op":"ok","req":1}"#, #"{"op":"error","code":"slow_consumer","message":"too slow"}"#])
        #expect(out == ["none", "subscribed 1/1", "none"])
        #expect(f.brokerError?.string("code") == "slow_consumer")
        #expect(f.brokerError?.failure("listening") == CLIError(.temporaryFailure, "listening failed: too slow (slow_consumer)"))
    }

    @Test func dropsAndGapsAreNotesAndTheRunGoesOn() {
        var f = feed(["a"])
        let out = run(&f, [hello, #"{"op":"ok","req":1}"#, #"{"op":"dropped","count":1,"since_seq":17}"#,
                           #"{"op":"dropped","count":3,"since_seq":20}"#, #"{"op":"gap","type":"a","since_seq":4,"first_seq":9}"#])
        #expect(out == [
            "none", "subscribed 1/1",
            "none", "note: the broker dropped 1 event for this listener, starting at seq 17 (reading too slowly)",
            "none", "note: the broker dropped 3 events for this listener, starting at seq 20 (reading too slowly)",
            "none", "note: the broker's history no longer reaches back to seq 5; events of 'a' from seq 5 to 8 may have been missed",
        ])
    }

    @Test func aGroupOnABrokerWithoutQueueGroupsStopsAtTheGreeting() {
        var f = feed(["a"], group: "workers")
        let out = run(&f, [#"{"op":"ok","req":0,"instance":"r1","conn":3,"features":["history"]}"#])
        #expect(out == ["stop 76: the broker has no queue groups (no 'groups' in its features: it is older than protocol 1.3), so --group cannot share the events"])
        var plain = feed(["a"])
        #expect(run(&plain, [#"{"op":"ok","req":0,"instance":"r1","conn":3,"features":["history"]}"#]) == ["none"])
    }

    @Test func anOrderedFeedReleasesHeldEventsAtTheSentinelAndSaysWhenSinceIsAhead() {
        var f = feed(["a"], ordered: true, since: 50)
        let out = run(&f, [hello, #"{"op":"ok","req":1}"#, #"{"op":"event","seq":3,"type":"a","data":1,"replayed":true}"#,
                           #"{"op":"ok","req":2,"history_first_seq":1,"history_events":9}"#])
        #expect(out == [
            "none", "subscribed 1/1", "none", "released 3",
            "note: --since 50 is ahead of the broker: its newest event is seq 9, so nothing is replayed; events print as they are published (seqs start again at 1 when the broker restarts: was 50 from an earlier run?)",
        ])
    }
}
