// A program's man page in mdoc(7), rendered from its declaration
// (Interface.swift): NAME, SYNOPSIS, DESCRIPTION, OPTIONS (one subsection per
// option section), COMMANDS (one subsection per command, with its options,
// examples and exit status), ENVIRONMENT, FILES, EXIT STATUS, SEE ALSO.
// `mandoc -T lint` finds nothing in the result (ManualTests).
//
// Before editing: every text line goes through `Mdoc.text`, which escapes
// backslashes, protects a leading `.` or `'`, and starts each sentence on a
// line of its own (mandoc's "new sentence, new line").

/// Writing mdoc(7).
package enum Mdoc {
    /// Prose as text lines: paragraphs (separated by blank lines) with `.Pp`
    /// between them, lines of a paragraph joined; lines indented by two or
    /// more spaces are shown as a literal display.
    package static func prose(_ text: String) -> String {
        var out = ""
        var paragraph: [String] = []
        var literal: [String] = []
        var first = true
        func flushParagraph() {
            guard !paragraph.isEmpty else { return }
            if !first { out += ".Pp\n" }
            first = false
            out += self.text(paragraph.joined(separator: " "))
            paragraph = []
        }
        func flushLiteral() {
            guard !literal.isEmpty else { return }
            out += ".Bd -literal -offset indent\n" + literal.map(self.literal).joined() + ".Ed\n"
            first = false
            literal = []
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  ") {
                flushParagraph()
                literal.append(String(line.dropFirst(2)))
            } else if line.trimmingSpaces.isEmpty {
                flushParagraph()
                flushLiteral()
            } else {
                flushLiteral()
                paragraph.append(line.trimmingSpaces)
            }
        }
        flushParagraph()
        flushLiteral()
        return out
    }

    /// One line of a literal display, escaped.
    package static func literal(_ line: String) -> String {
        let escaped = escape(line)
        return (escaped.hasPrefix(".") || escaped.hasPrefix("'") ? "\\&" : "") + escaped + "\n"
    }

    /// Running text as text lines, each sentence starting a line, lines at
    /// most 79 columns, escaped.
    package static func text(_ text: String) -> String {
        var out = ""
        for sentence in sentences(text) {
            for line in HelpText.wrap(sentence, width: 79) { out += literal(line) }
        }
        return out
    }

    /// `text` split after each `.`, `?` or `!` (and closing `)`, `"`, `'`)
    /// that blanks and an upper-case letter or digit follow.
    static func sentences(_ text: String) -> [String] {
        var result: [String] = []
        var current = ""
        let characters = Array(text)
        var index = 0
        while index < characters.count {
            let character = characters[index]
            current.append(character)
            index += 1
            guard character == "." || character == "?" || character == "!" else { continue }
            var end = index
            while end < characters.count, characters[end] == ")" || characters[end] == "\"" || characters[end] == "'" { end += 1 }
            var next = end
            while next < characters.count, characters[next] == " " { next += 1 }
            guard next > end, next < characters.count, characters[next].isUppercase || characters[next].isNumber else { continue }
            current += String(characters[index..<end])
            result.append(current)
            current = ""
            index = next
        }
        result.append(current)
        return result.map(\.trimmingSpaces).filter { !$0.isEmpty }
    }

    /// `\` as `\e`; `-` stays (mandoc renders it as a hyphen-minus); a
    /// `--` word (end of options) as `-\&-`, which shows the same and is not
    /// taken for a dash.
    static func escape(_ text: String) -> String {
        let escaped = text.replacingAll("\\", with: "\\e")
        return String((" " + escaped + " ").replacingAll(" -- ", with: " -\\&- ").dropFirst().dropLast())
    }

    /// `.Fl s , Fl \-socket Ar PATH` for `-s, --socket PATH`.
    static func optionHead(_ option: OptionDeclaration) -> String {
        var head = ".It"
        if let short = option.short { head += " Fl \(short) ," }
        head += " Fl \\-\(option.long)"
        if let value = option.value { head += " Ar \(macroArgument(value.name))" }
        if let operands = option.operandsShown { head += " Op Ar \(macroArgument(operands.trimmingCharacters(in: "[]")))" }
        return head + "\n"
    }

    /// A word as a macro argument: quoted when it holds blanks, escaped.
    package static func macroArgument(_ word: String) -> String {
        let escaped = escape(word)
        return escaped.contains(" ") ? "\"\(escaped)\"" : escaped
    }

    /// An option list: `.Bl -tag -width Ds`, one `.It` per option.
    static func options(_ options: [OptionDeclaration]) -> String {
        guard !options.isEmpty else { return "" }
        var out = ".Bl -tag -width Ds\n"
        for option in options {
            out += optionHead(option)
            let items = option.help.split(separator: "\n").map(String.init)
            for (index, item) in items.enumerated() {
                if index > 0 { out += ".br\n" }
                out += text(item)
            }
        }
        return out + ".El\n"
    }

    /// The whole page of `program`.
    /// - Parameters:
    /// - Parameter date: the page's date, `December 5, 2026`.
    package static func page(_ program: ProgramDeclaration, date: String) -> String {
        let root = program.root
        var out = ".\\\" Generated from the program's declaration by eventbus-manual: do not edit.\n"
        out += ".Dd \(date)\n.Dt \(program.name.uppercased()) \(program.manualSection)\n.Os\n"
        out += ".Sh NAME\n.Nm \(program.name)\n.Nd \(escape(program.summary))\n"
        out += ".Sh SYNOPSIS\n"
        var firstSynopsis = true
        for line in root.usage {
            if line.hasPrefix(" ") {
                out += literalWords(line)
                continue
            }
            if !firstSynopsis { out += ".Pp\n" }
            firstSynopsis = false
            out += ".Nm\n" + literalWords(line)
        }
        for command in program.commands {
            for line in command.usage {
                out += ".Pp\n.Nm\n" + literalWords(line)
            }
        }
        out += ".Sh DESCRIPTION\n" + prose(root.about)
        if let notes = root.notes { out += ".Pp\n" + prose(notes) }
        let sections = root.sections.filter { !$0.options.isEmpty || $0.showsCommonOptions }
        if !sections.isEmpty {
            out += ".Sh OPTIONS\n"
            for section in sections {
                var options = section.options
                if section.showsCommonOptions {
                    options += program.commonOptions.filter { common in !options.contains { $0.long == common.long } }
                }
                if sections.count > 1 {
                    out += ".Ss \(escape(heading(section.title)))\n"
                    let title = section.title.replacingAll("\n", with: " ")
                    if title != heading(section.title) + ":" { out += text(title) }
                }
                if !program.commands.isEmpty {
                    out += text("These options are accepted by every command, before or after it.")
                }
                out += Mdoc.options(options)
                if let footer = section.footer { out += ".Pp\n" + prose(footer) }
            }
        }
        if !program.commands.isEmpty {
            out += ".Sh COMMANDS\n"
            for command in program.commands {
                out += ".Ss \(command.name)\n"
                out += ".Bd -literal\n" + command.usage.map { literal(program.name + " " + $0) }.joined() + ".Ed\n"
                out += ".Pp\n" + prose(command.about)
                let options = command.ownOptions
                out += Mdoc.options(options)
                if let notes = command.notes { out += ".Pp\n" + prose(notes) }
                if !command.examples.isEmpty {
                    out += ".Pp\nExamples:\n.Bd -literal -offset indent\n" + command.examples.map(literal).joined() + ".Ed\n"
                }
                if let after = command.afterExamples { out += ".Pp\n" + prose(after) }
                out += ".Pp\n" + prose(command.exitStatus)
            }
        }
        for (title, text) in program.manualSections where title != "EXAMPLES" {
            out += ".Sh \(title)\n" + prose(text)
        }
        out += ".Sh EXIT STATUS\n" + prose(root.exitStatus)
        if !root.examples.isEmpty {
            out += ".Sh EXAMPLES\n.Bd -literal -offset indent\n" + root.examples.map(literal).joined() + ".Ed\n"
        }
        let seeAlso = program.seeAlso.sorted { ($0.section, $0.name) < ($1.section, $1.name) }
        if !seeAlso.isEmpty {
            out += ".Sh SEE ALSO\n"
            for (index, page) in seeAlso.enumerated() {
                out += ".Xr \(page.name) \(page.section)" + (index < seeAlso.count - 1 ? " ,\n" : "\n")
            }
        }
        return out
    }

    /// A synopsis line after `.Nm` as a text line.
    static func literalWords(_ line: String) -> String {
        literal(line.trimmingSpaces)
    }

    /// `Socket` of `Socket (first that applies...):`, `Limits` of `Limits:`.
    package static func heading(_ title: String) -> String {
        let flat = title.replacingAll("\n", with: " ")
        var end = flat.endIndex
        for mark in [" (", ":"] {
            if let range = flat.range(of: mark), range.lowerBound < end { end = range.lowerBound }
        }
        return String(flat[..<end])
    }
}

extension StringProtocol {
    /// Without leading and trailing blanks.
    var trimmingSpaces: String {
        var slice = Substring(self)
        while slice.first == " " { slice = slice.dropFirst() }
        while slice.last == " " { slice = slice.dropLast() }
        return String(slice)
    }

    /// Every `target` replaced by `replacement` (no Foundation here).
    func replacingAll(_ target: String, with replacement: String) -> String {
        var out = ""
        var rest = Substring(self)
        while let range = rest.range(of: target) {
            out += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return out + rest
    }

    /// Without the leading and trailing characters in `set`.
    func trimmingCharacters(in set: String) -> String {
        var slice = Substring(self)
        while let first = slice.first, set.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, set.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }

    /// The first occurrence of `target`, nil when there is none.
    func range(of target: String) -> Range<Index>? {
        guard !target.isEmpty else { return nil }
        var index = startIndex
        while index < endIndex {
            if self[index...].hasPrefix(target) {
                return index..<self.index(index, offsetBy: target.count)
            }
            index = self.index(after: index)
        }
        return nil
    }
}
