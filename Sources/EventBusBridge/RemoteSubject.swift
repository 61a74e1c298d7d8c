// A message another machine's bridge sent on a subject of the form
// `HEAD` + `NODE.TYPE` (requests: `PREFIX.req.`, group events:
// `PREFIX.grp.NAME.`): its node, its type and its CloudEvents headers, read
// the one way both RemoteRequests and RemoteGroups read them. A message from
// our own node, a reserved type or a bad header block is refused with the text
// the caller logs (and counts as dropped).
import EventBusNATS
@_spi(Package) import EventBusProtocol

enum RemoteSubject {
    /// What `message` carries, or why it is not taken. `what` names it in the
    /// refusals ("request", "group event").
    static func read(_ message: Message, head: String, ownNode: NodeName, what: String)
        -> Result<(node: NodeName, type: EventType, imported: CloudEventsHeaders.Imported), Refusal> {
        guard message.subject.hasPrefix(head) else { return .failure(Refusal("not a \(what) subject: \(message.subject)")) }
        let rest = message.subject.utf8.dropFirst(head.utf8.count)
        guard let dot = rest.firstIndex(of: 0x2E),
              let node = NodeName(String(decoding: rest[rest.startIndex..<dot], as: UTF8.self)),
              let type = EventType(String(decoding: rest[rest.index(after: dot)...], as: UTF8.self)), !type.isReserved else {
            return .failure(Refusal("bad \(what) subject \(message.subject)"))
        }
        guard node != ownNode else { return .failure(Refusal("a \(what) from our own node \(node.text)")) }
        var problem: String?
        guard let imported = CloudEventsHeaders.import(message.headerBlock, node: node, type: type, problem: &problem) else {
            return .failure(Refusal("bad headers on \(message.subject): \(problem ?? "?")"))
        }
        return .success((node, type, imported))
    }

    /// Why a message is not taken (the text the caller logs).
    struct Refusal: Error {
        let text: String
        init(_ text: String) { self.text = text }
    }
}
