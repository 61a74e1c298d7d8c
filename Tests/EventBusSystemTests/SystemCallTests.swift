// The one EINTR helper (`systemCall`) and the two shapes built on it: EINTR
// retried or reported as "nothing ready", EAGAIN as a value or an error, any
// other failure thrown with the call's name and errno. The calls are stand-ins
// that fail on purpose, so the rules are checked without racing a signal.
@_spi(Package) @testable import EventBusSystem
import Glibc
import Testing

/// A stand-in libc call: fails with each errno of `failures` in turn, then returns `result`.
final class ScriptedCall {
    var failures: [Int32]
    let result: Int
    private(set) var calls = 0

    init(failing failures: [Int32], then result: Int = 7) {
        self.failures = failures
        self.result = result
    }

    func callAsFunction() -> Int {
        calls += 1
        guard !failures.isEmpty else { return result }
        errno = failures.removeFirst()
        return -1
    }
}

@Suite("systemCall")
struct SystemCallTests {
    @Test func interruptedCallsAreRetriedUntilTheyFinish() throws {
        let call = ScriptedCall(failing: [EINTR, EINTR])
        #expect(try retryingInterrupts("read") { call() } == 7)
        #expect(call.calls == 3)
        let connect = ScriptedCall(failing: [EINTR])
        #expect(try checkedCall("connect") { connect() } == 7)
        #expect(connect.calls == 2)
    }

    @Test func anInterruptedWaitReturnsZeroAtOnceInsteadOfWaitingAgain() throws {
        let call = ScriptedCall(failing: [EINTR])
        #expect(try checkedCall("poll", .returnZero) { call() } == 0)
        #expect(call.calls == 1)
    }

    @Test func wouldBlockIsAValueForIOAndAnErrorForTheRest() throws {
        let read = ScriptedCall(failing: [EINTR, EAGAIN])
        #expect(try retryingInterrupts("read") { read() } == nil)
        #expect(read.calls == 2)
        let connect = ScriptedCall(failing: [EAGAIN])
        let error = #expect(throws: SystemError.self) { try checkedCall("connect") { connect() } }
        #expect(error?.call == "connect")
        #expect(error?.errno == .wouldBlock)
    }

    @Test func otherFailuresNameTheCallAndTheErrno() {
        let call = ScriptedCall(failing: [EINTR, ECONNRESET])
        let error = #expect(throws: SystemError.self) { try retryingInterrupts("sendmsg") { call() } }
        #expect(error?.call == "sendmsg")
        #expect(error?.errno == .connectionReset)
        #expect(error?.description == "sendmsg: Connection reset by peer")
        let wait = ScriptedCall(failing: [EBADF])
        #expect(throws: SystemError.self) { try checkedCall("epoll_wait", .returnZero) { wait() } }
    }

    @Test func systemCallHandsBackTheErrnoAsAValue() {
        let call = ScriptedCall(failing: [EINTR, ENOENT])
        guard case .failure(let e) = systemCall(.retry, { call() }) else { Issue.record("expected a failure"); return }
        #expect(e == .noSuchFile)
        #expect(call.calls == 2)
    }

    @Test func aTimedOutPollOverSeveralDescriptorsClearsEveryReturnedSet() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        var entries = [PollEntry(a, events: .readable), PollEntry(b, events: .readable)]
        entries[0].returned = .readable
        #expect(try FileDescriptor.poll(&entries, timeoutMilliseconds: 0) == 0)
        #expect(entries.allSatisfy { $0.returned.isEmpty })
        #expect(try a.poll(.writable, timeoutMilliseconds: 0) == .writable)
    }
}
