// Every DURATION the documentation shows is one the programs accept: the
// options that take a DURATION are read from the built programs' --help, and
// every value given to them in README.md, docs/*.md, systemd/**/*.service and
// the help texts themselves must parse. 0.1 documented
// `eventbusd --exit-idle-time 5min`, which that broker refused.
//
// Before editing: the scan finds `--option VALUE` and `--option=VALUE`
// anywhere, and short forms (`-t 30s`) only inside an `eventbus ...` command,
// up to a shell separator. A value starts with a digit, `.` or a sign; words
// after an option are prose ("`--timeout` passed") or metavariables (DURATION).
import EventBusCommandLine
import EventBusServer
import EventBusTestSupport
import Foundation
import Testing

/// One DURATION option of one program: `--timeout` with short letter `t`.
fileprivate struct DurationOption: Hashable {
    var long: String
    var short: Character?
}

/// Where a documented value was found, for the failure message.
fileprivate struct Occurrence: CustomStringConvertible {
    var file: String
    var line: Int
    var option: String
    var value: String
    var description: String { "\(file):\(line): \(option) \(value)" }
}

@Suite("Documented durations")
struct DocumentedDurationTests {
    /// The repository root (this file is Tests/EventBusIntegrationTests/...).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The help texts: eventbusd's and each eventbus command's.
    static func helpTexts() throws -> [(name: String, text: String)] {
        var texts: [(String, String)] = []
        let eventbusd = try runProcess(try builtProduct("eventbusd"), ["--help"], timeout: .seconds(10))
        texts.append(("eventbusd --help", eventbusd.stdout))
        for command in ["publish", "listen", "wait", "get", "clear", "stats", "ping", "reload"] {
            let run = try runProcess(try builtProduct("eventbus"), [command, "--help"], timeout: .seconds(10))
            texts.append(("eventbus \(command) --help", run.stdout))
        }
        return texts
    }

    /// `-t, --timeout DURATION` and `--exit-idle-time DURATION` lines of the help texts.
    fileprivate static func durationOptions(in help: String) throws -> [DurationOption] {
        let pattern = try NSRegularExpression(pattern: #"(?:-([A-Za-z]), )?--([a-z][a-z-]*)[ =]DURATION\b"#)
        let text = help as NSString
        return pattern.matches(in: help, range: NSRange(location: 0, length: text.length)).map { match in
            let short = match.range(at: 1).location == NSNotFound ? nil : text.substring(with: match.range(at: 1)).first
            return DurationOption(long: text.substring(with: match.range(at: 2)), short: short)
        }
    }

    /// The documentation files: README.md, docs/*.md, the systemd units.
    static func documents() throws -> [(name: String, text: String)] {
        var paths = ["README.md"]
        let manager = FileManager.default
        for entry in try manager.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path).sorted() where entry.hasSuffix(".md") {
            paths.append("docs/" + entry)
        }
        if let units = manager.enumerator(atPath: root.appendingPathComponent("systemd").path) {
            for case let entry as String in units where entry.hasSuffix(".service") { paths.append("systemd/" + entry) }
        }
        return try paths.map { ($0, try String(contentsOf: root.appendingPathComponent($0), encoding: .utf8)) }
    }

    /// A value as written after an option: up to white space or closing
    /// punctuation, or a whole quoted string.
    static func value(after rest: Substring) -> String {
        if let quote = rest.first, quote == "'" || quote == "\"" {
            return String(rest.dropFirst().prefix { $0 != quote })
        }
        return String(rest.prefix { !$0.isWhitespace && !"`'\"])|;,".contains($0) })
    }

    /// Whether `value` is written as a value rather than a word of prose.
    static func looksLikeAValue(_ value: String) -> Bool {
        guard let first = value.first else { return false }
        return first.isNumber || ".+-".contains(first)
    }

    /// Every value given to one of `options` in `text`.
    private static func occurrences(in text: String, file: String, options: Set<DurationOption>) -> [Occurrence] {
        var found: [Occurrence] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            for option in options {
                var search = line[...]
                while let range = search.range(of: "--" + option.long) {
                    search = search[range.upperBound...]
                    guard let next = search.first, next == "=" || next == " " else { continue }
                    let value = Self.value(after: search.dropFirst().drop { $0 == " " })
                    if looksLikeAValue(value) {
                        found.append(Occurrence(file: file, line: index + 1, option: "--" + option.long, value: value))
                    }
                }
            }
            // Short forms, only inside `eventbus ...` commands: -t 30s, -t30s.
            var commands = line.components(separatedBy: "eventbus ").dropFirst()[...]
            while let command = commands.popFirst() {
                let segment = command.prefix { !"|;&`".contains($0) }
                let tokens = segment.split(whereSeparator: \.isWhitespace)
                for (i, token) in tokens.enumerated() {
                    for option in options {
                        guard let short = option.short, token.hasPrefix("-\(short)"), !token.hasPrefix("--") else { continue }
                        let inline = token.dropFirst(2)
                        let value = inline.isEmpty ? (i + 1 < tokens.count ? Self.value(after: tokens[i + 1]) : "") : Self.value(after: inline)
                        if looksLikeAValue(value) {
                            found.append(Occurrence(file: file, line: index + 1, option: "-\(short)", value: value))
                        }
                    }
                }
            }
        }
        return found
    }

    @Test func everyDurationInTheDocsAndHelpTextsParses() throws {
        let help = try Self.helpTexts()
        let brokerOptions = Set(try Self.durationOptions(in: help[0].text))
        var options = brokerOptions
        for (_, text) in help.dropFirst() { options.formUnion(try Self.durationOptions(in: text)) }
        // The help texts show every DURATION option their declarations have.
        let commands = ["publish", "listen", "wait", "get", "clear", "stats", "ping", "reload"]
        let declared = (brokerInterface.options() + commands.flatMap { eventbusInterface.options(for: $0) }).filter { $0.value?.kind == .duration }
        #expect(Set(options.map(\.long)) == Set(declared.map(\.long)) && options.count >= 7, "DURATION options in the help texts: \(options)")

        var found: [Occurrence] = []
        for (name, text) in try Self.documents() + help {
            found += Self.occurrences(in: text, file: name, options: options)
        }
        for occurrence in found {
            #expect(throws: Never.self, "\(occurrence)") { try parseDuration(occurrence.value) }
        }
        // The scan must find what it is for (a scan that finds nothing cannot fail).
        let shown = Set(found.map { "\($0.option) \($0.value)" })
        for expected in ["--exit-idle-time 5min", "--shutdown-timeout 2s", "--timeout 30s", "--wait 5s"] {
            #expect(shown.contains(expected), "not found in the docs: \(expected); found \(shown.sorted())")
        }
        #expect(found.contains { $0.file == "README.md" && $0.option == "--exit-idle-time" })
        #expect(found.contains { $0.file == "docs/SYSTEMD.md" && $0.option == "--exit-idle-time" })

        // The broker itself takes every documented value of its own options
        // (parsed in full before --help is acted on).
        var arguments: [String] = []
        for occurrence in found where brokerOptions.contains(where: { "--" + $0.long == occurrence.option }) {
            arguments += [occurrence.option, occurrence.value]
        }
        #expect(!arguments.isEmpty)
        let run = try runProcess(try builtProduct("eventbusd"), arguments + ["--help"], timeout: .seconds(10))
        #expect(run.status == .exited(0), "eventbusd \(arguments): \(run.stderr)")
    }

    @Test func theScanFindsLongAndShortFormsAndSkipsMetavariables() {
        let options: Set<DurationOption> = [DurationOption(long: "timeout", short: "t"), DurationOption(long: "wait", short: "w")]
        let text = """
        eventbus listen --timeout 30s 'a.>' | socat -t 5 - UNIX-CONNECT:x
        `--timeout=2m` and [--wait DURATION], eventbus wait -t 1h30m x; eventbus ping -w5s
        when --timeout passed, --timeout=-1 is refused
        eventbus-bench --timeout-ms 3000
        """
        let values = Self.occurrences(in: text, file: "x", options: options).map { "\($0.option) \($0.value)" }
        #expect(values.sorted() == ["--timeout -1", "--timeout 2m", "--timeout 30s", "-t 1h30m", "-w 5s"])
    }
}
