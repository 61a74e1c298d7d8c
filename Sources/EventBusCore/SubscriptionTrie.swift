// The wildcard half of the subscription index: a segment trie with path
// compression (nats-server's sublist, as a radix tree). Each node stands for
// a run of one or more pattern segments (`edge`, `*` allowed) below its
// parent; a chain without branches is one node, so a long unique pattern
// costs one node, and tearing down thousands of them frees thousands of
// objects, not hundreds of thousands. A node holds the connections whose
// pattern ends there (`subscribers`) or continues with a final `>`
// (`tailSubscribers`).
//
// Before editing: a child is found by the first segment of its edge (`star`
// when that is `*`); two edges below one node never start alike. Nodes know
// their parent, so pruning walks up from a leaf; an inner node is split when
// a new pattern leaves its edge part-way, and never merged again (it goes
// when it is empty, like any node). `SubscriptionIndex` is the only user.
import EventBusProtocol

/// A node of the wildcard trie.
final class TrieNode {
    /// The node above; nil for the root. The parent owns this node.
    unowned(unsafe) var parent: TrieNode?
    /// The segments from the parent to this node, e.g. `["order", "*"]`;
    /// empty only for the root.
    var edge: ArraySlice<Substring>
    /// Children by the first segment of their edge (never `*`).
    var children: [Substring: TrieNode] = [:]
    /// The child whose edge starts with `*`.
    var star: TrieNode?
    /// Subscribers whose pattern ends here.
    var subscribers: [Connection] = []
    /// Subscribers whose pattern has `>` after this node's segments.
    var tailSubscribers: [Connection] = []

    init(parent: TrieNode?, edge: ArraySlice<Substring>) {
        self.parent = parent
        self.edge = edge
    }

    var isEmpty: Bool { children.isEmpty && star == nil && subscribers.isEmpty && tailSubscribers.isEmpty }

    /// The child whose edge starts with `segment`.
    @inline(__always)
    func child(startingWith segment: Substring) -> TrieNode? {
        segment == "*" ? star : children[segment]
    }

    /// Puts `node` below this one, under the first segment of its edge.
    func attach(_ node: TrieNode) {
        node.parent = self
        let first = node.edge.first!
        if first == "*" { star = node } else { children[first] = node }
    }

    /// Forgets an empty child.
    func removeChild(_ node: TrieNode) {
        if node === star {
            star = nil
        } else if children.count == 1 {
            children = [:]  // no hashing for the common single child
        } else {
            children[node.edge.first!] = nil
        }
    }

    /// The node for exactly `segments` (none of them `>`), made if missing:
    /// walks down, splitting an edge that `segments` leave part-way.
    static func node(for segments: ArraySlice<Substring>, from root: TrieNode) -> TrieNode {
        var node = root
        var rest = segments
        while let first = rest.first {
            guard let child = node.child(startingWith: first) else {
                let leaf = TrieNode(parent: node, edge: rest)
                node.attach(leaf)
                return leaf
            }
            // Length of the common prefix of the child's edge and `rest` (>= 1).
            var common = 1
            let edge = child.edge
            while common < edge.count && common < rest.count
                    && edge[edge.startIndex + common] == rest[rest.startIndex + common] {
                common += 1
            }
            if common < edge.count {
                // Split: a new node for the shared part, the old child below it.
                let middle = TrieNode(parent: node, edge: edge.prefix(common))
                node.attach(middle)
                child.edge = edge.dropFirst(common)
                middle.attach(child)
                node = middle
            } else {
                node = child
            }
            rest = rest.dropFirst(common)
        }
        return node
    }

    /// Removes `node` if it is empty, and then each ancestor that became
    /// empty; the root stays.
    static func prune(from node: TrieNode) {
        var node = node
        while node.isEmpty, let parent = node.parent {
            parent.removeChild(node)
            node = parent
        }
    }

    /// Calls `body` for every subscriber of a pattern that matches the type
    /// whose segments are `segments`, `at` of them already consumed to reach
    /// this node. A connection may come more than once (several patterns).
    func match(_ segments: [Substring], at consumed: Int, _ body: (Connection) -> Void) {
        guard consumed < segments.count else {
            for connection in subscribers { body(connection) }
            return
        }
        for connection in tailSubscribers { body(connection) }
        if let child = children[segments[consumed]] { child.matchEdge(segments, at: consumed, body) }
        if let star { star.matchEdge(segments, at: consumed, body) }
    }

    /// Continues `match` into this node when its edge fits the type from
    /// `consumed` on (its first segment is known to match).
    private func matchEdge(_ segments: [Substring], at consumed: Int, _ body: (Connection) -> Void) {
        let count = edge.count
        guard segments.count - consumed >= count else { return }
        var i = 1
        while i < count {
            let segment = edge[edge.startIndex + i]
            if segment != "*" && segment != segments[consumed + i] { return }
            i += 1
        }
        match(segments, at: consumed + count, body)
    }
}
