// Connecting and subscribing for `listen` and `wait`, and sorting the frames
// a subscriber receives (PROTOCOL.md "Requests", "Events", "Semantics").
//
// Before editing: subscribe requests carry `req` 1...N (one per pattern), so
// an `ok` or `error` with such a `req` is the answer to pattern N; anything
// else the broker sends a subscriber is an event, a `dropped` notice, or an
// `error` without `req` (e.g. `slow_consumer` just before it closes us).
import EventBusCommandLine
import EventBusProtocol
import EventBusSystem

/// Validates PATTERN operands before anything is sent.
/// - Throws: `CLIError` 64 naming the first bad pattern.
func validatePatterns(_ patterns: [String], command: String) throws(CLIError) {
    for text in patterns where Pattern(text) == nil {
        throw .usage(command, "invalid pattern '\(text)': '.'-separated segments of A-Z a-z 0-9 _ - :, a whole segment may be '*', the last may be '>'")
    }
}

/// Where a listener is in the broker's sequence (PROTOCOL.md "Retained
/// events and history (1.1)"): every matching event up to `seq` of broker
/// run `instance` has been handled.
struct StreamPosition: Equatable {
    var instance: String?
    var seq: UInt64
}

/// `{"op":"subscribe","req":1,"type":"a.*"}\n{"op":"subscribe","req":2,...}\n`,
/// with `last` and `since`/`instance` when given (1.1).
func subscribeFrames(_ patterns: [String], last: Bool = false, since: StreamPosition? = nil) -> [UInt8] {
    var out: [UInt8] = []
    for (index, pattern) in patterns.enumerated() {
        ClientRequest.subscribe(pattern: pattern, last: last ? true : nil, since: since?.seq, instance: since?.instance)
            .encode(req: Int64(index + 1), to: &out)
    }
    return out
}

/// What one frame received by a subscriber is.
enum SubscriberFrame {
    /// An `event` frame, read and validated (its fields index into the frame).
    case event(EventFields)
    /// `{"op":"dropped","count":N,"since_seq":S}`: events lost for this connection.
    case dropped(count: UInt64, sinceSeq: UInt64)
    /// (1.1) `{"op":"gap","type":P,"since_seq":S,"first_seq":F}`: the
    /// broker's history did not reach back to `S + 1`.
    case gap(pattern: String, sinceSeq: UInt64, firstSeq: UInt64)
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
        case .gap(let pattern, let since, let first)?: self = .gap(pattern: pattern, sinceSeq: since, firstSeq: first)
        case .unknown?, nil: self = .other
        }
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

/// Connects to `socket` as `client` (`eventbus-listen`, `eventbus-wait`) and
/// sends `frames` (subscribes, without waiting for the answers: they arrive
/// in order with the events, after the `hello` reply of `req` 0).
/// - Parameter overflow: (1.2) `--overflow`, sent in that `hello`; nil sends none.
func connectAndSubscribe(_ socket: String, client: String, overflow: OverflowPolicy? = nil, patterns: [String], frames: (() -> [UInt8])? = nil) throws(CLIError) -> BrokerConnection {
    let connection = try BrokerConnection.connect(to: socket, client: client, overflow: overflow)
    try connection.send(frames?() ?? subscribeFrames(patterns))
    return connection
}

/// Sleeps up to `milliseconds`, returning early (true) if standard output's
/// reader goes away meanwhile.
func sleepWatchingStandardOutput(milliseconds: Int32) -> Bool {
    var entries = [PollEntry(.standardOutput, events: [])]
    let n = (try? FileDescriptor.poll(&entries, timeoutMilliseconds: milliseconds)) ?? 0
    return n > 0 && !entries[0].returned.intersection([.hangup, .error]).isEmpty
}

/// A note on stderr for a `gap` frame (1.1): what may have been missed.
/// - Parameters:
///   - asked: the position the subscribe asked for.
///   - instance: the broker run answering (from `hello`), if known.
func reportGap(pattern: String, sinceSeq: UInt64, firstSeq: UInt64, asked: StreamPosition?, instance: String?) {
    if let old = asked?.instance, let instance, old != instance {
        printError("the broker restarted (run \(old), seq \(asked!.seq), is now run \(instance)); events of '\(pattern)' published in between may have been missed, replaying this run's from seq \(firstSeq)")
    } else {
        printError("the broker's history no longer reaches back to seq \(sinceSeq + 1); events of '\(pattern)' from seq \(sinceSeq + 1) to \(firstSeq - 1) may have been missed")
    }
}

/// A note on stderr when `--since SEQ` is beyond the broker's newest seq:
/// nothing is replayed, and new events print as they come.
func reportSinceAhead(asked: UInt64, newest: UInt64) {
    printError("--since \(asked) is ahead of the broker: its newest event is seq \(newest), so nothing is replayed; events print as they are published (seqs start again at 1 when the broker restarts: was \(asked) from an earlier run?)")
}

/// A note on stderr for a `dropped` notice.
func reportDropped(count: UInt64, sinceSeq: UInt64) {
    printError("the broker dropped \(count) event\(count == 1 ? "" : "s") for this listener, starting at seq \(sinceSeq) (reading too slowly)")
}
