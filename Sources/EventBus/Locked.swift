// A value behind a lock, used for all of the client's shared state.
//
// Before editing: this wraps `NSLock` (a pthread mutex) rather than
// `Synchronization.Mutex` on purpose. On Linux, Swift 6.3's `Mutex` is built
// on futex calls that ThreadSanitizer does not see: two threads incrementing
// a `Mutex<Int>` 100 000 times each end at exactly 200 000 yet TSan reports a
// "Swift access race" on every run. With `NSLock` TSan sees the lock, so
// `swift test --sanitize=thread` reports only real races in this library.
import Foundation

/// A `Value` that is only ever read or written while `lock` is held.
///
/// `@unchecked Sendable` is justified: `value` is private and every access
/// goes through `withLock`/`withLockIfAvailable`, which hold the lock for the
/// whole access, so no two threads touch it at once. `Value` need not be
/// `Sendable` for the same reason (as with `Synchronization.Mutex`); values
/// returned from the closure must not alias mutable state inside it.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// Runs `body` if the lock is free right now; returns nil without waiting otherwise.
    func withLockIfAvailable<Result>(_ body: (inout Value) -> Result) -> Result? {
        guard lock.try() else { return nil }
        defer { lock.unlock() }
        return body(&value)
    }
}
