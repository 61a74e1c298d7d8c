// The broker's state directory (`--state-dir`, docs/SYSTEMD.md "The state
// directory"): opened once as a directory fd whose owner and mode are
// checked on that fd, and every file inside it reached relative to it
// (openat(2), renameat(2)), so no path is resolved twice and nothing planted
// in it is followed: the state file is opened with O_NOFOLLOW, the
// temporary file is unlinked and created with O_CREAT|O_EXCL|O_NOFOLLOW.
//
// Before editing: a directory someone else can write (or owns) is refused,
// never used: whoever made it first could plant a symlink or a forged state
// file in it (docs/RELIABILITY.md "Attack round 2"). The path itself may be
// a symlink (systemd's `/var/lib/eventbus` with DynamicUser= is one, to
// `/var/lib/private/eventbus`) if the link is owned by root or by us, as
// fs.protected_symlinks would require in a sticky directory.
import Glibc

/// Why a state directory is not used (exit 78, EX_CONFIG, at start).
package struct StateDirectoryRefusal: Error, Sendable, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

package final class StateDirectory: @unchecked Sendable {
    package let path: String
    /// The directory fd, open for the broker's run.
    private let fd: CInt

    private init(path: String, fd: CInt) {
        self.path = path
        self.fd = fd
    }

    deinit { _ = Glibc.close(fd) }

    /// Opens `path` as the state directory of a process running as
    /// `owner` (its effective uid): creates it (and missing parents) with
    /// mode 0700 when missing; refuses one that is not a directory, is
    /// owned by another uid, or that group or others may write; tightens
    /// an existing one to 0700 (e.g. 0755).
    /// - Throws: `StateDirectoryRefusal` with the reason, naming the path.
    package static func open(_ path: String, owner: uid_t = geteuid()) throws(StateDirectoryRefusal) -> StateDirectory {
        do {
            try FileSystem.createDirectories(path, mode: 0o700)
        } catch {
            throw StateDirectoryRefusal("cannot create the state directory \(path): \(error)")
        }
        var link = stat()
        if lstat(path, &link) == 0, (link.st_mode & S_IFMT) == S_IFLNK, link.st_uid != owner, link.st_uid != 0 {
            throw StateDirectoryRefusal("the state directory \(path) is a symlink owned by uid \(link.st_uid), not by uid \(owner) or root: refusing to follow it")
        }
        let raw: CInt
        switch systemCall(.retry, { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }) {
        case .success(let value): raw = value
        case .failure(let e): throw StateDirectoryRefusal("cannot open the state directory \(path): \(e)")
        }
        var info = stat()
        guard fstat(raw, &info) == 0 else {
            let e = Errno.current
            _ = Glibc.close(raw)
            throw StateDirectoryRefusal("cannot stat the state directory \(path): \(e)")
        }
        let mode = info.st_mode & 0o7777
        if info.st_uid != owner {
            _ = Glibc.close(raw)
            throw StateDirectoryRefusal("the state directory \(path) is owned by uid \(info.st_uid), not by the broker's uid \(owner): refusing to use it (remove it, or chown it to uid \(owner))")
        }
        if mode & 0o022 != 0 {
            _ = Glibc.close(raw)
            throw StateDirectoryRefusal("the state directory \(path) has mode \(octal(mode)): group or others may write it: refusing to use it (chmod 0700 it)")
        }
        if mode != 0o700 {
            guard fchmod(raw, 0o700) == 0 else {
                let e = Errno.current
                _ = Glibc.close(raw)
                throw StateDirectoryRefusal("cannot tighten the state directory \(path) (mode \(octal(mode))) to 0700: \(e)")
            }
        }
        return StateDirectory(path: path, fd: raw)
    }

    static func octal(_ mode: mode_t) -> String {
        var digits = String(mode, radix: 8)
        while digits.count < 4 { digits = "0" + digits }
        return digits
    }

    /// Reads the file `name` in chunks of 64 KiB, handing each to `body`,
    /// without following a symlink (O_NOFOLLOW: ELOOP) or reading anything
    /// but a regular file.
    /// - Returns: false when there is no such file (ENOENT).
    /// - Throws: `SystemError("open"/"read", errno)`.
    package func read(_ name: String, _ body: (RawSpan) -> Void) throws(SystemError) -> Bool {
        let raw: CInt
        switch systemCall(.retry, { openat(fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }) {
        case .success(let value): raw = value
        case .failure(let e) where e == .noSuchFile: return false
        case .failure(let e): throw SystemError("open", e)
        }
        defer { _ = Glibc.close(raw) }
        var info = stat()
        guard fstat(raw, &info) == 0 else { throw SystemError("fstat", .current) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw SystemError("open", Errno(rawValue: EINVAL)) }
        let file = FileDescriptor(rawValue: raw)
        var chunk: [UInt8] = []
        while true {
            chunk.removeAll(keepingCapacity: true)
            // A regular file: read(2) never says EAGAIN.
            guard case .complete(let n) = try file.read(appendingTo: &chunk, limit: 1 << 16) else { continue }
            if n == 0 { return true }
            body(chunk.span.bytes)
        }
    }

    /// Writes `blocks` as the new content of `name`: a temporary file
    /// `name + ".tmp"` in this directory (any old one, or anything planted
    /// there, unlinked first; created O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600),
    /// fsync(2), renameat(2) onto `name`, fsync(2) of the directory. On
    /// failure the temporary file is removed and `name` is unchanged.
    /// - Throws: `SystemError` naming the failed call.
    package func replace(_ name: String, with blocks: [[UInt8]]) throws(SystemError) {
        let temporary = name + ".tmp"
        switch systemCall(.retry, { unlinkat(fd, temporary, 0) }) {
        case .success, .failure(.noSuchFile): break
        case .failure(let e): throw SystemError("unlink", e)
        }
        let raw = try checkedCall("open") { openat(fd, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        do throws(SystemError) {
            try StateDirectory.write(raw, blocks)
            _ = try checkedCall("fsync") { fsync(raw) }
        } catch {
            _ = Glibc.close(raw)
            _ = unlinkat(fd, temporary, 0)
            throw error
        }
        _ = Glibc.close(raw)
        do throws(SystemError) {
            _ = try checkedCall("rename") { renameat(fd, temporary, fd, name) }
        } catch {
            _ = unlinkat(fd, temporary, 0)
            throw error
        }
        // The rename is durable once the directory is; a failure here leaves
        // the new file in place, which is what the caller asked for.
        _ = systemCall(.retry) { fsync(fd) }
    }

    /// Appends `blocks` to the existing file `name` (O_APPEND|O_NOFOLLOW,
    /// write(2), fsync(2)). A failure may leave part of them written: the
    /// caller must not append after one (replace instead).
    /// - Throws: `SystemError` naming the failed call (ENOENT, ELOOP, ENOSPC, EIO).
    package func append(_ name: String, _ blocks: [[UInt8]]) throws(SystemError) {
        let raw = try checkedCall("open") { openat(fd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC) }
        defer { _ = Glibc.close(raw) }
        try StateDirectory.write(raw, blocks)
        _ = try checkedCall("fsync") { fsync(raw) }
    }

    private static func write(_ raw: CInt, _ blocks: [[UInt8]]) throws(SystemError) {
        // A regular file: write(2) never says EAGAIN.
        for block in blocks { try FileDescriptor(rawValue: raw).writeAll(block.span.bytes) }
    }
}
