// The subscription index: exact event types in a hash map, wildcard patterns
// in a segment trie (SubscriptionTrie.swift, the shape of nats-server's
// sublist), so routing an event costs in proportion to the subscribers that
// match, not to all subscriptions; with wildcards, each routed type's result
// is cached. Each (connection, pattern) pair has one `Subscription` record,
// held by the connection (by pattern), which knows the pair's position in its
// subscriber list, so removing it is O(1) whatever the number of subscribers
// of that pattern.
//
// Before editing: only `Broker.addSubscription`/`removeSubscription` call
// `add`/`remove` (they keep the connection's side and the counters in step:
// `remove` finds the moved member's record through its connection);
// empty lists and trie nodes are removed at once, so the index is empty once
// every subscription is gone (`isEmpty`, and `BrokerHarness.checkInvariants`
// walks it all). Whatever changes what `matches` returns must move `version`
// (the broker's EventTypeTable keeps those lists while it stands).
import EventBusPolicy
@_spi(Package) import EventBusProtocol

/// One subscription: `pattern` on one connection, at `position` in the list
/// of connections subscribed with that pattern (an exact type's, or a trie
/// node's).
final class Subscription {
    let pattern: Pattern
    /// For a wildcard pattern, the trie node whose list holds it
    /// (`tailSubscribers` when the pattern ends in `>`); nil for an exact type.
    let node: TrieNode?
    let isTail: Bool
    /// Its index in that list; kept up to date when another member is moved
    /// into its place.
    var position: Int
    /// The policy denies the connection some of the types the pattern
    /// matches (PROTOCOL.md "Access policy (1.1)": `filtered: true`); only a
    /// wildcard pattern can be. Counted in `Connection.session.filteredCount`.
    var isFiltered = false
    /// (1.1) The seq from which this subscription has been offered every
    /// event it matches: live from the one after its subscribe, earlier when
    /// a `since` replay filled in (Broker+History.swift de-duplicates by it).
    var offeredFrom: UInt64 = .max
    /// (1.3) A serving subscription (in the broker's serving index).
    let serves: Bool

    init(pattern: Pattern, node: TrieNode?, isTail: Bool, position: Int, serves: Bool) {
        self.pattern = pattern
        self.node = node
        self.isTail = isTail
        self.position = position
        self.serves = serves
    }
}

/// A counter that goes up whenever a wildcard pattern of one shape changes
/// (`GenerationKey`); a cached result is valid while the counters of the
/// shapes that could match its type are where they were when it was built.
final class Generation {
    var value: UInt64 = 0
}

/// The shape of a pattern as far as the cache cares: its first segment (`*`
/// for `*` and for `>` alone) and its segment count, or `tail` for one ending
/// in `>` (which matches types of any greater count).
struct GenerationKey: Hashable {
    var first: Substring
    var count: Int
    static let tail = -1
}

/// A cached result: the subscribers of one type, and the four generations it
/// depends on with their values at build time. The type of first segment `f`
/// and `n` segments can be matched only by patterns of shape (f, n), (*, n),
/// (f, tail) or (*, tail).
/// (A class: the broker's `EventTypeTable` keeps the same one with its route
/// list, so a change of another shape leaves that list valid; issue 20.)
final class CachedMatch {
    let list: [Connection]
    let g0: Generation, g1: Generation, g2: Generation, g3: Generation
    let v0: UInt64, v1: UInt64, v2: UInt64, v3: UInt64

    init(list: [Connection], g0: Generation, g1: Generation, g2: Generation, g3: Generation, v0: UInt64, v1: UInt64, v2: UInt64, v3: UInt64) {
        self.list = list
        self.g0 = g0; self.g1 = g1; self.g2 = g2; self.g3 = g3
        self.v0 = v0; self.v1 = v1; self.v2 = v2; self.v3 = v3
    }

    @inline(__always)
    var isValid: Bool { g0.value == v0 && g1.value == v1 && g2.value == v2 && g3.value == v3 }
}

package final class SubscriptionIndex {
    /// (1.3) The index of serving subscriptions (`Connection.servings`,
    /// PROTOCOL.md "Request/reply"), not of plain ones: a record is found
    /// on the connection's side there, and the policy's `serve` applies too.
    let serving: Bool
    private(set) var exact: [String: [Connection]] = [:]
    let root = TrieNode(parent: nil, edge: .empty)
    private(set) var wildcardCount = 0
    /// While wildcard patterns exist: each routed type's full, de-duplicated
    /// subscriber list (exact and wildcard), as nats-server's sublist caches
    /// results. A wildcard change bumps the generation of its shape, which
    /// makes stale the results of only the types it could match (O(1), paid
    /// by the subscriber that changes); an exact change drops its type's entry.
    private(set) var cache: [String: CachedMatch] = [:]
    private(set) var generations: [GenerationKey: Generation] = [:]
    static let maxCachedTypes = 4096
    /// Generations kept at most; beyond, they are forgotten with the cache.
    static let maxGenerations = 16384
    /// Goes up with every change of a subscription (and of the policy), so a
    /// list taken from `matches` (the broker's `EventTypeTable` keeps them)
    /// is known stale.
    private(set) var version: UInt64 = 0
    /// Goes up with the changes a kept `CachedMatch` does not see: a policy
    /// change, a wildcard change while nothing is cached, generations
    /// forgotten. A list kept with its `CachedMatch` is valid while this and
    /// its generations stay (and its own type's exact entry: the broker
    /// drops that list itself).
    private(set) var baseVersion: UInt64 = 0

    package init(serving: Bool = false) { self.serving = serving }

    /// Whether nothing is subscribed (no exact entries, trie pruned to the root).
    package var isEmpty: Bool { exact.isEmpty && root.isEmpty }

    /// Adds `(pattern, connection)`; the caller ensures it is not present yet.
    /// - Returns: the record, for the connection's side and for `remove`.
    func add(_ pattern: Pattern, _ connection: Connection) -> Subscription {
        version &+= 1
        guard pattern.hasWildcards else {
            if !cache.isEmpty { cache[pattern.text] = nil }
            let position = exact[pattern.text]?.count ?? 0
            exact[pattern.text, default: []].append(connection)
            return Subscription(pattern: pattern, node: nil, isTail: false, position: position, serves: serving)
        }
        bump(pattern)
        wildcardCount += 1
        var segments = Segments(Substring(pattern.text))
        let isTail = pattern.text.utf8.last == 0x3E  // ">"
        if isTail { segments = segments.prefix(segments.count - 1) }
        let node = TrieNode.node(for: segments, from: root)
        if isTail {
            node.tailSubscribers.append(connection)
            return Subscription(pattern: pattern, node: node, isTail: true, position: node.tailSubscribers.count - 1, serves: serving)
        }
        node.subscribers.append(connection)
        return Subscription(pattern: pattern, node: node, isTail: false, position: node.subscribers.count - 1, serves: serving)
    }

    /// The shape of a wildcard pattern.
    static func key(of pattern: Pattern) -> GenerationKey {
        let text = Substring(pattern.text)
        let first = text.utf8.firstIndex(of: 0x2E).map { text[..<$0] } ?? text
        if text.utf8.last == 0x3E {
            return GenerationKey(first: first == ">" ? "*" : first, count: GenerationKey.tail)
        }
        return GenerationKey(first: first, count: Segments(text).count)
    }

    /// Makes stale the cached results a change of `pattern` may affect.
    private func bump(_ pattern: Pattern) {
        guard !cache.isEmpty else { baseVersion &+= 1; return }
        if let g = generations[Self.key(of: pattern)] { g.value &+= 1 }
    }

    private func generation(_ key: GenerationKey) -> Generation {
        if let g = generations[key] { return g }
        let g = Generation()
        generations[key] = g
        return g
    }

    /// Removes a subscription made by `add`: O(1) in the number of
    /// subscribers of its pattern (the last one moves into the gap); an empty
    /// exact entry goes at once, and empty trie nodes are pruned upwards.
    func remove(_ subscription: Subscription) {
        version &+= 1
        let pattern = subscription.pattern
        guard let leaf = subscription.node else {
            if !cache.isEmpty { cache[pattern.text] = nil }
            remove(subscription, from: &exact[pattern.text]!)
            if exact[pattern.text]!.isEmpty { exact[pattern.text] = nil }
            return
        }
        bump(pattern)
        wildcardCount -= 1
        if subscription.isTail {
            remove(subscription, from: &leaf.tailSubscribers)
        } else {
            remove(subscription, from: &leaf.subscribers)
        }
        TrieNode.prune(from: leaf)
    }

    /// Takes the subscription's connection out of `list` by moving the last
    /// member into its place.
    private func remove(_ subscription: Subscription, from list: inout [Connection]) {
        let i = subscription.position
        let last = list.count - 1
        if i != last {
            let moved = list[last]
            list[i] = moved
            guard let record = serving ? moved.servings[subscription.pattern] : moved.subscriptions[subscription.pattern] else {
                preconditionFailure("subscriber list and connection disagree on \(subscription.pattern)")
            }
            record.position = i
        }
        list.removeLast()
    }

    /// Calls `body` for every connection with a pattern matching `type` that
    /// the policy lets receive it. Without wildcards a connection appears once
    /// per exact pattern, i.e. once; with wildcards the cached list is
    /// de-duplicated. (The broker also guards at-most-once delivery by seq.)
    ///
    /// The policy costs nothing here: an exact subscription is never
    /// `filtered` (its one type is allowed, or it would have been refused),
    /// so the exact-only path needs no check, and `buildMatches` leaves out
    /// connections that may not receive the type when it fills the cache.
    @inline(__always)
    func forEachMatch(_ type: EventType, _ body: (Connection) -> Void) {
        for connection in matches(type) { body(connection) }
    }

    /// The connections `forEachMatch` calls for `type`, valid until `version`
    /// changes. (Without wildcards this is the exact type's own list: a
    /// holder must let go of it before that type's subscriptions change.)
    func matches(_ type: EventType) -> [Connection] {
        if wildcardCount == 0 { return exact[type.name] ?? [] }
        if let cached = cache[type.name], cached.isValid { return cached.list }
        return buildMatches(type).list
    }

    /// `matches`, with the cached result it came from (nil without wildcards).
    func matchesAndStamp(_ type: EventType) -> ([Connection], CachedMatch?) {
        if wildcardCount == 0 { return (exact[type.name] ?? [], nil) }
        if let cached = cache[type.name], cached.isValid { return (cached.list, cached) }
        let built = buildMatches(type)
        return (built.list, built)
    }

    /// The connections matching `type` that may receive it, each once, and the type's segments.
    private func walk(_ type: EventType) -> (list: [Connection], segments: [Substring]) {
        var list: [Connection] = []
        var seen = Set<ObjectIdentifier>()
        func add(_ connection: Connection) {
            guard seen.insert(ObjectIdentifier(connection)).inserted else { return }
            if serving {
                if connection.session.serveFilteredCount > 0 && !connection.policy.serve(type).isAllowed { return }
            } else if connection.session.filteredCount > 0 && !connection.policy.receive(type).isAllowed { return }
            list.append(connection)
        }
        let type = type.name
        if let direct = exact[type] { for connection in direct { add(connection) } }
        let segments = Segments.array(of: type)
        root.match(segments, at: 0, add)
        return (list, segments)
    }

    /// How many connections `forEachMatch` would call for `type`, without
    /// filling the cache (for `types`, which asks about many types at once
    /// and must not push the fan-out's lists out).
    func matchCount(_ type: EventType) -> Int {
        if wildcardCount == 0 { return exact[type.name]?.count ?? 0 }
        if let cached = cache[type.name], cached.isValid { return cached.list.count }
        return walk(type).list.count
    }

    /// Walks the exact map and the trie once for `type` and caches the result.
    /// A connection with a `filtered` subscription is left out when its
    /// policy denies it `type`: exact, because its unfiltered patterns match
    /// only types it may receive (docs/POLICY.md "How the broker applies it").
    /// The cache must be emptied when a policy changes (`removeAllCached`).
    func buildMatches(_ type: EventType) -> CachedMatch {
        let (list, segments) = walk(type)
        let type = type.name
        if cache.count >= SubscriptionIndex.maxCachedTypes || generations.count >= SubscriptionIndex.maxGenerations {
            cache.removeAll(keepingCapacity: true)
            if generations.count >= SubscriptionIndex.maxGenerations {
                generations.removeAll()
                baseVersion &+= 1  // the kept results' generations are gone
            }
        }
        let first = segments[0], n = segments.count
        let g0 = generation(GenerationKey(first: first, count: n)), g1 = generation(GenerationKey(first: "*", count: n))
        let g2 = generation(GenerationKey(first: first, count: GenerationKey.tail)), g3 = generation(GenerationKey(first: "*", count: GenerationKey.tail))
        let built = CachedMatch(list: list, g0: g0, g1: g1, g2: g2, g3: g3, v0: g0.value, v1: g1.value, v2: g2.value, v3: g3.value)
        cache[type] = built
        return built
    }

    /// Makes every list kept from `matches` stale without changing a
    /// result (a connection was parked or unparked: the broker's kept lists
    /// leave parked connections out, ParkedSubscribers.swift).
    func keptListsChanged() {
        version &+= 1
        baseVersion &+= 1
    }

    /// Forgets every cached route list (a policy reload changed who may
    /// receive what).
    func removeAllCached() {
        cache.removeAll()
        version &+= 1
        baseVersion &+= 1
    }
}
