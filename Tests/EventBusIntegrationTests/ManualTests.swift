// The man pages and completions under man/ and completions/ are what the
// declarations render (issue 33: `swift run eventbus-manual` rewrites them;
// this fails when one is stale), and every page under man/, generated or
// written by hand, is clean for `mandoc -T lint`.
//
// Before editing: mandoc's "referenced manual not found" (and its note about
// an outdated mandoc.db) depend on the pages installed on this machine, not
// on ours: they are the only messages allowed.
import EventBusCommandLine
import EventBusManual
import EventBusTestSupport
import Foundation
import Testing

@Suite("Man pages and completions")
struct ManualTests {
    static let root = InterfaceAgreementTests.root

    @Test("the committed man pages and completions are the ones the declarations render (run: swift run eventbus-manual)")
    func generatedFilesAreCurrent() throws {
        for file in ManualFiles.generated() {
            let committed = try? String(contentsOfFile: Self.root + "/" + file.path, encoding: .utf8)
            #expect(committed == file.text, "\(file.path) is stale: run 'swift run eventbus-manual' at the repository root")
        }
        for path in ManualFiles.handWritten {
            #expect(FileManager.default.fileExists(atPath: Self.root + "/" + path), "\(path) is missing")
        }
    }

    @Test("docs/CLI.md's list of commands is the one eventbus --help shows")
    func cliDocumentListsTheDeclaredCommands() throws {
        let text = try String(contentsOfFile: Self.root + "/docs/CLI.md", encoding: .utf8)
        let expected = "```\n" + eventbusInterface.name + " " + eventbusInterface.root.usage[0] + "\n\n" + HelpText.commandList(eventbusInterface) + "```\n"
        #expect(text.contains(expected), "docs/CLI.md should open with:\n\(expected)")
    }

    @Test("mandoc -T lint finds nothing in any page", .enabled(if: findInPath("mandoc") != nil, "needs mandoc"))
    func pagesAreLintClean() throws {
        let pages = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/man").sorted().map { Self.root + "/man/" + $0 }
        #expect(pages.count >= 6, "\(pages)")
        let run = try runProcess(findInPath("mandoc")!, ["-T", "lint"] + pages, timeout: .seconds(30))
        let messages = (run.stdout + run.stderr).split(separator: "\n").filter {
            !$0.contains("STYLE: referenced manual not found") && !$0.contains("outdated mandoc.db")
        }
        #expect(messages.isEmpty, "\(messages.joined(separator: "\n"))")
        // And each renders with its NAME section.
        for page in pages {
            let text = try runProcess(findInPath("mandoc")!, ["-T", "markdown", page], timeout: .seconds(30))
            #expect(text.status == .exited(0) && text.stdout.contains("# NAME") && text.stdout.contains("# SEE ALSO"), "\(page): \(text.stderr)")
        }
    }

    /// A completion's description says what an option does: `with --wait: give
    /// up after DURATION` is shown as "give up after DURATION", not "with --wait".
    @Test("no completion describes an option only by the option it goes with")
    func completionDescriptionsSayWhat() throws {
        for file in ManualFiles.generated() where file.path.hasPrefix("completions/fish/") || file.path.hasPrefix("completions/zsh/") {
            let bare = file.text.split(separator: "\n").filter { $0.contains("-d 'with --") || $0.contains("[with --") }
            #expect(bare.isEmpty, "\(file.path):\n\(bare.joined(separator: "\n"))")
        }
    }

    /// `.Pq Ql a , Ql b` nests (an enclosure macro takes the rest of its line,
    /// later macros included): it renders (‘a, ‘b’’) and lint does not see it.
    /// Nested quotes show as two closing (or opening) quotes in a row.
    @Test("no page renders nested quotes", .enabled(if: findInPath("mandoc") != nil, "needs mandoc"))
    func pagesHaveNoNestedQuotes() throws {
        let pages = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/man").sorted()
        for page in pages {
            let run = try runProcess(findInPath("mandoc")!, ["-T", "utf8", "-O", "width=200", Self.root + "/man/" + page], timeout: .seconds(30))
            let nested = run.stdout.split(separator: "\n").filter { $0.contains("\u{2019}\u{2019}") || $0.contains("\u{2018}\u{2018}") }
            #expect(nested.isEmpty, "man/\(page) renders nested quotes:\n\(nested.joined(separator: "\n"))")
        }
    }

    /// Prose is wrapped by hand in the declarations: a line pasted or edited
    /// without re-wrapping shows in an 80-column terminal as one broken line
    /// (`types --help` had a 95-column one, stop 43's trial). The synopsis
    /// and the examples are read in the same terminal (the bridge's synopsis
    /// ran to 96 columns, listen's examples to 122 with their comments, stop
    /// 44's trial): every line of every `--help`, indented or not, fits.
    @Test("every line of every --help fits in 80 columns")
    func everyHelpLineFitsEightyColumns() {
        for program in ManualFiles.programs {
            for command in [program.root] + program.commands {
                let long = HelpText.render(program, command: command).split(separator: "\n").filter { $0.count > 80 }
                #expect(long.isEmpty, "\(program.name) \(command.name) --help:\n\(long.joined(separator: "\n"))")
            }
        }
    }
}
