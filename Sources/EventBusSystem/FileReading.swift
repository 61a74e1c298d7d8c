// Reading configuration files: a whole small file (open(2), read(2)), the
// names in a directory (opendir(3), readdir(3)), and where the running
// executable lives (readlink(2) of /proc/self/exe), for the broker's policy
// files (docs/POLICY.md "Files").
//
// Before editing: these are for start-up and SIGHUP, not for the event loop's
// hot path: reads block (regular files), and sizes are bounded so a runaway
// file cannot exhaust memory.
import CEventBusShims
import Glibc

extension FileSystem {
    /// Reads the whole regular file at `path` (open(2) with O_RDONLY|O_CLOEXEC,
    /// read(2) until EOF, close(2)).
    /// - Parameter maxBytes: larger files are refused (default 16 MiB).
    /// - Throws: `SystemError("open", errno)` (ENOENT, EACCES...),
    ///   `SystemError("read", errno)`, or `SystemError("read", EFBIG)` past `maxBytes`.
    package static func readFile(_ path: String, maxBytes: Int = 16 << 20) throws(SystemError) -> [UInt8] {
        let raw = try checkedCall("open") { Glibc.open(path, O_RDONLY | O_CLOEXEC) }
        let fd = FileDescriptor(rawValue: raw)
        defer { fd.close() }
        var bytes: [UInt8] = []
        while true {
            // A regular file: read(2) never says EAGAIN. One byte past the
            // limit is enough to refuse the file.
            guard case .complete(let n) = try fd.read(appendingTo: &bytes, limit: min(64 * 1024, maxBytes + 1 - bytes.count)) else { continue }
            if n == 0 { return bytes }
            guard bytes.count <= maxBytes else { throw SystemError("read", Errno(rawValue: EFBIG)) }
        }
    }

    /// The names in directory `path` (opendir(3), readdir(3), closedir(3)),
    /// without `.` and `..`, sorted bytewise (the "C" locale's lexical order,
    /// as systemd and D-Bus order drop-in files).
    /// - Returns: nil when `path` does not exist (ENOENT).
    /// - Throws: `SystemError("opendir", errno)` for other failures (ENOTDIR, EACCES).
    package static func directoryEntries(_ path: String) throws(SystemError) -> [String]? {
        guard let directory = opendir(path) else {
            let e = Errno.current
            if e == .noSuchFile { return nil }
            throw SystemError("opendir", e)
        }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = String(cString: eventbus_dirent_name(entry))
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    /// The absolute path of the running executable (readlink(2) of
    /// /proc/self/exe, proc(5)): symlinks resolved.
    /// - Returns: nil when /proc is not mounted or the link cannot be read.
    package static func executablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let capacity = buffer.count - 1
        guard case .success(let n) = systemCall(.retry, { readlink("/proc/self/exe", &buffer, capacity) }), n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
