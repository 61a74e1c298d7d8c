// The few filesystem calls the broker needs for its socket path: lstat(2),
// mkdir(2), unlink(2), chmod(2). Used to create the parent directory, detect a
// stale socket and never remove anything that is not a socket.
import Glibc

/// What, if anything, is at a path (lstat(2): links are not followed).
package enum FileKind: Equatable, Sendable {
    case missing
    case socket
    case regular
    case directory
    case other
}

package enum FileSystem {
    /// lstat(2) of `path`.
    /// - Throws: `SystemError("lstat", errno)` for errors other than ENOENT/ENOTDIR.
    package static func kind(ofPath path: String) throws(SystemError) -> FileKind {
        var info = stat()
        if case .failure(let e) = systemCall(.retry, { lstat(path, &info) }) {
            if e.rawValue == ENOENT || e.rawValue == ENOTDIR { return .missing }
            throw SystemError("lstat", e)
        }
        switch info.st_mode & S_IFMT {
        case S_IFSOCK: return .socket
        case S_IFREG: return .regular
        case S_IFDIR: return .directory
        default: return .other
        }
    }

    /// `path` made absolute against the current directory (getcwd(3)), as is
    /// when it is absolute already. No `..` or link is resolved.
    /// - Throws: `SystemError("getcwd", errno)`.
    package static func absolute(_ path: String) throws(SystemError) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { throw SystemError("getcwd", Errno(rawValue: errno)) }
        let directory = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return directory == "/" ? "/" + path : directory + "/" + path
    }

    /// The permission bits of `path` (stat(2) `st_mode & 0o7777`; links followed).
    /// - Throws: `SystemError("stat", errno)`.
    package static func permissions(ofPath path: String) throws(SystemError) -> mode_t {
        var info = stat()
        if case .failure(let e) = systemCall(.retry, { stat(path, &info) }) { throw SystemError("stat", e) }
        return info.st_mode & 0o7777
    }

    /// When `path` was last modified (stat(2) `st_mtim`), in nanoseconds since
    /// the Unix epoch (the clock of `Clock.wallNanoseconds()`).
    /// - Throws: `SystemError("stat", errno)` (ENOENT, EACCES...).
    package static func modificationNanoseconds(ofPath path: String) throws(SystemError) -> Int64 {
        var info = stat()
        if case .failure(let e) = systemCall(.retry, { stat(path, &info) }) { throw SystemError("stat", e) }
        return Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
    }

    /// Creates `path` and missing parents with exactly `mode` (like
    /// `mkdir -p -m`, whatever the umask); an existing directory is left as it is.
    /// - Throws: `SystemError("mkdir", errno)`.
    package static func createDirectories(_ path: String, mode: mode_t = 0o755) throws(SystemError) {
        if path.isEmpty || path == "/" { return }
        if try kind(ofPath: path) == .directory { return }
        if let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")), slash != path.utf8.startIndex {
            try createDirectories(String(path[..<slash]), mode: mode)
        }
        switch systemCall(.retry, { mkdir(path, mode) }) {
        case .success:
            // mkdir(2) applies the umask; the directory must get `mode` exactly.
            try chmod(path, mode: mode)
        case .failure(let e) where e == .fileExists:
            return
        case .failure(let e):
            throw SystemError("mkdir", e)
        }
    }

    /// unlink(2).
    /// - Throws: `SystemError("unlink", errno)`.
    package static func unlink(_ path: String) throws(SystemError) {
        _ = try checkedCall("unlink") { Glibc.unlink(path) }
    }

    /// chmod(2).
    /// - Throws: `SystemError("chmod", errno)`.
    package static func chmod(_ path: String, mode: mode_t) throws(SystemError) {
        _ = try checkedCall("chmod") { Glibc.chmod(path, mode) }
    }

    /// The directory part of a path (`/a/b` for `/a/b/c`, `.` for `c`).
    package static func parentDirectory(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        if slash == path.utf8.startIndex { return "/" }
        return String(path[..<slash])
    }
}
