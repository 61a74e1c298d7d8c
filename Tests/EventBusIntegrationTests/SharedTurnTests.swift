// BrokerServer+Scheduling.swift against the real broker: while two uids
// pipeline at once (a shared turn), a connection with input left has the
// writes its reads caused made every `readsPerSharedFlush` reads and at the
// end of its uid's service, not after each read. Asserted: each publisher
// gets every reply, in order; a subscriber of a third uid gets every event
// of both, each publisher's in order, none dropped; a client of a fourth uid
// that waits for each reply before sending the next gets them all meanwhile.
// Never timings (scripts/attack's churn and busy rows measure the rates).
//
// Before editing: the publishers write from their own threads (a write the
// broker has not read yet blocks); the uids are 4171-4174.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Shared turns (fair scheduling)", .enabled(if: getuid() == 0 && findInPath("setpriv") != nil))
struct SharedTurnTests {
    static let count = 8000

    /// `count` publishes of `type`, each with `req` i and `data` {"i": i}.
    static func pipelined(_ type: String) -> [UInt8] {
        var text = ""
        text.reserveCapacity(count * 70)
        for i in 0..<count { text += #"{"op":"publish","type":"\#(type)","req":\#(i),"data":{"i":\#(i)}}"# + "\n" }
        return Array(text.utf8)
    }

    @Test func twoUidsPipeliningAtOnceGetEveryReplyAndEveryEventInOrder() throws {
        try withSharedBroker([]) { broker in
            let subscriber = try connectAs(uid: 4173, path: broker.socketPath)[0]
            try subscriber.ok(#"{"op":"subscribe","type":"turn.>","req":"s"}"#)
            let waiter = try connectAs(uid: 4174, path: broker.socketPath)[0]
            let publishers = try [4171, 4172].map { try connectAs(uid: UInt32($0), path: broker.socketPath)[0] }
            for p in publishers { try p.ok(#"{"op":"ping","req":"p"}"#) }  // both connected before either floods
            let group = DispatchGroup()
            let replies = RobustShared([Int](repeating: 0, count: 2))
            for (n, publisher) in publishers.enumerated() {
                let handoff = RobustHandoff(publisher)
                let bytes = SharedTurnTests.pipelined("turn.\(n)")
                robustThread(group) {
                    do {
                        try handoff.client.sendBytes(bytes, timeout: .seconds(60))  // reads replies while the socket is full
                        var next = 0
                        while next < SharedTurnTests.count {
                            let frame = try handoff.client.readFrame(timeout: .seconds(60))
                            guard frame.req == .integer(next), frame.op == "ok" else {
                                Issue.record("publisher \(n): expected the ok of \(next), got \(frame.raw.prefix(160))")
                                return
                            }
                            next += 1
                        }
                        replies.withLock { $0[n] = next }
                    } catch {
                        Issue.record("publisher \(n): \(error)")
                    }
                }
            }
            // One request at a time from another uid while they pipeline.
            for i in 0..<200 {
                let reply = try waiter.request(#"{"op":"ping","req":\#(i)}"#, timeout: .seconds(30))
                #expect(reply.op == "ok" && reply.req == .integer(i), "\(reply.raw)")
            }
            var next = [0, 0]
            while next.reduce(0, +) < 2 * SharedTurnTests.count {
                let frame = try subscriber.readFrame(timeout: .seconds(60))
                if frame.op == "dropped" { Issue.record("events dropped: \(frame.raw)"); break }
                guard frame.op == "event", let type = frame.type, let n = Int(type.dropFirst("turn.".count)), n < 2 else { continue }
                let i = frame.object("data")?["i"] as? Int
                guard i == next[n] else { Issue.record("turn.\(n): expected event \(next[n]), got \(frame.raw.prefix(160))"); break }
                next[n] += 1
            }
            #expect(group.wait(timeout: .now() + 90) == .success, "the publishers did not finish")
            #expect(replies.withLock { $0 } == [SharedTurnTests.count, SharedTurnTests.count])
            #expect(next == [SharedTurnTests.count, SharedTurnTests.count])
        }
    }
}
