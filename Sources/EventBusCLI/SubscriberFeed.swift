// What `eventbus listen` and `eventbus wait` make of each frame the broker
// sends: one switch over the session's `Incoming` (EventBusSession) for
// both commands, so a refused subscribe, a revoked pattern, a broker error,
// a drop or a gap is handled the same way by each.
//
// Before editing: this file prints nothing, reads no clock and owns no
// descriptor. `handle` returns what the command must do and queues the
// lines for standard error (`takeNotes`), which the command prints at once,
// before it acts on the step; unit tests (EventBusCLITests) read both.
@_spi(Package) import EventBusProtocol
import EventBusSession

package struct SubscriberFeed {
    /// What the command does with one frame.
    package enum Step {
        /// An event to print: the frame holds it.
        case event(EventFields)
        /// The session released the events it held for order (`.settled`):
        /// take them with `session.takeReleased()`.
        case released
        /// The broker acknowledged one more subscription (`allSubscribed`
        /// says whether it was the last).
        case subscribed
        /// The run ends with this error.
        case stop(CLIError)
        /// Nothing for the command to do.
        case none
    }

    /// The session the command writes its frames from (hello, subscribes, sentinel).
    package var session: BusSession<Never>
    /// The patterns subscribed to (PATTERN operands).
    package let patterns: [String]
    /// (1.3) The queue group joined, if any: a broker without the `groups`
    /// feature would deliver every event to every member, so it stops the run.
    package let group: String?
    /// Subscriptions the broker acknowledged so far (on every connection).
    package private(set) var acknowledged = 0
    /// An `error` without `req`, or a refused `hello`: the reason to give if
    /// the broker then closes. The command clears it once it reported it.
    package var brokerError: Reply? = nil
    private var revokedPatterns: RevokedPatterns
    private var notes: [String] = []

    package init(session: BusSession<Never>, patterns: [String], group: String? = nil) {
        self.session = session
        self.patterns = patterns
        self.group = group
        revokedPatterns = RevokedPatterns(patterns)
    }

    /// Whether every pattern's subscription has been acknowledged.
    package var allSubscribed: Bool { acknowledged == patterns.count }

    /// The lines for standard error queued since the last call, oldest first.
    package mutating func takeNotes() -> [String] {
        defer { notes.removeAll() }
        return notes
    }

    /// Reads one frame from the broker.
    package mutating func handle(_ frame: RawSpan) -> Step {
        switch session.handle(frame) {
        case .event(let fields):
            return .event(fields)
        case .settled(let ahead):
            if let ahead { notes.append(SubscriberNotes.sinceAhead(asked: ahead.asked, newest: ahead.newest)) }
            return .released
        case .subscribed:
            acknowledged += 1
            return .subscribed
        case .dropped(let count, let since):
            notes.append(SubscriberNotes.dropped(count: count, sinceSeq: since))
        case .gap(let gap):
            notes.append(SubscriberNotes.gap(gap, instance: session.greeting?.instance))
        case .subscribeRefused(let pattern, let reply, _):
            return .stop(reply.failure("subscribing to '\(pattern)'"))
        case .revoked(let pattern, let reply):
            switch revokedPatterns.revoke(pattern, reply) {
            case .success(let note): notes.append(note)
            case .failure(let error): return .stop(error)
            }
        case .helloRefused(let reply), .error(let reply):
            brokerError = reply
        case .greeted(let info, _) where group != nil && !info.features.contains("groups"):
            // A broker before 1.3 would take `group` for an unknown field: every listener would get every event.
            return .stop(CLIError(.protocolError, "the broker has no queue groups (no 'groups' in its features: it is older than protocol 1.3), so --group cannot share the events"))
        case .held, .greeted, .unsubscribed, .other, .unreadable, .ignored, .servers, .request:
            break
        }
        return .none
    }
}
