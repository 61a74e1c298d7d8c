// Shell completion scripts for bash, zsh and fish, rendered from a program's
// declaration (Interface.swift): its commands, every option (long and short),
// the values an option takes (files, directories, choices) and its operands.
// Event types and patterns come from the running broker (`eventbus types
// --format json`, through the bus options already on the command line);
// when no broker answers within 2 s ($EVENTBUS_COMPLETION_TIMEOUT), nothing
// is offered and nothing printed.
//
// Before editing: CompletionTests drives the bash script with `compgen`-style
// calls and loads the zsh and fish ones; the scripts must not depend on the
// bash-completion package (they use only bash builtins, sed and timeout).

package enum Completion {
    /// The options of `command` (nil: the top level) that take a value, and every option word.
    static func words(_ program: ProgramDeclaration, _ command: String?) -> (all: [String], valued: [(String, ValueKind)]) {
        var all: [String] = []
        var valued: [(String, ValueKind)] = []
        for option in program.options(for: command) {
            let names = ["--" + option.long] + (option.short.map { ["-\($0)"] } ?? [])
            all += names
            if let value = option.value { for name in names { valued.append((name, value.kind)) } }
        }
        return (all, valued)
    }

    /// The bash word list of a `choice`, or the shell code offering a kind.
    static func bashAction(_ kind: ValueKind, _ program: ProgramDeclaration) -> String {
        switch kind {
        case .subcommand: return bashAction(.choice(program.commands.map(\.name)), program)
        case .file: return #"COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null"#
        case .directory: return #"COMPREPLY=($(compgen -d -- "$cur")); compopt -o filenames 2>/dev/null"#
        case .choice(let words): return #"COMPREPLY=($(compgen -W "\#(words.joined(separator: " "))" -- "$cur"))"#
        case .eventType: return #"COMPREPLY=($(compgen -W "$(__eventbus_types)" -- "$cur"))"#
        case .pattern: return #"COMPREPLY=($(compgen -W "$(__eventbus_patterns)" -- "$cur"))"#
        case .command: return #"COMPREPLY=($(compgen -c -- "$cur"))"#
        case .text, .duration, .size, .count, .octal, .url, .json: return "COMPREPLY=()"
        }
    }

    /// The helpers every script shares: the bus options on the line, the
    /// broker's types, patterns made of them.
    static let bashHelpers = #"""
    # The bus options given on the line, one word each, to ask the same broker.
    __eventbus_bus() {
        local i
        for ((i = 1; i < ${#COMP_WORDS[@]}; i++)); do
            case ${COMP_WORDS[i]} in
                -s|--socket) [[ ${COMP_WORDS[i+1]} == = ]] && ((i++)); printf '%s\n' --socket "${COMP_WORDS[i+1]}"; ((i++)) ;;
                --system|--user) printf '%s\n' "${COMP_WORDS[i]}" ;;
            esac
        done
    }
    # The event types the running broker knows (nothing when none answers).
    __eventbus_types() {
        local -a bus
        mapfile -t bus < <(__eventbus_bus)
        timeout "${EVENTBUS_COMPLETION_TIMEOUT:-2}" eventbus "${bus[@]}" types --format json 2>/dev/null | sed -n 's/^{"type":"\([^"]*\)".*/\1/p'
    }
    # Those types, their prefixes with '.>', and '>'.
    __eventbus_patterns() {
        __eventbus_types | awk -F. '{ print; p = $1; for (i = 2; i <= NF; i++) { print p ".>"; p = p "." $i } }' | sort -u
        printf '%s\n' '>'
    }
    """#

    /// The bash script of `program` (one `complete -F` for its name).
    package static func bash(_ program: ProgramDeclaration) -> String {
        let function = "_" + program.name.replacingAll("-", with: "_")
        var out = "# bash completion for \(program.name), generated from its declaration by eventbus-manual: do not edit.\n"
        out += bashHelpers + "\n"
        let commands = program.commands.map(\.name)
        // Which options take a value, per command ("" is the top level).
        out += "\(function)_valued() {\n    case \"$1:$2\" in\n"
        var keys: [String] = []
        for command in [nil] + commands.map(Optional.some) {
            for (word, _) in words(program, command).valued { keys.append("\(command ?? ""):\(word)") }
        }
        out += keys.isEmpty ? "" : "        " + keys.joined(separator: "|") + ") return 0 ;;\n"
        out += "    esac\n    return 1\n}\n"
        // The option words and value completions, per command.
        out += "\(function)_options() {\n    case $1 in\n"
        for command in [nil] + commands.map(Optional.some) {
            out += "        \(command ?? "''")) echo '\(words(program, command).all.joined(separator: " "))' ;;\n"
        }
        out += "    esac\n}\n"
        out += "\(function)_value() {\n    case \"$1:$2\" in\n"
        for command in [nil] + commands.map(Optional.some) {
            var byAction: [(action: String, keys: [String])] = []
            for (word, kind) in words(program, command).valued {
                let action = bashAction(kind, program)
                if let index = byAction.firstIndex(where: { $0.action == action }) {
                    byAction[index].keys.append("\(command ?? ""):\(word)")
                } else {
                    byAction.append((action, ["\(command ?? ""):\(word)"]))
                }
            }
            for entry in byAction { out += "        \(entry.keys.joined(separator: "|"))) \(entry.action) ;;\n" }
        }
        out += "    esac\n}\n"
        out += "\(function)_operand() {\n    case \"$1:$2\" in\n"
        for command in [program.root] + program.commands {
            let name = command.name
            for (index, kind) in command.operands.kinds.enumerated() where !(name.isEmpty && !commands.isEmpty && index == 0) {
                let position = command.operands.repeats && index == command.operands.kinds.count - 1 ? "*" : "\(index)"
                out += "        \(name):\(position)) \(bashAction(kind, program)) ;;\n"
            }
        }
        out += "        *) COMPREPLY=() ;;\n    esac\n}\n"
        let hasCommands = commands.isEmpty ? "0" : "1"
        out += #"""
        \#(function)() {
            local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
            local i word command= operands=0 dashdash=0 after=0
            if [[ $cur == = ]]; then cur=; elif [[ $prev == = ]]; then prev=${COMP_WORDS[COMP_CWORD-2]}; fi
            for ((i = 1; i < COMP_CWORD; i++)); do
                word=${COMP_WORDS[i]}
                if ((dashdash)); then ((after++)); continue; fi
                case $word in
                    --) dashdash=1 ;;
                    =) ((i++)) ;;
                    -?*) \#(function)_valued "$command" "$word" && [[ ${COMP_WORDS[i+1]} != = ]] && ((i++)) ;;
                    *) if ((\#(hasCommands))) && [[ -z $command ]]; then command=$word; else ((operands++)); fi ;;
                esac
            done
            COMPREPLY=()
            if ((dashdash)); then
                if ((after == 0)); then COMPREPLY=($(compgen -c -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi
                return
            fi
            if [[ $prev == -?* ]] && \#(function)_valued "$command" "$prev"; then
                \#(function)_value "$command" "$prev"
                return
            fi
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$(\#(function)_options "$command")" -- "$cur"))
                return
            fi
            if ((\#(hasCommands))) && [[ -z $command ]]; then
                COMPREPLY=($(compgen -W "\#(commands.joined(separator: " "))" -- "$cur"))
                return
            fi
            \#(function)_operand "$command" "$operands"
            if ((${#COMPREPLY[@]} == 0)); then \#(function)_operand "$command" '*'; fi
        }
        complete -F \#(function) \#(program.name)

        """#
        return out
    }

    /// A help text cut to a short description: the first item, up to its
    /// first ` (`, `; ` or `: `, at most 70 characters; for a list of
    /// choices, their names. A leading qualifier (`with --wait: give up
    /// after ...`) is dropped: it says when, the rest says what.
    static func shortHelp(_ help: String) -> String {
        let items = help.split(separator: "\n")
        if items.count > 1 {
            // A list of choices (`json: ...`, `pretty: ...`): their names.
            return items.map { String($0.prefix { $0 != ":" }) }.joined(separator: ", ")
        }
        var text = String(items.first ?? "")
        if text.hasPrefix("with --"), let colon = text.range(of: ": ") { text = String(text[colon.upperBound...]) }
        for mark in [" (", "; ", ": "] {
            if let range = text.range(of: mark) { text = String(text[..<range.lowerBound]) }
        }
        if text.count > 70 { text = String(text.prefix(67)) + "..." }
        return text
    }

    /// `text` inside single quotes for zsh (`'` as `'\''`) or fish (`\` and `'` escaped).
    static func quoted(_ text: String, fish: Bool = false) -> String {
        if fish { return "'" + text.replacingAll("\\", with: "\\\\").replacingAll("'", with: "\\'") + "'" }
        return "'" + text.replacingAll("'", with: "'\\''") + "'"
    }

    /// The zsh action completing a kind of value.
    static func zshAction(_ kind: ValueKind, _ program: ProgramDeclaration) -> String {
        switch kind {
        case .subcommand: return zshAction(.choice(program.commands.map(\.name)), program)
        case .file: return "_files"
        case .directory: return "_files -/"
        case .choice(let words): return "(\(words.joined(separator: " ")))"
        case .eventType: return "__eventbus_types"
        case .pattern: return "__eventbus_patterns"
        case .command: return "_command_names -e"
        case .text, .duration, .size, .count, .octal, .url, .json: return " "
        }
    }

    /// The `_arguments` specs of `command`'s options and operands.
    static func zshSpecs(_ program: ProgramDeclaration, _ command: CommandDeclaration?) -> [String] {
        var specs: [String] = []
        for option in program.options(for: command?.name) {
            let help = shortHelp(option.help).replacingAll("\\", with: "\\\\").replacingAll("[", with: "\\[").replacingAll("]", with: "\\]").replacingAll(":", with: "\\:")
            let value = option.value.map { ":\($0.name.replacingAll(":", with: "\\:")):\(zshAction($0.kind, program))" } ?? ""
            let repeatable = option.value == nil ? "" : "*"
            if let short = option.short { specs.append("\(repeatable)-\(short)\(option.value == nil ? "" : "+")[\(help)]\(value)") }
            specs.append("\(repeatable)--\(option.long)\(option.value == nil ? "" : "=")[\(help)]\(value)")
        }
        if let command {
            for (index, kind) in command.operands.kinds.enumerated() {
                let last = command.operands.repeats && index == command.operands.kinds.count - 1
                specs.append("\(last ? "*" : "\(index + 1)"):operand:\(zshAction(kind, program))")
            }
        }
        return specs.map { quoted($0) }
    }

    /// The zsh script for `programs` (one `#compdef` file for all of them).
    package static func zsh(_ programs: [ProgramDeclaration]) -> String {
        var out = "#compdef \(programs.map(\.name).joined(separator: " "))\n"
        out += "# zsh completion for \(programs.map(\.name).joined(separator: ", ")), generated from their declarations by eventbus-manual: do not edit.\n\n"
        out += #"""
        # The bus options given on the line, to ask the same broker.
        __eventbus_bus() {
            local i
            reply=()
            for ((i = 1; i <= $#words; i++)); do
                case $words[i] in
                    -s|--socket) reply+=(--socket "$words[i+1]") ;;
                    --socket=*|--system|--user) reply+=("$words[i]") ;;
                esac
            done
        }
        # The event types the running broker knows (nothing when none answers).
        __eventbus_type_list() {
            local -a bus
            __eventbus_bus
            bus=("${reply[@]}")
            timeout "${EVENTBUS_COMPLETION_TIMEOUT:-2}" eventbus "${bus[@]}" types --format json 2>/dev/null | sed -n 's/^{"type":"\([^"]*\)".*/\1/p'
        }
        __eventbus_types() {
            local -a types
            types=(${(f)"$(__eventbus_type_list)"})
            compadd -a types
        }
        __eventbus_patterns() {
            local -a types patterns
            local t
            types=(${(f)"$(__eventbus_type_list)"})
            patterns=('>')
            for t in $types; do
                patterns+=("$t")
                while [[ $t == *.* ]]; do t=${t%.*}; patterns+=("$t.>"); done
            done
            compadd -Q -a patterns
        }

        """#
        for program in programs {
            let function = "_" + program.name.replacingAll("-", with: "_")
            if program.commands.isEmpty {
                out += "\(function)() {\n    _arguments -s -S \\\n"
                out += zshSpecs(program, program.root).map { "        \($0) \\\n" }.joined()
                out += "        && return 0\n    return 1\n}\n\n"
                continue
            }
            out += "\(function)() {\n    local curcontext=$curcontext state line ret=1\n    typeset -A opt_args\n"
            out += "    _arguments -C -s \\\n"
            out += zshSpecs(program, nil).map { "        \($0) \\\n" }.joined()
            out += "        '1:command:->command' '*::argument:->argument' && ret=0\n"
            out += "    case $state in\n        command)\n            local -a commands\n            commands=(\n"
            for command in program.commands {
                out += "                \(quoted(command.name + ":" + command.summary.replacingAll(":", with: "\\:")))\n"
            }
            out += "            )\n            _describe -t commands 'command' commands && ret=0\n            ;;\n"
            out += "        argument)\n            case $words[1] in\n"
            for command in program.commands {
                out += "                \(command.name)) _arguments -s -S \\\n"
                out += zshSpecs(program, command).map { "                    \($0) \\\n" }.joined()
                out += "                    && ret=0 ;;\n"
            }
            out += "            esac\n            ;;\n    esac\n    return ret\n}\n\n"
        }
        out += "case $service in\n"
        for program in programs {
            out += "    \(program.name)) _\(program.name.replacingAll("-", with: "_")) \"$@\" ;;\n"
        }
        out += "esac\n"
        return out
    }

    /// The fish completions of `program`.
    package static func fish(_ program: ProgramDeclaration) -> String {
        let name = program.name
        var out = "# fish completion for \(name), generated from its declaration by eventbus-manual: do not edit.\n\n"
        out += #"""
        # The bus options given on the line, to ask the same broker.
        function __eventbus_bus
            set -l tokens (commandline -opc)
            set -l i 1
            while test $i -le (count $tokens)
                switch $tokens[$i]
                    case -s --socket
                        set i (math $i + 1)
                        echo --socket
                        echo $tokens[$i]
                    case '--socket=*' --system --user
                        echo $tokens[$i]
                end
                set i (math $i + 1)
            end
        end
        # The event types the running broker knows (nothing when none answers).
        function __eventbus_types
            timeout (set -q EVENTBUS_COMPLETION_TIMEOUT; and echo $EVENTBUS_COMPLETION_TIMEOUT; or echo 2) eventbus (__eventbus_bus) types --format json 2>/dev/null | string replace -rf '^\{"type":"([^"]*)".*' '$1'
        end
        # Those types, their prefixes with '.>', and '>'.
        function __eventbus_patterns
            for t in (__eventbus_types)
                echo $t
                while string match -q '*.*' -- $t
                    set t (string replace -r '\.[^.]*$' '' -- $t)
                    echo $t'.>'
                end
            end | sort -u
            echo '>'
        end

        complete -c \#(name) -f

        """#
        func value(_ kind: ValueKind) -> String {
            switch kind {
            case .subcommand: return value(.choice(program.commands.map(\.name)))
            case .file: return "-r -F"
            case .directory: return "-x -a '(__fish_complete_directories)'"
            case .choice(let words): return "-x -a \(quoted(words.joined(separator: " "), fish: true))"
            case .eventType: return "-x -a '(__eventbus_types)'"
            case .pattern: return "-x -a '(__eventbus_patterns)'"
            case .command: return "-x -a '(__fish_complete_command)'"
            case .text, .duration, .size, .count, .octal, .url, .json: return "-x"
            }
        }
        func line(_ option: OptionDeclaration, condition: String?) -> String {
            var text = "complete -c \(name)"
            if let condition { text += " -n \(quoted(condition, fish: true))" }
            if let short = option.short { text += " -s \(short)" }
            text += " -l \(option.long)"
            if let kind = option.value?.kind { text += " " + value(kind) }
            return text + " -d \(quoted(shortHelp(option.help), fish: true))\n"
        }
        for option in program.commonOptions { out += line(option, condition: nil) }
        if program.commands.isEmpty {
            for option in program.root.ownOptions { out += line(option, condition: nil) }
            for kind in program.root.operands.kinds.prefix(1) { out += "complete -c \(name) \(value(kind))\n" }
            return out
        }
        for command in program.commands {
            out += "complete -c \(name) -n __fish_use_subcommand -a \(command.name) -d \(quoted(command.summary, fish: true))\n"
        }
        for command in program.commands {
            let condition = "__fish_seen_subcommand_from \(command.name)"
            for option in command.ownOptions { out += line(option, condition: condition) }
            if let kind = command.operands.kinds.first, kind != .json {
                out += "complete -c \(name) -n \(quoted(condition, fish: true)) \(value(kind))\n"
            }
        }
        return out
    }
}
