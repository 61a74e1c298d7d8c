// Tier 2: the wrappers the access policy needs, against the real kernel and
// system: SO_PEERGROUPS, getsockname(2) of a bound socket, getpwnam_r(3) /
// getgrnam_r(3), reading files and directories, /proc/self/exe, kill(2).
import EventBusSystem
import EventBusTestSupport
import Glibc
import Testing

@Suite("Policy inputs")
struct PolicyInputTests {
    @Test func peerGroupsOfASocketpairAreOurSupplementaryGroups() throws {
        let (a, b) = try makeSocketPair()
        defer { a.close(); b.close() }
        let count = getgroups(0, nil)
        var ours = [gid_t](repeating: 0, count: Int(count))
        #expect(getgroups(count, &ours) == count)
        #expect(Set(try a.peerGroups()) == Set(ours))
        #expect(Set(try b.peerGroups()) == Set(ours))
    }

    @Test func peerGroupsFailOnANonSocketAndNameTheCall() throws {
        var fds: [Int32] = [-1, -1]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let error = #expect(throws: SystemError.self) { try FileDescriptor(rawValue: fds[0]).peerGroups() }
        #expect(error?.call == "getsockopt(SO_PEERGROUPS)" && error?.errno == .notSocket)
    }

    @Test func localPathIsTheBoundPathAndNilWhenUnbound() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let listener = try FileDescriptor.unixStreamSocket()
        defer { listener.close() }
        #expect(try listener.localPath() == nil)
        try listener.bind(toPath: directory.file("s"))
        #expect(try listener.localPath() == directory.file("s"))
    }

    @Test func namesResolveThroughTheUserDatabase() {
        #expect(UserDatabase.uid(ofUser: "root") == 0)
        #expect(UserDatabase.gid(ofGroup: "root") == 0)
        #expect(UserDatabase.uid(ofUser: "no-such-user-eventbus-test") == nil)
        #expect(UserDatabase.gid(ofGroup: "no-such-group-eventbus-test") == nil)
    }

    @Test func filesAndDirectoriesAreReadWholeAndSorted() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for name in ["b.conf", "a.conf", "B.conf"] {
            let fd = open(directory.file(name), O_WRONLY | O_CREAT, 0o644)
            _ = write(fd, name, name.utf8.count)
            close(fd)
        }
        #expect(try FileSystem.directoryEntries(directory.path) == ["B.conf", "a.conf", "b.conf"])
        #expect(try FileSystem.directoryEntries(directory.file("missing")) == nil)
        #expect(try FileSystem.readFile(directory.file("a.conf")) == Array("a.conf".utf8))
        let missing = #expect(throws: SystemError.self) { try FileSystem.readFile(directory.file("missing")) }
        #expect(missing?.call == "open" && missing?.errno == .noSuchFile)
        let big = #expect(throws: SystemError.self) { try FileSystem.readFile(directory.file("a.conf"), maxBytes: 3) }
        #expect(big?.errno == Errno(rawValue: EFBIG))
    }

    @Test func executablePathIsAnAbsoluteExistingFile() throws {
        let path = try #require(FileSystem.executablePath())
        #expect(path.hasPrefix("/") && access(path, X_OK) == 0, "\(path)")
    }

    @Test func signalsReachOurselvesAndNameAMissingProcess() throws {
        try ProcessSignals.send(0, to: getpid())
        let error = #expect(throws: SystemError.self) { try ProcessSignals.send(0, to: Int32.max) }
        #expect(error?.call == "kill" && error?.errno == Errno(rawValue: ESRCH))
    }
}
