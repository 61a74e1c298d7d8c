// The fair-share scheduler (BrokerServer+Scheduling.swift) in an in-process
// server with handed connections of made-up uids, so it runs without root:
// a uid's share of the loop does not grow with its connections, and while two
// uids pipeline at once (a shared turn) each gets every reply in order and a
// third uid that waits for each reply is answered meanwhile.
//
// Before editing: no assertion is about time. The share test fills every
// publisher's socket and hands every connection before the loop starts (so
// what the broker reads does not depend on when the test's threads run) and
// takes the order in which the broker routed the publishes from the seqs of
// their oks: a per-connection scheduler would route the flooder's 8x the
// other uid's, a per-uid one about as many; the bound is 4x.
import EventBusSystem
import EventBusScenarios
import EventBusTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@Suite("Fair-share scheduler, in process (no root)")
struct ServerSchedulingTests {
    /// `count` publishes of `type`, each with `req` i.
    static func publishes(_ type: String, count: Int) -> [UInt8] {
        var text = ""
        for i in 0..<count { text += #"{"op":"publish","type":"\#(type)","req":\#(i)}"# + "\n" }
        return Array(text.utf8)
    }

    @Test("A uid's share of the loop does not grow with its connections: 16 connections of one uid against 2 of another")
    func shareIsPerUIDNotPerConnection() throws {
        let perConnection = 1000
        try withServer(started: false) { broker in
            // Every publisher's input is in its socket, and every connection
            // handed, before the loop runs: it adopts them all at once.
            func filled(uid: UInt32, count: Int) throws -> [RawClient] {
                try (0..<count).map { n in
                    let (mine, theirs) = try FileDescriptor.unixStreamPair()
                    let client = RawClient(adopting: mine.rawValue, path: "handed \(n) of uid \(uid)")
                    try client.sendBytes(ServerSchedulingTests.publishes("share.\(uid)", count: perConnection), timeout: .seconds(5))
                    broker.handoff.hand(theirs, pid: getpid(), uid: uid, gid: uid)
                    return client
                }
            }
            let flooder = try filled(uid: 4181, count: 16)
            let other = try filled(uid: 4182, count: 2)
            broker.start()
            // The seq of each ok is the order in which the broker routed the publishes.
            func seqs(_ clients: [RawClient]) throws -> [Int] {
                try clients.flatMap { client in
                    try client.readFrames(count: perConnection, timeout: .seconds(60)).enumerated().map { i, reply in
                        guard reply.op == "ok", reply.req == .integer(i), let seq = reply.seq else { throw TestFailure("reply \(i): \(reply.raw.prefix(200))") }
                        return seq
                    }
                }
            }
            let otherLast = try #require(try seqs(other).max())
            let routed = try seqs(flooder).filter { $0 < otherLast }.count
            // Per uid: about 2,000 of the flooder's while the other's 2,000 go; per connection it would be all 16,000.
            #expect(routed <= 4 * perConnection * other.count, "the flooder's 16 connections had \(routed) publishes routed while the other uid's 2 had \(perConnection * other.count)")
        }
    }

    @Test("Two uids pipelining at once get every reply and every event in order; a third uid's requests are answered meanwhile")
    func twoUIDsPipeliningAtOnce() throws {
        let count = 8000
        try withServer { broker in
            let subscriber = try broker.connect(uid: 4173)
            try subscriber.ok(#"{"op":"subscribe","type":"turn.>","req":"s"}"#)
            let waiter = try broker.connect(uid: 4174)
            let publishers = try [4171, 4172].map { try broker.connect(uid: UInt32($0)) }
            for p in publishers { try p.ok(#"{"op":"ping","req":"p"}"#) }
            let replies = Shared([Int](repeating: 0, count: 2))
            let failures = Shared([String]())
            let group = DispatchGroup()
            for (n, publisher) in publishers.enumerated() {
                let bytes = Array((0..<count).map { #"{"op":"publish","type":"turn.\#(n)","req":\#($0),"data":{"i":\#($0)}}"# + "\n" }.joined().utf8)
                let handed = UncheckedClient(publisher)
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
        }
    }
}

/// A value several threads read and write under a lock.
private final class Shared<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { value.withLock { body(&$0) } }
}

/// A client handed to one other thread, which alone uses it until it leaves
/// the group the test waits for.
private final class UncheckedClient: @unchecked Sendable {
    let client: RawClient
    init(_ client: RawClient) { self.client = client }
}
