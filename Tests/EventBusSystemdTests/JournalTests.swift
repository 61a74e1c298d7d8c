// JournalLogSink and stderrIsJournal: field-name rules in-process, the real datagram
// sd_journal_sendv sends (captured in a private mount namespace), and JOURNAL_STREAM
// matching in a child whose stderr the test chose.
@testable import EventBusSystemd
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite(.timeLimit(.minutes(1)))
struct JournalTests {
    @Test(arguments: [
        ("EVENTBUS_CONN", "EVENTBUS_CONN"),
        ("conn id", "CONN_ID"),
        ("_PID", "PID"),
        ("__9x", "X"),
        ("2fa", "FA"),
        ("élan", "LAN"),
        ("___", nil),
        ("", nil),
        (String(repeating: "A", count: 70), String(repeating: "A", count: 64)),
    ] as [(String, String?)])
    func fieldNamesFollowTheJournalRules(key: String, expected: String?) {
        #expect(journalFieldName(key) == expected)
    }

    @Test func entryHasPriorityMessageIdentifierThenFields() {
        let entry = journalEntry(identifier: "eventbusd", level: .notice, message: "dropped events",
                                 fields: [("EVENTBUS_CONN", "7"), ("___", "gone"), ("uid", "1000")])
        #expect(entry == ["PRIORITY=5", "MESSAGE=dropped events", "SYSLOG_IDENTIFIER=eventbusd",
                          "EVENTBUS_CONN=7", "UID=1000"])
    }

    @Test(arguments: [
        ("64769:1234", true),
        ("64769:1235", false),
        ("64770:1234", false),
        ("64769:1234:1", false),
        ("64769", false),
        (":1234", false),
        ("", false),
        (nil, false),
    ] as [(String?, Bool)])
    func journalStreamMatchesOnlyTheExactDeviceAndInode(value: String?, expected: Bool) {
        #expect(journalStreamMatches(value, device: 64769, inode: 1234) == expected)
    }

    @Test(arguments: [true, false])
    func stderrIsJournalComparesJournalStreamWithFd2(matching: Bool) async throws {
        let dir = try makeTempDirectory()
        let stderrPath = dir.file("stderr")
        try createEmptyFile(stderrPath)
        var status = stat()
        #expect(stat(stderrPath, &status) == 0)
        let inode = UInt64(status.st_ino) + (matching ? 0 : 1)
        let child = try spawn(probePath, ["stderr-is-journal"], environment: ["JOURNAL_STREAM": "\(status.st_dev):\(inode)"],
                              stderrTo: stderrPath, in: dir)
        let finished = try await child.wait()
        #expect(finished.stdout == "\(matching)\n")
    }

    @Test func stderrIsNotJournalWithoutJournalStream() async throws {
        let dir = try makeTempDirectory()
        #expect(try await run(probePath, ["stderr-is-journal"], in: dir).stdout == "false\n")
    }

    /// Runs the probe in a private mount namespace with a tmpfs on /run, so it can bind
    /// /run/systemd/journal/socket itself and catch what `sd_journal_sendv` sends.
    @Test(.enabled(if: canUnshareMount, "needs root and a working `unshare --mount`"))
    func sinkSendsOneStructuredEntryToTheJournalSocket() async throws {
        let dir = try makeTempDirectory()
        let script = "mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal && exec \"$0\" \"$@\""
        let finished = try await run("unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script,
                                                      probePath, "journal-capture", "line one\nline two",
                                                      "EVENTBUS_CONN=7", "conn uid=1000", "_TRUSTED=x"], in: dir)
        #expect(finished.status == 0, "stderr: \(finished.stderr)")
        let fields = try parseNativeJournal(Array(finished.stdout.utf8))
        #expect(fields.map(\.0) == ["PRIORITY", "MESSAGE", "SYSLOG_IDENTIFIER", "EVENTBUS_CONN", "CONN_UID", "TRUSTED"])
        #expect(fields.map(\.1) == ["5", "line one\nline two", "eventbus-systemd-probe", "7", "1000", "x"])
    }
}

/// eventbusd's start-up failure under systemd, run by the probe in a private mount
/// namespace that catches what reaches /run/systemd/journal/socket.
@Suite(.timeLimit(.minutes(1)))
struct StartupFailureJournalTests {
    /// Runs `eventbusd --no-such-option` (a start-up failure: exit 64) with `environment`
    /// and stderr to a file. Returns its status, the datagrams sent to the journal and stderr.
    private func failingBroker(environment: (_ stderrPath: String) throws -> [String: String]) async throws -> (status: EventBusTestSupport.ExitStatus, journal: [UInt8], stderr: String) {
        let dir = try makeTempDirectory()
        let stderrPath = dir.file("stderr")
        try createEmptyFile(stderrPath)
        let script = "mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal && exec \"$0\" \"$@\""
        let child = try spawn("unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script,
                                          probePath, "journal-capture-run", productsDirectory() + "/eventbusd", "--no-such-option"],
                              environment: try environment(stderrPath), stderrTo: stderrPath, in: dir)
        let finished = try await child.wait()
        return (finished.status, Array(finished.stdout.utf8), try String(contentsOfFile: stderrPath, encoding: .utf8))
    }

    @Test(.enabled(if: canUnshareMount, "needs root and a working `unshare --mount`"))
    func withStderrElsewhereTheFailureIsAJournalEntryAndAStderrLine() async throws {
        let outcome = try await failingBroker { _ in ["INVOCATION_ID": "0123456789abcdef0123456789abcdef"] }
        #expect(outcome.status == 64)
        let fields = try parseNativeJournal(outcome.journal)
        #expect(fields.map(\.0) == ["PRIORITY", "MESSAGE", "SYSLOG_IDENTIFIER"])
        let message = try #require(fields.first { $0.0 == "MESSAGE" }?.1)
        #expect(message.contains("--no-such-option"))
        #expect(fields.first?.1 == "3")
        #expect(fields.last?.1 == "eventbusd")
        #expect(outcome.stderr == "eventbusd: error: \(message)\n")
    }

    @Test(.enabled(if: canUnshareMount, "needs root and a working `unshare --mount`"))
    func withStderrOnTheJournalTheFailureIsOneLineWithItsPriorityPrefix() async throws {
        let outcome = try await failingBroker { stderrPath in
            var status = stat()
            guard stat(stderrPath, &status) == 0 else { throw TestFailure("stat \(stderrPath) failed") }
            return ["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino)"]
        }
        #expect(outcome.status == 64)
        #expect(outcome.journal.isEmpty, "the stream line is enough: \(outcome.journal.count) bytes sent natively")
        #expect(outcome.stderr.hasPrefix("<3>eventbusd: error: "), "\(outcome.stderr)")
        #expect(outcome.stderr.contains("--no-such-option"))
    }

    @Test func notUnderSystemdTheFailureIsThePlainStderrLine() async throws {
        let dir = try makeTempDirectory()
        let finished = try await run(productsDirectory() + "/eventbusd", ["--no-such-option"], in: dir)
        #expect(finished.status == 64)
        #expect(finished.stderr.hasPrefix("eventbusd: error: "), "\(finished.stderr)")
    }
}

/// Whether this process may make a private mount namespace (root, and not forbidden by a container).
let canUnshareMount: Bool = {
    guard getuid() == 0, findInPath("unshare") != nil else { return false }
    guard let dir = try? makeTempDirectory(),
          let child = try? spawn("unshare", ["--mount", "--propagation", "private", "true"], in: dir) else { return false }
    return (try? child.waitBlocking())?.status == 0
}()

/// Parses journald's native protocol (`systemd-journald.service(8)`, "Native Protocol"):
/// `NAME=value\n`, or for values with a newline `NAME\n` + 64-bit little-endian length + value + `\n`.
func parseNativeJournal(_ bytes: [UInt8]) throws -> [(String, String)] {
    var fields: [(String, String)] = []
    var index = 0
    while index < bytes.count {
        guard let end = bytes[index...].firstIndex(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "=") }) else {
            throw TestFailure("unterminated field at \(index)")
        }
        let name = String(decoding: bytes[index..<end], as: UTF8.self)
        if bytes[end] == UInt8(ascii: "=") {
            guard let newline = bytes[end...].firstIndex(of: UInt8(ascii: "\n")) else { throw TestFailure("no LF after \(name)") }
            fields.append((name, String(decoding: bytes[(end + 1)..<newline], as: UTF8.self)))
            index = newline + 1
        } else {
            guard end + 9 <= bytes.count else { throw TestFailure("short length after \(name)") }
            let length = bytes[(end + 1)..<(end + 9)].reversed().reduce(0) { $0 << 8 | Int($1) }
            let start = end + 9
            guard start + length < bytes.count, bytes[start + length] == UInt8(ascii: "\n") else { throw TestFailure("bad binary field \(name)") }
            fields.append((name, String(decoding: bytes[start..<(start + length)], as: UTF8.self)))
            index = start + length + 1
        }
    }
    return fields
}
