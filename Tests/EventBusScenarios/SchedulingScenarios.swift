// The fair-share scheduler's shared turns (BrokerServer+Scheduling.swift):
// while two uids pipeline at once, a connection with input left has the
// writes its reads caused made every `readsPerSharedFlush` reads and at the
// end of its uid's service, not after each read. Asserted: each publisher
// gets every reply, in order; a subscriber of a third uid gets every event
// of both, each publisher's in order, none dropped (any other frame fails);
// a client of a fourth uid that waits for each reply before sending the next
// gets them all meanwhile. Never timings (scripts/attack's churn and busy
// rows measure the rates). Written once (UIDBus.swift) and run in process
// (EventBusServerTests, no root) and against eventbusd with setpriv'd clients
// (EventBusIntegrationTests, root).
//
// Before editing: the publishers write from their own threads (a write the
// broker has not read yet blocks); the uids are 4171-4174.
import EventBusTestSupport
import Foundation
import Synchronization
import Testing

package let schedulingScenarios: [BusScenario] = [
    BusScenario("Two uids pipelining at once get every reply and every event in order; a third uid's requests are answered meanwhile") { bus in
        let count = 8000
        let subscriber = try bus.connect(uid: 4173)
        try subscriber.ok(#"{"op":"subscribe","type":"turn.>","req":"s"}"#)
        let waiter = try bus.connect(uid: 4174)
        let publishers = try [4171, 4172].map { try bus.connect(uid: UInt32($0)) }
        for p in publishers { try p.ok(#"{"op":"ping","req":"p"}"#) }
        let replies = Locked([Int](repeating: 0, count: 2))
        let failures = Locked([String]())
        let group = DispatchGroup()
        for (n, publisher) in publishers.enumerated() {
            let bytes = Array((0..<count).map { #"{"op":"publish","type":"turn.\#(n)","req":\#($0),"data":{"i":\#($0)}}"# + "\n" }.joined().utf8)
            let handed = HandedClient(publisher)
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    try handed.client.sendBytes(bytes, timeout: .seconds(60))  // reads replies while the socket is full
                    var next = 0
                    while next < count {
                        let frame = try handed.client.readFrame(timeout: .seconds(60))
                        guard frame.req == .integer(next), frame.op == "ok" else {
                            throw TestFailure("publisher \(n): expected the ok of \(next), got \(frame.raw.prefix(160))")
                        }
                        next += 1
                    }
                    replies.withLock { $0[n] = next }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }.start()
        }
        for i in 0..<200 {
            let reply = try waiter.request(#"{"op":"ping","req":\#(i)}"#, timeout: .seconds(30))
            #expect(reply.op == "ok" && reply.req == .integer(i), "\(reply.raw)")
        }
        var next = [0, 0]
        while next.reduce(0, +) < 2 * count {
            let frame = try subscriber.readFrame(timeout: .seconds(60))
            guard frame.op == "event", let type = frame.type, let n = Int(type.dropFirst("turn.".count)), n < 2 else {
                throw TestFailure("not an event of turn.0/1: \(frame.raw.prefix(160))")
            }
            guard frame.object("data")?["i"] as? Int == next[n] else { throw TestFailure("turn.\(n): expected event \(next[n]), got \(frame.raw.prefix(160))") }
            next[n] += 1
        }
        #expect(group.wait(timeout: .now() + 90) == .success, "the publishers did not finish")
        #expect(failures.withLock { $0 } == [])
        #expect(replies.withLock { $0 } == [count, count])
        #expect(next == [count, count])
    },
]

/// A value several threads read and write under a lock.
package final class Locked<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    package init(_ value: Value) { self.value = Mutex(value) }
    package func withLock<T>(_ body: (inout Value) -> T) -> T { value.withLock { body(&$0) } }
}

/// A client handed to one other thread, which alone uses it until it leaves
/// the group the test waits for.
package final class HandedClient: @unchecked Sendable {
    package let client: RawClient
    package init(_ client: RawClient) { self.client = client }
}
