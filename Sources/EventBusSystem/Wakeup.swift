// A descriptor another thread can make readable to wake a thread blocked in
// poll(2): an eventfd(2) counter (EFD_NONBLOCK|EFD_CLOEXEC).
//
// Before editing: `Wakeup` owns its fd and closes it on deinit; `signal()` may
// be called from any thread, `drain()` only by the thread that polls it.
import CEventBusShims
import Glibc

/// An eventfd(2) used as a wake-up signal between threads.
package final class Wakeup: Sendable {
    /// Poll this for `.readable`; owned by this object.
    package let descriptor: FileDescriptor

    /// - Throws: `SystemError("eventfd", errno)`.
    package init() throws(SystemError) {
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard fd >= 0 else { throw SystemError("eventfd", .current) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    deinit { descriptor.close() }

    /// Makes the descriptor readable (adds 1 to the counter; write(2), EINTR
    /// retried; a full counter is already readable, so EAGAIN is ignored).
    package func signal() {
        var one: UInt64 = 1
        _ = try? retryingInterrupts("write") { Glibc.write(descriptor.rawValue, &one, 8) }
    }

    /// Resets the counter so the descriptor is no longer readable (read(2);
    /// EAGAIN, nothing to drain, is ignored).
    package func drain() {
        var value: UInt64 = 0
        _ = try? retryingInterrupts("read") { Glibc.read(descriptor.rawValue, &value, 8) }
    }
}
