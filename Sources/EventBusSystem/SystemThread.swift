// A thread of its own for a blocking I/O loop (pthread_create(3)): the NATS
// client's and the bridge's bus connection. Foundation's `Thread` would do,
// but importing Foundation into a program linked with `--static-swift-stdlib`
// links all of static Foundation, whose temporary-file code references glibc's
// `mktemp`, and the linker then warns (issue 23); the executables built that
// way import no Foundation.
//
// Before editing: the thread is detached (nothing joins it); whoever needs to
// know it ended signals that from `body` itself.
import Glibc

package enum SystemThread {
    /// Runs `body` on a new detached thread (pthread_create(3) with default
    /// attributes: the stack size of `ulimit -s`; then pthread_detach(3)).
    /// Traps when the thread cannot be created (EAGAIN: the process or user
    /// is at its thread limit), as `Foundation.Thread.start()` does.
    package static func detach(_ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { context in
            Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            fatalError("failed to create a thread: pthread_create: \(Errno(rawValue: result))")
        }
        pthread_detach(thread)
    }
}

/// The closure handed to the new thread, retained across pthread_create(3).
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void

    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
