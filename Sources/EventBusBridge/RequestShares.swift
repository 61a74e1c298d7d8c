// (attacker7) Fair shares of the requests the link asks its bus for other
// machines (docs/RELIABILITY.md "Hostile users, seventh round"). Every one
// goes on the link's one bus connection, whose pending requests the broker
// bounds (`--max-pending-requests`, 1024 by default): one requester on
// another machine asking requests a server here leaves unanswered, with a
// far deadline, took every place, and every other requester's request was
// refused `limit` until those deadlines passed. Each origin (the node and
// uid the request's headers assert) may now hold at most its fair share of
// the places, the broker's rule for a server's queue (`fairShareAllows`:
// one origin alone about half, so the others always find room).
//
// Before editing: `take` and `release` pair by tag (`RemoteRequests.receive`
// takes, `replied`/`forget` release, `busLost` clears); an origin is a key
// for fairness only, never compared with local uids.
package struct RequestShares {
    /// Who asked, as its machine's headers say.
    package struct Origin: Hashable, Sendable {
        package var node: String
        package var uid: UInt64?
    }

    /// The places in all: the broker's default pending requests per
    /// connection (with a lower `--max-pending-requests` the broker refuses first).
    package static let places = 1024

    private var held: [Origin: Int] = [:]
    private var byTag: [UInt64: Origin] = [:]

    package init() {}

    /// Requests held now (all origins).
    package var count: Int { byTag.count }

    /// Takes a place for `origin`'s request `tag`, or returns false when it
    /// is at its fair share (its request is refused `limit`).
    package mutating func take(_ origin: Origin, tag: UInt64) -> Bool {
        let share = held[origin] ?? 0
        // (users + 1) * (1 + share) - share <= remaining, as Broker.fairShareAllows.
        guard (held.count + 1) * (1 + share) - share <= RequestShares.places - byTag.count else { return false }
        held[origin] = share + 1
        byTag[tag] = origin
        return true
    }

    /// Gives back the place of request `tag` (answered or forgotten).
    package mutating func release(tag: UInt64) {
        guard let origin = byTag.removeValue(forKey: tag), let share = held[origin] else { return }
        held[origin] = share > 1 ? share - 1 : nil
    }

    /// The bus connection ended: every place is free.
    package mutating func removeAll() {
        held.removeAll()
        byTag.removeAll()
    }
}
