// The library under flow control against the real broker (PROTOCOL.md "Flow
// control (1.2)", docs/CLIENT.md "Flow control"): an observer slower than its
// publisher in another process gets every event, in order, with no notice;
// `post` and `publish` while the broker holds the connection lose nothing,
// also when the publishing connection observes its own events and a second
// connection of the same process is the slow subscriber.
//
// Before editing: the brokers run with `--max-outbound 64K` and the buses
// with small buffers so that both stages of flow control are exercised (the
// library stops reading, the broker holds the publisher); each test checks
// the broker's `holds` to prove it was, not only that nothing was lost. The
// stall timeouts (the broker's, the library's) are 30 s here: these tests
// are about consumers that keep taking, and on a loaded 2-core machine the
// suite's synchronous tests can keep the cooperative pool, where the
// handlers run, busy for more than the default 1 s.
import Foundation
import Testing
@testable import EventBus

/// Busy for `microseconds` (a handler's work; a sleep would be longer and uneven).
private func work(microseconds: Int) {
    let end = ContinuousClock.now + .microseconds(microseconds)
    while ContinuousClock.now < end {}
}

/// Events only the stalled stream observes.
private struct Fill: BusEvent {
    static let eventType = "taps.fill"
    var n: Int
}

/// A short account of `seen` against `0..<count`: how many, the first out of place.
private func summary(_ seen: [Int], _ count: Int) -> String {
    let wrong = seen.enumerated().first { $0.offset != $0.element }
    return "\(seen.count) of \(count)" + (wrong.map { ", first out of place: #\($0.offset) is \($0.element)" } ?? "")
}

/// Collects the loss notices (`dropped`, `droppedLocally`) of a bus.
private func lossNotices(of bus: EventBus) -> (Task<Void, Never>, Log<BusNotice>) {
    let log = Log<BusNotice>()
    let notices = bus.notices()
    let task = Task {
        for await notice in notices {
            switch notice {
            case .dropped, .droppedLocally: log.append(notice)
            default: break
            }
        }
    }
    return (task, log)
}

@Suite struct FlowControlScenarioTests {
    @Test func anObserverSlowerThanItsPublisherInAnotherProcessGetsEveryEventInOrderWithoutANotice() async throws {
        let broker = try await BrokerProcess(arguments: ["--max-outbound", "64K", "--stall-timeout", "30s"])
        let bus = try await EventBus.connect(EventBus.Configuration(bus: .path(broker.socketPath), clientName: "slow-observer", bufferLimit: 1000, localStallTimeout: .seconds(30)))
        #expect(bus.connectionInfo?.features.contains("flow") == true)
        #expect((bus.connectionInfo?.pid ?? 0) > 0, "1.2: hello names the broker's pid")
        let (noticeTask, notices) = lossNotices(of: bus)
        let seen = Log<Int>()
        let subscription = drain(bus.events(of: Tap.self)) { delivery in
            work(microseconds: 100)
            seen.append(delivery.event.n)
        }
        try await bus.ping()

        let poster = try await runProduct("eventbus-client-peer", ["--socket", broker.socketPath, "poster", "20000"], within: .seconds(90))
        #expect(poster.status == 0 && poster.stdout.contains("posted 20000"), "stderr: \(poster.stderr)")
        #expect(await eventually(within: .seconds(90)) { seen.all.count >= 20000 })
        try await bus.ping()
        let inOrder = seen.all == Array(0..<20000)
        #expect(inOrder, "every event, in order: \(summary(seen.all, 20000))")
        #expect(notices.all.isEmpty, "no loss notice: \(notices.all.prefix(3))")
        let stats = try await bus.stats()
        #expect(stats.dropped == 0, "\(stats)")
        #expect(stats.holds > 0, "the broker held the poster: flow control reached it")
        subscription.cancel()
        noticeTask.cancel()
        bus.close()
        await broker.stop()
    }

    /// A stream nobody iterates fills the bus's buffer (`Fill` events, which
    /// only it observes): the bus stops reading, and after the local stall
    /// timeout the stream is behind and the bus reads on for the steady
    /// observer of `Tap`s (which gets everything, and the broker drops
    /// nothing); once the stream has taken what it had queued its loss
    /// arrives as one notice.
    ///
    /// Settled by the bus's own state, not by timing: the `Tap`s of the
    /// stall are published once the reader waits (so none is queued to the
    /// steady observer while the stall runs: only a queue holding events can
    /// stall; every condition waited for stays true once it is, so a test
    /// task kept from a thread cannot miss one), and the rest in runs of
    /// 100, each once the steady observer has
    /// taken the run before (its queue never reaches the buffer limit of 200,
    /// so the reader never waits for it): however long its consumer waits for
    /// a thread, it cannot be taken for stalled. (It was, at load 20, with the
    /// whole flood at once.)
    @Test func aStalledStreamCostsTheOtherObserversOfItsBusOneStallAndItsLossIsOneNotice() async throws {
        let broker = try await BrokerProcess(arguments: ["--max-outbound", "64K", "--stall-timeout", "30s"])
        let bus = try await EventBus.connect(EventBus.Configuration(bus: .path(broker.socketPath), clientName: "stalled", bufferLimit: 200, localStallTimeout: .seconds(5)))
        let publisher = try await EventBus.connect(EventBus.Configuration(bus: .path(broker.socketPath), clientName: "publisher"))
        let (noticeTask, notices) = lossNotices(of: bus)
        var stalled = bus.events(of: Fill.self).makeAsyncIterator()
        let steady = Log<Int>()
        let subscription = drain(bus.events(of: Tap.self)) { delivery in steady.append(delivery.event.n) }
        #expect(try await eventually { try await publisher.stats().subscriptions == 2 })
        let ledger = bus.core.flow.ledger, sink = stalled.base.sink

        // The stream's queue fills the buffer: the reader waits (or, if this
        // task got no thread for the 5 s, has waited: the condition stays
        // true once it is, so a late look cannot miss it).
        let limit = 200
        for n in 0..<limit { try publisher.post(Fill(n: n)) }
        #expect(await eventually(within: .seconds(50)) { ledger.withLock { $0.queued(sink) == limit && ($0.readerWaiting || $0.isBehind(sink)) } })
        // Taps during the stall wait unread; then the stream is behind and the reader reads on.
        let run = 100, count = 3000
        var fills = limit
        for n in 0..<run { try publisher.post(Tap(from: "publisher", n: n)) }
        #expect(await eventually(within: .seconds(50)) { ledger.withLock { $0.isBehind(sink) } })
        #expect(await eventually(within: .seconds(50)) { steady.count >= run }, "the steady observer got the stall's taps after it")
        // The rest: runs of taps (and fills the stream loses), each once the one before was taken.
        for start in stride(from: run, to: count, by: run) {
            for n in start..<start + run {
                try publisher.post(Tap(from: "publisher", n: n))
                try publisher.post(Fill(n: fills))
                fills += 1
            }
            #expect(await eventually(within: .seconds(50)) { steady.count >= start + run })
        }
        try await bus.ping()
        let steadyInOrder = steady.all == Array(0..<count)
        #expect(steadyInOrder, "the steady observer: \(summary(steady.all, count))")
        #expect(notices.all.isEmpty, "nothing lost yet, nothing reported yet: \(notices.all)")

        let (behind, queued) = ledger.withLock { ($0.isBehind(sink), $0.queued(sink)) }
        #expect(behind && queued == limit, "behind with \(queued) queued")
        var taken: [Int] = []
        while taken.count < queued, let delivery = try await stalled.next() { taken.append(delivery.event.n) }
        let takenInOrder = taken == Array(0..<queued)
        #expect(takenInOrder, "what it had queued, in order: \(summary(taken, queued))")
        #expect(await eventually { !notices.all.isEmpty })
        try await bus.ping()
        #expect(notices.all.count == 1, "one notice for the run: \(notices.all.prefix(3))")
        if case .droppedLocally(let pattern, let lost, _)? = notices.all.first {
            #expect(pattern == "taps.fill" && taken.count + Int(lost) == fills, "taken \(taken.count), lost \(lost) of \(fills)")
        }
        let stats = try await bus.stats()
        #expect(stats.dropped == 0, "the broker dropped nothing: the bus read on")
        subscription.cancel()
        noticeTask.cancel()
        publisher.close()
        bus.close()
        await broker.stop()
    }

    /// One process, two connections: `publisher` posts (from a thread) and
    /// then publishes (awaiting) while observing its own events; `subscriber`
    /// observes them slowly, so the broker holds `publisher` again and again.
    @Test func postAndPublishWhileTheBrokerHoldsThisConnectionLoseNothingAndNeverDeadlock() async throws {
        let broker = try await BrokerProcess(arguments: ["--max-outbound", "64K", "--stall-timeout", "30s"])
        let socket = BusSelection.path(broker.socketPath)
        let subscriber = try await EventBus.connect(EventBus.Configuration(bus: socket, clientName: "subscriber", bufferLimit: 300, localStallTimeout: .seconds(30)))
        let publisher = try await EventBus.connect(EventBus.Configuration(bus: socket, clientName: "publisher", bufferLimit: 300, localStallTimeout: .seconds(30)))
        let (subscriberNoticeTask, subscriberNotices) = lossNotices(of: subscriber)
        let (publisherNoticeTask, publisherNotices) = lossNotices(of: publisher)
        let remote = Log<Int>()
        let local = Log<Int>()
        let slow = drain(subscriber.events(of: Tap.self)) { delivery in
            work(microseconds: 100)
            remote.append(delivery.event.n)
        }
        let own = drain(publisher.events(of: Tap.self)) { delivery in
            work(microseconds: 50)
            local.append(delivery.event.n)
        }
        try await subscriber.ping()
        try await publisher.ping()

        let posts = 6000, publishes = 1000
        let posted = Log<String>()
        let thread = Thread {
            do {
                for n in 0..<posts { try publisher.post(Tap(from: "post", n: n)) }
                posted.append("done")
            } catch {
                posted.append("\(error)")
            }
        }
        thread.start()
        #expect(await eventually(within: .seconds(90)) { !posted.all.isEmpty })
        #expect(posted.all == ["done"], "no post failed")
        for n in posts..<(posts + publishes) {
            try await publisher.publish(Tap(from: "publish", n: n))
        }
        let total = posts + publishes
        #expect(await eventually(within: .seconds(90)) { remote.all.count >= total && local.all.count >= total })
        try await subscriber.ping()
        let remoteInOrder = remote.all == Array(0..<total), localInOrder = local.all == Array(0..<total)
        #expect(remoteInOrder, "the other connection got every event in order: \(summary(remote.all, total))")
        #expect(localInOrder, "the publisher's own observer got every event in order: \(summary(local.all, total))")
        #expect(subscriberNotices.all.isEmpty && publisherNotices.all.isEmpty, "\(subscriberNotices.all.prefix(2)) \(publisherNotices.all.prefix(2))")
        let stats = try await publisher.stats()
        #expect(stats.dropped == 0 && stats.holds > 0, "held, and nothing dropped: \(stats)")
        slow.cancel()
        own.cancel()
        subscriberNoticeTask.cancel()
        publisherNoticeTask.cancel()
        subscriber.close()
        publisher.close()
        await broker.stop()
    }
}
