// Replacing a file so that a crash at any moment leaves either the old or
// the new content, never a mix (write a temporary file in the same
// directory, fsync(2) it, rename(2) it over the old one, fsync(2) the
// directory: the recipe of rename(2) and of SQLite's and systemd's own state
// files), and reading a whole file back. For the files the
// CLI and the bridge rewrite (`listen --resume`, `stats --output`, the
// bridge's status file); the broker's state file is StateDirectory's.
//
// Before editing: these calls block (regular files, fsync): call them from
// a helper thread or at start-up and shutdown, never from the event loop.
// Bytes come and go as spans through FileDescriptor (no pointer here).
import Glibc

package enum DurableFile {
    /// Writes `bytes` as the new content of `path`: to `path + ".tmp"`
    /// (any old one, or anything planted there, unlinked first; created
    /// O_CREAT|O_EXCL|O_NOFOLLOW, mode `mode` less the umask, as
    /// `StateDirectory.replace` does), fsync(2), rename(2) onto `path`, fsync(2)
    /// of the directory. On failure the temporary file is removed and `path`
    /// is unchanged.
    /// - Parameters:
    ///   - durable: false skips both fsyncs: the replacement stays atomic for
    ///     readers and across a crash of this process, but a power loss may
    ///     bring back the old content (for files rewritten often).
    ///   - mode: the new file's permissions before the umask (default 0600).
    /// - Throws: `SystemError` naming the failed call (`open`, `write`,
    ///   `fsync`, `rename`), e.g. ENOSPC or EIO from `write` or `fsync`.
    package static func replace(_ path: String, with bytes: RawSpan, durable: Bool = true, mode: mode_t = 0o600) throws(SystemError) {
        let temporary = path + ".tmp"
        // The name is predictable and the folder may be shared (`--resume
        // /tmp/orders.pos` as root): never follow or reuse what is there.
        switch systemCall(.retry, { unlink(temporary) }) {
        case .success, .failure(.noSuchFile): break
        case .failure(let e): throw SystemError("unlink", e)
        }
        let raw = try checkedCall("open") { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode) }
        let fd = FileDescriptor(rawValue: raw)
        do throws(SystemError) {
            try fd.writeAll(bytes)  // a regular file: write(2) never says EAGAIN
            if durable { _ = try checkedCall("fsync") { fsync(raw) } }
        } catch {
            fd.close()
            _ = Glibc.unlink(temporary)
            throw error
        }
        fd.close()
        do throws(SystemError) {
            _ = try checkedCall("rename") { rename(temporary, path) }
        } catch {
            _ = Glibc.unlink(temporary)
            throw error
        }
        // The rename is durable once the directory is; a failure here leaves
        // the new file in place, which is what the caller asked for.
        guard durable else { return }
        let directory = FileSystem.parentDirectory(of: path)
        if case .success(let dirfd) = systemCall(.retry, { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }) {
            _ = systemCall(.retry) { fsync(dirfd) }
            _ = Glibc.close(dirfd)
        }
    }

    /// The content of `path` (open(2), read(2) until EOF), at most
    /// `maxBytes`: a longer file gives its first `maxBytes` bytes and
    /// `truncated: true`.
    /// - Returns: nil when the file does not exist (ENOENT).
    /// - Throws: `SystemError("open"/"read", errno)` for other failures (EACCES, EIO).
    package static func read(_ path: String, maxBytes: Int) throws(SystemError) -> (bytes: [UInt8], truncated: Bool)? {
        let raw: CInt
        switch systemCall(.retry, { open(path, O_RDONLY | O_CLOEXEC) }) {
        case .success(let fd): raw = fd
        case .failure(let e) where e == .noSuchFile: return nil
        case .failure(let e): throw SystemError("open", e)
        }
        defer { _ = Glibc.close(raw) }
        var bytes: [UInt8] = []
        let fd = FileDescriptor(rawValue: raw)
        while bytes.count < maxBytes {
            // A regular file: read(2) never says EAGAIN.
            guard case .complete(let n) = try fd.read(appendingTo: &bytes, limit: min(1 << 16, maxBytes - bytes.count)) else { continue }
            if n == 0 { return (bytes, false) }
        }
        var probe: UInt8 = 0
        let more = (try? checkedCall("read") { Glibc.read(raw, &probe, 1) }) ?? 0
        return (bytes, more > 0)
    }
}
