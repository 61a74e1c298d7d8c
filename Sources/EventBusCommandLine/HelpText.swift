// The `--help` text of a command, rendered from its declaration
// (Interface.swift): usage, about, each option section (option column, then
// its help wrapped at `HelpText.width`), notes, examples, exit status.
//
// Before editing: BrokerCommandLineTests and DocumentedDurationTests read
// these texts with a regular expression (`  -t, --timeout DURATION  ...`):
// keep an option's label at the start of its line, after two spaces.

package enum HelpText {
    /// The right margin of the option help.
    package static let width = 79
    /// Where an option's help starts (its label is padded to this column).
    package static let column = 27

    /// The whole `--help` of `command` of `program`, ending in a blank line.
    package static func render(_ program: ProgramDeclaration, command: CommandDeclaration) -> String {
        var out = ""
        for (index, line) in command.usage.enumerated() {
            if line.hasPrefix(" ") {
                // The continuation of the synopsis above.
                out += String(repeating: " ", count: 7 + program.name.count) + line + "\n"
                continue
            }
            out += (index == 0 ? "Usage: " : "       ") + program.name + (line.isEmpty ? "" : " " + line) + "\n"
        }
        out += "\n" + command.about + "\n"
        if command.name.isEmpty && !program.commands.isEmpty {
            out += "\nCommands:\n" + commandList(program)
        }
        for section in command.sections {
            out += "\n" + section.title + "\n"
            var options = section.options
            if section.showsCommonOptions {
                options += program.commonOptions.filter { common in !options.contains { $0.long == common.long } }
            }
            for declaration in options { out += option(label: declaration.label, help: declaration.help, column: column) }
            if let footer = section.footer {
                out += footer.split(separator: "\n", omittingEmptySubsequences: false).map { $0.isEmpty ? "\n" : "    \($0)\n" }.joined()
            }
        }
        if let notes = command.notes { out += "\n" + notes + "\n" }
        if !command.examples.isEmpty {
            out += "\nExamples:\n" + command.examples.map { "  \($0)\n" }.joined()
        }
        if let after = command.afterExamples { out += "\n" + after + "\n" }
        out += "\n" + command.exitStatus + "\n"
        return out + "\n"
    }

    /// The list of `program`'s commands: `  publish TYPE [DATA]     publish one event...`.
    package static func commandList(_ program: ProgramDeclaration) -> String {
        program.commands.map { command in
            let label = command.operandsSummary.isEmpty ? command.name : "\(command.name) \(command.operandsSummary)"
            return option(label: label, help: command.summary, column: 26, width: width + 1)
        }.joined()
    }

    /// One option: `  LABEL` padded to `column`, its help wrapped after it;
    /// when the help has several items (lines), each item's wrapped lines
    /// hang 2 columns deeper (a list of choices).
    static func option(label: String, help: String, column: Int, width: Int = HelpText.width) -> String {
        let lead = "  " + label
        let start = max(column, lead.count + 2)
        let items = help.split(separator: "\n").map(String.init)
        let hang = items.count > 1 ? 2 : 0
        var out = ""
        for (itemIndex, item) in items.enumerated() {
            let firstWidth = width - (itemIndex == 0 ? start : column)
            for (index, line) in wrap(item, width: width - column - hang, firstWidth: firstWidth).enumerated() {
                if itemIndex == 0 && index == 0 {
                    out += lead + String(repeating: " ", count: start - lead.count)
                } else {
                    out += String(repeating: " ", count: column + (index > 0 ? hang : 0))
                }
                out += line + "\n"
            }
        }
        return items.isEmpty ? lead + "\n" : out
    }

    /// `text` broken at spaces into lines of at most `width` characters, the
    /// first of at most `firstWidth` (a longer word gets a line of its own).
    package static func wrap(_ text: String, width: Int, firstWidth: Int? = nil) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            let limit = lines.isEmpty ? (firstWidth ?? width) : width
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= limit {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }
}
