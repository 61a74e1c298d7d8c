// Tier 2: the filesystem calls used for the socket path (lstat, mkdir,
// unlink, chmod), errno naming, clocks and process limits, on temp paths.
import EventBusSystem
import EventBusTestSupport
import Glibc
import Testing

@Suite("File system")
struct FileSystemTests {
    @Test func kindTellsMissingRegularDirectoryAndSocketApart() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        #expect(try FileSystem.kind(ofPath: dir.file("nothing")) == .missing)
        #expect(try FileSystem.kind(ofPath: dir.file("nothing/below")) == .missing)
        #expect(try FileSystem.kind(ofPath: dir.path) == .directory)
        let fd = open(dir.file("plain"), O_CREAT | O_WRONLY, 0o600)
        try #require(fd >= 0)
        close(fd)
        #expect(try FileSystem.kind(ofPath: dir.file("plain")) == .regular)
        // A path below a regular file is ENOTDIR: still "missing".
        #expect(try FileSystem.kind(ofPath: dir.file("plain/below")) == .missing)
        let socket = try FileDescriptor.unixStreamSocket()
        defer { socket.close() }
        try socket.bind(toPath: dir.file("s.sock"))
        #expect(try FileSystem.kind(ofPath: dir.file("s.sock")) == .socket)
        try #require(symlink(dir.file("s.sock"), dir.file("link")) == 0)
        #expect(try FileSystem.kind(ofPath: dir.file("link")) == .other, "links are not followed")
        try #require(mkfifo(dir.file("fifo"), 0o600) == 0)
        #expect(try FileSystem.kind(ofPath: dir.file("fifo")) == .other)
    }

    /// The bridge's status file (issue 23: written without Foundation): its
    /// mode, and its age from `modificationNanoseconds` on the wall clock.
    @Test func replaceWithAModeAndModificationTimeOnTheWallClock() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("status.json")
        let before = Clock.wallNanoseconds()
        let old = umask(0o022)
        defer { umask(old) }
        try DurableFile.replace(path, with: Array("{}\n".utf8).span.bytes, durable: false, mode: 0o666)
        var info = stat()
        try #require(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o644, "mode less the umask")
        let modified = try FileSystem.modificationNanoseconds(ofPath: path)
        #expect(modified >= before - 1_000_000_000 && modified <= Clock.wallNanoseconds() + 1_000_000_000)
        #expect(throws: SystemError.self) { try FileSystem.modificationNanoseconds(ofPath: dir.file("none")) }
    }

    @Test func systemThreadRunsItsBody() async {
        let ran = await withCheckedContinuation { continuation in
            SystemThread.detach { continuation.resume(returning: pthread_self()) }
        }
        #expect(ran != pthread_self(), "ran on a thread of its own")
    }

    @Test func kindNamesLstatForOtherErrors() throws {
        let long = "/" + String(repeating: "n", count: 5000)  // ENAMETOOLONG
        let error = #expect(throws: SystemError.self) { try FileSystem.kind(ofPath: long) }
        #expect(error?.call == "lstat")
        #expect(error?.errno == .nameTooLong)
    }

    @Test func createDirectoriesMakesEveryMissingParentAndIsIdempotent() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let deep = dir.file("a/b/c")
        try FileSystem.createDirectories(deep)
        #expect(try FileSystem.kind(ofPath: dir.file("a")) == .directory)
        #expect(try FileSystem.kind(ofPath: deep) == .directory)
        try FileSystem.createDirectories(deep)
        try FileSystem.createDirectories("/")
        try FileSystem.createDirectories("")
    }

    @Test func createDirectoriesBelowAFileNamesMkdir() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let fd = open(dir.file("file"), O_CREAT | O_WRONLY, 0o600)
        try #require(fd >= 0)
        close(fd)
        let error = #expect(throws: SystemError.self) { try FileSystem.createDirectories(dir.file("file/sub")) }
        #expect(error?.call == "mkdir")
        #expect(error?.errno == Errno(rawValue: ENOTDIR))
    }

    @Test func unlinkRemovesAndNamesTheCallWhenMissing() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let socket = try FileDescriptor.unixStreamSocket()
        defer { socket.close() }
        try socket.bind(toPath: dir.file("u.sock"))
        try FileSystem.unlink(dir.file("u.sock"))
        #expect(try FileSystem.kind(ofPath: dir.file("u.sock")) == .missing)
        let error = #expect(throws: SystemError.self) { try FileSystem.unlink(dir.file("u.sock")) }
        #expect(error?.call == "unlink")
        #expect(error?.errno == .noSuchFile)
    }

    @Test func chmodSetsTheModeOfASocketFile() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let socket = try FileDescriptor.unixStreamSocket()
        defer { socket.close() }
        try socket.bind(toPath: dir.file("m.sock"))
        try FileSystem.chmod(dir.file("m.sock"), mode: 0o666)
        var info = stat()
        try #require(lstat(dir.file("m.sock"), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o666)
        let error = #expect(throws: SystemError.self) { try FileSystem.chmod(dir.file("none"), mode: 0o600) }
        #expect(error?.call == "chmod")
    }

    @Test("parentDirectory splits at the last slash", arguments: [
        ("/run/eventbus/bus.sock", "/run/eventbus"), ("/bus.sock", "/"), ("bus.sock", "."), ("a/b", "a"), ("/a/b/", "/a/b"),
    ])
    func parentDirectorySplitsAtTheLastSlash(_ path: String, _ parent: String) {
        #expect(FileSystem.parentDirectory(of: path) == parent)
    }
}

@Suite("Errors, clocks, limits")
struct SystemMiscTests {
    @Test func errnoDescriptionsAreStrerrorText() {
        #expect(Errno.noSuchFile.description == "No such file or directory")
        #expect(Errno.connectionRefused.description == "Connection refused")
        #expect(Errno.wouldBlock == Errno(rawValue: EWOULDBLOCK))
        #expect(SystemError("accept4", .tooManyOpenFiles).description == "accept4: Too many open files")
    }

    @Test func errnoCurrentReadsTheThreadsErrno() {
        _ = close(-1)
        #expect(Errno.current == Errno(rawValue: EBADF))
    }

    @Test func monotonicClockDoesNotGoBackwards() {
        var last = Clock.monotonicNanoseconds()
        for _ in 0..<1000 {
            let now = Clock.monotonicNanoseconds()
            #expect(now >= last)
            last = now
        }
        #expect(last > 0)
    }

    @Test func wallClockMatchesTime() {
        let seconds = Clock.wallNanoseconds() / 1_000_000_000
        let libc = Int64(time(nil))
        #expect(abs(seconds - libc) <= 1)
    }

    @Test func openFileLimitSoftIsAtMostHard() {
        let limit = ProcessSettings.openFileLimit()
        #expect(limit.soft > 0 && limit.soft <= limit.hard)
    }
}
