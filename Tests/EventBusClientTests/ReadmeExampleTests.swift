// The Swift example of README.md (and docs/CLIENT.md) is the file
// Examples/ReadmeExample/main.swift, compiled as `readme-example`: the code
// blocks must be that file byte for byte, and the program must fail with the
// library's one-line message when no broker runs (not a crash) and work when
// one does.
import EventBus
import EventBusTestSupport
import Foundation
import Testing

/// The repository's root, from this file's path.
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// The first ```swift block after the line `heading` in the Markdown file `path`.
private func swiftBlock(in path: String, after heading: String) throws -> String {
    let text = try String(contentsOfFile: repositoryRoot + "/" + path, encoding: .utf8)
    guard let section = text.range(of: "\n" + heading + "\n"),
          let open = text.range(of: "```swift\n", range: section.upperBound..<text.endIndex),
          let close = text.range(of: "\n```\n", range: open.upperBound..<text.endIndex) else {
        throw TestFailure("no ```swift block after \(heading) in \(path)")
    }
    return String(text[open.upperBound..<close.lowerBound]) + "\n"
}

@Suite(.timeLimit(.minutes(1)))
struct ReadmeExampleTests {
    @Test(arguments: [("README.md", "## The Swift library"), ("docs/CLIENT.md", "## In a dozen lines")])
    func theDocumentedExampleIsTheCompiledExample(document: String, heading: String) throws {
        let example = try String(contentsOfFile: repositoryRoot + "/Examples/ReadmeExample/main.swift", encoding: .utf8)
        #expect(try swiftBlock(in: document, after: heading) == example, "copy Examples/ReadmeExample/main.swift into \(document)")
    }

    @Test func withNoBrokerItExitsOneWithTheLibrarysMessage() throws {
        let directory = try TemporaryDirectory(prefix: "ebc-")
        let socket = directory.file("absent.sock")
        let run = try SpawnedProcess(productsDirectory() + "/readme-example", [], in: directory, environment: ["EVENTBUS_SOCKET": socket])
            .waitBlocking(timeout: .seconds(10))
        #expect(run.status == 1, "not a crash (a top-level try would trap: signal 4, exit 132): \(run.status)")
        #expect(run.stderr == "price-view: event bus unavailable at \(socket): connect: No such file or directory\n")
    }

    @Test func withABrokerItPublishesTheChange() async throws {
        let broker = try await BrokerProcess()
        let bus = try await EventBus.connect(socketPath: broker.socketPath)
        let changes = bus.events(of: CurrencyChanged.self)
        try await bus.ping()
        let example = try SpawnedProcess(productsDirectory() + "/readme-example", [], in: broker.directory,
                                         environment: ["EVENTBUS_SOCKET": broker.socketPath])
        var iterator = changes.makeAsyncIterator()
        let change = try await iterator.next()
        #expect(change?.event.code == "EUR")
        #expect(change?.metadata.pid == example.pid)
        _ = try? await example.stop(SIGTERM, timeout: .seconds(5))
        bus.close()
        await broker.stop()
    }
}
