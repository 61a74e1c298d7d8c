// Connecting and subscribing for `listen`, `wait` and `get` (PROTOCOL.md
// "Requests", "Events", "Semantics"): each drives a `BusSession`
// (EventBusSession), which says the `hello`, subscribes with `since`,
// matches replies to requests and keeps the position; this file holds what
// the three share on top of it: validating patterns, `--overflow`, the
// session's options, and the notes on stderr.
//
// Before editing: the session's `hello` is `req` 0 (`firstReq`), as
// `BrokerConnection.connect` says it for the other commands.
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
import EventBusSession
@_spi(Package) import EventBusSystem

/// Validates PATTERN operands before anything is sent.
/// - Throws: `CLIError` 64 naming the first bad pattern.
func validatePatterns(_ patterns: [String], command: String) throws(CLIError) {
    for text in patterns where Pattern(text) == nil {
        throw .usage(command, "invalid pattern '\(text)': '.'-separated segments of A-Z a-z 0-9 _ - :, a whole segment may be '*', the last may be '>'")
    }
}

/// (1.2) `--overflow RULE` of `listen` and `wait`: nil when not given (no
/// `overflow` is sent, so the broker's default applies: `wait`, PROTOCOL.md
/// "Flow control (1.2)").
/// - Throws: `CLIError` 64 for a rule the protocol does not have.
func overflowOption(_ args: ParsedArguments, command: String) throws(CLIError) -> OverflowPolicy? {
    guard let text = args.value("overflow") else { return nil }
    guard let rule = OverflowPolicy(rawValue: text) else {
        throw .usage(command, "unknown overflow rule '\(text)'; use \(OverflowPolicy.allCases.map(\.rawValue).joined(separator: ", "))")
    }
    return rule
}

/// A command's session options: `hello` as `client` (`eventbus-listen`)
/// with `overflow`, `req` 0; `ordered` for a listener that follows its
/// position. Every CLI connection says its `hello` from these.
func sessionOptions(client: String, overflow: OverflowPolicy? = nil, ordered: Bool = false) -> SessionOptions {
    SessionOptions(hello: Hello(client: client, overflow: overflow), ordered: ordered, firstReq: 0)
}

/// A subscriber command's session (`listen`, `wait`, `get`), see `sessionOptions`.
func subscriberSession(client: String, overflow: OverflowPolicy? = nil, ordered: Bool = false) -> BusSession<Never> {
    BusSession(sessionOptions(client: client, overflow: overflow, ordered: ordered))
}

extension BusSession {
    /// A new connection's frames: the `hello`, then a subscribe per pattern
    /// (with `last` when asked, with `since` where the position covers it),
    /// then, for an ordered session, the sentinel. (1.3) With `group`, each
    /// pattern joins that queue group instead (no `last`, no `since`).
    mutating func connectionFrames(_ patterns: [String], last: Bool = false, group: String? = nil) -> [UInt8] {
        connectionStarted()
        for pattern in patterns { subscribe(SubscriptionKey(pattern, group: group), last: last) }
        settle()
        return takeOutput()
    }
}

/// Connects to `socket` and sends `frames()` (the session's `hello` and
/// subscribes, without waiting for the answers: they arrive in order with the events).
func connectAndSubscribe(_ socket: String, frames: () -> [UInt8]) throws(CLIError) -> BrokerConnection {
    let connection = try BrokerConnection.open(to: socket)
    try connection.send(frames())
    return connection
}

/// Sleeps up to `milliseconds`, returning early (true) if standard output's
/// reader goes away meanwhile.
func sleepWatchingStandardOutput(milliseconds: Int32) -> Bool {
    var entries = [PollEntry(.standardOutput, events: [])]
    let n = (try? FileDescriptor.poll(&entries, timeoutMilliseconds: milliseconds)) ?? 0
    return n > 0 && !entries[0].returned.intersection([.hangup, .error]).isEmpty
}

/// A note on stderr for a `dropped` notice (`get`; `listen` and `wait` have theirs from `SubscriberFeed`).
func reportDropped(count: UInt64, sinceSeq: UInt64) {
    printError(SubscriberNotes.dropped(count: count, sinceSeq: sinceSeq))
}
