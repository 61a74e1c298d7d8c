// PROTOCOL.md "Request/reply (1.3)" in the core, without sockets: the
// deadline is driven by the time the broker is handed (a min-heap: nothing
// is due or scanned while no request is pending), the books stay in step
// (`BrokerHarness.checkRequests`), and a closing server or requester leaves
// nothing behind.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
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

    @Test("A server's reply tokens are shared fairly: another uid alone holds about half, a second one its share, the server's own uid and root always find room")
    func servingTokensAreSharedFairly() throws {
        let h = BrokerHarness { $0.maxServingRequestsPerConnection = 64 }
        let server = h.connect(uid: 2000)
        _ = h.send(server, #"{"op":"subscribe","type":"svc.x","serve":true,"req":1}"#)
        _ = h.read(server)
        /// Sends `count` requests from `asker`; returns how many reached the server.
        func flood(_ asker: Connection, _ count: Int) -> Int {
            for i in 0..<count { _ = h.send(asker, #"{"op":"request","type":"svc.x","timeout":60000,"req":\#(i)}"#) }
            let refused = h.read(asker).filter { $0.code == "no_responders" }.count
            return count - refused
        }
        let attacker = h.connect(uid: 3000)
        let first = flood(attacker, 64)
        #expect(first > 0 && first <= 32, "uid 3000 alone got \(first) of 64")
        let other = h.connect(uid: 3001)
        let second = flood(other, 64)
        #expect(second > 0, "a second uid finds room")
        #expect(flood(attacker, 8) == 0, "uid 3000 at its share is passed over")
        // The server's own uid and root are not counted in a share: they fill what is left.
        let own = h.connect(uid: 2000), root = h.connect(uid: 0)
        #expect(flood(own, 1) == 1 && flood(root, 1) == 1)
        #expect(h.broker.requests.slots.count == first + second + 2)
        h.checkInvariants()
        // Answering frees the share: uid 3000 gets in again.
        let requests = h.read(server).filter { $0.op == "request" }
        for request in requests.prefix(first) { _ = h.send(server, #"{"op":"reply","to":"\#(request.string("reply")!)","data":1}"#) }
        #expect(flood(attacker, 1) == 1)
        h.checkInvariants()
        _ = h.close(server)
        #expect(h.broker.requests.slots.isEmpty)
        h.checkInvariants()
        h.closeAll()
    }
}
