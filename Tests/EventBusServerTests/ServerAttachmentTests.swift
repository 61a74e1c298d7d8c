// Work attached to the broker's own loop (BrokerServer+Attachments.swift; the
// NATS link's requests inside eventbusd, issue 36): an in-process broker with
// one attachment. Its `turn` runs on the loop's thread when its descriptor is
// readable, again while it stays readable (level-triggered), never without a
// reason, at its deadline with nothing to read, and it can be a client of the
// broker through a handed socketpair without ever blocking the loop; handed
// with `attached`, the loop turns it after writing to it without waiting for
// its descriptor, and reads what it wrote in the same pass (the hand-over).
//
// Who pays (bridgerr): an attachment's time is charged to the uids whose
// service wrote to its connection since it last turned (judged on a clock
// the test moves, not measured).
//
// Before editing: absence ("no more turns") is asserted after a ping round
// trip through the loop, never after a sleep.
import EventBusServer
@_spi(Package) import EventBusSystem
import EventBusTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// What an attachment's turns saw, shared with the test.
private final class Turns: Sendable {
    let count = Mutex(0)
    let onLoopThread = Mutex(true)
    let loopThread = Mutex<pthread_t?>(nil)
    let turned = DispatchSemaphore(value: 0)

    /// Records one turn (on whichever thread calls it).
    func record() {
        let same = loopThread.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
        onLoopThread.withLock { $0 = $0 && same }
        count.withLock { $0 += 1 }
        turned.signal()
    }

    func wait(_ what: String) throws {
        guard turned.wait(timeout: .now() + 20) == .success else { throw TestFailure("no turn: \(what)") }
    }
}

@Suite("BrokerServer: work attached to its loop")
struct ServerAttachmentTests {
    @Test func aReadableDescriptorTurnsItOnTheLoopsThreadUntilItsWorkIsDone() throws {
        let turns = Turns()
        let wakeup = try Wakeup()
        try withServer(prepare: { server in
            turns.loopThread.withLock { $0 = pthread_self() }
            server.attach(LoopAttachment(descriptor: wakeup.descriptor, nextDeadline: { .max }, turn: { _ in
                turns.record()
                // Work left for two more turns: the descriptor stays readable until the third.
                if turns.count.withLock({ $0 }) >= 3 { wakeup.drain() }
                return false
            }))
        }) { broker in
            let client = try broker.connect(uid: 1000)
            try client.ok(#"{"op":"ping","req":1}"#)
            #expect(turns.count.withLock { $0 } == 0, "no turn before the descriptor is readable")
            wakeup.signal()
            for i in 0..<3 { try turns.wait("turn \(i)") }
            try client.ok(#"{"op":"ping","req":2}"#)
            #expect(turns.count.withLock { $0 } == 3, "no turn once the descriptor is drained")
            #expect(turns.onLoopThread.withLock { $0 }, "every turn on the loop's thread")
        }
    }

    @Test func itsDeadlineTurnsItWithNothingToRead() throws {
        let turns = Turns()
        let wakeup = try Wakeup()
        let deadline = Mutex<Int64>(.max)
        try withServer(prepare: { server in
            turns.loopThread.withLock { $0 = pthread_self() }
            deadline.withLock { $0 = Clock.monotonicNanoseconds() + 20_000_000 }
            server.attach(LoopAttachment(descriptor: wakeup.descriptor, nextDeadline: { deadline.withLock { $0 } }, turn: { _ in
                deadline.withLock { $0 = .max }
                turns.record()
                return false
            }))
        }) { broker in
            try turns.wait("the deadline")
            let client = try broker.connect(uid: 1000)
            try client.ok(#"{"op":"ping","req":1}"#)
            #expect(turns.count.withLock { $0 } == 1)
            #expect(turns.onLoopThread.withLock { $0 })
        }
    }

    /// The request part's shape: a client of the broker on the broker's own
    /// thread, writing a frame in one turn and reading what comes back in
    /// later ones, woken by its socket alone.
    @Test func itCanBeAClientOfTheBrokerThroughAHandedSocketpair() throws {
        let turns = Turns()
        let received = Mutex<String>("")
        let sent = Mutex(false)
        try withServer(prepare: { server in
            turns.loopThread.withLock { $0 = pthread_self() }
            guard let fd = try? server.handoff.connect(pid: getpid(), uid: 1000, gid: 1000) else { return }
            server.attach(LoopAttachment(descriptor: fd, nextDeadline: { sent.withLock { $0 } ? .max : 0 }, turn: { _ in
                if !sent.withLock({ $0 }) {
                    let frame = Array(#"{"op":"subscribe","type":"to.loop","req":"s"}"#.utf8) + [10]
                    if case .complete(let n)? = try? fd.write(frame.span.bytes), n == frame.count { sent.withLock { $0 = true } }
                }
                var buffer: [UInt8] = []
                while case .complete(let n)? = try? fd.read(appendingTo: &buffer, limit: 4096), n > 0 {
                    received.withLock { $0 += String(decoding: buffer, as: UTF8.self) }
                    buffer.removeAll(keepingCapacity: true)
                    turns.record()
                }
                return false
            }))
        }) { broker in
            try turns.wait("the broker's ok to the attachment's subscribe")
            #expect(received.withLock { $0 }.contains(#""op":"ok""#), "\(received.withLock { $0 })")
            let publisher = try broker.connect(uid: 1000)
            try publisher.publish("to.loop")
            try turns.wait("the event, read by the attachment")
            #expect(received.withLock { $0 }.contains(#""type":"to.loop""#), "\(received.withLock { $0 })")
            #expect(turns.onLoopThread.withLock { $0 })
        }
    }

    /// The hand-over (issue 36, third pass): an attachment whose socketpair
    /// end was handed with `attached` is turned when the loop has written to
    /// it, although its descriptor (here an eventfd nobody signals) never
    /// becomes readable; and what a turn says it wrote is read in that pass.
    @Test func anAttachedConnectionsOutputTurnsItsAttachmentWithoutItsDescriptor() throws {
        let turns = Turns()
        let received = Mutex<String>("")
        let state = Mutex<(subscribed: Bool, published: Bool)>((false, false))
        let never = try Wakeup()
        let handedOvers = Mutex(0)
        try withServer(prepare: { server in
            turns.loopThread.withLock { $0 = pthread_self() }
            guard let fd = try? server.handoff.connect(pid: getpid(), uid: 1000, gid: 1000, attached: true) else { return }
            server.attach(LoopAttachment(descriptor: never.descriptor, nextDeadline: { state.withLock { $0.subscribed } ? .max : 0 }, turn: { handedOver in
                if handedOver { handedOvers.withLock { $0 += 1 } }
                var wrote = false
                if !state.withLock({ $0.subscribed }) {
                    let frame = Array(#"{"op":"subscribe","type":"to.loop","req":"s"}"#.utf8) + [10]
                    if case .complete(let n)? = try? fd.write(frame.span.bytes), n == frame.count {
                        state.withLock { $0.subscribed = true }
                        wrote = true
                    }
                }
                var buffer: [UInt8] = []
                while case .complete(let n)? = try? fd.read(appendingTo: &buffer, limit: 4096), n > 0 {
                    received.withLock { $0 += String(decoding: buffer, as: UTF8.self) }
                    buffer.removeAll(keepingCapacity: true)
                    turns.record()
                }
                // Its event arrived: it publishes one of its own, which the loop reads in this pass.
                if received.withLock({ $0.contains(#""op":"event""#) }) && !state.withLock({ $0.published }) {
                    let frame = Array(#"{"op":"publish","type":"from.loop","req":"p"}"#.utf8) + [10]
                    if case .complete(let n)? = try? fd.write(frame.span.bytes), n == frame.count {
                        state.withLock { $0.published = true }
                        wrote = true
                    }
                }
                return wrote
            }))
        }) { broker in
            try turns.wait("the broker's ok to the attachment's subscribe, with its descriptor never readable")
            #expect(received.withLock { $0 }.contains(#""op":"ok""#), "\(received.withLock { $0 })")
            let publisher = try broker.connect(uid: 1000)
            let watcher = try broker.connect(uid: 1000)
            try watcher.ok(#"{"op":"subscribe","type":"from.loop","req":1}"#)
            try publisher.publish("to.loop")
            try turns.wait("the event, read by the attachment")
            #expect(received.withLock { $0 }.contains(#""op":"event""#), "\(received.withLock { $0 })")
            let event = try watcher.readFrame()
            #expect(event.string("type") == "from.loop", "\(event)")
            #expect(handedOvers.withLock { $0 } >= 2, "the ok and the event each turned it as a hand-over")
            #expect(turns.onLoopThread.withLock { $0 })
        }
    }
    /// Who pays (bridgerr): the time of a turn that carries uid 2000's event
    /// (the server's clock, moved 5 ms by the turn itself) is charged to
    /// uid 2000, whose service wrote it to the attached connection; none to
    /// uid 3000, whose event comes after. Seen from the attachment's next
    /// turn, on the loop's thread.
    @Test func itsTimeIsChargedToTheUidWhoseFramesItCarried() throws {
        let clock = ManualClock()
        let turns = Turns()
        let received = Mutex<String>("")
        let subscribed = Mutex(false)
        let seen = Mutex<[(uid2000: Int64, uid3000: Int64)]>([])
        let never = try Wakeup()
        try withServer(configure: { $0.clock = clock.serverClock }, prepare: { server in
            turns.loopThread.withLock { $0 = pthread_self() }
            guard let fd = try? server.handoff.connect(pid: getpid(), uid: 1000, gid: 1000, attached: true) else { return }
            server.attach(LoopAttachment(descriptor: never.descriptor, nextDeadline: { subscribed.withLock { $0 } ? .max : 0 }, turn: { _ in
                var wrote = false
                if !subscribed.withLock({ $0 }) {
                    let frame = Array(#"{"op":"subscribe","type":"to.loop","req":"s"}"#.utf8) + [10]
                    if case .complete(let n)? = try? fd.write(frame.span.bytes), n == frame.count {
                        subscribed.withLock { $0 = true }
                        wrote = true
                    }
                }
                var buffer: [UInt8] = []
                while case .complete(let n)? = try? fd.read(appendingTo: &buffer, limit: 4096), n > 0 {
                    let text = String(decoding: buffer, as: UTF8.self)
                    received.withLock { $0 += text }
                    buffer.removeAll(keepingCapacity: true)
                    if text.contains(#""op":"event""#) {
                        seen.withLock { $0.append((server.attachmentCharged(uid: 2000), server.attachmentCharged(uid: 3000))) }
                        clock.advance(nanoseconds: 5_000_000)  // this turn's work, on the server's clock
                    }
                    turns.record()
                }
                return wrote
            }))
        }) { broker in
            try turns.wait("the broker's ok to the attachment's subscribe")
            let flooder = try broker.connect(uid: 2000)
            let other = try broker.connect(uid: 3000)
            try flooder.publish("to.loop")
            while seen.withLock({ $0.count }) < 1 { try turns.wait("uid 2000's event") }
            try other.publish("to.loop")
            while seen.withLock({ $0.count }) < 2 { try turns.wait("uid 3000's event") }
            let charges = seen.withLock { $0 }
            #expect(charges[0].uid2000 == 0 && charges[0].uid3000 == 0, "nothing charged before the first event's turn: \(charges)")
            #expect(charges[1].uid2000 == 5_000_000, "the 5 ms turn that carried uid 2000's event is uid 2000's: \(charges)")
            #expect(charges[1].uid3000 == 0, "none of it is uid 3000's: \(charges)")
            #expect(turns.onLoopThread.withLock { $0 })
        }
    }
}
