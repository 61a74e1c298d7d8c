// `--help` texts for `eventbus` and each subcommand, and `--version`.
// Printed to standard output with exit status 0 (GNU coding standards).
//
// Before editing: the texts are rendered from the CLI's declaration,
// `eventbusInterface` (EventBusCommandLine/EventbusInterface.swift), the same
// one the parser, eventbus(1) and the shell completions come from: change
// them there. The version is `EventBusRelease.version`, shared with eventbusd.
import EventBusCommandLine
@_spi(Package) import EventBusProtocol

/// What `--version` prints: the release, the protocol edition and the features.
let versionText = EventBusRelease.versionText(program: "eventbus")

/// `eventbus --help`.
var mainHelp: String { HelpText.render(eventbusInterface, command: eventbusInterface.root) }

/// The help text of a subcommand, or nil for an unknown name.
func helpText(for command: String) -> String? {
    eventbusInterface.command(command).map { HelpText.render(eventbusInterface, command: $0) }
}
