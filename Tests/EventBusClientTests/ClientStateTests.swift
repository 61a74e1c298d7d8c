// Unit tests of the client state machine: one broker subscription per
// pattern, resubscribing on reconnect, local delivery that skips the
// triggering observer, publishes while disconnected, replies matched to
// requests (PROTOCOL.md "Requests", "Semantics").
@_spi(Package) import EventBusProtocol
import Synchronization
import Testing
@testable import EventBus

/// A sink that records what reaches it; `alive` plays the weak observer.
final class RecordingSink: EventSink {
    let owner: ObjectIdentifier?
    let pattern = ">"
    let alive = Atomic<Bool>(true)
    let received = Locked<[RawEvent]>([])
    let endings = Locked<[EventBusError?]>([])

    init(owner: AnyObject? = nil) { self.owner = owner.map(ObjectIdentifier.init) }

    var types: [String] { received.withLock { $0.map(\.type) } }
    var isAlive: Bool { alive.load(ordering: .relaxed) }
    func isObserver(_ object: AnyObject) -> Bool { owner == ObjectIdentifier(object) }
    var observerID: ObjectIdentifier? { owner }
    let gaps = Locked<[BusGap]>([])
    func markGap(_ gap: BusGap) { gaps.withLock { $0.append(gap) } }
    func deliver(_ event: RawEvent) -> SinkOutcome {
        guard isAlive else { return .inactive }
        received.withLock { $0.append(event) }
        return .delivered
    }
    func finish(_ error: EventBusError?, discardQueued: Bool) { endings.withLock { $0.append(error) } }
}

final class Screen: Sendable {}

/// Results of completions, collected by the test's effect runner.
final class Outcomes: Sendable {
    let publishes = Locked<[Result<PublishReceipt, EventBusError>]>([])
    let replies = Locked<[Result<Reply, EventBusError>]>([])
    let first = Locked<[Result<ConnectionInfo, EventBusError>]>([])

    var publishCompletion: Completion<PublishReceipt> { { r in self.publishes.withLock { $0.append(r) } } }
    var replyCompletion: Completion<Reply> { { r in self.replies.withLock { $0.append(r) } } }
}

@Suite struct ClientStateTests {
    let outcomes = Outcomes()

    func makeState(_ policy: EventBus.DisconnectedPublishing = .fail, firstConnect: Bool = false) -> ClientState {
        let outcomes = outcomes
        var completion: Completion<ConnectionInfo>?
        if firstConnect { completion = { r in outcomes.first.withLock { $0.append(r) } } }
        return ClientState(
            path: "/tmp/t.sock", clientName: "tester", overflow: .dropNew, whileDisconnected: policy,
            identity: (pid: 42, uid: 1000, gid: 100), firstConnect: completion
        )
    }

    /// Frames written by a step, one string each, without LF.
    func frames(_ step: Step) -> [String] {
        String(decoding: step.write, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Performs effects the way BusCore does; returns the notices.
    @discardableResult
    func perform(_ step: Step) -> [BusNotice] {
        var notices: [BusNotice] = []
        for effect in step.effects {
            switch effect {
            case .deliver(let event, let sinks): for sink in sinks { _ = sink.deliver(event) }
            case .published(let event, let sinks, let delivered, let completion):
                let local = sinks.filter { $0.deliver(event) == .delivered }.count
                completion(.success(PublishReceipt(seq: event.metadata.seq, delivered: delivered, deliveredLocally: local)))
            case .reply(let completion, let result): completion(result)
            case .failPublish(let completion, let error): completion(.failure(error))
            case .finish(let sinks, let error, let discard): for sink in sinks { sink.finish(error, discardQueued: discard) }
            case .notice(let notice): notices.append(notice)
            case .firstConnect(let completion, let result): completion(result)
            case .wakeReader, .dropConnection, .closed, .serve, .call, .deferred: break
            case .completeCurrent(let completion, let result): completion(result)
            case .markGap(let sinks, let gap): for sink in sinks { sink.markGap(gap) }
            }
        }
        return notices
    }

    /// `{"op":"ok","req":R,<fields>}`
    func ok(_ req: Int64, _ fields: String = "") -> String { #"{"op":"ok","req":\#(req)"# + (fields.isEmpty ? "" : "," + fields) + "}" }

    func event(_ type: String, seq: UInt64 = 1) -> String {
        #"{"op":"event","seq":\#(seq),"type":"\#(type)","time":"t","source":"s","id":"i","pid":1,"uid":2,"gid":3,"data":{}}"#
    }

    /// Hands one broker frame, as text, to the state the way BusCore does.
    func handle(_ state: inout ClientState, _ frame: String, wall: Int64 = 0) -> Step {
        state.handle(Array(frame.utf8).span.bytes, wallNanoseconds: wall)
    }

    func json(_ text: String) -> JSONText { try! JSONText(validating: Array(text.utf8)) }

    func connect(_ state: inout ClientState) -> [String] {
        let step = state.connectionEstablished()!
        _ = perform(handle(&state, ok(1, #""instance":"inst","conn":7"#)))
        return frames(step)
    }

    @Test func manyLocalObserversShareOneBrokerSubscription() {
        var state = makeState()
        _ = connect(&state)
        let pattern = Pattern("currency.changed")!
        let (a, first) = state.add(RecordingSink(), on: pattern)
        let (b, second) = state.add(RecordingSink(), on: pattern)
        #expect(frames(first) == [#"{"op":"subscribe","req":2,"type":"currency.changed"}"#])
        #expect(second.write.isEmpty)
        #expect(state.remove(a).write.isEmpty)
        #expect(frames(state.remove(b)) == [#"{"op":"unsubscribe","req":3,"type":"currency.changed"}"#])
        #expect(state.subscribed.isEmpty && state.patterns.isEmpty)
    }

    @Test func everyConnectionSaysHelloThenResubscribesEveryPattern() {
        var state = makeState()
        _ = state.add(RecordingSink(), on: Pattern("b.changed")!)
        let (_, offline) = state.add(RecordingSink(), on: Pattern("a.>")!)
        #expect(offline.write.isEmpty)
        #expect(connect(&state) == [
            #"{"op":"hello","req":1,"client":"tester","echo":false,"overflow":"drop-new"}"#,
            #"{"op":"subscribe","req":2,"type":"a.>"}"#,
            #"{"op":"subscribe","req":3,"type":"b.changed"}"#,
        ])
        #expect(state.connectionInfo?.instance == "inst")
        let notices = perform(state.connectionLost(reason: "gone"))
        #expect(notices == [.disconnected(.connectionLost(reason: "gone"))])
        #expect(state.subscribed.isEmpty)
        let again = frames(state.connectionEstablished()!)
        #expect(again.count == 3 && again[1].contains(#""type":"a.>""#) && again[2].contains(#""type":"b.changed""#))
    }

    @Test func eventsReachEveryMatchingRegistrationOnce() {
        var state = makeState()
        _ = connect(&state)
        let exact = RecordingSink(), wildcard = RecordingSink(), all = RecordingSink(), other = RecordingSink()
        _ = state.add(exact, on: Pattern("order.created")!)
        _ = state.add(wildcard, on: Pattern("order.*")!)
        _ = state.add(all, on: Pattern(">")!)
        _ = state.add(other, on: Pattern("user.>")!)
        perform(handle(&state, event("order.created")))
        perform(handle(&state, event("order.a.b")))
        #expect(exact.types == ["order.created"])
        #expect(wildcard.types == ["order.created"])
        #expect(all.types == ["order.created", "order.a.b"])
        #expect(other.types.isEmpty)
    }

    @Test func aPublishReachesOtherLocalObserversButNotTheOneThatTriggeredIt() {
        var state = makeState()
        _ = connect(&state)
        let liker = Screen(), viewer = Screen()
        let likerSink = RecordingSink(owner: liker), viewerSink = RecordingSink(owner: viewer)
        _ = state.add(likerSink, on: Pattern("post.liked")!)
        _ = state.add(viewerSink, on: Pattern("post.liked")!)
        let publish = OutgoingPublish(type: "post.liked", data: json(#"{"post":1}"#), source: nil, id: nil, exclude: liker, completion: outcomes.publishCompletion)
        #expect(frames(state.publish(publish, now: 0)) == [#"{"op":"publish","req":3,"type":"post.liked","data":{"post":1}}"#])
        #expect(viewerSink.types.isEmpty, "local delivery waits for the broker's ok")
        perform(handle(&state, ok(3, #""seq":11,"delivered":2"#), wall: 1_000_000_000))
        #expect(likerSink.types.isEmpty)
        let got = viewerSink.received.withLock { $0 }
        #expect(got.count == 1)
        #expect(got.first?.metadata == EventMetadata(type: "post.liked", seq: 11, time: "1970-01-01T00:00:01.000Z", source: "tester", id: "inst-11", pid: 42, uid: 1000, gid: 100, isLocal: true))
        #expect(got.first?.dataString == #"{"post":1}"#)
        #expect(outcomes.publishes.withLock { $0 } == [.success(PublishReceipt(seq: 11, delivered: 2, deliveredLocally: 1))])
    }

    @Test func requestsInFlightFailWhenTheConnectionIsLost() {
        var state = makeState()
        _ = connect(&state)
        let publish = OutgoingPublish(type: "a.b", data: json("1"), source: nil, id: nil, exclude: nil, completion: outcomes.publishCompletion)
        _ = state.publish(publish, now: 0)
        _ = state.request(stats: true, outcomes.replyCompletion)
        perform(state.connectionLost(reason: "reset"))
        #expect(outcomes.publishes.withLock { $0 } == [.failure(.connectionLost(reason: "reset"))])
        #expect(outcomes.replies.withLock { $0 } == [.failure(.connectionLost(reason: "reset"))])
        #expect(state.pending.isEmpty)
    }

    @Test func publishingWhileDisconnectedFailsAtOnceUnderPolicyFail() {
        var state = makeState(.fail)
        let publish = OutgoingPublish(type: "a.b", data: json("1"), source: nil, id: nil, exclude: nil, completion: outcomes.publishCompletion)
        perform(state.publish(publish, now: 0))
        guard case .failure(.unavailable(let path, _)) = outcomes.publishes.withLock({ $0.first }) else {
            Issue.record("expected unavailable")
            return
        }
        #expect(path == "/tmp/t.sock")
    }

    @Test func publishingWhileDisconnectedWaitsBoundedThenIsSentOnConnect() {
        var state = makeState(.wait(upTo: .seconds(2), maxWaiting: 2))
        let make = { (n: Int) in OutgoingPublish(type: "a.b", data: json("\(n)"), source: nil, id: nil, exclude: nil, completion: self.outcomes.publishCompletion) }
        _ = state.publish(make(1), now: 0)
        _ = state.publish(make(2), now: 1_000_000_000)
        perform(state.publish(make(3), now: 1_000_000_000))
        #expect(outcomes.publishes.withLock { $0.count } == 1, "the third is over maxWaiting")
        perform(state.expireWaiting(now: 2_000_000_000))
        #expect(outcomes.publishes.withLock { $0.count } == 2, "the first passed its 2 s bound")
        #expect(state.waiting.count == 1)
        let sent = frames(state.connectionEstablished()!)
        #expect(sent.last == #"{"op":"publish","req":2,"type":"a.b","data":2}"#)
        #expect(state.waiting.isEmpty)
    }

    @Test func anErrorWithoutReqAnswersTheOldestRequest() {
        var state = makeState()
        _ = connect(&state)
        let publish = OutgoingPublish(type: "a.b", data: json("1"), source: nil, id: nil, exclude: nil, completion: outcomes.publishCompletion)
        _ = state.publish(publish, now: 0)
        _ = state.request(stats: false, outcomes.replyCompletion)
        perform(handle(&state, #"{"op":"error","code":"frame_too_large","message":"too big"}"#))
        #expect(outcomes.publishes.withLock { $0 } == [.failure(.protocolError(code: .frameTooLarge, message: "too big"))])
        #expect(outcomes.replies.withLock { $0 }.isEmpty)
        perform(handle(&state, ok(3)))
        #expect(outcomes.replies.withLock { $0 }.count == 1)
    }

    @Test func aRefusedSubscriptionEndsItsRegistrationsWithTheError() {
        var state = makeState()
        _ = connect(&state)
        let sink = RecordingSink()
        _ = state.add(sink, on: Pattern("a.b")!)
        let error = EventBusError.protocolError(code: .limit, message: "too many subscriptions")
        let notices = perform(handle(&state, #"{"op":"error","req":2,"code":"limit","message":"too many subscriptions"}"#))
        #expect(notices == [.subscriptionRefused(pattern: "a.b", error)])
        #expect(sink.endings.withLock { $0 } == [error])
        #expect(state.patterns.isEmpty && state.subscribed.isEmpty)
    }

    @Test func deadObserversAreSweptAndTheirPatternUnsubscribed() {
        var state = makeState()
        _ = connect(&state)
        let dead = RecordingSink(), live = RecordingSink()
        _ = state.add(dead, on: Pattern("a.b")!)
        _ = state.add(live, on: Pattern("c.d")!)
        #expect(!state.hasDeadRegistrations)
        dead.alive.store(false, ordering: .relaxed)
        #expect(state.hasDeadRegistrations)
        let step = state.sweep()
        #expect(frames(step) == [#"{"op":"unsubscribe","req":4,"type":"a.b"}"#])
        #expect(state.subscribed == ["c.d"])
        #expect(state.registrationCount == 1)
    }

    @Test func observersThatDiedWhileDisconnectedAreNotSubscribedAgain() {
        var state = makeState()
        _ = connect(&state)
        let dead = RecordingSink(), live = RecordingSink()
        _ = state.add(dead, on: Pattern("a.b")!)
        _ = state.add(live, on: Pattern("c.d")!)
        perform(state.connectionLost(reason: "restart"))
        dead.alive.store(false, ordering: .relaxed)
        let step = state.connectionEstablished()!
        perform(step)
        let sent = frames(step)
        #expect(sent.count == 2 && sent[1] == #"{"op":"subscribe","req":5,"type":"c.d"}"#)
        #expect(dead.endings.withLock { $0 } == [nil])
        #expect(state.subscribed == ["c.d"])
    }

    @Test func closingFailsEverythingAndRefusesNewWork() {
        var state = makeState(.wait(upTo: .seconds(5), maxWaiting: 10))
        let sink = RecordingSink()
        _ = state.add(sink, on: Pattern("a.b")!)
        let publish = OutgoingPublish(type: "a.b", data: json("1"), source: nil, id: nil, exclude: nil, completion: outcomes.publishCompletion)
        _ = state.publish(publish, now: 0)
        perform(state.close(error: nil))
        #expect(outcomes.publishes.withLock { $0 } == [.failure(.closed)])
        #expect(sink.endings.withLock { $0 } == [nil])
        #expect(state.connectionEstablished() == nil)
        let late = RecordingSink()
        perform(state.add(late, on: Pattern("a.b")!).1)
        #expect(late.endings.withLock { $0 } == [.closed])
    }

    @Test func theFirstConnectionSucceedsOnHelloAndFailsIfLostBefore() {
        var state = makeState(firstConnect: true)
        _ = connect(&state)
        #expect(outcomes.first.withLock { $0 } == [.success(ConnectionInfo(server: "", version: "", instance: "inst", connection: 7, features: []))])

        let other = Outcomes()
        var lost = ClientState(path: "/p", clientName: nil, overflow: .dropNew, whileDisconnected: .fail, identity: (1, 1, 1), firstConnect: { r in other.first.withLock { $0.append(r) } })
        _ = lost.connectionEstablished()
        perform(lost.connectionLost(reason: "the broker closed the connection"))
        #expect(other.first.withLock { $0 } == [.failure(.unavailable(path: "/p", reason: "the broker closed the connection before answering: it may have exited (see its standard error or log)"))])
        #expect(lost.isClosed)
    }

    @Test func aFirstConnectionClosedSilentlyOnTheUserBusPointsAtTheUserUnit() {
        let other = Outcomes()
        var lost = ClientState(path: "/run/user/1000/eventbus/bus.sock", clientName: nil, overflow: .dropNew, whileDisconnected: .fail, identity: (1, 1, 1),
                               firstConnect: { r in other.first.withLock { $0.append(r) } }, runtimeDirectory: "/run/user/1000")
        _ = lost.connectionEstablished()
        perform(lost.connectionLost(reason: "read: Connection reset by peer"))
        guard case .failure(let error)? = other.first.withLock({ $0.first }) else { Issue.record("connect did not fail"); return }
        #expect("\(error)" == "event bus unavailable at /run/user/1000/eventbus/bus.sock: the broker closed the connection before answering: it may have failed to start (see 'systemctl --user status eventbus.service' and 'journalctl --user -u eventbus')")
    }

    @Test func aFirstConnectionRefusedWithLimitNamesTheRefusalNotAStartFailure() {
        let other = Outcomes()
        var lost = ClientState(path: "/p", clientName: nil, overflow: .dropNew, whileDisconnected: .fail, identity: (1, 1, 1), firstConnect: { r in other.first.withLock { $0.append(r) } })
        _ = lost.connectionEstablished()
        perform(handle(&lost, #"{"op":"error","code":"limit","message":"too many connections"}"#))
        perform(lost.connectionLost(reason: "the broker closed the connection"))
        #expect(other.first.withLock { $0 } == [.failure(.unavailable(path: "/p", reason: "the broker closed the connection (limit: too many connections)"))])
    }
}

@Suite struct ReconnectPolicyTests {
    @Test func delaysGrowGeometricallyUpToTheCap() {
        let policy = EventBus.ReconnectPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(1), multiplier: 2, jitter: 0)
        let delays = (0..<6).map { policy.delay(afterFailures: $0, random: 0.5) }
        #expect(delays == [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1)])
    }

    @Test func jitterOnlyShortensTheWait() {
        let policy = EventBus.ReconnectPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(1), jitter: 0.5)
        #expect(policy.delay(afterFailures: 0, random: 0) == .seconds(1))
        #expect(policy.delay(afterFailures: 0, random: 1) == .milliseconds(500))
    }
}
