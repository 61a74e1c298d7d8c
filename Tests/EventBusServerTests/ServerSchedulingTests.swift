// The fair-share scheduler (BrokerServer+Scheduling.swift) in an in-process
// server with handed connections of made-up uids, so it runs without root:
// a uid's share of the loop does not grow with its connections (it needs the
// loop not yet started when the connections are handed: in process only).
// Shared turns are a scenario (EventBusScenarios/SchedulingScenarios.swift).
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
}
