// PROTOCOL.md "Request/reply (1.3)" in the core, without sockets: the
// deadline is driven by the time the broker is handed (a min-heap: nothing
// is due or scanned while no request is pending), the books stay in step
// (`BrokerHarness.checkRequests`), and a closing server or requester leaves
// nothing behind.
@testable import EventBusCore
import EventBusProtocol
import Testing

@Suite("Request/reply in the core (1.3)")
struct RequestReplyCoreTests {
    @Test("A deadline is due exactly when the handed time reaches it, earliest first; none is kept while nothing is pending")
    func deadlinesFollowTheHandedTime() throws {
        let h = BrokerHarness()
        let server = h.connect(), asker = h.connect()
        _ = h.send(server, #"{"op":"subscribe","type":"svc.>","serve":true,"req":1}"#)
        _ = h.read(server)
        #expect(h.broker.nextRequestDeadline == nil)
        _ = h.send(asker, #"{"op":"publish","type":"svc.a","req":0}"#)  // events leave no deadline
        #expect(h.broker.nextRequestDeadline == nil)
        _ = h.send(asker, #"{"op":"request","type":"svc.a","timeout":300,"req":1}"#, #"{"op":"request","type":"svc.b","timeout":100,"req":2}"#)
        #expect(h.broker.nextRequestDeadline == h.now.monotonicNanoseconds + 100_000_000)
        h.checkInvariants()
        h.elapsedNanoseconds += 99_999_999
        #expect(h.record(h.broker.expireRequests(at: h.now)).isEmpty)
        h.elapsedNanoseconds += 1
        _ = h.record(h.broker.expireRequests(at: h.now))
        let first = h.read(asker).filter { $0.op == "error" }
        #expect(first.count == 1 && first.first?.code == "timeout" && first.first?.req == .integer(2), "\(first)")
        h.checkInvariants()
        h.elapsedNanoseconds += 200_000_000
        _ = h.record(h.broker.expireRequests(at: h.now))
        #expect(h.read(asker).map(\.req) == [.integer(1)])
        #expect(h.broker.nextRequestDeadline == nil && h.broker.statistics.timeouts == 2)
        h.checkInvariants()
        h.closeAll()
    }

    @Test("An answered request leaves the heap at once; the books are empty once everyone is gone")
    func answeredRequestsAndClosesLeaveNothing() throws {
        let h = BrokerHarness()
        let one = h.connect(), two = h.connect(uid: 2000), asker = h.connect(uid: 3000)
        for server in [one, two] { _ = h.send(server, #"{"op":"subscribe","type":"svc.x","serve":true,"req":1}"#) }
        _ = h.read(one); _ = h.read(two)
        _ = h.send(asker, #"{"op":"request","type":"svc.x","req":1}"#, #"{"op":"request","type":"svc.x","req":2}"#)
        let requests = h.read(one).filter { $0.op == "request" }
        #expect(requests.count == 2)
        h.checkInvariants()
        _ = h.send(one, #"{"op":"reply","to":"\#(requests[0].string("reply")!)","data":1,"req":9}"#)
        #expect(h.read(asker).map(\.req) == [.integer(1)])
        #expect(h.broker.requests.count == 1 && h.broker.requests.slots.count == 2)
        h.checkInvariants()
        _ = h.close(one)
        h.checkInvariants()
        #expect(h.broker.requests.slots.count == 1, "two's token of the pending request stays")
        _ = h.close(asker)
        #expect(h.broker.requests.count == 0 && h.broker.requests.slots.isEmpty && h.broker.nextRequestDeadline == nil)
        h.checkInvariants()
        h.closeAll()
    }
}
