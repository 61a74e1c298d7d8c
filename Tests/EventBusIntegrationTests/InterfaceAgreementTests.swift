// The programs accept exactly what they declare (issue 33): each program's
// `--help` (and each command's) is the text rendered from its declaration;
// every declared option, long and short, passes the built program's parser
// with a value of its kind; an undeclared one is refused with status 64; and
// the names the sources read (`args.has("x")`, `args.value("x")`, eventbusd's
// `case "x":` in `apply`, the bridge's ConfigFile keys) are the declared ones, so
// nothing is declared that no code reads and nothing read that cannot be given.
//
// Before editing: the source scan reads Sources/eventbus/*.swift,
// Sources/eventbusd/BrokerOptions.swift and EventBusBridge's ConfigFile.
import EventBusBridge
import EventBusCommandLine
import EventBusManual
import EventBusServer
import EventBusTestSupport
import Foundation
import Testing

@Suite("Declared options agree with the programs")
struct InterfaceAgreementTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// A value of `kind` the parsers accept.
    static func sample(_ kind: ValueKind) -> String {
        switch kind {
        case .text: "x"
        case .file: "/dev/null"
        case .directory: "/tmp"
        case .command: "true"
        case .subcommand: "publish"
        case .duration: "1h30m"
        case .size: "2M"
        case .count: "10"
        case .octal: "0660"
        case .choice(let words): words[0]
        case .eventType: "a.b"
        case .pattern: "a.>"
        case .url: "nats://127.0.0.1:4222"
        case .json: "1"
        }
    }

    /// Each program's command lines: (arguments before the options, the declaration's command or nil).
    static func commandLines(_ program: ProgramDeclaration) -> [(prefix: [String], command: String?)] {
        [([], nil)] + program.commands.map { ([$0.name], $0.name) }
    }

    @Test("--help of every program and command is the text rendered from its declaration", arguments: ManualFiles.programs.map(\.name))
    func helpIsRenderedFromTheDeclaration(_ name: String) throws {
        let program = try #require(ManualFiles.programs.first { $0.name == name })
        for (prefix, command) in Self.commandLines(program) {
            let run = try runProcess(try builtProduct(name), prefix + ["--help"], timeout: .seconds(10))
            #expect(run.status == .exited(0), "\(name) \(prefix) --help: \(run.stderr)")
            let declaration = command.flatMap(program.command) ?? program.root
            #expect(run.stdout == HelpText.render(program, command: declaration), "\(name) \(prefix)")
            // The option rows (labels and wrapped help) fit 80 columns, or
            // go past them only by a long label.
            for line in run.stdout.split(separator: "\n") where line.hasPrefix("  -") || line.hasPrefix("      --") || line.hasPrefix(String(repeating: " ", count: HelpText.column)) {
                #expect(line.count <= 90, "\(name) \(prefix): a help line of \(line.count) columns: \(line)")
                // A wrapped line of an option's help has no label to blame:
                // 80 columns (request's --format json ran to 87 with one
                // unbreakable word, stop 44's trial).
                if line.hasPrefix(String(repeating: " ", count: HelpText.column)) {
                    #expect(line.count <= 80, "\(name) \(prefix): a wrapped help line of \(line.count) columns: \(line)")
                }
            }
        }
    }

    @Test("every declared option passes the built program's parser; an undeclared one exits 64", arguments: ManualFiles.programs.map(\.name))
    func declaredOptionsAreAcceptedAndNoOthers(_ name: String) throws {
        let program = try #require(ManualFiles.programs.first { $0.name == name })
        for (prefix, command) in Self.commandLines(program) {
            var arguments = prefix
            for option in program.options(for: command) where !["help", "version", "socket", "system", "user", "check-policy"].contains(option.long) {
                let value = option.value.map { [Self.sample($0.kind)] } ?? []
                arguments += ["--" + option.long] + value
                if let short = option.short { arguments += ["-\(short)"] + value }
            }
            // --help last: everything before it is parsed (eventbusd also checks every value).
            let run = try runProcess(try builtProduct(name), arguments + ["--help"], timeout: .seconds(10))
            #expect(run.status == .exited(0), "\(name) \(arguments): \(run.stderr)")
            let undeclared = try runProcess(try builtProduct(name), prefix + ["--no-such-option"], timeout: .seconds(10))
            #expect(undeclared.status == .exited(64) && undeclared.stderr.contains("unknown option '--no-such-option'"), "\(name) \(prefix): \(undeclared)")
        }
    }

    @Test("every declared command of eventbus runs (a missing operand or an absent broker, never 'unknown command')")
    func everyDeclaredCommandRuns() throws {
        let scratch = try TemporaryDirectory(prefix: "ebcmd.")
        defer { scratch.remove() }
        for command in eventbusInterface.commands {
            let run = try runProcess(try builtProduct("eventbus"), ["--socket", scratch.file("no.sock"), command.name], timeout: .seconds(10))
            guard case .exited(let status) = run.status else { Issue.record("\(command.name): \(run.status)"); continue }
            #expect([0, 64, 69].contains(status) && !run.stderr.contains("unknown command"), "\(command.name): \(run.stderr)")
        }
        let help = try runProcess(try builtProduct("eventbus"), ["help", "publish"], timeout: .seconds(10))
        #expect(help.status == .exited(0) && help.stdout == HelpText.render(eventbusInterface, command: eventbusInterface.command("publish")!))
    }

    /// `help` talks to no broker: its help lists no bus option (stop 44's
    /// trial), though it accepts them as every command does.
    @Test("eventbus help --help lists no bus option; help still takes one")
    func helpOfHelpListsNoBusOption() throws {
        let run = try runProcess(try builtProduct("eventbus"), ["help", "--help"], timeout: .seconds(10))
        #expect(run.status == .exited(0) && run.stdout.contains("  -h, --help"), "\(run)")
        for option in ["--socket", "--system", "--user"] { #expect(!run.stdout.contains(option), "\(option) in:\n\(run.stdout)") }
        let given = try runProcess(try builtProduct("eventbus"), ["help", "--socket", "/nonexistent/bus.sock", "ping"], timeout: .seconds(10))
        #expect(given.status == .exited(0) && given.stdout == HelpText.render(eventbusInterface, command: eventbusInterface.command("ping")!), "\(given)")
    }

    /// A newcomer's typo, or the protocol's word for `listen`, is answered with
    /// the command or option meant (stop 43's trial), still exit 64.
    @Test("a mistyped command or option names the one meant", arguments: [
        (["publsh", "x.y"], "eventbus: unknown command 'publsh'; did you mean 'publish'? (see 'eventbus --help')\n"),
        (["subscribe", "x.>"], "eventbus: unknown command 'subscribe'; did you mean 'listen'? (see 'eventbus --help')\n"),
        (["help", "lsiten"], "eventbus: unknown command 'lsiten'; did you mean 'listen'? (see 'eventbus --help')\n"),
        (["frobnicate"], "eventbus: unknown command 'frobnicate' (see 'eventbus --help')\n"),
        (["publish", "--retian", "x.y", "1"], "eventbus: unknown option '--retian'; did you mean '--retain'? (see 'eventbus publish --help')\n"),
    ])
    func aTypoNamesWhatWasMeant(arguments: [String], message: String) throws {
        let run = try runProcess(try builtProduct("eventbus"), ["--socket", "/nonexistent/bus.sock"] + arguments, timeout: .seconds(10))
        #expect(run.status == .exited(64) && run.stderr == message, "\(run)")
    }

    /// The quoted names matched by `pattern` in `files`.
    static func names(in files: [String], _ pattern: String) throws -> Set<String> {
        let expression = try NSRegularExpression(pattern: pattern)
        var names = Set<String>()
        for file in files {
            let text = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
            for match in expression.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                names.insert(String(text[Range(match.range(at: 1), in: text)!]))
            }
        }
        return names
    }

    @Test("the options the CLI's sources read are the declared ones")
    func eventbusReadsWhatItDeclares() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/Sources/eventbus").filter { $0.hasSuffix(".swift") }.map { "Sources/eventbus/" + $0 }
        var read = try Self.names(in: files, #"\b(?:args|top)\.(?:has|value)\("([a-z][a-z-]*)""#)
        // `for name in ["max-types", ...] where args.has(name)`
        read.formUnion(try Self.names(in: ["Sources/eventbus/StatsPing.swift"], #"for name in \[((?:"[a-z-]+"(?:, )?)+)\]"#).flatMap {
            $0.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\" ")) }
        })
        let declared = Set(([nil] + eventbusInterface.commands.map(\.name)).flatMap { eventbusInterface.options(for: $0).map(\.long) })
        #expect(read.subtracting(declared).isEmpty, "read but not declared: \(read.subtracting(declared).sorted())")
        #expect(declared.subtracting(read).isEmpty, "declared but never read: \(declared.subtracting(read).sorted())")
    }

    @Test("eventbusd handles every declared option and no other")
    func eventbusdHandlesWhatItDeclares() throws {
        // The server's own options are set in EventBusServer (ServerConfiguration+Options.swift), the rest in eventbusd.
        let handled = try Self.names(in: ["Sources/eventbusd/BrokerOptions.swift", "Sources/EventBusServer/ServerConfiguration+Options.swift"], #"case "([a-z][a-z-]*)":"#)
        let declared = Set(brokerInterface.options().map(\.long))
        #expect(handled == declared, "handled only: \(handled.subtracting(declared).sorted()); declared only: \(declared.subtracting(handled).sorted())")
    }

    @Test("the bridge declares a flag for every settings key but the file-only ones and bus")
    func bridgeDeclaresItsSettings() throws {
        let declared = Set(bridgeInterface.options().map(\.long))
        let keys = Set(ConfigFile.keys).subtracting(ConfigFile.fileOnly).subtracting(["bus"])
        #expect(declared == keys.union(["system", "user", "config", "status", "help", "version"]), "\(declared.symmetricDifference(keys).sorted())")
    }
}
