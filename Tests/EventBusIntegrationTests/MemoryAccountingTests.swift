// Memory counted as allocated (issue 20; docs/PROTOCOL-NOTES.md "Quotas
// (1.1)"): a frame the broker is writing keeps its chunk until its last byte
// is written, so the quotas charge it whole until then. Against the real
// broker, with a retained event of about 1 MB: `stats` and `clients` while
// its copy is partly read, and a uid's outbound quota bounding how many such
// copies its connections hold, and the memory of such copies given back to
// the system once their connections go (an RSS ceiling with a wide margin;
// the figures are scripts/attack's rows last-copies and partial-memory).
//
// Before editing: the subscribers read their socket directly (`RawReader`),
// a few hundred KB at a time, so that part of the copy is written and the
// rest still held by the broker (an AF_UNIX socket takes about 230 KB).
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Memory counted as allocated", .enabled(if: getuid() == 0 && findInPath("setpriv") != nil))
struct MemoryAccountingTests {
    /// Bytes of `data` in the retained event.
    static let dataBytes = 1_000_000

    /// Retains an event of `type` with `dataBytes` of data, as `publisher`.
    static func retainLarge(_ type: String, by publisher: RawClient) throws {
        try publisher.ok(#"{"op":"publish","type":"\#(type)","retain":true,"req":"big","data":"\#(String(repeating: "m", count: dataBytes))"}"#)
    }

    /// Reads a client's socket itself (past its line buffer, which must be
    /// empty): the bytes of the frames after its last `readFrame`.
    final class RawReader {
        let client: RawClient
        var bytes: [UInt8] = []
        private var buffer = [UInt8](repeating: 0, count: 64 << 10)

        init(_ client: RawClient) { self.client = client }

        /// Reads until `done(bytes)` holds, no more than `limit` bytes in all.
        func read(upTo limit: Int = .max, timeout: Duration = .seconds(30), until done: ([UInt8]) -> Bool) throws {
            let deadline = ContinuousClock.now + timeout
            while !done(bytes) && bytes.count < limit {
                guard ContinuousClock.now < deadline else { throw TestFailure("read \(bytes.count) bytes, then nothing for \(timeout)") }
                var entry = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 50)
                let n = recv(client.fd, &buffer, min(buffer.count, limit - bytes.count), Int32(MSG_DONTWAIT))
                if n > 0 { bytes += buffer[0..<n] } else if n == 0 { throw TestFailure("EOF after \(bytes.count) bytes") }
            }
        }

        /// Reads until `count` bytes were read in all.
        func read(count: Int) throws { try read(upTo: count) { $0.count >= count } }

        /// Reads until `lines` complete lines were read.
        func readLines(_ lines: Int) throws { try read { $0.lazy.filter { $0 == 0x0A }.count >= lines } }

        /// The complete lines read so far, as text.
        var lines: [String] { bytes.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) } }
    }

    @Test func aRetainedCopyBeingWrittenIsChargedWholeUntilItsLastByteIsWritten() throws {
        try withSharedBroker([]) { broker in
            let root = try broker.connect()
            try Self.retainLarge("mem.half", by: root)
            let subscriber = try broker.connect()
            try subscriber.send(#"{"op":"subscribe","type":"mem.half","last":true,"req":1}"#)
            let reader = RawReader(subscriber)
            try reader.read(count: 300_000)  // its ok and about a third of the copy

            // The broker wrote at least that much of the copy, and holds all of it.
            let queued = try root.stats().int("queued_bytes") ?? 0
            #expect(queued >= Self.dataBytes + 32, "queued_bytes \(queued) while the copy is partly written")
            let held = try root.clientList().compactMap { $0.int("queued_bytes") }
            #expect(held.contains { $0 >= Self.dataBytes + 32 }, "clients: \(held)")

            try reader.readLines(2)
            #expect(reader.lines[0].contains(#""op":"ok""#) && reader.lines[1].hasSuffix(#","retained":true}"#))
            #expect(try root.stats().int("queued_bytes") == 0, "written completely: released")
        }
    }

    @Test func theMemoryOfCopiesIsGivenBackOnceTheirConnectionsGo() throws {
        try withSharedBroker([]) { broker in
            let root = try broker.connect()
            try Self.retainLarge("mem.back", by: root)
            let before = try broker.rssKiB()
            var clients: [RawClient] = []
            for i in 0..<16 {
                let client = try broker.connect()
                try client.send(#"{"op":"subscribe","type":"mem.back","last":true,"req":\#(i)}"#)
                try RawReader(client).read(count: 300_000)  // the copy stays with the broker, partly written
                clients.append(client)
            }
            let held = try broker.rssKiB()
            #expect(held - before > 12 << 10, "16 copies of 1 MB held: RSS \(before) -> \(held) KiB")
            for client in clients { client.close() }
            try waitUntil("the broker's RSS is back within 4 MiB of \(before) KiB", timeout: .seconds(20)) {
                try root.stats().int("connections") == 1 && broker.rssKiB() - before < 4 << 10
            }
        }
    }

    @Test func aUIDsOutboundQuotaBoundsTheCopiesItHoldsWhileTheyAreWritten() throws {
        try withSharedBroker(["--max-outbound-per-uid", "3M"]) { broker in
            let root = try broker.connect()
            try Self.retainLarge("mem.quota", by: root)
            let clients = try connectAs(uid: 4651, path: broker.socketPath, count: 4)
            var readers: [RawReader] = []
            var events: [Bool] = []
            for (i, client) in clients.enumerated() {
                try client.ok(#"{"op":"hello","overflow":"drop-new","req":"h"}"#)
                try client.send(#"{"op":"subscribe","type":"mem.quota","last":true,"req":\#(i)}"#)
                let reader = RawReader(client)
                // The ok, then the start of the copy or a dropped notice.
                try reader.read { bytes in
                    guard let lf = bytes.firstIndex(of: 0x0A), bytes.count >= lf + 20 else { return false }
                    return bytes[(lf + 1)...].starts(with: Array(#"{"op":"event""#.utf8)) || bytes.dropFirst(lf + 1).contains(0x0A)
                }
                let gotEvent = reader.lines.count == 1
                if gotEvent { try reader.read(count: 300_000) }  // partly read: the rest stays with the broker
                events.append(gotEvent)
                readers.append(reader)
            }
            // Three copies of about 1 MB fit in 3 MiB, charged whole while
            // they are written; the fourth is dropped (drop-new).
            #expect(events == [true, true, true, false], "copies: \(events)")
            #expect(readers[3].lines.count == 2 && readers[3].lines[1].contains(#""op":"dropped","count":1"#), "\(readers[3].lines.map { $0.prefix(80) })")
            let held = try root.clientList().filter { $0.int("uid") == 4651 }.compactMap { $0.int("queued_bytes") }
            #expect(held.filter { $0 >= Self.dataBytes }.count == 3, "queued_bytes of uid 4651: \(held)")

            // Once one copy is completely written, another fits.
            try readers[0].readLines(2)
            #expect(readers[0].lines[1].hasSuffix(#","retained":true}"#))
            try clients[3].send(#"{"op":"subscribe","type":"mem.quota","last":true,"req":"again"}"#)
            try readers[3].readLines(4)
            #expect(readers[3].lines[2].contains(#""req":"again""#) && readers[3].lines[3].hasSuffix(#","retained":true}"#))
        }
    }
}
