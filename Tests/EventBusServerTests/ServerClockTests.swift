// The server's clock seam (issue 35, ServerClock.swift): a clock the test
// moves by hand, handed through `ServerConfiguration.clock`, so a rule that
// is judged by time (the frame timeout) is tested by moving that clock, not
// by waiting for it. The loop still wakes by the real clock (epoll), so each
// check is settled by round trips: the first wakes the loop, whose next turn
// runs the timers at the moved time before it reads the second.
import EventBusServer
import EventBusScenarios
import EventBusTestSupport
import Synchronization
import Testing

/// A clock that moves only when the test says (monotonic and wall together).
final class ManualClock: Sendable {
    private let elapsed = Mutex<Int64>(0)
    static let monotonicStart: Int64 = 1_000 * 1_000_000_000
    static let wallStart: Int64 = 1_700_000_000 * 1_000_000_000

    func advance(seconds: Int64) { advance(nanoseconds: seconds * 1_000_000_000) }
    func advance(nanoseconds: Int64) { elapsed.withLock { $0 += nanoseconds } }

    var serverClock: ServerClock {
        ServerClock(monotonic: { [self] in ManualClock.monotonicStart + elapsed.withLock { $0 } },
                    wall: { [self] in ManualClock.wallStart + elapsed.withLock { $0 } })
    }
}

@Suite("Server clock, in process (no root)")
struct ServerClockTests {
    @Test("Frame timeout: an incomplete frame is closed with timeout when the server's clock passes --frame-timeout, not before")
    func frameTimeoutByTheServersClock() throws {
        let clock = ManualClock()
        try withServer(configure: { $0.clock = clock.serverClock; $0.broker.quotas.frameTimeoutNanoseconds = 60_000_000_000 }) { broker in
            let slow = try broker.connect(uid: 4131)
            let root = try broker.connect(uid: 0)
            // One write: a whole ping (its reply says the write was read) and an incomplete one.
            try slow.sendBytes(Array(#"{"op":"ping","req":1}"#.utf8) + [0x0A] + incompletePing(req: 2, bytes: 100))
            #expect(try slow.readFrame().int("req") == 1)
            func slowConnections() throws -> Int { try root.clientList().filter { $0.int("uid") == 4131 }.count }
            clock.advance(seconds: 59)
            _ = try slowConnections()  // wakes the loop; its next turn ticks at +59 s
            #expect(try slowConnections() == 1, "not yet: 59 s of the 60")
            clock.advance(seconds: 2)
            _ = try slowConnections()
            let frames = try slow.readUntilEOF(timeout: .seconds(20))
            #expect(frames.count == 1 && frames.first?.code == "timeout" && frames.first?.has("req") == false, "\(frames)")
            #expect(try slowConnections() == 0)
        }
    }
}
