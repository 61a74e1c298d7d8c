// The subscription index: exact event types in a hash map, wildcard patterns
// in a segment trie (the shape of nats-server's sublist), so routing an event
// costs in proportion to the subscribers that match, not to all subscriptions.
//
// Before editing: both directions must stay in step — every (connection,
// pattern) here is also in `connection.patterns` and vice versa — and trie
// nodes are pruned on removal so the index is empty once every subscription is
// gone (`isEmpty` is checked by the tests).
import EventBusProtocol

final class TrieNode {
    var children: [Substring: TrieNode] = [:]
    var star: TrieNode?
    /// Subscribers whose pattern ends here.
    var subscribers: [Connection] = []
    /// Subscribers whose pattern has `>` after this node's segments.
    var tailSubscribers: [Connection] = []

    var isEmpty: Bool { children.isEmpty && star == nil && subscribers.isEmpty && tailSubscribers.isEmpty }
}

public final class SubscriptionIndex {
    var exact: [String: [Connection]] = [:]
    let root = TrieNode()
    var wildcardCount = 0
    /// While wildcard patterns exist: each routed type's full, de-duplicated
    /// subscriber list (exact and wildcard), as nats-server's sublist caches
    /// results. Emptied whenever a wildcard subscription changes; one entry
    /// dropped when an exact subscription of that type changes.
    var cache: [String: [Connection]] = [:]
    static let maxCachedTypes = 4096

    public init() {}

    /// Whether nothing is subscribed (no exact entries, trie pruned to the root).
    public var isEmpty: Bool { exact.isEmpty && root.isEmpty }

    /// Adds `(pattern, connection)`. The caller ensures it is not present yet.
    func add(_ pattern: Pattern, _ connection: Connection) {
        guard pattern.hasWildcards else {
            exact[pattern.text, default: []].append(connection)
            if !cache.isEmpty { cache[pattern.text] = nil }
            return
        }
        cache.removeAll()
        wildcardCount += 1
        var node = root
        let segments = pattern.segments
        for (i, segment) in segments.enumerated() {
            if segment == ">" && i == segments.count - 1 {
                node.tailSubscribers.append(connection)
                return
            }
            if segment == "*" {
                if node.star == nil { node.star = TrieNode() }
                node = node.star!
            } else {
                if let next = node.children[segment] {
                    node = next
                } else {
                    let next = TrieNode()
                    node.children[segment] = next
                    node = next
                }
            }
        }
        node.subscribers.append(connection)
    }

    /// Removes `(pattern, connection)` and prunes empty nodes.
    func remove(_ pattern: Pattern, _ connection: Connection) {
        guard pattern.hasWildcards else {
            if !cache.isEmpty { cache[pattern.text] = nil }
            guard var list = exact[pattern.text] else { return }
            if let i = list.firstIndex(where: { $0 === connection }) { list.swapAt(i, list.count - 1); list.removeLast() }
            exact[pattern.text] = list.isEmpty ? nil : list
            return
        }
        cache.removeAll()
        wildcardCount -= 1
        _ = remove(Array(pattern.segments)[...], connection, from: root)
    }

    /// Recursive removal; returns whether `node` became empty (so the parent drops it).
    private func remove(_ segments: ArraySlice<Substring>, _ connection: Connection, from node: TrieNode) -> Bool {
        guard let first = segments.first else {
            if let i = node.subscribers.firstIndex(where: { $0 === connection }) { node.subscribers.remove(at: i) }
            return node.isEmpty
        }
        if first == ">" && segments.count == 1 {
            if let i = node.tailSubscribers.firstIndex(where: { $0 === connection }) { node.tailSubscribers.remove(at: i) }
            return node.isEmpty
        }
        let rest = segments.dropFirst()
        if first == "*" {
            if let star = node.star, remove(rest, connection, from: star) { node.star = nil }
        } else if let child = node.children[first], remove(rest, connection, from: child) {
            node.children[first] = nil
        }
        return node.isEmpty
    }

    /// Calls `body` for every connection with a pattern matching `type`.
    /// Without wildcards a connection appears once per exact pattern, i.e.
    /// once; with wildcards the cached list is de-duplicated. (The broker also
    /// guards at-most-once delivery by seq.)
    @inline(__always)
    func forEachMatch(_ type: String, _ body: (Connection) -> Void) {
        if wildcardCount == 0 {
            if let list = exact[type] {
                for connection in list { body(connection) }
            }
            return
        }
        let list = cache[type] ?? buildMatches(type)
        for connection in list { body(connection) }
    }

    /// Walks the exact map and the trie once for `type` and caches the result.
    func buildMatches(_ type: String) -> [Connection] {
        var list: [Connection] = []
        var seen = Set<ObjectIdentifier>()
        func add(_ connection: Connection) {
            if seen.insert(ObjectIdentifier(connection)).inserted { list.append(connection) }
        }
        if let direct = exact[type] { for connection in direct { add(connection) } }
        var segments: [Substring] = []
        var start = type.startIndex
        for index in type.utf8.indices where type.utf8[index] == 0x2E {
            segments.append(type[start..<index])
            start = type.utf8.index(after: index)
        }
        segments.append(type[start...])
        match(segments[...], root, add)
        if cache.count >= SubscriptionIndex.maxCachedTypes { cache.removeAll(keepingCapacity: true) }
        cache[type] = list
        return list
    }

    private func match(_ segments: ArraySlice<Substring>, _ node: TrieNode, _ body: (Connection) -> Void) {
        guard let first = segments.first else {
            for connection in node.subscribers { body(connection) }
            return
        }
        for connection in node.tailSubscribers { body(connection) }
        let rest = segments.dropFirst()
        if let child = node.children[first] { match(rest, child, body) }
        if let star = node.star { match(rest, star, body) }
    }
}
