// The shell completions (completions/, generated from the declarations):
// bash driven as bash drives it (COMP_WORDS, COMP_CWORD, the function `complete
// -p` names, COMPREPLY), with event types and patterns from a real broker and
// nothing (and no noise) without one; fish through `complete -C`; zsh loaded
// by compinit, which registers it for the three programs.
//
// Before editing: the scripts call `eventbus` by name: the tests put the
// built products first in PATH.
import EventBusCommandLine
import EventBusTestSupport
import Foundation
import Testing

@Suite("Shell completions")
struct CompletionTests {
    static let root = InterfaceAgreementTests.root
    static var path: String { productsDirectory() + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") }
    /// The environment of a completion: the built programs first in PATH, and
    /// time enough for the broker's answer on a loaded machine.
    static var environment: [String: String?] { ["PATH": path, "EVENTBUS_COMPLETION_TIMEOUT": "30"] }

    /// What the bash completion of `program` offers for `words` (the last one being completed).
    static func bash(_ program: String, _ words: [String]) throws -> (offers: [String], stderr: String) {
        let script = """
        source "\(root)/completions/bash/\(program)"
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
        $(complete -p \(program) | sed -n 's/.*-F \\([^ ]*\\) .*/\\1/p')
        printf '%s\\n' "${COMPREPLY[@]}"
        """
        let run = try runProcess("/bin/bash", ["-c", script, "bash"] + words, environment: environment, timeout: .seconds(60))
        #expect(run.status == .exited(0), "\(words): \(run.stderr)")
        return (run.stdout.split(separator: "\n").map(String.init).sorted(), run.stderr)
    }

    @Test("bash: complete -p names the function for each program")
    func bashRegisters() throws {
        for program in ["eventbus", "eventbusd", "eventbus-bridge"] {
            let run = try runProcess("/bin/bash", ["-c", "source \(Self.root)/completions/bash/\(program) && complete -p \(program)"], timeout: .seconds(10))
            #expect(run.stdout == "complete -F _\(program.replacingOccurrences(of: "-", with: "_")) \(program)\n", "\(run)")
        }
    }

    @Test("bash: commands, options, option values, operands")
    func bashCompletesTheDeclaration() throws {
        #expect(try Self.bash("eventbus", ["eventbus", ""]).offers == eventbusInterface.commands.map(\.name).sorted())
        #expect(eventbusInterface.commands.count >= 11)
        #expect(try Self.bash("eventbus", ["eventbus", "pu"]).offers == ["publish"])
        #expect(try Self.bash("eventbus", ["eventbus", "--socket", "/x", "pu"]).offers == ["publish"], "a value is not the command")
        #expect(try Self.bash("eventbus", ["eventbus", "publish", "--re"]).offers == ["--retain"])
        #expect(try Self.bash("eventbus", ["eventbus", "listen", "--format", ""]).offers == ["cloudevents", "data", "json", "pretty"])
        #expect(try Self.bash("eventbus", ["eventbus", "stats", "-f", "t"]).offers == ["table"])
        #expect(try Self.bash("eventbus", ["eventbus", "stats", "--m"]).offers == ["--max-clients", "--max-types", "--min-client-age"])
        #expect(try Self.bash("eventbus", ["eventbus", "wait", "a.b", "--", "tru"]).offers.contains("true"))
        #expect(try Self.bash("eventbusd", ["eventbusd", "--log-level", "n"]).offers == ["notice"])
        #expect(try Self.bash("eventbusd", ["eventbusd", "--max-retained-b"]).offers == ["--max-retained-bytes", "--max-retained-bytes-per-uid"])
        #expect(try Self.bash("eventbus-bridge", ["eventbus-bridge", "--exp"]).offers == ["--export", "--export-group", "--export-requests"])
        let scratch = try TemporaryDirectory(prefix: "ebcomp.")
        defer { scratch.remove() }
        #expect(FileManager.default.createFile(atPath: scratch.file("orders.pos"), contents: Data()))
        #expect(try Self.bash("eventbus", ["eventbus", "listen", "--resume", scratch.file("ord")]).offers == [scratch.file("orders.pos")])
        #expect(try Self.bash("eventbusd", ["eventbusd", "--state-dir", scratch.path + "/"]).offers == [], "only folders")
    }

    @Test("bash: event types and patterns come from the running broker; without one, nothing and no noise")
    func bashAsksTheBroker() throws {
        let broker = try TestBroker()
        for type in ["order.created", "order.paid.card"] { #expect(try broker.run(["publish", type, "1"]).status == 0) }
        #expect(try Self.bash("eventbus", ["eventbus", "--socket", broker.socket, "publish", "ord"]).offers == ["order.created", "order.paid.card"])
        #expect(try Self.bash("eventbus", ["eventbus", "listen", "--socket", broker.socket, "or"]).offers == ["order.>", "order.created", "order.paid.>", "order.paid.card"])
        #expect(try Self.bash("eventbus-bridge", ["eventbus-bridge", "--socket", broker.socket, "--export", "order.p"]).offers == ["order.paid.>", "order.paid.card"])
        let none = try Self.bash("eventbus", ["eventbus", "--socket", broker.scratch.file("no.sock"), "listen", ""])
        #expect(none.offers == [">"] && none.stderr.isEmpty, "\(none)")
    }

    @Test("fish: the completions load and complete commands, options and values", .enabled(if: findInPath("fish") != nil, "needs fish"))
    func fishCompletes() throws {
        func complete(_ program: String, _ line: String) throws -> [String] {
            let run = try runProcess(findInPath("fish")!, ["--no-config", "-c", "source \(Self.root)/completions/fish/\(program).fish; complete -C '\(line)'"],
                                     environment: Self.environment, timeout: .seconds(60))
            #expect(run.status == .exited(0) && run.stderr.isEmpty, "\(line): \(run.stderr)")
            return run.stdout.split(separator: "\n").map { String($0.split(separator: "\t").first ?? "") }.sorted()
        }
        #expect(try complete("eventbus", "eventbus pu") == ["publish"])
        #expect(try complete("eventbus", "eventbus listen --format ") == ["cloudevents", "data", "json", "pretty"])
        #expect(try complete("eventbus", "eventbus publish --ret") == ["--retain"])
        #expect(try complete("eventbusd", "eventbusd --log-level d") == ["debug"])
        #expect(try complete("eventbus-bridge", "eventbus-bridge --st").contains("--status-file"))
        let broker = try TestBroker()
        #expect(try broker.run(["publish", "fish.caught", "1"]).status == 0)
        #expect(try complete("eventbus", "eventbus --socket \(broker.socket) listen fi") == ["fish.>", "fish.caught"])
    }

    @Test("zsh: compinit registers _eventbus for the three programs and the file parses", .enabled(if: findInPath("zsh") != nil, "needs zsh"))
    func zshLoads() throws {
        let script = """
        fpath=("\(Self.root)/completions/zsh" $fpath)
        autoload -Uz compinit && compinit -u -D
        print -r -- "$_comps[eventbus] $_comps[eventbusd] $_comps[eventbus-bridge]"
        autoload +X _eventbus && print loaded
        """
        let run = try runProcess(findInPath("zsh")!, ["-f", "-c", script], environment: ["HOME": "/nonexistent"], timeout: .seconds(30))
        #expect(run.status == .exited(0) && run.stdout == "_eventbus _eventbus _eventbus\nloaded\n", "\(run)")
        let syntax = try runProcess(findInPath("zsh")!, ["-n", Self.root + "/completions/zsh/_eventbus"], timeout: .seconds(10))
        #expect(syntax.status == .exited(0), "\(syntax)")
    }
}
