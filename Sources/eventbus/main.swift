// Entry point of the `eventbus` CLI: find the subcommand, parse its options,
// resolve the socket path, run it, and turn any `CLIError` into one stderr
// line and an exit status (sysexits(3)).
//
// Before editing: nothing here may load more than a publish needs; start-up
// time is measured against redis-cli (docs/CLI.md). No Foundation.
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSystem
import Glibc

FileDescriptor.openNullOnClosedStandardDescriptors()
ProcessSettings.ignoreBrokenPipeSignal()
exit(runCommandLine(Array(CommandLine.arguments.dropFirst())))

/// Runs one command line (without the program name) and returns the exit status.
func runCommandLine(_ arguments: [String]) -> Int32 {
    do {
        try dispatch(arguments)
        return ExitStatus.success.rawValue
    } catch {
        if let message = error.message { printError(message) }
        return error.status
    }
}

/// The function that runs each command of `eventbusInterface` (nil: none).
private func runner(_ name: String) -> ((ParsedArguments, String) throws(CLIError) -> Void)? {
    switch name {
    case "publish": runPublish
    case "listen": runListen
    case "wait": runWait
    case "get": runGet
    case "clear": runClear
    case "stats": runStats
    case "clients": runClients
    case "types": runTypes
    case "top": runTop
    case "ping": runPing
    case "reload": runReload
    case "request": runRequest
    case "serve": runServe
    default: nil
    }
}

private func dispatch(_ arguments: [String]) throws(CLIError) {
    let top = try parseCommand(arguments[...], specs: eventbusInterface.specs(), command: nil, stopAtFirstOperand: true)
    guard let name = top.operands.first else {
        if top.has("help") { return try StandardOutput.write(mainHelp) }
        if top.has("version") { return try StandardOutput.write(versionText) }
        let names = eventbusInterface.commands.map(\.name)
        throw .usage(nil, "missing COMMAND (\(names.dropLast().joined(separator: ", ")) or \(names.last!))")
    }
    guard eventbusInterface.command(name) != nil else {
        if top.has("help") { return try StandardOutput.write(mainHelp) }
        throw .usage(nil, "unknown command '\(name)'" + commandSuggestion(name))
    }
    var args = try parseCommand(top.operands.dropFirst(), specs: eventbusInterface.specs(for: name), command: name)
    args.options.insert(contentsOf: top.options, at: 0)
    if args.has("help") { return try StandardOutput.write(helpText(for: name)!) }
    if args.has("version") { return try StandardOutput.write(versionText) }
    if name == "help" {
        // `eventbus help [COMMAND]`: the same as `eventbus [COMMAND] --help`.
        guard let topic = args.operands.first else { return try StandardOutput.write(mainHelp) }
        guard let text = helpText(for: topic) else { throw .usage(nil, "unknown command '\(topic)'" + commandSuggestion(topic)) }
        return try StandardOutput.write(text)
    }
    guard let run = runner(name) else { preconditionFailure("eventbus \(name) is declared but runs nothing") }
    try run(args, resolveSocket(args, command: name))
}

/// `; did you mean 'publish'?` for a mistyped command, and the CLI's word for
/// the protocol's (`subscribe` is `listen`); empty when nothing is close.
private func commandSuggestion(_ typed: String) -> String {
    let words = ["subscribe": "listen", "sub": "listen", "pub": "publish"]
    guard let near = words[typed] ?? Suggestion.closest(to: typed, among: eventbusInterface.commands.map(\.name)) else { return "" }
    return "; did you mean '\(near)'?"
}

/// The socket path per PROTOCOL.md "Transport": `--socket`; `--system` or
/// `--user`; `$EVENTBUS_SOCKET`; the user bus when `XDG_RUNTIME_DIR` is set
/// and not root; the system bus.
private func resolveSocket(_ args: ParsedArguments, command: String) throws(CLIError) -> String {
    let selection: BusSelection
    let chosen = [args.has("socket"), args.has("system"), args.has("user")].filter { $0 }.count
    guard chosen <= 1 else { throw .usage(command, "give only one of --socket, --system and --user") }
    if let path = args.value("socket") {
        selection = .path(path)
    } else if args.has("system") {
        selection = .system
    } else if args.has("user") {
        selection = .user
    } else {
        selection = .automatic
    }
    do {
        return try SocketPath.resolve(selection, environment: ProcessEnvironment.variables(), effectiveUID: ProcessIdentity.effectiveUID)
    } catch {
        throw .usage(command, error.description)
    }
}
