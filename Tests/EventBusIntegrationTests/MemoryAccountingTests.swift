// Memory counted as allocated (issue 20; docs/PROTOCOL-NOTES.md "Quotas
// (1.1)"): the memory of the copies of a large retained event, held partly
// written by the broker, is given back to the system once their connections
// go (an RSS ceiling with a wide margin; the figures are scripts/attack's rows
// last-copies and partial-memory). What the quotas charge for such copies is
// a pair of scenarios (EventBusScenarios/MemoryScenarios.swift, run in
// process and here as ProcessScenarioTests); the broker process's RSS can be
// read only here.
//
// Before editing: the subscribers read their socket directly (`RawReader`),
// a few hundred KB at a time, so that part of the copy is written and the
// rest still held by the broker (an AF_UNIX socket takes about 230 KB).
import EventBusScenarios
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Memory counted as allocated", .enabled(if: getuid() == 0 && findInPath("setpriv") != nil))
struct MemoryAccountingTests {
    @Test func theMemoryOfCopiesIsGivenBackOnceTheirConnectionsGo() throws {
        try withSharedBroker([]) { broker in
            let root = try broker.connect()
            try retainLarge("mem.back", by: root)
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
}
