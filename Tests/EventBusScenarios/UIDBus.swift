// A rule about uids written once and run two ways (issue 35): a scenario is
// a broker set-up (eventbusd options, a policy file's text) and a body that
// drives a `UIDBus`, "a running broker whose clients can be of any uid".
// Two harnesses implement it:
// - in process, without root: EventBusServerTests' `InProcessBus`, a
//   `BrokerServer` on a thread of the test, clients handed to it with
//   made-up credentials (the handoff seam);
// - against the real eventbusd, as root: EventBusIntegrationTests'
//   `ProcessBus`, clients of other uids connected by setpriv'd processes
//   (`connectAs`), so SO_PEERCRED/SO_PEERGROUPS give the broker their uids.
// Each harness has one parameterized test per scenario list, so a rule's
// assertions live here only and fail in both places when the rule breaks.
//
// Before editing: a scenario may use only what both harnesses give: the
// protocol below and `RawClient`. What only one way can show (the broker
// process's RSS, `eventbus` CLI output, exit statuses, files) stays a test of
// its own in that target. Uid 0 is root in both (the in-process broker is
// made to believe it runs as uid 0). Each scenario uses its own uids so a
// failure names its rule; absence is settled with a sentinel event or a ping,
// never a sleep.
import EventBusTestSupport
import Foundation
import Testing

/// A running broker whose clients can be of any uid.
package protocol UIDBus: AnyObject {
    /// `count` clients, opened in order, whose connections the broker sees
    /// as `uid`'s, with primary group `gid` (nil: `uid`) and exactly `groups`
    /// as supplementary groups. A connection the broker refuses is returned
    /// too (its first frame is the refusal, then EOF).
    func connect(uid: UInt32, gid: UInt32?, groups: [UInt32], count: Int) throws -> [RawClient]

    /// The policy file the broker was started with (messages name it);
    /// meaningless when the scenario has no policy.
    var policyPath: String { get }

    /// Asks the broker to read its policy files again and waits for the answer.
    /// The harness may leave one idle uid-0 connection open (no subscription).
    func reload() throws -> ReloadOutcome

    /// The broker's log so far, one message per line (a denial's line holds
    /// `denied: <message>`, whatever the sink adds around it).
    func logText() -> String
}

extension UIDBus {
    /// A client of `uid` (gid `uid`, no supplementary groups), or of `gid`/`groups`.
    package func connect(uid: UInt32, gid: UInt32? = nil, groups: [UInt32] = []) throws -> RawClient {
        try connect(uid: uid, gid: gid, groups: groups, count: 1)[0]
    }

    /// `count` clients of `uid`.
    package func connect(uid: UInt32, count: Int) throws -> [RawClient] {
        try connect(uid: uid, gid: nil, groups: [], count: count)
    }

    /// Writes `text` as the policy file, read at the next `reload`.
    package func writePolicy(_ text: String) throws {
        try text.write(toFile: policyPath, atomically: true, encoding: .utf8)
    }
}

/// What the broker answered to a reload (PROTOCOL.md "Access policy", the
/// `eventbus.policy.reloaded` and `eventbus.policy.refused` events).
package enum ReloadOutcome: Equatable, Sendable {
    /// The new policy is in force as `generation`.
    case reloaded(generation: Int)
    /// The broker kept `generation`; `reason` names file:line.
    case refused(generation: Int, reason: String)
}

/// One rule's scenario: the broker it needs and what to do with it.
package struct BusScenario: Sendable, CustomTestStringConvertible {
    /// The rule, as a sentence (the test's description in both harnesses).
    package let name: String
    /// eventbusd options (`--max-frame`, `48K`, ...): the server options of
    /// `ServerConfiguration.apply(option:)`, given as on the command line.
    package let options: [String]
    /// The policy file's text; nil: the broker runs without a policy file.
    package let policy: String?
    /// Drives the bus; throws or records an issue when the rule is broken.
    package let body: @Sendable (any UIDBus) throws -> Void

    package init(_ name: String, options: [String] = [], policy: String? = nil, _ body: @escaping @Sendable (any UIDBus) throws -> Void) {
        self.name = name
        self.options = options
        self.policy = policy
        self.body = body
    }

    package var testDescription: String { name }

    /// `options` as (long name without dashes, value) pairs.
    package func optionPairs() throws -> [(name: String, value: String)] {
        guard options.count % 2 == 0 else { throw TestFailure("options come in pairs: \(options)") }
        return try stride(from: 0, to: options.count, by: 2).map { i in
            guard options[i].hasPrefix("--") else { throw TestFailure("not an option: \(options[i])") }
            return (String(options[i].dropFirst(2)), options[i + 1])
        }
    }
}

/// A file of this repository, by its path from the root.
package func repositoryFile(_ path: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path + "/" + path
}
