// (1.3) Which subscription of a pattern the session means: PROTOCOL.md
// "Request/reply" makes a serving subscription separate from a plain one of
// the same pattern, and "Queue groups" makes a group member separate from
// both (the broker's group is its uid, pattern, `serve` and name). The
// session keeps its registrations by this key, sends `serve`/`group` with
// every subscribe and unsubscribe of it, and never asks a replay (`since`,
// `last`) for one that serves or is in a group (requests are never replayed;
// `since`/`last` with `group` is `bad_request`).
@_spi(Package) import EventBusProtocol

/// A subscription: its pattern and (1.3) whether it serves requests and its
/// queue group. A plain one is the 1.0 subscription.
package struct SubscriptionKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    package var pattern: String
    /// A serving subscription (requests, never events).
    package var serve: Bool
    /// The queue group it is a member of; nil: none.
    package var group: String?

    package init(_ pattern: String, serve: Bool = false, group: String? = nil) {
        self.pattern = pattern
        self.serve = serve
        self.group = group
    }

    /// Neither serving nor in a group: the only kind a replay is asked for.
    package var isPlain: Bool { !serve && group == nil }

    /// `order.>`, `thumb.* serve`, `job.* group=workers`.
    package var description: String {
        pattern + (serve ? " serve" : "") + (group.map { " group=" + $0 } ?? "")
    }

    package static func < (a: Self, b: Self) -> Bool {
        (a.pattern, a.serve ? 1 : 0, a.group ?? "") < (b.pattern, b.serve ? 1 : 0, b.group ?? "")
    }

    /// The `subscribe` of it; `serve`/`group` only when set, so a plain one
    /// is the frame a 1.2 broker knows.
    func subscribeRequest(last: Bool?, since: StreamPosition?) -> ClientRequest {
        .subscribe(pattern: pattern, last: last, since: since?.seq, instance: since?.instance, serve: serve ? true : nil, group: group)
    }

    /// The `unsubscribe` of it.
    var unsubscribeRequest: ClientRequest {
        .unsubscribe(pattern: pattern, serve: serve ? true : nil, group: group)
    }
}
