// Every ```swift block of README.md and docs/CLIENT.md is compiled (issue
// 34): the line before each block names the file it is, as
// `<!-- snippet: PATH -->`, and the block must be that file's shown lines.
// A snippet file in Tests/EventBusClientTests/Snippets wraps its block in
// the declarations it needs, between `// snippet.hide` and `// snippet.show`
// lines (Swift-DocC's snippet markers), so it compiles with this target; a
// file without markers (an example program, the app's Package.swift) is
// shown whole.
import EventBusTestSupport
import Foundation
import Testing

/// The repository's root, from this file's path.
private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// A ```swift block of a Markdown file and the snippet it names.
struct DocBlock: CustomStringConvertible, Sendable {
    var document: String
    var line: Int
    var snippet: String?
    var code: String

    var description: String { "\(document):\(line)" }
}

/// Every ```swift block of `document`, with the snippet named on the line before it.
func swiftBlocks(in document: String) throws -> [DocBlock] {
    let lines = try String(contentsOfFile: root + "/" + document, encoding: .utf8).components(separatedBy: "\n")
    var blocks: [DocBlock] = []
    var index = 0
    while index < lines.count {
        guard lines[index] == "```swift" else { index += 1; continue }
        let previous = index > 0 ? lines[index - 1] : ""
        var snippet: String?
        if previous.hasPrefix("<!-- snippet: "), previous.hasSuffix(" -->") {
            snippet = String(previous.dropFirst("<!-- snippet: ".count).dropLast(" -->".count))
        }
        var end = index + 1
        while end < lines.count, lines[end] != "```" { end += 1 }
        blocks.append(DocBlock(document: document, line: index + 1, snippet: snippet, code: lines[(index + 1)..<end].joined(separator: "\n") + "\n"))
        index = end + 1
    }
    return blocks
}

/// The lines of `text` outside `// snippet.hide` ... `// snippet.show` (the whole text without markers).
func shownLines(of text: String) -> String {
    var shown: [Substring] = []
    var hidden = false
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        switch line.trimmingCharacters(in: .whitespaces) {
        case "// snippet.hide": hidden = true
        case "// snippet.show": hidden = false
        default: if !hidden { shown.append(line) }
        }
    }
    var result = shown.joined(separator: "\n")
    while result.hasSuffix("\n\n") { result.removeLast() }
    return result
}

/// `text` without its trailing newlines.
func trimmed(_ text: String) -> Substring {
    var text = Substring(text)
    while text.hasSuffix("\n") { text.removeLast() }
    return text
}

@Suite struct DocSnippetTests {
    @Test(arguments: ["README.md", "docs/CLIENT.md"])
    func everySwiftBlockIsACompiledSnippet(document: String) throws {
        let blocks = try swiftBlocks(in: document)
        #expect(!blocks.isEmpty)
        for block in blocks {
            guard let snippet = block.snippet else {
                Issue.record("\(block): a ```swift block without <!-- snippet: PATH --> on the line before it")
                continue
            }
            let text = try String(contentsOfFile: root + "/" + snippet, encoding: .utf8)
            let documented = trimmed(block.code).split(separator: "\n", omittingEmptySubsequences: false)
            let compiled = trimmed(shownLines(of: text)).split(separator: "\n", omittingEmptySubsequences: false)
            if documented != compiled {
                let first = (0..<min(documented.count, compiled.count)).first { documented[$0] != compiled[$0] } ?? min(documented.count, compiled.count)
                let line = { (lines: [Substring]) in first < lines.count ? String(lines[first]) : "(end)" }
                Issue.record("\(block): copy the shown lines of \(snippet) into the block; line \(first + 1) differs: \(line(documented)) / \(line(compiled))")
            }
        }
    }

    /// The README's Package.swift of an app that depends on this package by
    /// path: SwiftPM reads it and finds the product.
    @Test func theAppPackageManifestIsValid() async throws {
        let directory = try TemporaryDirectory(prefix: "ebc-app-")
        try FileManager.default.createSymbolicLink(atPath: directory.file("eventbus"), withDestinationPath: root)
        try FileManager.default.createDirectory(atPath: directory.file("app/Sources/app"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: root + "/Examples/AppPackage/Package.swift", toPath: directory.file("app/Package.swift"))
        try "import EventBus\n".write(toFile: directory.file("app/Sources/app/main.swift"), atomically: true, encoding: .utf8)
        let dump = try await SpawnedProcess("/usr/bin/env", ["swift", "package", "--package-path", directory.file("app"), "dump-package"], in: directory)
            .wait(timeout: .seconds(120))  // awaits: SwiftPM compiling the manifest must not hold a pool thread
        #expect(dump.status == .exited(0), "\(dump.stderr)")
        #expect(dump.stdout.contains("\"EventBus\""), "the product is named: \(dump.stdout.prefix(400))")
    }
}
