// `eventbus get PATTERN` and `eventbus clear TYPE` (PROTOCOL.md "Retained
// events and history (1.1)"): the current value of a type for scripts
// (`eventbus get --format data currency.changed`), and removing it.
//
// Before editing: `get` is one `subscribe` with `last: true` on a fresh
// connection (a `BusSession`, Subscription.swift): its `ok` says how many retained events follow (`retained`),
// and the command exits once it has them all (or been told, with a
// `dropped` notice, that some did not fit). Exit 1 without a word when
// there is nothing: scripts test for it (`if value=$(eventbus get ...)`).
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSession
import EventBusSystem

func runGet(_ args: ParsedArguments, socket: String) throws(CLIError) {
    let command = "get"
    guard let pattern = args.operands.first else { throw .usage(command, "missing PATTERN") }
    guard args.operands.count == 1 else { throw .usage(command, "give one PATTERN") }
    try validatePatterns([pattern], command: command)
    let formatter = EventFormatter(format: try OutputFormat.chosen(args.format(command: command), command: command))
    var session = subscriberSession(client: "eventbus-get")
    let connection = try connectAndSubscribe(socket) { session.connectionFrames([pattern], last: true) }
    var expected: UInt64? = nil
    var received: UInt64 = 0
    var failure: CLIError? = nil
    var output = StandardOutput()
    while expected.map({ received < $0 }) ?? true {
        let outcome = try connection.receive(deadline: nil) { frame in
            switch session.handle(frame) {
            case .subscribed(_, let reply, _):
                expected = reply.unsigned("retained") ?? 0
            case .subscribeRefused(_, let reply, _), .error(let reply):
                failure = reply.failure("get")
                return false
            case .event(let fields):
                // Only the retained events follow the `ok`; live ones come after them.
                guard let expected, received < expected else { return false }
                output.withBuffer { _ = formatter.append(event: frame, fields, to: &$0) }
                received += 1
            case .dropped(let count, let since):
                reportDropped(count: count, sinceSeq: since)
                received += count
            case .held, .gap, .greeted, .helloRefused, .unsubscribed, .answered, .settled, .revoked, .other, .unreadable, .ignored, .servers, .request:
                break
            }
            return expected.map { received < $0 } ?? true
        }
        try output.flush()
        if let failure { throw failure }
        if outcome == .closed && (expected.map { received < $0 } ?? true) { throw connection.closedError }
    }
    if expected == 0 { throw .quiet(.nothing) }
}

func runClear(_ args: ParsedArguments, socket: String) throws(CLIError) {
    let command = "clear"
    guard let type = args.operands.first else { throw .usage(command, "missing event TYPE") }
    guard args.operands.count == 1 else { throw .usage(command, "give one event TYPE") }
    try validateEventType(type, command: command)
    let connection = try BrokerConnection.connect(to: socket, client: "eventbus-clear")
    let reply = try connection.request(.clear(type: type))
    guard reply.isOK else { throw reply.failure("clear") }
    if reply.bool("removed") != true { throw .quiet(.nothing) }
}
