// The event types recently published, found by their bytes (issue 14): a
// publish of a type seen before builds no `String`, validates nothing again
// and hashes no `String`; the entry holds the validated `EventType` and the
// type's subscriber list as `SubscriptionIndex` last gave it. A fixed number
// of entries, each type in the one entry its hash picks (a new type replaces
// the old one there), so a client publishing random types costs itself a
// validation per publish, as before, and can grow nothing.
//
// The entry also remembers the last policy view allowed to publish the type,
// so a publisher that may publish it is not asked again (`mayPublish(_:_:entry:req:)`).
//
// Before editing: a route list is used only while `SubscriptionIndex.version`
// is what it was when the list was taken; and a list shared with the index's
// own array of an exact type must be dropped (`dropRoutes`) before the index
// changes that array, or the change copies it (Broker.addSubscription and
// removeSubscription do).
import EventBusPolicy
@_spi(Package) import EventBusProtocol

struct EventTypeTable {
    /// One type: its bytes as two words and a length (for types of up to 16
    /// bytes these identify it; longer ones are compared in full), the
    /// validated type, and its subscribers at `version`.
    struct Entry {
        fileprivate(set) var w0: UInt64 = 0
        fileprivate(set) var w1: UInt64 = 0
        /// Bytes in the type; 0 for an empty entry.
        fileprivate(set) var count = 0
        fileprivate(set) var type: EventType? = nil
        fileprivate(set) var routes: [Connection]? = nil
        fileprivate(set) var version: UInt64 = 0
        /// The index's result `routes` came from, and its `baseVersion` then.
        fileprivate(set) var match: CachedMatch? = nil
        fileprivate(set) var baseVersion: UInt64 = 0
        /// (issue 20) The parked connections the index's list holds, left
        /// out of `routes` (ParkedSubscribers.swift); nil when none.
        fileprivate(set) var parked: ParkedRoutes? = nil
        /// (parkfair) The connections parked against some publisher uids
        /// the index's list holds, left out of `routes`, a part per set of
        /// uids (ParkedSubscribers.swift); [] when none.
        fileprivate(set) var fairParked: [ParkedRoutes] = []
        /// The last policy view that was allowed to publish the type (held,
        /// so no other view can take its address; a reload makes new views).
        fileprivate(set) var publisherView: PolicyView? = nil
        /// The type's per-type counters (TypeCounters.swift), `TypeCounters.none` until counted.
        fileprivate(set) var counter: TypeCounters.Ref = TypeCounters.none
        /// (1.3) The queue groups matching the type at `GroupIndex.version`
        /// `groupsVersion` (QueueGroups.swift; asked only while groups exist),
        /// and the serving groups (for requests) likewise.
        fileprivate(set) var groups: [QueueGroup] = []
        fileprivate(set) var groupsVersion: UInt64 = 0
        fileprivate(set) var servingGroups: [QueueGroup] = []
        fileprivate(set) var servingGroupsVersion: UInt64 = 0
    }

    /// The bytes of a type reduced to what finds and identifies its entry.
    struct Key {
        fileprivate(set) var w0: UInt64
        fileprivate(set) var w1: UInt64
        fileprivate(set) var count: Int
        fileprivate(set) var hash: UInt64

        /// Two words covering every byte (so for 1-16 bytes the words and
        /// the length determine the bytes), and a hash of all of it under
        /// `seed` (`SeededHash`, EventBusProtocol). `raw` is not empty.
        @inline(__always)
        init(_ raw: RawSpan, seed: UInt64) {
            let words = SeededHash.words(raw)
            w0 = words.0
            w1 = words.1
            count = raw.byteCount
            hash = SeededHash.mix(raw, words: words, seed: seed)
        }
    }

    private var entries: [Entry]
    /// (issue 20) Some connection is parked (`Broker.parking` is not empty).
    private(set) var splitsParked = false
    /// (parkfair) Some connection is parked against a publisher uid (`Broker.parking.againstUIDs`).
    private(set) var splitsFairParked = false

    /// (issue 20) Whether some connection is parked (ParkedSubscribers.swift says when).
    mutating func noteParked(any: Bool) { splitsParked = any }

    /// (parkfair) Whether some connection is parked against a publisher uid.
    mutating func noteParkedAgainstUIDs(any: Bool) { splitsFairParked = any }
    private let mask: Int
    private let seed: UInt64

    /// - Parameters:
    ///   - capacity: entries, a power of two.
    ///   - seed: mixed into the hash (random per broker run).
    init(capacity: Int = 1024, seed: UInt64) {
        precondition(capacity > 0 && capacity & (capacity - 1) == 0, "capacity must be a power of two")
        entries = Array(repeating: Entry(), count: capacity)
        mask = capacity - 1
        self.seed = seed
    }

    /// The entry of the type whose bytes are `raw`; a type not there yet is
    /// validated (`EventType.publishable`) and put in, replacing the entry's
    /// previous type.
    /// - Returns: the entry's index, or nil when the bytes are no type a
    ///   client may publish.
    @inline(__always)
    mutating func entry(for raw: RawSpan) -> Int? {
        guard raw.byteCount > 0 else { return nil }
        let key = Key(raw, seed: seed)
        let i = Int(truncatingIfNeeded: key.hash) & mask
        if entries[i].count == key.count && entries[i].w0 == key.w0 && entries[i].w1 == key.w1
            && (key.count <= 16 || Self.same(entries[i].type, raw)) {
            return i
        }
        guard let type = EventType.publishable(raw) else { return nil }
        entries[i].parked?.retire()
        for part in entries[i].fairParked { part.retire() }
        entries[i] = Entry(w0: key.w0, w1: key.w1, count: key.count, type: type)
        return i
    }

    /// The type of entry `i`.
    @inline(__always)
    func type(_ i: Int) -> EventType { entries[i].type! }

    /// The subscribers of entry `i`'s type, from the index when the list kept
    /// is older than the index's last change.
    /// While `splitsParked`, a list taken from the index leaves the parked
    /// connections out (into `parked(i)`).
    @inline(__always)
    mutating func routes(_ i: Int, in index: SubscriptionIndex) -> [Connection] {
        if let routes = entries[i].routes {
            if entries[i].version == index.version { return routes }
            // (issue 20) A change of another shape (a churning uid's `a.*.c`)
            // leaves this type's list as it was: no lookup by name.
            if let match = entries[i].match, entries[i].baseVersion == index.baseVersion, match.isValid {
                entries[i].version = index.version
                return routes
            }
        }
        var (routes, match) = index.matchesAndStamp(entries[i].type!)
        entries[i].parked?.retire()
        entries[i].parked = nil
        if splitsParked { (routes, entries[i].parked) = ParkedRoutes.split(routes) }
        if !entries[i].fairParked.isEmpty {
            for part in entries[i].fairParked { part.retire() }
            entries[i].fairParked = []
        }
        if splitsFairParked { (routes, entries[i].fairParked) = ParkedRoutes.splitFair(routes) }
        entries[i].routes = routes
        entries[i].version = index.version
        entries[i].match = match
        entries[i].baseVersion = index.baseVersion
        return routes
    }

    /// (1.3) The queue groups whose pattern matches entry `i`'s type (the
    /// serving ones with `serving`), from the group index when the list kept
    /// is older than its last change. A list holds each matching group once,
    /// so the lists of all entries hold at most `capacity` references per
    /// group (what `Broker.groupMemberCost` charges a membership).
    /// Inlined (every grouped publish asks): the list kept is returned
    /// without a call; one taken again is `matchGroups`'.
    @inline(__always)
    mutating func groups(_ i: Int, in index: GroupIndex, serving: Bool = false) -> [QueueGroup] {
        if serving ? entries[i].servingGroupsVersion != index.version : entries[i].groupsVersion != index.version {
            matchGroups(i, in: index, serving: serving)
        }
        return serving ? entries[i].servingGroups : entries[i].groups
    }

    /// `groups`' list taken again from the group index.
    @inline(never)
    private mutating func matchGroups(_ i: Int, in index: GroupIndex, serving: Bool) {
        if serving {
            entries[i].servingGroups = index.matches(entries[i].type!)
            entries[i].servingGroupsVersion = index.version
        } else {
            entries[i].groups = index.matches(entries[i].type!)
            entries[i].groupsVersion = index.version
        }
    }

    /// (1.3) Lets go of every group list kept (the last group of an index
    /// ended: what the lists hold is stale, and the memory goes back at
    /// once, not when each type is next published). O(capacity), once per
    /// time the groups run out.
    mutating func dropGroupLists(serving: Bool) {
        for i in entries.indices {
            if serving {
                entries[i].servingGroups = []
                entries[i].servingGroupsVersion = 0
            } else {
                entries[i].groups = []
                entries[i].groupsVersion = 0
            }
        }
    }

    /// Entries in all (a power of two).
    var capacity: Int { entries.count }

    /// The parked part of entry `i`'s list (valid as `routes(i, in:)` last made it).
    @inline(__always)
    func parked(_ i: Int) -> ParkedRoutes? { entries[i].parked }

    /// (parkfair) The parts of entry `i`'s list parked against publisher
    /// uids (valid as `routes(i, in:)` last made them).
    func fairParked(_ i: Int) -> [ParkedRoutes] { entries[i].fairParked }

    /// The counters of entry `i`'s type, as last found (`Broker.countPublished` checks it).
    @inline(__always)
    func counter(_ i: Int) -> TypeCounters.Ref { entries[i].counter }

    @inline(__always)
    mutating func setCounter(_ ref: TypeCounters.Ref, _ i: Int) { entries[i].counter = ref }

    /// Whether `view` is the one last allowed to publish entry `i`'s type.
    @inline(__always)
    func isAllowedPublisher(_ view: PolicyView, _ i: Int) -> Bool { entries[i].publisherView === view }

    /// Remembers that `view` may publish entry `i`'s type.
    mutating func setAllowedPublisher(_ view: PolicyView, _ i: Int) { entries[i].publisherView = view }

    /// Forgets the route list of the exact type `name`, if it is here: the
    /// index is about to change that type's own list.
    mutating func dropRoutes(of name: String) {
        let raw = name.utf8Span.span.bytes
        guard raw.byteCount > 0 else { return }
        let key = Key(raw, seed: seed)
        let i = Int(truncatingIfNeeded: key.hash) & mask
        if entries[i].count == key.count && entries[i].w0 == key.w0 && entries[i].w1 == key.w1 {
            entries[i].routes = nil
        }
    }

    /// Whether `type` is the bytes `raw`.
    static func same(_ type: EventType?, _ raw: RawSpan) -> Bool {
        guard let name = type?.name else { return false }
        return name.utf8Span.span.bytes.sameBytes(as: raw)
    }

    /// Entries holding a type (for tests).
    var count: Int { entries.reduce(0) { $0 + ($1.count > 0 ? 1 : 0) } }
}

extension Broker {
    /// `mayPublish` with the type's entry in `types`: a policy view allowed
    /// to publish the type before is not asked again (a verdict depends on
    /// the view and the type only). Denials are asked every time, so each is
    /// answered and logged as `mayPublish` does.
    @inline(__always)
    func mayPublish(_ connection: Connection, _ type: EventType, entry: Int?, req: RawSpan?) -> Bool {
        if policyState.publishIsOpen { return true }
        guard let entry else { return mayPublish(connection, type, req: req) }
        let view = connection.policy
        if types.isAllowedPublisher(view, entry) { return true }
        guard mayPublish(connection, type, req: req) else { return false }
        types.setAllowedPublisher(view, entry)
        return true
    }
}
