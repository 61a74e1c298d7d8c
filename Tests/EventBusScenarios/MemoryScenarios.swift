// Memory counted as allocated (issue 20; docs/PROTOCOL-NOTES.md "Quotas
// (1.1)"): a frame the broker is writing keeps its chunk until its last byte
// is written, so the quotas charge it whole until then. With a retained
// event of about 1 MB: `stats` and `clients` while its copy is partly read,
// and a uid's outbound quota bounding how many such copies its connections
// hold. Written once (UIDBus.swift) and run in process (EventBusServerTests,
// no root) and against eventbusd with setpriv'd clients
// (EventBusIntegrationTests, root); the broker process's RSS once the copies'
// connections go stays there (MemoryAccountingTests.swift).
//
// Before editing: the subscribers read their socket directly (`RawReader`),
// a few hundred KB at a time, so that part of the copy is written and the
// rest still held by the broker (an AF_UNIX socket takes about 230 KB, a
// socket pair of the in-process harness about as much). Uids 4650-4659.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// Bytes of `data` in the retained event of the memory scenarios.
package let largeRetainedBytes = 1_000_000

/// Retains an event of `type` with `largeRetainedBytes` of data, as `publisher`.
package func retainLarge(_ type: String, by publisher: RawClient) throws {
    try publisher.ok(#"{"op":"publish","type":"\#(type)","retain":true,"req":"big","data":"\#(String(repeating: "m", count: largeRetainedBytes))"}"#)
}

/// Reads a client's socket itself (past its line buffer, which must be
/// empty): the bytes of the frames after its last `readFrame`.
package final class RawReader {
    let client: RawClient
    package private(set) var bytes: [UInt8] = []
    private var buffer = [UInt8](repeating: 0, count: 64 << 10)

    package init(_ client: RawClient) { self.client = client }

    /// Reads until `done(bytes)` holds, no more than `limit` bytes in all.
    package func read(upTo limit: Int = .max, timeout: Duration = .seconds(30), until done: ([UInt8]) -> Bool) throws {
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
    package func read(count: Int) throws { try read(upTo: count) { $0.count >= count } }

    /// Reads until `lines` complete lines were read.
    package func readLines(_ lines: Int) throws { try read { $0.lazy.filter { $0 == 0x0A }.count >= lines } }

    /// The complete lines read so far, as text.
    package var lines: [String] { bytes.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) } }
}

package let memoryScenarios: [BusScenario] = [
    BusScenario("A retained copy being written is charged whole until its last byte is written") { bus in
        let root = try bus.connect(uid: 0)
        try retainLarge("mem.half", by: root)
        let subscriber = try bus.connect(uid: 4650)
        try subscriber.send(#"{"op":"subscribe","type":"mem.half","last":true,"req":1}"#)
        let reader = RawReader(subscriber)
        try reader.read(count: 300_000)  // its ok and about a third of the copy

        // The broker wrote at least that much of the copy, and holds all of it.
        let queued = try root.stats().int("queued_bytes") ?? 0
        #expect(queued >= largeRetainedBytes + 32, "queued_bytes \(queued) while the copy is partly written")
        let held = try root.clientList().compactMap { $0.int("queued_bytes") }
        #expect(held.contains { $0 >= largeRetainedBytes + 32 }, "clients: \(held)")

        try reader.readLines(2)
        #expect(reader.lines[0].contains(#""op":"ok""#) && reader.lines[1].hasSuffix(#","retained":true}"#))
        #expect(try root.stats().int("queued_bytes") == 0, "written completely: released")
    },

    BusScenario("A uid's outbound quota bounds the copies it holds while they are written",
                options: ["--max-outbound-per-uid", "3M"]) { bus in
        let root = try bus.connect(uid: 0)
        try retainLarge("mem.quota", by: root)
        let clients = try bus.connect(uid: 4651, count: 4)
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
        #expect(held.filter { $0 >= largeRetainedBytes }.count == 3, "queued_bytes of uid 4651: \(held)")

        // Once one copy is completely written, another fits.
        try readers[0].readLines(2)
        #expect(readers[0].lines[1].hasSuffix(#","retained":true}"#))
        try clients[3].send(#"{"op":"subscribe","type":"mem.quota","last":true,"req":"again"}"#)
        try readers[3].readLines(4)
        #expect(readers[3].lines[2].contains(#""req":"again""#) && readers[3].lines[3].hasSuffix(#","retained":true}"#))
    },
]
