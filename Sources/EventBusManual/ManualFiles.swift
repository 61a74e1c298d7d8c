// The generated documentation files of the tree (issue 33): the man pages of
// the three programs and eventbusd.conf(5), and the bash, zsh and fish
// completions, each rendered from the programs' declarations
// (`eventbusInterface`, `brokerInterface`, `bridgeInterface`). They are
// committed under man/ and completions/ (what scripts/package installs);
// `swift run eventbus-manual` rewrites them, and ManualTests fails when one
// is stale. eventbus(7) and eventbus-policy(5) are written by hand in man/.
//
// Before editing: paths are relative to the repository root.
import EventBusBridge
import EventBusCommandLine
import EventBusServer

package enum ManualFiles {
    /// The date the generated pages carry (`.Dd`): change it with their content.
    package static let date = "December 5, 2026"

    /// The three programs' declarations.
    package static var programs: [ProgramDeclaration] { [eventbusInterface, brokerInterface, bridgeInterface] }

    /// The man pages written by hand (mandoc-checked, not generated).
    package static let handWritten = ["man/eventbus.7", "man/eventbus-policy.5"]

    /// Every generated file: (path from the repository root, content).
    package static func generated() -> [(path: String, text: String)] {
        var files: [(path: String, text: String)] = []
        for program in programs {
            files.append(("man/\(program.name).\(program.manualSection)", Mdoc.page(program, date: date)))
        }
        files.append(("man/eventbusd.conf.5", ConfigPage.page(date: date)))
        for program in programs {
            files.append(("completions/bash/\(program.name)", Completion.bash(program)))
            files.append(("completions/fish/\(program.name).fish", Completion.fish(program)))
        }
        files.append(("completions/zsh/_eventbus", Completion.zsh(programs)))
        return files
    }
}
