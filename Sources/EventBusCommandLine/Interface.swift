// The one declaration of a program's command line (issue 33): its commands,
// their options (name, value, help text, what completes the value), operands,
// prose, examples and exit statuses. The parser's `OptionSpec` tables, the
// `--help` texts (HelpText.swift), the man pages (ManualPage.swift) and the
// bash, zsh and fish completions (Completion*.swift) are all derived from it,
// so an option cannot be accepted without being documented, or documented
// without being accepted.
//
// Before editing: text is written as the `--help` shows it. Prose (`about`,
// `notes`, section intros) is wrapped by hand at 79 columns, paragraphs
// separated by a blank line; the man page joins the lines of a paragraph.
// An option's `help` is not wrapped by hand: one line per item (most options
// have one; `--format` has one per format), wrapped by the renderer.

/// What a value (or an operand) is: says how it is completed and checked.
package enum ValueKind: Sendable, Equatable {
    /// Free text: nothing to complete.
    case text
    /// A file name.
    case file
    /// A directory name.
    case directory
    /// A command and its arguments (`eventbus wait ... -- COMMAND`).
    case command
    /// One of the program's own commands (`eventbus help COMMAND`).
    case subcommand
    /// A DURATION (`parseDuration`).
    case duration
    /// A SIZE (`parseSize`).
    case size
    /// A count N (`parseCount`).
    case count
    /// Octal permission bits.
    case octal
    /// One of these words.
    case choice([String])
    /// An event type: completed from the running broker's `types`.
    case eventType
    /// A pattern of event types: completed from the broker's `types`, with
    /// `.*`/`.>` forms of their prefixes.
    case pattern
    /// A URL or a comma-separated list of URLs.
    case url
    /// A JSON value.
    case json
}

/// An option's value: its name as shown (`PATH`, `DURATION`) and its kind.
package struct ValueDeclaration: Sendable {
    package var name: String
    package var kind: ValueKind

    package init(_ name: String, _ kind: ValueKind) {
        self.name = name
        self.kind = kind
    }
}

/// One option: `-t, --timeout DURATION` and what it does.
package struct OptionDeclaration: Sendable {
    package var long: String
    package var short: Character?
    package var value: ValueDeclaration?
    /// The help, one item per line (see the file comment).
    package var help: String
    /// Shown after the value in the synopsis of `--help` and the man page,
    /// e.g. `[FILE...]` for `--check-policy` (which takes operands).
    package var operandsShown: String?

    package init(_ long: String, _ short: Character? = nil, _ value: ValueDeclaration? = nil, operands: String? = nil, _ help: String) {
        self.long = long
        self.short = short
        self.value = value
        self.help = help
        self.operandsShown = operands
    }

    /// What the parser accepts for this option.
    package var spec: OptionSpec { OptionSpec(long, short, value: value != nil) }

    /// `-t, --timeout DURATION` or `--system`, as in the help's first column.
    package var label: String {
        var text = short.map { "-\($0), " } ?? "    "
        text += "--" + long
        if let value { text += " " + value.name }
        if let operandsShown { text += " " + operandsShown }
        return text
    }
}

/// A group of options under a heading, with prose before and after them.
package struct OptionSection: Sendable {
    /// The heading, e.g. `Options:` or `Limits per uid (...):` (may span lines).
    package var title: String
    package var options: [OptionDeclaration]
    /// Prose after the options, indented in the help (e.g. what SIZE means).
    package var footer: String?
    /// Whether the program's common options (`ProgramDeclaration.commonOptions`)
    /// are shown at the end of this section.
    package var showsCommonOptions: Bool

    /// An `Options:` section.
    package init(_ options: [OptionDeclaration], footer: String? = nil, showsCommonOptions: Bool = false) {
        self.init("Options:", options, footer: footer, showsCommonOptions: showsCommonOptions)
    }

    package init(_ title: String, _ options: [OptionDeclaration], footer: String? = nil, showsCommonOptions: Bool = false) {
        self.title = title
        self.options = options
        self.footer = footer
        self.showsCommonOptions = showsCommonOptions
    }
}

/// The operands a command takes, for completion: their kinds in order; the
/// last repeats when `repeats` is true.
package struct OperandsDeclaration: Sendable {
    package var kinds: [ValueKind]
    package var repeats: Bool

    package init(_ kinds: [ValueKind] = [], repeats: Bool = false) {
        self.kinds = kinds
        self.repeats = repeats
    }

    /// The kind of the operand at `index` (0-based), nil when there is none.
    package func kind(at index: Int) -> ValueKind? {
        if index < kinds.count { return kinds[index] }
        return repeats ? kinds.last : nil
    }
}

/// One command of a program (`eventbus publish`), or the whole command line
/// of a program without commands (`eventbusd`: `name` is empty).
package struct CommandDeclaration: Sendable {
    /// The subcommand, or "" for a program without subcommands.
    package var name: String
    /// How the command list shows its operands, e.g. `TYPE [DATA]`.
    package var operandsSummary: String
    /// One line for the command list and the man page's NAME.
    package var summary: String
    /// The synopsis lines after the program name, e.g. `publish [OPTIONS] TYPE [DATA | -]`.
    package var usage: [String]
    /// What the command does (hand-wrapped prose).
    package var about: String
    package var sections: [OptionSection]
    /// Prose after the options (what a PATTERN is, DURATION...).
    package var notes: String?
    /// Example command lines (a `#` comment may follow).
    package var examples: [String]
    /// Prose after the examples.
    package var afterExamples: String?
    /// `Exit status: ...` (hand-wrapped prose, starting with `Exit status:`).
    package var exitStatus: String
    package var operands: OperandsDeclaration

    package init(_ name: String, operandsSummary: String = "", summary: String, usage: [String], about: String,
                sections: [OptionSection], notes: String? = nil, examples: [String] = [], afterExamples: String? = nil,
                exitStatus: String, operands: OperandsDeclaration = OperandsDeclaration()) {
        self.name = name
        self.operandsSummary = operandsSummary
        self.summary = summary
        self.usage = usage
        self.about = about
        self.sections = sections
        self.notes = notes
        self.examples = examples
        self.afterExamples = afterExamples
        self.exitStatus = exitStatus
        self.operands = operands
    }

    /// Every option of the command's own sections.
    package var ownOptions: [OptionDeclaration] { sections.flatMap(\.options) }
}

/// A program: its name, manual section, common options and commands.
package struct ProgramDeclaration: Sendable {
    package var name: String
    /// The man page section: 1 for the CLI, 8 for the daemons.
    package var manualSection: Int
    /// The man page's one-line description (NAME section).
    package var summary: String
    /// Options every command accepts (`--socket`, `--help`); for a program
    /// without commands, those of `root` already include them.
    package var commonOptions: [OptionDeclaration]
    /// The program's own command line: for `eventbus` the top level
    /// (`eventbus [OPTIONS] COMMAND`), for `eventbusd` everything.
    package var root: CommandDeclaration
    package var commands: [CommandDeclaration]
    /// Man page sections beyond the options: (title, hand-wrapped prose).
    package var manualSections: [(title: String, text: String)]
    /// Other pages, e.g. `("eventbusd", 8)`.
    package var seeAlso: [(name: String, section: Int)]

    package init(name: String, manualSection: Int, summary: String, commonOptions: [OptionDeclaration] = [],
                root: CommandDeclaration, commands: [CommandDeclaration] = [],
                manualSections: [(title: String, text: String)] = [], seeAlso: [(name: String, section: Int)] = []) {
        self.name = name
        self.manualSection = manualSection
        self.summary = summary
        self.commonOptions = commonOptions
        self.root = root
        self.commands = commands
        self.manualSections = manualSections
        self.seeAlso = seeAlso
    }

    /// The command called `name`, nil for an unknown one.
    package func command(_ name: String) -> CommandDeclaration? { commands.first { $0.name == name } }

    /// What the parser accepts for `command` (nil: the top level): its own
    /// options and the common ones.
    package func specs(for command: String? = nil) -> [OptionSpec] {
        options(for: command).map(\.spec)
    }

    /// Every option `command` (nil: the top level) accepts, declared once each.
    package func options(for command: String? = nil) -> [OptionDeclaration] {
        let declaration = command.flatMap(self.command) ?? root
        var all = declaration.ownOptions
        for option in commonOptions where !all.contains(where: { $0.long == option.long }) { all.append(option) }
        return all
    }
}
