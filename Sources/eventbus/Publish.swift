// `eventbus publish TYPE [DATA]`: one event, acknowledged by the broker
// (PROTOCOL.md "Requests", `publish`). `--lines` is in PublishLines.swift.
//
// Before editing: this is the start-up-critical path (a shell loop calling
// `eventbus publish` is the most common use). Validate everything before
// connecting, send the publish right behind the `hello` that names the
// connection (not waited for), read the replies, exit: no extra round trip,
// nothing loaded that a publish does not need.
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
@_spi(Package) import EventBusSystem
import Glibc

/// What `publish` sends in each event besides `data`.
struct PublishEnvelope {
    var type: String
    var source: String?
    var id: String?
    /// (1.1) Keep it as the retained event of its type (`--retain`).
    var retain = false
    /// (1.3) Queue groups: the member this key hashes to gets the event (`--key`).
    var key: String? = nil

    /// `{"op":"publish","req":R,"type":"T"[,"source":S][,"id":I][,"key":K][,"retain":true],"data":D}`
    func request(data: JSONText) -> ClientRequest {
        .publish(type: type, source: source, id: id, key: key, retain: retain ? true : nil, data: data)
    }
}

func runPublish(_ args: ParsedArguments, socket: String) throws(CLIError) {
    let command = "publish"
    guard let typeName = args.operands.first else { throw .usage(command, "missing event TYPE") }
    try validateEventType(typeName, command: command)
    // The connection is named `eventbus-publish` (in `hello`, for `eventbus clients`), which the
    // broker would make the default `source`; the documented default stays the publisher's `pid/<pid>`.
    let source = args.value("source") ?? "pid/\(ProcessIdentity.current.pid)"
    let envelope = PublishEnvelope(type: typeName, source: source, id: args.value("id"), retain: args.has("retain"), key: try keyOption(args, command: command))

    if args.has("lines") || args.has("json-lines") {
        guard args.operands.count == 1 else { throw .usage(command, "--lines reads events from standard input and takes no DATA") }
        guard !args.has("string") else { throw .usage(command, "--lines and --string cannot be combined") }
        try publishLines(envelope, json: args.has("json-lines"), printSeq: args.has("print-seq"), socket: socket)
        return
    }
    guard args.operands.count <= 2 else { throw .usage(command, "too many arguments; quote DATA as one argument, e.g. '{\"a\": 1}'") }

    let data = try operandData(args, command: command)
    let connection = try BrokerConnection.connect(to: socket, client: "eventbus-publish")
    let reply = try connection.request(envelope.request(data: data))
    guard reply.isOK else { throw reply.failure("publish") }
    if args.has("print-seq") {
        guard let seq = reply.unsigned("seq") else { throw CLIError(.software, "the broker's reply has no seq") }
        try StandardOutput.write("\(seq)\n")
    }
}

/// The DATA of `publish TYPE [DATA | -]` and `request TYPE [DATA | -]`,
/// validated and compacted before anything is sent: `--string TEXT` as a
/// JSON string; DATA; '-' or no DATA: standard input unless it is a terminal
/// (blank input: null); otherwise null.
/// - Throws: `CLIError` 64 for DATA with `--string`, 65 for invalid JSON.
func operandData(_ args: ParsedArguments, command: String) throws(CLIError) -> JSONText {
    if let text = args.value("string") {
        guard args.operands.count == 1 else { throw .usage(command, "give either DATA or --string TEXT, not both") }
        return JSONText(quoting: text)
    }
    if args.operands.count == 2 && args.operands[1] != "-" {
        return try validatedJSON(Array(args.operands[1].utf8), origin: "DATA")
    }
    if args.operands.count == 2 || !FileDescriptor.standardInput.isTerminal {
        let input = try readAllStandardInput()
        if isBlank(input) { return .null }
        return try validatedJSON(input, origin: "standard input", alwaysHint: args.operands.count == 2 ? "" : implicitInputHint)
    }
    return .null
}

/// Event types are checked here so a bad one is a usage error and nothing is
/// sent (PROTOCOL.md "Names and patterns").
func validateEventType(_ name: String, command: String) throws(CLIError) {
    guard EventType(name) == nil else { return }
    if Pattern(name) != nil {
        throw .usage(command, "'\(name)' is a pattern; \(command) needs an exact event TYPE")
    }
    throw .usage(command, "invalid event TYPE '\(name)': 1-255 bytes of '.'-separated segments of A-Z a-z 0-9 _ - :")
}

/// (1.3) `--key K` of `publish` and `request`: 1-255 bytes (PROTOCOL.md
/// "Queue groups"), checked before anything is sent.
/// - Throws: `CLIError` 64 for an empty or longer key.
func keyOption(_ args: ParsedArguments, command: String) throws(CLIError) -> String? {
    guard let key = args.value("key") else { return nil }
    guard (1...255).contains(key.utf8.count) else { throw .usage(command, "invalid --key: 1-255 bytes, got \(key.utf8.count)") }
    return key
}

/// The hint for DATA that starts like plain text.
let defaultTextHint = "; to send text use --string TEXT"

/// The hint for standard input read as DATA because none was given: in a
/// `while read` loop that input is the rest of the loop's (docs/CLI.md).
let implicitInputHint = "; no DATA was given, so standard input was read as DATA (in a 'while read' loop that is the loop's input): give DATA as an argument, or '</dev/null' for none"

/// Validates `bytes` as one JSON value and returns it compacted.
/// - Parameters:
///   - textHint: added to the message when the text starts like plain text
///     (a letter) and no quoting mistake explains the error.
///   - alwaysHint: added to the message in every case (e.g. `implicitInputHint`).
/// - Throws: `CLIError` 65 (`EX_DATAERR`) naming `origin` and the position,
///   with the text around it (`invalidJSONMessage`).
func validatedJSON(_ bytes: [UInt8], origin: String, textHint: String = defaultTextHint, alwaysHint: String = "") throws(CLIError) -> JSONText {
    do {
        return try JSONText(validating: bytes, layout: .compact)
    } catch {
        let hint = alwaysHint.isEmpty && looksLikeBareText(bytes) ? textHint : ""
        throw CLIError(.dataError, invalidJSONMessage(bytes, error, origin: origin, hint: hint, alwaysHint: alwaysHint))
    }
}

/// Whether the input starts like plain text (a letter), not like JSON.
private func looksLikeBareText(_ bytes: [UInt8]) -> Bool {
    guard let first = bytes.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) else { return false }
    return (0x41...0x5A).contains(first) || (0x61...0x7A).contains(first)
}

func isBlank(_ bytes: [UInt8]) -> Bool {
    bytes.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
}

/// One read(2) of standard input (at most 64 KiB), appended to `bytes`.
/// - Throws: `CLIError` 74 on a read error.
func readStandardInput(appendingTo bytes: inout [UInt8]) throws(CLIError) -> IOResult<Int> {
    do throws(SystemError) {
        return try FileDescriptor.standardInput.read(appendingTo: &bytes, limit: 1 << 16)
    } catch {
        throw CLIError(.ioError, "cannot read standard input: \(error.errno)")
    }
}

/// Reads standard input to its end.
/// - Throws: `CLIError` 74 on a read error.
func readAllStandardInput() throws(CLIError) -> [UInt8] {
    var result: [UInt8] = []
    while true {
        switch try readStandardInput(appendingTo: &result) {
        case .complete(0): return result
        case .complete: break
        case .wouldBlock:
            do { _ = try FileDescriptor.standardInput.poll(.readable, timeoutMilliseconds: -1) } catch {
                throw CLIError(.ioError, "cannot read standard input: \(error.errno)")
            }
        }
    }
}
