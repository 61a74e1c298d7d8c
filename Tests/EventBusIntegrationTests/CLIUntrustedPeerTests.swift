// The CLI never trusts its socket peer (issue 11): a fake broker that puts
// terminal control sequences into an event cannot drive the terminal of
// `listen --format pretty`; `--format json` prints only frames it validated;
// `publish --lines` refuses lines that are not UTF-8 or longer than the
// frame limit, reporting their numbers, and still publishes the others.
//
// Before editing: the fake broker is a listening socket of the test's own
// that accepts one connection and writes the frames it was given.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// A "broker" that answers one connection with fixed bytes, then closes it.
final class FakeBroker: @unchecked Sendable {
    let directory: TemporaryDirectory
    let path: String
    private let listener: Int32
    private let thread: Thread

    init(sending bytes: [UInt8]) throws {
        directory = try TemporaryDirectory(prefix: "ebfake.")
        path = directory.path + "/fake.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = try unixAddress(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 4) == 0 else { throw TestFailure("fake broker: bind/listen failed, errno \(errno)") }
        listener = fd
        thread = Thread {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { write(client, $0.baseAddress! + offset, bytes.count - offset) }
                if n <= 0 { break }
                offset += n
            }
            // Let the client read everything, then hang up.
            var entry = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            var sink = [UInt8](repeating: 0, count: 4096)
            while poll(&entry, 1, 2000) > 0, read(client, &sink, sink.count) > 0 {}
            close(client)
        }
        thread.start()
    }

    deinit {
        close(listener)
        directory.remove()
    }
}

@Suite("CLI against an untrusted peer")
struct CLIUntrustedPeerTests {
    static func frames(_ lines: [String]) -> [UInt8] { Array(lines.joined(separator: "\n").utf8) + [0x0A] }

    @Test("listen --format pretty escapes control characters in every field it prints")
    func prettyEscapesControls() throws {
        let hostile = #"{"op":"event","seq":1,"type":"a\u001b]0;owned\u0007\u001b[2J","time":"x\u001b[31m","source":"s","id":"i","pid":1,"uid":0,"gid":0,"data":"\#u{9B}31m\#u{202E}\u0001 ok"}"#  // raw C1 and bidi (valid JSON), an escaped C0
        let fake = try FakeBroker(sending: Self.frames([hostile]))
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        defer { scratch.remove() }
        let run = try RunningProcess(cliProduct("eventbus"), ["--socket", fake.path, "listen", "--format", "pretty", "--count", "1"], in: scratch).wait()
        #expect(run.status == 0, "\(run)")
        let bytes = Array(run.stdout.utf8)
        #expect(!bytes.contains(0x1B) && !bytes.contains(0x07) && !bytes.contains(0x01), "raw controls reached the terminal: \(run.stdout)")
        #expect(!run.stdout.unicodeScalars.contains { (0x80...0x9F).contains($0.value) || $0.value == 0x202E }, "C1 or bidi controls: \(run.stdout)")
        #expect(run.stdout.contains(#"\x1B]0;owned\x07\x1B[2J"#) && run.stdout.contains(#"\u{9B}31m\u{202E}"#), "\(run.stdout)")
    }

    @Test("listen --format json prints only frames it has validated")
    func jsonPrintsOnlyValidFrames() throws {
        let fake = try FakeBroker(sending: Self.frames([
            #"{"op":"event","seq":1,"type":"a","data":{"#,                  // not JSON
            #"{"op":"event","seq":2,"type":"a","data":1,"data":}"#,         // not JSON either
            #"{"op":"event","type":"a","data":2}"#,                         // no seq
            #"{"op":"event","seq":3,"type":"ok","data":3}"#,
        ]))
        let scratch = try TemporaryDirectory(prefix: "ebcli.")
        defer { scratch.remove() }
        let run = try RunningProcess(cliProduct("eventbus"), ["--socket", fake.path, "listen", "--format", "json", "--count", "1"], in: scratch).wait()
        #expect(run.status == 0, "\(run)")
        #expect(run.stdoutLines == [#"{"op":"event","seq":3,"type":"ok","data":3}"#], "\(run)")
    }

    @Test("publish --lines: a line that is not UTF-8 is bad input with its number; the others are published")
    func publishLinesRefusesInvalidUTF8() throws {
        let broker = try TestBroker()
        let script = #"printf 'one\ntw\377o\nthree\n' | "$0" --socket "$1" publish --lines line.t"#
        let run = try RunningProcess("/bin/sh", ["-c", script, cliProduct("eventbus"), broker.socket], in: broker.scratch).wait()
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("line 2 is not valid UTF-8"), "\(run.stderr)")
        #expect(try broker.stats()["published"] as? Int == 2)
    }

    @Test("publish --lines caps a line at the frame limit instead of buffering it")
    func publishLinesCapsLongLines() throws {
        let broker = try TestBroker()
        let script = #"{ head -c 3000000 /dev/zero | tr '\0' x; printf '\nshort\n'; } | "$0" --socket "$1" publish --lines line.t"#
        let run = try RunningProcess("/bin/sh", ["-c", script, cliProduct("eventbus"), broker.socket], in: broker.scratch).wait(timeout: .seconds(30))
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("line 1 is longer than 1048576 bytes"), "\(run.stderr)")
        #expect(try broker.stats()["published"] as? Int == 1)
    }
}
