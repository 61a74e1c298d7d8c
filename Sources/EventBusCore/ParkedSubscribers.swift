// (issue 20) Full subscribers out of the route lists: a subscriber that is
// dropping under `drop-new` or `wait` and is refused again is *parked*
// (issue 37: also `drop-old`, below): the route lists that
// `EventTypeTable` keeps hold it apart, so an event costs a publisher O(1)
// for all the parked subscribers of its type together, not O(each). It
// comes back at its next write (`Broker.didWrite`) or when an event is
// queued to it through another path (a replay: `queuePendingDropNotice`).
//
// The counts stay exact without looking at a parked subscriber per event:
// each kept route list's parked part (`ParkedRoutes`) counts the events
// routed through it; a parked connection remembers, per part it sits on,
// how many of those it has counted already (`ParkState`), so its drops are
// the differences, added to `pendingDropCount`/`droppedCount` when the part
// is replaced (the list is rebuilt, or its type leaves the table) and when
// it comes back. `statistics.dropped` and the type's `dropped` are counted
// per event (the part's size). The part is the type's de-duplicated,
// policy-filtered list (`SubscriptionIndex.matches`), so an event counts
// once per connection whatever number of its patterns match, and never for
// a connection the policy denies the type; a parked publisher without echo
// skips its own event (`Broker.countParked`).
//
// (issue 37) Every overflow kind. A `wait` subscriber is parked as a
// `drop-new` one is (it refuses another uid's events, and its own uid's once
// behind); a publisher it may hold still sees it: `holdIfBlocked` walks the
// parked part too (`forEachParked`), holding the publisher where the parked
// one would, and unparking it where the event would fit. A stalled
// `drop-old` subscriber (below) refused again is parked too (`Broker.offer`): the
// new event is counted as dropped instead of making room, and when it next
// takes bytes (`unpark`) its queue's unwritten events are dropped
// (`replaceStaleQueue`), all its drops told in the one notice first in
// line, so every event it receives after a drop is newer than every event
// dropped, as drop-old promises; it then gets the live events from there.
// Only a stalled one is parked: its notice has stood first in line, unread,
// for `--stall-timeout` (as a `wait` holder goes behind); before that, and
// for one that reads past its notice, drop-old keeps the newest events.
// `disconnect` needs nothing: a full subscriber is closed at once, and until
// the close (the same step) `fanOut` skips it as not routable.
//
// (parkfair) Parked against a publisher uid. A refusal by one publisher
// uid's fair share holds for that uid only: the subscriber still takes the
// events of other uids (their own shares of its queue, root's, its own
// uid's), so it cannot leave the lists for everyone. Refused again so while
// dropping, it is parked *against that uid* (`parkAgainst`): the kept list
// of each type holds the connections parked against some uid apart, grouped
// by the set of uids they are parked against (`ParkedRoutes.actors`, one
// part per set, `EventTypeTable.Entry.fairParked`); an event of uid V walks
// the members of every part whose set leaves V out with the list, and
// counts each part whose set holds V as one `events` more, O(1) for all
// its members (`Broker.routesWithFairParked`, asked by `forEachSubscriber`
// only while someone is parked against a uid). The drops are counted as
// for the parts above (each connection's `fairPark`, its own `ParkState`).
// It comes back to every list when it writes or an event is queued to it
// (`unpark`, as a parked one does; its notice then tells every loss
// before that event), and, in the hold check, where an event of a uid it
// may hold would fit: the hold check walks every fair part (publisher uid
// nil), so a `wait` subscriber with `allow hold` on any uid still holds as
// it would. A connection parked for every publisher (above) sits in the
// plain parked part only.
//
// Before editing: whatever parks or unparks a connection calls
// `SubscriptionIndex.keptListsChanged` (every kept list is split again
// before its next use), and a part is retired (`ParkedRoutes.retire`)
// before its entry forgets it.
@_spi(Package) import EventBusProtocol

/// The parked connections of one kept route list, and the events routed
/// through it since it was made (every member joined then).
final class ParkedRoutes {
    private(set) var members: [Connection]
    /// Events routed through the list since it was made (for a fair part:
    /// those of a uid in `actors`).
    var events: UInt64 = 0
    /// (parkfair) The publisher uids its members are parked against, sorted;
    /// empty for the part parked for every publisher.
    let actors: [UInt32]

    private init(_ members: [Connection], actors: [UInt32] = []) {
        self.members = members
        self.actors = actors
    }

    /// Splits a route list into the connections to route to and the parked
    /// ones; returns `list` itself (no copy) and nil when none is parked.
    static func split(_ list: [Connection]) -> ([Connection], ParkedRoutes?) {
        guard list.contains(where: { $0.park != nil }) else { return (list, nil) }
        var active: [Connection] = []
        var parked: [Connection] = []
        active.reserveCapacity(list.count)
        for connection in list {
            if connection.park != nil { parked.append(connection) } else { active.append(connection) }
        }
        let routes = ParkedRoutes(parked)
        for connection in parked { connection.park!.join(routes) }
        return (active, routes)
    }

    /// (parkfair) Splits the active list `split` left into the connections
    /// parked against no uid and one part per set of uids the others are
    /// parked against; returns `list` itself and [] when none is.
    static func splitFair(_ list: [Connection]) -> ([Connection], [ParkedRoutes]) {
        guard list.contains(where: { $0.fairPark != nil }) else { return (list, []) }
        var active: [Connection] = []
        var groups: [[UInt32]: [Connection]] = [:]
        active.reserveCapacity(list.count)
        for connection in list {
            if let state = connection.fairPark { groups[state.actors, default: []].append(connection) } else { active.append(connection) }
        }
        var parts: [ParkedRoutes] = []
        for (actors, members) in groups {
            let routes = ParkedRoutes(members, actors: actors)
            for connection in members { connection.fairPark!.join(routes) }
            parts.append(routes)
        }
        return (active, parts)
    }

    /// The list is replaced or gone: each member still on it counts its
    /// events and leaves it.
    func retire() {
        for connection in members { connection.countParked(on: self, leaving: true) }
        members = []
    }
}

/// A parked connection's side: the parts it sits on, each with the events
/// of it counted for the connection already.
final class ParkState {
    fileprivate(set) var parts: [ObjectIdentifier: (routes: ParkedRoutes, counted: UInt64)] = [:]
    /// (parkfair) For `Connection.fairPark`: the publisher uids it is parked against, sorted.
    private(set) var actors: [UInt32] = []

    init(actors: [UInt32] = []) { self.actors = actors }

    func join(_ routes: ParkedRoutes) {
        parts[ObjectIdentifier(routes)] = (routes, routes.events)
    }

    /// Events of its parts not yet counted for it.
    var outstanding: UInt64 {
        var sum: UInt64 = 0
        for (_, part) in parts { sum &+= part.routes.events &- part.counted }
        return sum
    }
}

extension Connection {
    /// Counts the events of `routes` not yet counted for this connection as
    /// dropped for it (a no-op when it is not on that part).
    /// - Parameter leaving: it leaves the part (retired, or unparked).
    func countParked(on routes: ParkedRoutes, leaving: Bool) {
        guard let state = routes.actors.isEmpty ? park : fairPark else { return }
        let key = ObjectIdentifier(routes)
        guard let part = state.parts[key] else { return }
        let count = routes.events &- part.counted
        _ = output.countDrops(count, firstSeq: 0)
        accounting.countDropped(count)
        if leaving { state.parts[key] = nil } else { state.parts[key] = (routes, routes.events) }
    }

    /// Events lost since the last `dropped` notice (PROTOCOL.md "Semantics"),
    /// including those counted while parked and not added yet.
    package var pendingDropCount: UInt64 { output.pendingDropsCounted &+ (park?.outstanding ?? 0) &+ (fairPark?.outstanding ?? 0) }

    /// Events it lost in all (`clients`: `dropped`), including those
    /// counted while parked and not added yet.
    package var droppedCount: UInt64 { accounting.droppedCounted &+ (park?.outstanding ?? 0) &+ (fairPark?.outstanding ?? 0) }

    /// Whether it is parked: out of the kept route lists while full.
    package var isParked: Bool { park != nil }

    /// (parkfair) The publisher uids it is parked against (their fair share
    /// of its queue full); empty when none.
    package var parkedAgainst: [UInt32] { fairPark?.actors ?? [] }
}

/// The broker's parked connections (by identity): for every publisher, and
/// (parkfair) against some publisher uids.
struct ParkingLot {
    fileprivate(set) var members: [ObjectIdentifier: Connection] = [:]
    fileprivate(set) var againstUIDs: [ObjectIdentifier: Connection] = [:]
}

extension Broker {
    /// Whether a subscriber refused again while dropping may be parked:
    /// under `drop-new` or `wait` while `behind`, with bytes queued (so a
    /// write, which brings it back, will come; one with an empty queue stays
    /// in the lists). A refusal by one uid's fair share parks it against
    /// that uid only (`parkAgainst`, the caller's choice).
    /// (issue 37) Under `wait` too, without a paced replay under way (its
    /// live events wait behind it, held by nothing).
    @inline(__always)
    func mayPark(_ subscriber: Connection, _ refusal: Refusal) -> Bool {
        subscriber.park == nil && subscriber.outbound.chargedBytes > 0
            && (subscriber.overflow == .dropNew || subscriber.flow.behind
                || (subscriber.overflow == .wait && subscriber.flow.replays.isEmpty))
    }

    /// Parks a subscriber refused again while dropping (`mayPark` said so):
    /// for every publisher, or, refused by the fair share of publisher uid
    /// `uid`, against that uid only.
    @inline(never)
    func park(_ subscriber: Connection, refused: Refusal, publisher uid: UInt32) {
        if refused == .fairShare { parkAgainst(subscriber, uid) } else { park(subscriber) }
    }

    /// (parkfair) Takes `connection` out of the route lists for events of
    /// publisher uid `uid` (each list is split again before its next use).
    func parkAgainst(_ connection: Connection, _ uid: UInt32) {
        guard connection.markParked(against: uid) else { return }
        parking.againstUIDs[ObjectIdentifier(connection)] = connection
        types.noteParkedAgainstUIDs(any: true)
        index.keptListsChanged()
    }

    /// (issue 37) Whether a `drop-old` subscriber refused an event of `seq`
    /// is parked instead of making room: it is stalled (its notice first in
    /// line has been there, unread, for `--stall-timeout`), the refusal
    /// holds for every publisher, and it has bytes queued. If so the event
    /// is counted as dropped (pending, told when it comes back) and it is parked.
    @inline(never)
    func parkedDropOld(_ connection: Connection, _ refusal: Refusal, seq: UInt64) -> Bool {
        guard refusal != .fairShare, connection.outbound.noticeInFront != nil, connection.outbound.chargedBytes > 0,
              now.monotonicNanoseconds - connection.output.dropOldSince >= configuration.stallTimeoutNanoseconds,
              connection.flow.replays.isEmpty, connection.isRoutable else { return false }
        statistics.dropped += 1
        connection.accounting.countDropped(1)
        typeCounters.addDropped(1, typeCounters.routed)
        _ = connection.output.countDrops(1, firstSeq: seq)
        park(connection)
        return true
    }

    /// (issue 37) A `drop-old` connection back from the lot: the unwritten
    /// events still queued are older than every event it lost while parked,
    /// so they go too, and all its drops are told in the one notice first
    /// in line (its since_seq the first of them).
    private func replaceStaleQueue(_ connection: Connection) {
        let result = ledger.collectReleased { connection.outbound.dropOldestEvents(untilAtMost: 0, released: &$0, droppedTypes: &droppedTypesScratch) }
        countDroppedTypes()
        applyOutbound(connection, result.delta)
        if result.count > 0 { recordDrops(connection, count: result.count, firstSeq: result.firstSeq, takenFromQueue: true) }
        guard connection.output.pendingDropsCounted > 0 else { return }
        let (pending, since) = connection.output.takePendingDrops()
        if let placed = connection.outbound.noticeInFront {
            enqueueDropNotice(count: placed.count + pending, since: min(placed.since, since), to: connection, inFront: true)
        } else {
            enqueueDropNotice(count: pending, since: since, to: connection, inFront: true)
        }
    }

    /// (issue 37) Calls `body` for each parked connection of `type`'s kept
    /// list (valid as `forEachSubscriber` just made it), on a copy: `body`
    /// may unpark.
    func forEachParked(of type: EventType, entry: Int?, _ body: (Connection) -> Void) {
        guard types.splitsParked else { return }
        var found = entry
        if found == nil {
            found = types.entry(for: type.name.utf8Span.span.bytes)
        }
        guard let found else { return }
        _ = types.routes(found, in: index)
        guard let parked = types.parked(found) else { return }
        for connection in parked.members { body(connection) }
    }

    /// Takes `connection` out of the route lists (each is split again
    /// before its next use).
    @inline(never)
    func park(_ connection: Connection) {
        guard connection.markParked() else { return }
        parking.members[ObjectIdentifier(connection)] = connection
        types.noteParked(any: true)
        index.keptListsChanged()
    }

    /// Puts a parked connection back into the route lists, its events
    /// counted while parked added to its drop counts (a no-op when it is
    /// not parked).
    @inline(__always)
    func unpark(_ connection: Connection) {
        if connection.park != nil { unparkParked(connection) }
        if connection.fairPark != nil { unparkFair(connection) }
    }

    /// (parkfair) Back into the lists for every publisher uid it was parked
    /// against, its events counted meanwhile added to its drop counts.
    @inline(never)
    private func unparkFair(_ connection: Connection) {
        guard let state = connection.fairPark else { return }
        for (_, part) in state.parts { connection.countParked(on: part.routes, leaving: true) }
        connection.markUnparkedFair()
        parking.againstUIDs[ObjectIdentifier(connection)] = nil
        types.noteParkedAgainstUIDs(any: !parking.againstUIDs.isEmpty)
        index.keptListsChanged()
    }

    /// (parkfair) `routes`, entry `found`'s active list, with the members of
    /// each of its fair parts that leaves `uid` out (all of them when `uid`
    /// is nil: the hold check); each part parked against `uid` counts the
    /// event, just routed, as dropped for each member, O(1) for the part.
    /// Returns `routes` itself (no copy) when every part is left out.
    /// Asked only while some connection is parked against a uid.
    @inline(never)
    func routesWithFairParked(_ found: Int, _ routes: [Connection], skipping uid: UInt32?) -> [Connection] {
        var count: UInt64 = 0
        var walked = routes
        for part in types.fairParked(found) {
            if let uid, part.actors.contains(uid) {
                part.events &+= 1
                count &+= UInt64(part.members.count)
                continue
            }
            walked.append(contentsOf: part.members)
        }
        if count > 0 {
            statistics.dropped += count
            typeCounters.addDropped(count, typeCounters.routed)
        }
        return walked
    }

    @inline(never)
    private func unparkParked(_ connection: Connection) {
        guard let state = connection.park else { return }
        for (_, part) in state.parts { connection.countParked(on: part.routes, leaving: true) }
        connection.markUnparked()
        parking.members[ObjectIdentifier(connection)] = nil
        types.noteParked(any: !parking.members.isEmpty)
        index.keptListsChanged()
        if connection.overflow == .dropOld && connection.isRoutable { replaceStaleQueue(connection) }
    }

    /// Counts one event of `type`, just routed, as dropped for each member of
    /// its kept list's parked part (the publisher skips its own event unless
    /// it asked for echo). Asked only while some connection is parked.
    /// - Parameter entry: the type's entry in `types`, when the caller found it.
    @inline(never)
    func countParked(_ type: EventType, entry: Int?, publisher: Connection?) {
        var found = entry
        if found == nil {
            found = types.entry(for: type.name.utf8Span.span.bytes)
        }
        guard let found, let parked = types.parked(found) else { return }
        parked.events &+= 1
        var count = UInt64(parked.members.count)
        if let publisher, !publisher.echo, let state = publisher.park {
            let key = ObjectIdentifier(parked)
            if let part = state.parts[key] {
                state.parts[key] = (part.routes, part.counted &+ 1)
                count -= 1
            }
        }
        guard count > 0 else { return }
        statistics.dropped += count
        typeCounters.addDropped(count, typeCounters.routed)
    }
}
