// Connecting and subscribing for `listen` and `wait`, and sorting the frames
// a subscriber receives (PROTOCOL.md "Requests", "Events", "Semantics").
//
// Before editing: subscribe requests carry `req` 1...N (one per pattern), so
// an `ok` or `error` with such a `req` is the answer to pattern N; anything
// else the broker sends a subscriber is an event, a `dropped` notice, or an
// `error` without `req` (e.g. `slow_consumer` just before it closes us).
import EventBusProtocol
import EventBusSystem

/// Validates PATTERN operands before anything is sent.
/// - Throws: `CLIError` 64 naming the first bad pattern.
func validatePatterns(_ patterns: [String], command: String) throws(CLIError) {
    for text in patterns where Pattern(text) == nil {
        throw .usage(command, "invalid pattern '\(text)': '.'-separated segments of A-Z a-z 0-9 _ - :, a whole segment may be '*', the last may be '>'")
    }
}

/// `{"op":"subscribe","req":1,"type":"a.*"}\n{"op":"subscribe","req":2,...}\n`
func subscribeFrames(_ patterns: [String]) -> [UInt8] {
    var out: [UInt8] = []
    for (index, pattern) in patterns.enumerated() {
        ClientRequest.subscribe(pattern: pattern).encode(req: Int64(index + 1), to: &out)
    }
    return out
}

/// What one frame received by a subscriber is.
enum SubscriberFrame {
    /// An `event` frame, read and validated (its fields index into the frame).
    case event(EventFields)
    /// `{"op":"dropped","count":N,"since_seq":S}`: events lost for this connection.
    case dropped(count: UInt64, sinceSeq: UInt64)
    /// An `ok` or `error` reply.
    case reply(Reply)
    /// Anything else (a newer broker's frame, one that cannot be read): ignored.
    case other

    /// Reads a frame with the clients' reader (`BrokerFrame.read`): nothing
    /// the broker sends is printed before it has been validated as JSON and
    /// as the frame it claims to be.
    init(_ frame: UnsafeRawBufferPointer) {
        switch try? BrokerFrame.read(frame) {
        case .event(let fields)?: self = .event(fields)
        case .ok(let reply)?, .error(let reply)?: self = .reply(reply)
        case .dropped(let count, let since)?: self = .dropped(count: count, sinceSeq: since)
        case .gap?, .unknown?, nil: self = .other
        }
    }
}

/// Connects to `socket` and sends one subscribe per pattern (without waiting
/// for the answers: they arrive in order with the events).
func connectAndSubscribe(_ socket: String, patterns: [String]) throws(CLIError) -> BrokerConnection {
    let connection = try BrokerConnection.connect(to: socket)
    try connection.send(subscribeFrames(patterns))
    return connection
}

/// Sleeps up to `milliseconds`, returning early (true) if standard output's
/// reader goes away meanwhile.
func sleepWatchingStandardOutput(milliseconds: Int32) -> Bool {
    var entries = [PollEntry(.standardOutput, events: [])]
    let n = (try? FileDescriptor.poll(&entries, timeoutMilliseconds: milliseconds)) ?? 0
    return n > 0 && !entries[0].returned.intersection([.hangup, .error]).isEmpty
}

/// A note on stderr for a `dropped` notice.
func reportDropped(count: UInt64, sinceSeq: UInt64) {
    printError("the broker dropped \(count) event\(count == 1 ? "" : "s") for this listener, starting at seq \(sinceSeq) (reading too slowly)")
}
