// The Swift example of README.md (and docs/CLIENT.md) is the file
// Examples/ReadmeExample/main.swift, compiled as `readme-example` (the code
// blocks are that file byte for byte: DocSnippetTests): the program must fail
// with the library's one-line message when no broker runs (not a crash) and
// work when one does.
import EventBus
import EventBusTestSupport
import Foundation
import Testing

// A hang guard. The limit counts from when a test is started, and while
// synchronous tests hold the cooperative pool (2 threads on 2 CPUs) a started
// test can wait minutes for a thread (250 s in a CI run under load).
@Suite(.timeLimit(.minutes(10)))
struct ReadmeExampleTests {
    @Test func withNoBrokerItExitsOneWithTheLibrarysMessage() async throws {
        let directory = try TemporaryDirectory(prefix: "ebc-")
        let socket = directory.file("absent.sock")
        let run = try await SpawnedProcess(productsDirectory() + "/readme-example", [], in: directory, environment: ["EVENTBUS_SOCKET": socket])
            .wait(timeout: .seconds(10))
        #expect(run.status == 1, "not a crash (a top-level try would trap: signal 4, exit 132): \(run.status)")
        #expect(run.stderr == "price-view: event bus unavailable at \(socket): connect: No such file or directory (is eventbusd running? start it with 'eventbusd --socket \(socket)')\n")
    }

    /// Issue 34: it subscribes before it publishes, so it hears its own
    /// change, says what it does, and hears the changes of other processes,
    /// its view too.
    @Test func withABrokerItPublishesTheChangeAndPrintsWhatItHears() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let changes = bus.events(of: CurrencyChanged.self)
        try await bus.ping()
        // stdbuf: print's stdout is a file here, line-buffered as on a terminal.
        let example = try SpawnedProcess("/usr/bin/stdbuf", ["-oL", productsDirectory() + "/readme-example"], in: broker.directory,
                                         environment: ["EVENTBUS_SOCKET": broker.socketPath])
        var iterator = changes.makeAsyncIterator()
        let change = try await iterator.next()
        #expect(change?.event.code == "EUR")
        #expect(change?.metadata.pid == example.pid, "stdbuf execs the example in its own process")
        #expect(await eventually { example.stdoutSoFar().contains("price-view: currency.changed to EUR by this process") })
        try await bus.publish(CurrencyChanged(code: "GBP"))
        #expect(await eventually {
            let out = example.stdoutSoFar()
            return out.contains("price-view: the view shows prices in GBP") && out.contains("price-view: currency.changed to GBP by pid \(getpid())")
        }, "stdout: \(example.stdoutSoFar())")
        let output = try await example.stop(SIGTERM, timeout: .seconds(5))
        #expect(output.stdout.hasPrefix("price-view: connected to \(broker.socketPath)\nprice-view: published EUR; waiting for changes (Ctrl-C to stop)\n"), "\(output.stdout)")
        #expect(!output.stdout.contains("shows prices in EUR"), "the view published EUR itself (from: view): not told")
        bus.close()
        await broker.stop()
    }
}
