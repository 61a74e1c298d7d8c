// signalfd(2): signals as a readable descriptor in the broker's epoll set,
// instead of handlers that touch state (STYLE.md "Concurrency").
//
// Before editing: the signals are blocked for the calling thread before the
// signalfd is made; create it on the loop thread before starting any other
// thread, so that every thread inherits the mask and none takes the signal.
import CEventBusShims
import Glibc

/// A signalfd(2) for a set of signals, which it blocks for the calling thread
/// first (threads started later inherit the mask). Owns its fd.
package final class SignalDescriptor {
    package let descriptor: FileDescriptor

    /// - Throws: `SystemError("pthread_sigmask" | "signalfd", errno)`.
    package init(signals: [Int32]) throws(SystemError) {
        // pthread_sigmask(3) returns the error number instead of setting errno.
        let blocked = eventbus_block_signals(signals, Int32(signals.count))
        guard blocked == 0 else { throw SystemError("pthread_sigmask", Errno(rawValue: blocked)) }
        let fd = try checkedCall("signalfd") { eventbus_signalfd(signals, Int32(signals.count)) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    deinit { descriptor.close() }

    /// Reads pending signals (read(2) of `signalfd_siginfo` records until
    /// it would block); returns their numbers, empty when none. A read error
    /// ends the list (the fd is non-blocking and cannot fail otherwise).
    package func readSignals() -> [Int32] {
        var result: [Int32] = []
        let size = MemoryLayout<signalfd_siginfo>.size
        let signo = MemoryLayout<signalfd_siginfo>.offset(of: \.ssi_signo)!
        var record: [UInt8] = []
        while true {
            record.removeAll(keepingCapacity: true)
            let read = try? descriptor.read(appendingTo: &record, limit: size)
            guard case .complete(size)? = read else { return result }
            result.append(Int32(bitPattern: record.span.bytes.unsafeLoadUnaligned(fromByteOffset: signo, as: UInt32.self)))
        }
    }
}
