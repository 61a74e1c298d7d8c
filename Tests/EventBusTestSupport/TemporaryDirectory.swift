// Short-named temporary directories under /tmp for sockets and child output.
//
// Before editing: names must stay short. A socket path must fit sun_path
// (108 bytes, unix(7)); `/tmp/eb-XXXXXX/s` leaves plenty of room.
import Foundation
import Glibc
import Synchronization

/// A fresh directory `/tmp/<prefix>XXXXXX` (mkdtemp(3), mode 0700), removed
/// with everything in it by `remove()` or, as a last resort, on deinit.
package final class TemporaryDirectory: Sendable {
    /// Absolute path, e.g. `/tmp/eb-a1B2c3`.
    package let path: String
    private let removed = Atomic<Bool>(false)

    /// Creates the directory.
    /// - Parameter prefix: the name before the six random characters (keep it short).
    /// - Throws: `ChildProcessError.system(call: "mkdtemp", …)`.
    package init(prefix: String = "eb-") throws {
        var template = Array("/tmp/\(prefix)XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            mkdtemp(buffer.baseAddress!)
        }
        guard made != nil else { throw ChildProcessError.system(call: "mkdtemp", errno: errno) }
        path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Removes the directory and its contents; idempotent.
    package func remove() {
        guard !removed.exchange(true, ordering: .relaxed) else { return }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// `path + "/" + name`.
    package func file(_ name: String) -> String { path + "/" + name }

    deinit { remove() }
}
