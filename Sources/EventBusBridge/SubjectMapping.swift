// How eventbus types map onto NATS subjects (issue 13; DESIGN-NOTES-1.1 A.7):
// local type T on node N travels as `PREFIX.evt.N.T`, an import pattern P is
// the subscription `PREFIX.evt.*.P`, and control traffic for node N lives on
// `PREFIX.ctl.N.<kind>` (`hello`, `dropped`), outside the event namespace.
//
// Before editing: a node name is exactly one subject token, so the node can
// always be read back from the subject; and every eventbus type is already a
// valid run of NATS tokens (segments of `A-Z a-z 0-9 _ - :`), but not every
// NATS subject is an eventbus type, so the way back is checked.
import EventBusNATS
@_spi(Package) import EventBusProtocol

/// A bridge's node name: 1 to 63 bytes of `A-Z a-z 0-9 _ -`, one NATS subject
/// token. It names the machine (or bus) in subjects, headers and `origin`.
/// Example: `host-a`.
package struct NodeName: Hashable, Sendable, CustomStringConvertible {
    package let text: String

    /// Nil unless `text` is 1-63 bytes of `A-Z a-z 0-9 _ -`.
    package init?(_ text: String) {
        guard NodeName.isToken(text, maxBytes: 63) else { return nil }
        self.text = text
    }

    static func isToken(_ text: String, maxBytes: Int) -> Bool {
        let utf8 = text.utf8
        return !utf8.isEmpty && utf8.count <= maxBytes && utf8.allSatisfy { b in
            switch b {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x5F, 0x2D: true
            default: false
            }
        }
    }

    package var description: String { text }
}

/// The root of every subject the bridge uses: 1 to 8 tokens of
/// `A-Z a-z 0-9 _ -` (each 1-63 bytes) joined by `.`, at most 128 bytes in
/// all. Default `eventbus`.
package struct SubjectPrefix: Hashable, Sendable, CustomStringConvertible {
    package let text: String

    package static let standard = SubjectPrefix("eventbus")!

    /// Nil unless `text` follows the rule above.
    package init?(_ text: String) {
        let tokens = text.split(separator: ".", omittingEmptySubsequences: false)
        guard text.utf8.count <= 128, (1...8).contains(tokens.count),
              tokens.allSatisfy({ NodeName.isToken(String($0), maxBytes: 63) }) else { return nil }
        self.text = text
    }

    package var description: String { text }
}

/// Where an incoming event subject comes from.
package enum IncomingSubject: Equatable, Sendable {
    /// `PREFIX.evt.NODE.TYPE` with a valid node name and eventbus type.
    case event(node: NodeName, type: EventType)
    /// Under `PREFIX.evt.` but the node or the type is not valid for eventbus
    /// (`$`, UTF-8, a type over 255 bytes...): dropped as `bad_type`.
    case badType(String)
    /// Not under `PREFIX.evt.` at all.
    case other
}

/// The subject names of one bridge.
package struct SubjectMapping: Equatable, Sendable {
    package let prefix: SubjectPrefix
    package let node: NodeName
    /// `PREFIX.ctl.NODE.hello`: where bridges claiming this node announce themselves.
    package let helloSubject: Subject
    /// `PREFIX.ctl.NODE.dropped`: this node's reports of exports lost while NATS was unreachable.
    package let droppedSubject: Subject
    /// `PREFIX.ctl.*.dropped`: every node's drop reports.
    package let allDroppedSubject: Subject
    /// `PREFIX.evt.` and `PREFIX.ctl.`, for reading subjects back (built once: every message is read against them).
    private let eventHead: String
    private let controlHead: String

    package init(prefix: SubjectPrefix = .standard, node: NodeName) {
        self.prefix = prefix
        self.node = node
        // Valid by construction: tokens of valid characters.
        helloSubject = Subject("\(prefix.text).ctl.\(node.text).hello")!
        droppedSubject = Subject("\(prefix.text).ctl.\(node.text).dropped")!
        allDroppedSubject = Subject(pattern: "\(prefix.text).ctl.*.dropped")!
        eventHead = prefix.text + ".evt."
        controlHead = prefix.text + ".ctl."
    }

    /// `PREFIX.evt.NODE.TYPE`, e.g. `eventbus.evt.host-a.order.created`.
    package func exportSubject(for type: EventType) -> Subject {
        // Valid by construction: tokens of valid characters, ≤ 128 + 5 + 63 + 1 + 255 bytes.
        Subject("\(prefix.text).evt.\(node.text).\(type.name)")!
    }

    /// `PREFIX.evt.*.PATTERN`: the pattern from every node (our own is
    /// dropped on arrival, see `BridgeCore`).
    package func importSubject(for pattern: Pattern) -> Subject {
        Subject(pattern: "\(prefix.text).evt.*.\(pattern.text)")!
    }

    /// Reads an event subject back.
    package func parse(_ subject: String) -> IncomingSubject {
        guard subject.hasPrefix(eventHead) else { return .other }
        let rest = subject.utf8.dropFirst(eventHead.utf8.count)
        guard let dot = rest.firstIndex(of: 0x2E) else { return .badType(subject) }
        let nodeText = String(decoding: rest[rest.startIndex..<dot], as: UTF8.self)
        let typeText = String(decoding: rest[rest.index(after: dot)...], as: UTF8.self)
        guard let node = NodeName(nodeText), let type = EventType(typeText) else { return .badType(subject) }
        return .event(node: node, type: type)
    }

    /// The node of a `PREFIX.ctl.NODE.dropped` subject, or nil.
    package func dropReportNode(_ subject: String) -> NodeName? {
        guard subject.hasPrefix(controlHead), subject.hasSuffix(".dropped") else { return nil }
        let middle = subject.dropFirst(controlHead.count).dropLast(".dropped".count)
        return NodeName(String(middle))
    }
}
